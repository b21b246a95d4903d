//! LSP base framing: `Content-Length: N\r\n\r\n` then N bytes of JSON.
//!
//! The reader resynchronises on junk: a header line that names no known header is skipped,
//! and a `Content-Length:` found anywhere in a line is honoured (the body of a bad frame and
//! the next frame's header run together on one line). A header block whose `Content-Length`
//! is not a number is skipped whole. Duplicate `Content-Length` headers with one value count
//! as one; different values close the connection ([`FrameError::Conflicting`]), as RFC 9112
//! treats them, since any guess at the body's end could eat the next message. A length above
//! [`MAX_FRAME`] is fatal too; no claimed length is allocated before its bytes arrive.
//!
//! A body that turns out not to be JSON is handed back with [`Rescan::rescan`] and read again
//! as headers: a frame whose length was too long took the next frame's header into its body,
//! and rescanning finds that header, so one bad frame never eats the next good one.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

/// The largest body we accept.
pub const MAX_FRAME: usize = 64 * 1024 * 1024;
/// The most of one header line we keep (its end: where a header that follows junk is).
const MAX_HEADER_LINE: usize = 8 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("Content-Length {0} exceeds the limit of {MAX_FRAME} bytes")]
    TooLarge(u64),
    #[error("conflicting Content-Length headers ({0} and {1}) in one header block")]
    Conflicting(u64, u64),
    #[error("i/o: {0}")]
    Io(#[from] io::Error),
}

/// What one read produced.
#[derive(Debug, PartialEq)]
pub enum Frame {
    Body(Vec<u8>),
    /// Something malformed was skipped; the connection goes on. The string says what.
    Skipped(String),
    Eof,
}

pub async fn read_frame<R: AsyncBufRead + Unpin>(reader: &mut R) -> Result<Frame, FrameError> {
    let mut length: Option<u64> = None;
    // Why this block is skipped once it ends, if it is.
    let mut bad: Option<String> = None;
    let mut saw_any = false;
    loop {
        let line = match read_header_line(reader).await? {
            Some(line) => line,
            None if saw_any => return Ok(Frame::Skipped("end of input inside a header".into())),
            None => return Ok(Frame::Eof),
        };
        saw_any = true;
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            if let Some(why) = bad {
                return Ok(Frame::Skipped(why));
            }
            match length {
                Some(n) if n > MAX_FRAME as u64 => return Err(FrameError::TooLarge(n)),
                Some(n) => {
                    // Grown as the bytes arrive: a length that lies costs nothing up front.
                    let mut body = Vec::with_capacity((n as usize).min(64 * 1024));
                    (&mut *reader).take(n).read_to_end(&mut body).await?;
                    if (body.len() as u64) < n {
                        return Err(FrameError::Io(io::ErrorKind::UnexpectedEof.into()));
                    }
                    return Ok(Frame::Body(body));
                }
                None => return Ok(Frame::Skipped("a header block without Content-Length".into())),
            }
        }
        if let Some(value) = find_content_length(text) {
            match parse_length(value) {
                Some(n) => match length {
                    Some(m) if m != n => return Err(FrameError::Conflicting(m, n)),
                    _ => length = Some(n),
                },
                None => {
                    bad.get_or_insert_with(|| format!("a header block with a bad Content-Length {:?}", value.trim()));
                }
            }
        }
        // Any other header (Content-Type, or junk) is ignored.
    }
}

/// A `Content-Length` value: decimal digits, or a list of identical ones (`42, 42`, which
/// RFC 9112 allows a recipient to take as one). A list of different values is `None`.
/// Digits too many for a u64 are `u64::MAX` (over [`MAX_FRAME`], so fatal, never allocated).
fn parse_length(value: &str) -> Option<u64> {
    let mut found = None;
    for item in value.split(',') {
        let item = item.trim();
        if item.is_empty() || !item.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n = item.parse::<u64>().unwrap_or(u64::MAX);
        match found {
            Some(m) if m != n => return None,
            _ => found = Some(n),
        }
    }
    found
}

fn find_content_length(line: &str) -> Option<&str> {
    const NAME: &str = "content-length:";
    let lower = line.to_ascii_lowercase();
    let at = lower.find(NAME)?;
    Some(&line[at + NAME.len()..])
}

