//! Streams the `message` of a RESPOND planner reply while the model is still
//! writing the JSON object, so ordinary chat replies keep arriving token by
//! token in planner mode. It recognises only the exact prefix
//! `{"action": "RESPOND", "message": "` (any JSON whitespace); anything else
//! (a tool call, NOOP, prose) streams nothing and is judged at the end by
//! [`crate::planner::parse_planner_reply`].

#[derive(Debug, Default)]
pub struct RespondStream {
    buf: String,
    /// Byte offset in `buf` where the message string starts, once known.
    start: Option<usize>,
    /// Byte offset in `buf` up to which the message was decoded.
    pos: usize,
    /// The message decoded so far.
    message: String,
    /// The closing quote was seen.
    done: bool,
    /// The reply is not a RESPOND (stop looking).
    other: bool,
    /// The model writes the message itself, not a planner object.
    raw: bool,
}

/// The prefix as a sequence of tokens separated by optional whitespace.
const PREFIX: &[&str] = &["{", "\"action\"", ":", "\"RESPOND\"", ",", "\"message\"", ":", "\""];

enum Prefix {
    /// Matched; the message starts at this byte offset.
    Complete(usize),
    /// Could still match with more text.
    Partial,
    Mismatch,
}

fn match_prefix(text: &str) -> Prefix {
    let mut rest = text;
    for token in PREFIX {
        rest = rest.trim_start();
        if rest.len() < token.len() {
            return if token.starts_with(rest) { Prefix::Partial } else { Prefix::Mismatch };
        }
        match rest.strip_prefix(token) {
            Some(r) => rest = r,
            None => return Prefix::Mismatch,
        }
    }
    Prefix::Complete(text.len() - rest.len())
}

impl RespondStream {
    pub fn new() -> Self {
        Self::default()
    }

    /// For a reply whose only possible action is RESPOND: the model is
    /// asked for the message directly, and every piece streams as is.
    pub fn raw() -> Self {
        Self { raw: true, ..Self::default() }
    }

    pub fn is_raw(&self) -> bool {
        self.raw
    }

    /// Is this reply a RESPOND whose message is being streamed?
    pub fn is_respond(&self) -> bool {
        self.raw || self.start.is_some()
    }

    /// Feeds model text; returns the newly decoded part of the message.
    pub fn push(&mut self, delta: &str) -> String {
        self.buf.push_str(delta);
        if self.raw {
            self.message.push_str(delta);
            return delta.to_owned();
        }
        if self.other || self.done {
            return String::new();
        }
        if self.start.is_none() {
            match match_prefix(&self.buf) {
                Prefix::Complete(at) => {
                    self.start = Some(at);
                    self.pos = at;
                }
                Prefix::Partial => return String::new(),
                Prefix::Mismatch => {
                    self.other = true;
                    return String::new();
                }
            }
        }
        let new = self.decode();
        self.message.push_str(&new);
        new
    }

    /// The message decoded so far (all of it once the reply is complete).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Decodes JSON string content from `pos`, holding back an escape that
    /// is not complete yet.
    fn decode(&mut self) -> String {
        let mut out = String::new();
        let bytes = self.buf.as_bytes();
        let mut i = self.pos;
        while i < bytes.len() {
            match bytes[i] {
                b'"' => {
                    self.done = true;
                    i += 1;
                    break;
                }
                b'\\' => {
                    let Some(&e) = bytes.get(i + 1) else { break };
                    let simple = match e {
                        b'n' => Some('\n'),
                        b't' => Some('\t'),
                        b'r' => Some('\r'),
                        b'b' => Some('\u{8}'),
                        b'f' => Some('\u{c}'),
                        b'"' => Some('"'),
                        b'\\' => Some('\\'),
                        b'/' => Some('/'),
                        _ => None,
                    };
                    if let Some(c) = simple {
                        out.push(c);
                        i += 2;
                        continue;
                    }
                    if e != b'u' {
                        // Invalid escape: the final parse will reject it.
                        self.done = true;
                        break;
                    }
                    let Some((c, used)) = decode_unicode_escape(&self.buf[i..]) else { break };
                    out.push(c);
                    i += used;
                }
                _ => {
                    // Copy one whole UTF-8 character.
                    let ch_len = self.buf[i..].chars().next().map_or(1, char::len_utf8);
                    out.push_str(&self.buf[i..i + ch_len]);
                    i += ch_len;
                }
            }
        }
        self.pos = i;
        out
    }

    /// Everything the model wrote so far.
    pub fn text(&self) -> &str {
        &self.buf
    }
}

/// `\uXXXX` (with a surrogate pair when needed) at the start of `s`:
/// the character and the bytes used, or None when incomplete.
fn decode_unicode_escape(s: &str) -> Option<(char, usize)> {
    let hex = |from: usize| s.get(from..from + 4).and_then(|h| u16::from_str_radix(h, 16).ok());
    let hi = hex(2)?;
    if (0xD800..0xDC00).contains(&hi) {
        if s.len() < 12 {
            return None;
        }
        let lo = if &s[6..8] == "\\u" { hex(8) } else { None };
        return match lo {
            Some(lo) if (0xDC00..0xE000).contains(&lo) => {
                let c = 0x10000 + ((u32::from(hi) - 0xD800) << 10) + (u32::from(lo) - 0xDC00);
                Some((char::from_u32(c).unwrap_or('\u{fffd}'), 12))
            }
            _ => Some(('\u{fffd}', 6)),
        };
    }
    Some((char::from_u32(u32::from(hi)).unwrap_or('\u{fffd}'), 6))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream_all(chunks: &[&str]) -> (String, bool) {
        let mut s = RespondStream::new();
        let out: String = chunks.iter().map(|c| s.push(c)).collect();
        (out, s.is_respond())
    }

    #[test]
    fn streams_the_message_of_a_respond_split_anywhere() {
        let full = r#"{ "action": "RESPOND", "message": "Hi \"you\"\n café \u00e9 \ud83d\ude00!" }"#;
        let want = "Hi \"you\"\n café é 😀!";
        // Every split point, one and two cuts.
        for a in 0..=full.len() {
            if !full.is_char_boundary(a) {
                continue;
            }
            let (out, respond) = stream_all(&[&full[..a], &full[a..]]);
            assert!(respond);
            assert_eq!(out, want, "split at {a}");
        }
        let chars: Vec<String> = full.chars().map(String::from).collect();
        let refs: Vec<&str> = chars.iter().map(String::as_str).collect();
        assert_eq!(stream_all(&refs).0, want);
    }

    #[test]
    fn tool_calls_noop_and_prose_stream_nothing() {
        for text in [
            r#"{"action":"CALL_TOOL","args":{"title":"Heat"},"tool":"save_movie"}"#,
            r#"{"action":"NOOP"}"#,
            "Sure, here you go",
            r#"{"message":"x","action":"RESPOND"}"#,
        ] {
            let (out, respond) = stream_all(&[text]);
            assert_eq!(out, "", "{text}");
            assert!(!respond);
        }
    }

    #[test]
    fn a_raw_stream_passes_everything_through() {
        let mut s = RespondStream::raw();
        assert_eq!(s.push("Hel"), "Hel");
        assert_eq!(s.push("lo \"x\""), "lo \"x\"");
        assert_eq!(s.message(), "Hello \"x\"");
        assert!(s.is_respond() && s.is_raw());
    }

    #[test]
    fn stops_at_the_closing_quote() {
        let (out, _) = stream_all(&[r#"{"action":"RESPOND","message":"ok"}"#, "  trailing \"junk\""]);
        assert_eq!(out, "ok");
    }
}
