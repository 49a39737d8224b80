//! Whisper's vocabulary (CTranslate2's `vocabulary.txt`: one token per
//! line, line number = id), decoding of byte-level BPE tokens to text, and
//! the ids of the special tokens the decoder steers with.

use std::collections::HashMap;
use std::path::Path;

use crate::error::VoiceError;

/// A special token the decoder needs is not in the vocabulary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the vocabulary has no {0}")]
pub struct MissingToken(pub &'static str);

pub struct Vocabulary {
    tokens: Vec<String>,
    ids: HashMap<String, u32>,
    /// GPT-2's byte-to-character table, reversed.
    byte_of: HashMap<char, u8>,
}

/// The special tokens decoding needs.
#[derive(Debug, Clone)]
pub struct Specials {
    pub eot: u32,
    pub sot: u32,
    pub transcribe: u32,
    pub no_timestamps: u32,
    pub no_speech: u32,
    /// The first timestamp token (`<|0.00|>`); each next one is 20 ms later.
    pub timestamp_begin: u32,
}

impl Vocabulary {
    pub fn load(path: &Path) -> Result<Self, VoiceError> {
        let text = std::fs::read_to_string(path).map_err(|source| VoiceError::Io { path: path.to_owned(), source })?;
        Ok(Self::from_lines(text.lines().map(str::to_owned).collect()))
    }

    pub fn from_lines(tokens: Vec<String>) -> Self {
        let ids = tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
        let byte_of = bytes_to_unicode().into_iter().map(|(b, c)| (c, b)).collect();
        Self { tokens, ids, byte_of }
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    pub fn id(&self, token: &str) -> Option<u32> {
        self.ids.get(token).copied()
    }

    pub fn specials(&self) -> Result<Specials, MissingToken> {
        let need = |t: &'static str| self.id(t).ok_or(MissingToken(t));
        let no_speech =
            self.id("<|nospeech|>").or_else(|| self.id("<|nocaptions|>")).ok_or(MissingToken("<|nospeech|>"))?;
        Ok(Specials {
            eot: need("<|endoftext|>")?,
            sot: need("<|startoftranscript|>")?,
            transcribe: need("<|transcribe|>")?,
            no_timestamps: need("<|notimestamps|>")?,
            no_speech,
            timestamp_begin: need("<|0.00|>")?,
        })
    }

    /// The text of `ids` (special tokens, which are all >= `text_end`, skipped).
    pub fn decode(&self, ids: &[u32], text_end: u32) -> String {
        let mut bytes = Vec::new();
        for &id in ids.iter().filter(|&&id| id < text_end) {
            if let Some(token) = self.tokens.get(id as usize) {
                for c in token.chars() {
                    match self.byte_of.get(&c) {
                        Some(b) => bytes.push(*b),
                        // Not a byte-level character: keep it as text.
                        None => bytes.extend(c.to_string().as_bytes()),
                    }
                }
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The token `id` as stored (for language codes: `<|pt|>` → "pt").
    pub fn token(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }
}

/// GPT-2's reversible map from bytes to printable characters.
fn bytes_to_unicode() -> Vec<(u8, char)> {
    let printable = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let mut n = 0u32;
    (0u32..=255)
        .map(|b| {
            let c = if printable(b) {
                b
            } else {
                n += 1;
                255 + n
            };
            (b as u8, char::from_u32(c).unwrap_or('?'))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_level_tokens_decode_to_text_with_spaces_and_accents() {
        // "Ġ" is the space byte; "Ã©" are the two UTF-8 bytes of "é".
        let v = Vocabulary::from_lines(vec!["Hello".into(), "Ġcaf".into(), "Ã©".into(), "<|endoftext|>".into()]);
        assert_eq!(v.decode(&[0, 1, 2, 3], 3), "Hello café");
    }

    #[test]
    fn the_byte_table_is_a_bijection() {
        let table = bytes_to_unicode();
        let chars: std::collections::HashSet<char> = table.iter().map(|(_, c)| *c).collect();
        assert_eq!(chars.len(), 256);
        assert_eq!(table[32].1, 'Ġ');
        assert_eq!(table[10].1, 'Ċ');
    }
}
