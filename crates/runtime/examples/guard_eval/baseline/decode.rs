//! Finds encoded runs (base64, hex, `\x` escapes, percent-encoding) and
//! decodes the ones that turn out to be readable text, so the detectors can
//! scan what is hidden inside them.

use std::sync::LazyLock;

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine;
use regex::Regex;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Base64,
    Hex,
    Percent,
}

impl Encoding {
    pub fn name(self) -> &'static str {
        match self {
            Self::Base64 => "base64",
            Self::Hex => "hex",
            Self::Percent => "percent-encoding",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub encoding: Encoding,
    pub start: usize,
    pub end: usize,
    pub text: String,
}

static BASE64_RUN: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"[A-Za-z0-9+/_-]{16,}={0,2}").ok());
static HEX_RUN: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)\b(?:[0-9a-f]{2}[ :]?){8,}\b|(?:\\x[0-9a-f]{2}){4,}").ok());
static PERCENT_RUN: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?:%[0-9A-Fa-f]{2}){4,}").ok());

/// Mostly printable, mostly letters and spaces: looks like language.
fn readable(bytes: Vec<u8>) -> Option<String> {
    let s = String::from_utf8(bytes).ok()?;
    let total = s.chars().count();
    if total < 4 {
        return None;
    }
    let printable = s.chars().filter(|c| !c.is_control() || *c == '\n').count();
    let wordy = s.chars().filter(|c| c.is_alphabetic() || *c == ' ').count();
    (printable * 100 >= total * 95 && wordy * 100 >= total * 70 && s.contains(' ')).then_some(s)
}

fn decode_hex(run: &str) -> Option<Vec<u8>> {
    let digits: String = run
        .replace("\\x", "")
        .replace("\\X", "")
        .chars()
        .filter(char::is_ascii_hexdigit)
        .collect();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    hex::decode(digits).ok()
}

fn decode_percent(run: &str) -> Option<Vec<u8>> {
    run.split('%')
        .filter(|p| !p.is_empty())
        .map(|p| u8::from_str_radix(p, 16).ok())
        .collect()
}

/// Whether `text` has at least `min` bytes of `class` in a row: a cheap
/// necessary condition checked before a run's regex scans the text.
fn has_run(text: &str, min: usize, class: impl Fn(u8) -> bool) -> bool {
    let mut run = 0;
    for &b in text.as_bytes() {
        run = if class(b) { run + 1 } else { 0 };
        if run >= min {
            return true;
        }
    }
    false
}

/// Every readable payload hidden in `text`.
pub fn payloads(text: &str) -> Vec<Decoded> {
    let mut out = Vec::new();
    // A hex run has 16+ hex digits (with optional ' ' / ':' between pairs)
    // or `\x` escapes; a base64 run 16+ alphabet characters; percent
    // encoding a '%'. Most text has none: no regex runs over it.
    let hex = text.contains("\\x")
        || text.contains("\\X")
        || has_run(text, 16, |b| b.is_ascii_hexdigit() || b == b' ' || b == b':');
    let base64 = has_run(text, 16, |b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'_' | b'-'));
    let percent = text.contains('%');
    if let Some(re) = HEX_RUN.as_ref().filter(|_| hex) {
        for m in re.find_iter(text) {
            if let Some(s) = decode_hex(m.as_str()).and_then(readable) {
                out.push(Decoded {
                    encoding: Encoding::Hex,
                    start: m.start(),
                    end: m.end(),
                    text: s,
                });
            }
        }
    }
    if let Some(re) = BASE64_RUN.as_ref().filter(|_| base64) {
        for m in re.find_iter(text) {
            if out.iter().any(|d| m.start() < d.end && d.start < m.end()) {
                continue;
            }
            let run = m.as_str();
            let decoded = [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD]
                .iter()
                .find_map(|engine| engine.decode(run).ok().and_then(readable));
            if let Some(s) = decoded {
                out.push(Decoded {
                    encoding: Encoding::Base64,
                    start: m.start(),
                    end: m.end(),
                    text: s,
                });
            }
        }
    }
    if let Some(re) = PERCENT_RUN.as_ref().filter(|_| percent) {
        for m in re.find_iter(text) {
            if let Some(s) = decode_percent(m.as_str()).and_then(readable) {
                out.push(Decoded {
                    encoding: Encoding::Percent,
                    start: m.start(),
                    end: m.end(),
                    text: s,
                });
            }
        }
    }
    out
}

