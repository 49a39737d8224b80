//! A small BERT WordPiece tokenizer (uncased), reading `vocab.txt`.
//!
//! Matches Hugging Face's `BertTokenizer` with `do_lower_case=True` for the
//! cases that matter to chat text: clean-up of control characters, CJK
//! characters split apart, lower-casing, accent stripping (NFD, drop marks),
//! punctuation split, greedy longest-match WordPiece with `##`
//! continuations, `[CLS] … [SEP]`, truncation to `max_len` tokens.

use std::collections::HashMap;
use std::path::Path;

use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;

use crate::MemoryError;

const MAX_CHARS_PER_WORD: usize = 100;

pub struct WordPiece {
    vocab: HashMap<String, u32>,
    cls: u32,
    sep: u32,
    unk: u32,
    pub max_len: usize,
}

impl WordPiece {
    pub fn from_file(path: &Path, max_len: usize) -> Result<Self, MemoryError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| MemoryError::ModelUnavailable(format!("cannot read {}: {e}", path.display())))?;
        Self::from_vocab(&text, max_len)
    }

    pub fn from_vocab(text: &str, max_len: usize) -> Result<Self, MemoryError> {
        let vocab: HashMap<String, u32> =
            text.lines().enumerate().map(|(i, l)| (l.trim_end_matches('\r').to_owned(), i as u32)).collect();
        let id = |t: &str| {
            vocab.get(t).copied().ok_or_else(|| MemoryError::ModelUnavailable(format!("vocab.txt has no {t} token")))
        };
        Ok(Self { cls: id("[CLS]")?, sep: id("[SEP]")?, unk: id("[UNK]")?, vocab, max_len: max_len.max(2) })
    }

    /// Token ids with `[CLS]` and `[SEP]`, at most `max_len` of them.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut ids = vec![self.cls];
        let budget = self.max_len - 1;
        'words: for word in basic_tokens(text) {
            for id in self.wordpiece(&word) {
                if ids.len() >= budget {
                    break 'words;
                }
                ids.push(id);
            }
        }
        ids.push(self.sep);
        ids
    }

    fn wordpiece(&self, word: &str) -> Vec<u32> {
        let chars: Vec<char> = word.chars().collect();
        if chars.len() > MAX_CHARS_PER_WORD {
            return vec![self.unk];
        }
        let mut out = Vec::new();
        let mut start = 0;
        let mut piece = String::new();
        while start < chars.len() {
            let mut end = chars.len();
            let mut found = None;
            while start < end {
                piece.clear();
                if start > 0 {
                    piece.push_str("##");
                }
                piece.extend(&chars[start..end]);
                if let Some(&id) = self.vocab.get(piece.as_str()) {
                    found = Some(id);
                    break;
                }
                end -= 1;
            }
            match found {
                Some(id) => {
                    out.push(id);
                    start = end;
                }
                None => return vec![self.unk],
            }
        }
        out
    }
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F |
        0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

fn is_punctuation(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_punctuation();
    }
    // Unicode "P*" categories, approximated by the blocks chat text uses.
    matches!(c as u32,
        0x00A1 | 0x00A7 | 0x00AB | 0x00B6 | 0x00B7 | 0x00BB | 0x00BF |
        0x2010..=0x2027 | 0x2030..=0x205E | 0x3001..=0x3003 | 0x3008..=0x3011 |
        0x3014..=0x301F | 0xFF01..=0xFF0F | 0xFF1A..=0xFF20 | 0xFF3B..=0xFF40 | 0xFF5B..=0xFF65)
}

/// Clean-up, lower-case, strip accents, split on whitespace and punctuation.
fn basic_tokens(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let flush = |cur: &mut String, words: &mut Vec<String>| {
        if !cur.is_empty() {
            words.push(std::mem::take(cur));
        }
    };
    for c in text.chars() {
        if c == '\0' || c == '\u{FFFD}' || (c.is_control() && !c.is_whitespace()) {
            continue;
        }
        if c.is_whitespace() {
            flush(&mut cur, &mut words);
            continue;
        }
        if is_cjk(c) || is_punctuation(c) {
            flush(&mut cur, &mut words);
            words.push(c.to_string());
            continue;
        }
        for l in c.to_lowercase() {
            for d in std::iter::once(l).nfd() {
                if !is_combining_mark(d) {
                    cur.push(d);
                }
            }
        }
    }
    flush(&mut cur, &mut words);
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab() -> WordPiece {
        let v = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n,\nworld\n!\nun\n##want\n##ed\ncafe\nrun\n##ning\n";
        WordPiece::from_vocab(v, 128).unwrap()
    }

    #[test]
    fn splits_punctuation_lowercases_strips_accents_and_uses_wordpieces() {
        let t = vocab();
        assert_eq!(t.encode("Hello, WORLD!"), vec![2, 4, 5, 6, 7, 3]);
        assert_eq!(t.encode("unwanted café"), vec![2, 8, 9, 10, 11, 3]);
        assert_eq!(t.encode("running xyz"), vec![2, 12, 13, 1, 3]);
    }

    #[test]
    fn truncates_to_max_len_keeping_sep() {
        let mut t = vocab();
        t.max_len = 4;
        assert_eq!(t.encode("hello hello hello hello"), vec![2, 4, 4, 3]);
    }
}
