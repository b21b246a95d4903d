//! LSP base framing: `Content-Length: N\r\n\r\n` then N bytes of JSON.
//!
//! The reader resynchronises on junk: a header line that names no known header is skipped,
//! and a `Content-Length:` found anywhere in a line is honoured. A length above
//! [`MAX_FRAME`] is fatal for the connection (it is never allocated).

use std::io;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The largest body we accept.
pub const MAX_FRAME: usize = 64 * 1024 * 1024;
/// The longest header line we read before giving up on it.
const MAX_HEADER_LINE: usize = 8 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("Content-Length {0} exceeds the limit of {MAX_FRAME} bytes")]
    TooLarge(u64),
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
            match length {
                Some(n) if n > MAX_FRAME as u64 => return Err(FrameError::TooLarge(n)),
                Some(n) => {
                    let mut body = vec![0u8; n as usize];
                    reader.read_exact(&mut body).await?;
                    return Ok(Frame::Body(body));
                }
                None => return Ok(Frame::Skipped("a header block without Content-Length".into())),
            }
        }
        if let Some(value) = find_content_length(text) {
            match value.trim().parse::<u64>() {
                Ok(n) => length = Some(n),
                Err(_) => return Ok(Frame::Skipped(format!("a bad Content-Length {value:?}"))),
            }
        }
        // Any other header (Content-Type, or junk) is ignored.
    }
}

fn find_content_length(line: &str) -> Option<&str> {
    const NAME: &str = "content-length:";
    let lower = line.to_ascii_lowercase();
    let at = lower.find(NAME)?;
    Some(&line[at + NAME.len()..])
}

/// Reads up to and including `\n`, keeping at most [`MAX_HEADER_LINE`] bytes of it.
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
        let room = MAX_HEADER_LINE.saturating_sub(line.len());
        line.extend_from_slice(&buf[..take.min(room)]);
        reader.consume(take);
        if done {
            return Ok(Some(line));
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
        let mut reader = tokio::io::BufReader::new(input);
        let mut out = Vec::new();
        loop {
            match read_frame(&mut reader).await {
                Ok(Frame::Eof) => break,
                Ok(f) => out.push(Ok(f)),
                Err(e) => {
                    out.push(Err(e.to_string()));
                    break;
                }
            }
        }
        out
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