/// Reads up to and including `\n`, keeping at most the last [`MAX_HEADER_LINE`] bytes of it.
async fn read_header_line<R: AsyncBufRead + Unpin>(reader: &mut R) -> io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok((!line.is_empty()).then_some(line));
        }
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let keep = take.min(MAX_HEADER_LINE);
        line.extend_from_slice(&buf[take - keep..take]);
        reader.consume(take);
        if line.len() > 2 * MAX_HEADER_LINE {
            line.drain(..line.len() - MAX_HEADER_LINE);
        }
        if done {
            if line.len() > MAX_HEADER_LINE {
                line.drain(..line.len() - MAX_HEADER_LINE);
            }
            return Ok(Some(line));
        }
    }
}

/// A buffered reader that can be handed bytes back: they are read again before the rest of
/// the stream (see the module docs).
pub struct Rescan<R> {
    front: Vec<u8>,
    at: usize,
    inner: R,
}

impl<R> Rescan<R> {
    pub fn new(inner: R) -> Self {
        Rescan {
            front: Vec::new(),
            at: 0,
            inner,
        }
    }

    /// Reads `bytes` again, before whatever was still to be read.
    pub fn rescan(&mut self, mut bytes: Vec<u8>) {
        bytes.extend_from_slice(&self.front[self.at..]);
        self.front = bytes;
        self.at = 0;
    }

    fn front_left(&self) -> &[u8] {
        &self.front[self.at..]
    }

    fn take_front(&mut self, n: usize) {
        self.at += n;
        if self.at >= self.front.len() {
            self.front = Vec::new();
            self.at = 0;
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Rescan<R> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let left = this.front_left();
        if left.is_empty() {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        let n = left.len().min(buf.remaining());
        buf.put_slice(&left[..n]);
        this.take_front(n);
        Poll::Ready(Ok(()))
    }
}

impl<R: AsyncBufRead + Unpin> AsyncBufRead for Rescan<R> {
    fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        let this = self.get_mut();
        if this.at < this.front.len() {
            return Poll::Ready(Ok(&this.front[this.at..]));
        }
        Pin::new(&mut this.inner).poll_fill_buf(cx)
    }

    fn consume(self: Pin<&mut Self>, amt: usize) {
        let this = self.get_mut();
        if this.at < this.front.len() {
            this.take_front(amt);
        } else {
            Pin::new(&mut this.inner).consume(amt);
        }
    }
}

pub async fn write_frame<W: AsyncWrite + Unpin>(writer: &mut W, body: &[u8]) -> io::Result<()> {
    write_frame_unflushed(writer, body).await?;
    writer.flush().await
}

/// Writes one frame without flushing: for a buffered writer that flushes once per burst.
pub async fn write_frame_unflushed<W: AsyncWrite + Unpin>(writer: &mut W, body: &[u8]) -> io::Result<()> {
    let header = format!("Content-Length: {}\r\n\r\n", body.len());
    writer.write_all(header.as_bytes()).await?;
    writer.write_all(body).await
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn frames(input: &[u8]) -> Vec<Result<Frame, String>> {
        let mut reader = Rescan::new(tokio::io::BufReader::with_capacity(16, input));
        let mut out = Vec::new();
        loop {
            match read_frame(&mut reader).await {
                Ok(Frame::Eof) => break,
                Ok(Frame::Body(b)) if serde_json::from_slice::<serde_json::Value>(&b).is_err() => {
                    // As the transport does: a body that is not JSON is read again as headers.
                    out.push(Ok(Frame::Skipped(format!("not JSON: {}", String::from_utf8_lossy(&b)))));
                    reader.rescan(b);
                }
                Ok(f) => out.push(Ok(f)),
                Err(e) => {
                    out.push(Err(e.to_string()));
                    break;
                }
            }
        }
        out
    }

    fn bodies(got: &[Result<Frame, String>]) -> Vec<&[u8]> {
        got.iter()
            .filter_map(|f| match f {
                Ok(Frame::Body(b)) => Some(b.as_slice()),
                _ => None,
            })
            .collect()
    }

    fn body(s: &str) -> Result<Frame, String> {
        Ok(Frame::Body(s.as_bytes().to_vec()))
    }

    #[tokio::test]
    async fn reads_two_frames_with_extra_headers() {
        let input = b"Content-Length: 2\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{}content-length: 4\r\n\r\nnull";
        assert_eq!(frames(input).await, vec![body("{}"), body("null")]);
    }

    #[tokio::test]
    async fn skips_a_block_without_length_and_resyncs() {
        let input = b"X-Junk: 1\r\n\r\nContent-Length: 2\r\n\r\n{}";
        let got = frames(input).await;
        assert!(matches!(got[0], Ok(Frame::Skipped(_))));
        assert_eq!(got[1], body("{}"));
    }

    #[tokio::test]
    async fn finds_length_after_junk_on_the_same_line() {
        let input = b"garbage{}Content-Length: 2\r\n\r\n[]";
        assert_eq!(frames(input).await, vec![body("[]")]);
    }

    #[tokio::test]
    async fn refuses_absurd_length_without_allocating() {
        let input = b"Content-Length: 99999999999999\r\n\r\n{}";
        let got = frames(input).await;
        assert!(matches!(&got[0], Err(e) if e.contains("exceeds")));
    }

    #[tokio::test]
    async fn non_numeric_length_is_skipped() {
        let input = b"Content-Length: abc\r\n\r\nContent-Length: 2\r\n\r\n{}";
        let got = frames(input).await;
        assert!(matches!(got[0], Ok(Frame::Skipped(_))));
        assert!(got.contains(&body("{}")));
    }

    #[tokio::test]
    async fn identical_duplicate_lengths_are_one() {
        let input = b"Content-Length: 2\r\ncontent-length: 2\r\n\r\n{}Content-Length: 2, 2\r\n\r\n[]";
        assert_eq!(frames(input).await, vec![body("{}"), body("[]")]);
    }

    #[tokio::test]
    async fn conflicting_lengths_are_fatal() {
        let input = b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}\n{}";
        let got = frames(input).await;
        assert_eq!(got.len(), 1);
        assert!(matches!(&got[0], Err(e) if e.contains("conflicting Content-Length headers (2 and 3)")));
        let got = frames(b"Content-Length: 2, 3\r\n\r\n{}").await;
        assert!(matches!(&got[0], Ok(Frame::Skipped(_))), "{got:?}");
    }

