//! Server-sent events, decoded from the bytes of a response body: what `GET /event` sends.
//!
//! OpenCode sends one `data: {json}` line per event, then a blank line. The decoder follows
//! the SSE rules that matter here: lines end with `\n`, `\r\n` or `\r`; a `data` field's value
//! loses one leading space; several `data` lines of one event are joined with `\n`; a blank
//! line dispatches the event; comments (`:`) and other fields (`event`, `id`, `retry`) are
//! skipped. An event larger than [`MAX_EVENT`] is dropped whole (a `None` in its place), so
//! a runaway stream cannot take memory.

/// The largest event kept, in bytes (a tool part holds the tool's whole output).
pub const MAX_EVENT: usize = 32 * 1024 * 1024;

#[derive(Debug, Default)]
pub struct Decoder {
    /// The unfinished line.
    line: Vec<u8>,
    /// The data of the event being read.
    data: Vec<u8>,
    has_data: bool,
    /// The event grew past [`MAX_EVENT`]: it is skipped up to its blank line.
    oversized: bool,
    /// The last byte was `\r` (a `\n` right after it ends nothing more).
    after_cr: bool,
    /// The current line has bytes (kept or, in an oversized event, dropped).
    in_line: bool,
}

impl Decoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds a chunk of the body; returns the events it completed, in order (`None` for an
    /// event dropped as too large).
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<Option<String>> {
        let mut out = Vec::new();
        for &b in chunk {
            if std::mem::take(&mut self.after_cr) && b == b'\n' {
                continue;
            }
            match b {
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    self.end_line(&mut out);
                }
                _ if self.oversized => self.in_line = true,
                _ => {
                    self.in_line = true;
                    self.line.push(b);
                    if self.line.len() + self.data.len() > MAX_EVENT {
                        self.oversized = true;
                        self.line = Vec::new();
                        self.data = Vec::new();
                    }
                }
            }
        }
        out
    }

    fn end_line(&mut self, out: &mut Vec<Option<String>>) {
        let line = std::mem::take(&mut self.line);
        if !std::mem::take(&mut self.in_line) {
            if std::mem::take(&mut self.oversized) {
                out.push(None);
            } else if std::mem::take(&mut self.has_data) {
                let data = std::mem::take(&mut self.data);
                out.push(Some(String::from_utf8_lossy(&data).into_owned()));
            }
            return;
        }
        if self.oversized {
            return;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(0) => return, // a comment
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (&line[..], &[][..]),
        };
        if field == b"data" {
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(chunks: &[&[u8]]) -> Vec<Option<String>> {
        let mut d = Decoder::new();
        chunks.iter().flat_map(|c| d.feed(c)).collect()
    }

    #[test]
    fn events_split_anywhere_are_whole() {
        let text = b"data: {\"type\":\"a\"}\n\ndata: {\"type\":\"b\"}\n\n";
        for cut in 0..text.len() {
            let got = all(&[&text[..cut], &text[cut..]]);
            assert_eq!(
                got,
                [Some(r#"{"type":"a"}"#.to_owned()), Some(r#"{"type":"b"}"#.to_owned())],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn fields_comments_and_line_ends() {
        let got = all(&[b": ping\r\nevent: x\r\nid: 7\r\ndata:one\r\ndata:  two\r\n\r\ndata\n\n\n"]);
        assert_eq!(got, [Some("one\n two".to_owned()), Some(String::new())]);
        // A lone CR ends a line too; an event without data is nothing.
        assert_eq!(all(&[b"data: a\r\rid: 1\n\n"]), [Some("a".to_owned())]);
        // An unfinished event is not dispatched.
        assert!(all(&[b"data: half"]).is_empty());
    }

    #[test]
    fn an_oversized_event_is_dropped_and_the_next_one_kept() {
        let mut d = Decoder::new();
        let big = vec![b'x'; MAX_EVENT + 10];
        let mut got = d.feed(b"data: ");
        got.extend(d.feed(&big));
        got.extend(d.feed(b"\ndata: more\n\ndata: next\n\n"));
        assert_eq!(got, [None, Some("next".to_owned())]);
    }
}
