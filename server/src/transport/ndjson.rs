//! Newline-delimited JSON framing: one JSON-RPC message per line, as ACP (agents and
//! clients) and `codex app-server` speak it on stdio.
//!
//! A message never contains a raw newline: compact JSON escapes them inside strings, so a
//! newline can only be whitespace between tokens, and the writer turns any such byte into a
//! space. A line longer than [`MAX_LINE`] is skipped up to its newline without being kept
//! (the reader stays in sync: unlike a `Content-Length` frame, the next message starts at a
//! known place), and so is a blank line.

use std::io;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

use super::framing::{Frame, FrameError};

/// The longest line we accept: the same limit as a framed body.
pub const MAX_LINE: usize = super::framing::MAX_FRAME;

/// Reads one line (without its terminator) as a frame body.
pub async fn read_line<R: AsyncBufRead + Unpin>(reader: &mut R) -> Result<Frame, FrameError> {
    read_line_capped(reader, MAX_LINE).await
}

pub(super) async fn read_line_capped<R: AsyncBufRead + Unpin>(reader: &mut R, cap: usize) -> Result<Frame, FrameError> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            if line.is_empty() && !too_long {
                return Ok(Frame::Eof);
            }
            break;
        }
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (buf.len(), false),
        };
        if !too_long && line.len() + take > cap {
            too_long = true;
            line = Vec::new();
        }
        if !too_long {
            line.extend_from_slice(&buf[..take]);
        }
        reader.consume(if done { take + 1 } else { take });
        if done {
            break;
        }
    }
    if too_long {
        return Ok(Frame::Skipped(format!("a line longer than {cap} bytes")));
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(Frame::Skipped("a blank line".into()));
    }
    Ok(Frame::Body(line))
}

/// Writes one message as a line, without flushing.
pub async fn write_line_unflushed<W: AsyncWrite + Unpin>(writer: &mut W, body: &[u8]) -> io::Result<()> {
    if body.contains(&b'\n') {
        let flat: Vec<u8> = body.iter().map(|&b| if b == b'\n' { b' ' } else { b }).collect();
        writer.write_all(&flat).await?;
    } else {
        writer.write_all(body).await?;
    }
    writer.write_all(b"\n").await
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], cap: usize) -> Vec<Frame> {
        let mut reader = tokio::io::BufReader::with_capacity(16, input);
        let mut out = Vec::new();
        loop {
            match read_line_capped(&mut reader, cap).await.unwrap() {
                Frame::Eof => break,
                f => out.push(f),
            }
        }
        out
    }

    fn body(s: &str) -> Frame {
        Frame::Body(s.as_bytes().to_vec())
    }

    #[tokio::test]
    async fn reads_lines_with_and_without_cr_and_a_last_unterminated_one() {
        let got = lines(b"{\"a\":1}\r\n{\"b\":2}\n{\"c\":3}", 1024).await;
        assert_eq!(got, vec![body(r#"{"a":1}"#), body(r#"{"b":2}"#), body(r#"{"c":3}"#)]);
    }

    #[tokio::test]
    async fn skips_blank_lines() {
        let got = lines(b"\n  \r\n{}\n", 1024).await;
        assert!(matches!(got[0], Frame::Skipped(_)));
        assert!(matches!(got[1], Frame::Skipped(_)));
        assert_eq!(got[2], body("{}"));
    }

    #[tokio::test]
    async fn an_over_long_line_is_skipped_and_the_next_one_is_read() {
        let mut input = vec![b'x'; 200];
        input.extend_from_slice(b"\n{\"ok\":true}\n");
        let got = lines(&input, 64).await;
        assert!(matches!(&got[0], Frame::Skipped(m) if m.contains("longer than 64")));
        assert_eq!(got[1], body(r#"{"ok":true}"#));
        assert_eq!(got.len(), 2);
    }

    #[tokio::test]
    async fn a_line_of_exactly_the_cap_is_kept() {
        let mut input = vec![b'7'; 64];
        input.push(b'\n');
        assert_eq!(lines(&input, 64).await, vec![Frame::Body(vec![b'7'; 64])]);
    }

    #[tokio::test]
    async fn written_lines_never_hold_a_raw_newline() {
        let mut out = Vec::new();
        write_line_unflushed(&mut out, b"{\n\"a\": \"x\\ny\"\n}").await.unwrap();
        write_line_unflushed(&mut out, b"{}").await.unwrap();
        assert_eq!(out, b"{ \"a\": \"x\\ny\" }\n{}\n");
        let v: serde_json::Value = serde_json::from_slice(out.split(|&b| b == b'\n').next().unwrap()).unwrap();
        assert_eq!(v["a"], "x\ny");
    }
}