    #[tokio::test]
    async fn a_bad_length_skips_its_whole_block() {
        let input = b"Content-Length: +2\r\nContent-Type: x\r\n\r\nContent-Length: 2\r\n\r\n{}";
        let got = frames(input).await;
        assert!(
            matches!(&got[0], Ok(Frame::Skipped(m)) if m.contains("bad Content-Length")),
            "{got:?}"
        );
        assert_eq!(got[1], body("{}"));
        assert_eq!(got.len(), 2);
    }

    #[tokio::test]
    async fn a_length_too_long_does_not_eat_the_next_frame() {
        // The first frame claims 20 bytes: its body takes the next frame's header and body.
        let next = r#"{"jsonrpc":"2.0","id":2,"method":"m"}"#;
        let mut input = b"Content-Length: 30\r\n\r\n{\"id\":1}".to_vec();
        input.extend_from_slice(format!("Content-Length: {}\r\n\r\n{next}", next.len()).as_bytes());
        input.extend_from_slice(b"Content-Length: 2\r\n\r\n[]");
        let got = frames(&input).await;
        assert_eq!(bodies(&got), vec![next.as_bytes(), b"[]"], "{got:?}");
    }

    #[tokio::test]
    async fn a_length_too_short_does_not_eat_the_next_frame() {
        let mut input = b"Content-Length: 4\r\n\r\n{\"id\":1}".to_vec();
        input.extend_from_slice(b"Content-Length: 2\r\n\r\n{}");
        let got = frames(&input).await;
        assert_eq!(bodies(&got), vec![b"{}"], "{got:?}");
    }

    #[tokio::test]
    async fn a_header_after_long_junk_is_found() {
        let mut input = vec![b'x'; 100 * 1024];
        input.extend_from_slice(b"Content-Length: 2\r\n\r\n{}");
        assert_eq!(bodies(&frames(&input).await), vec![b"{}"]);
    }

    #[tokio::test]
    async fn truncated_body_is_an_io_error() {
        let got = frames(b"Content-Length: 10\r\n\r\n{}").await;
        assert!(matches!(&got[0], Err(e) if e.contains("i/o")));
    }

    #[tokio::test]
    async fn very_long_header_line_is_bounded() {
        let mut input = vec![b'x'; 1 << 20];
        input.extend_from_slice(b"\r\n\r\nContent-Length: 2\r\n\r\n{}");
        let got = frames(&input).await;
        assert_eq!(got.last().unwrap(), &body("{}"));
    }

    #[tokio::test]
    async fn write_then_read_roundtrip() {
        let mut buf = Vec::new();
        write_frame(&mut buf, br#"{"a":1}"#).await.unwrap();
        assert_eq!(frames(&buf).await, vec![body(r#"{"a":1}"#)]);
    }
}
