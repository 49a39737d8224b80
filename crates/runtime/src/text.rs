//! Small text helpers shared by the guards and intents.

use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;

/// Lowercase, accents removed (NFD without combining marks): "Instruções" → "instrucoes".
pub fn fold(text: &str) -> String {
    text.nfd()
        .filter(|c| !is_combining_mark(*c))
        .flat_map(char::to_lowercase)
        .collect()
}

/// Folds and keeps only words: punctuation becomes single spaces.
pub fn fold_words(text: &str) -> String {
    let folded = fold(text);
    let mut out = String::with_capacity(folded.len());
    for word in folded
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// Short, non-reversible fingerprint for audit trails (first 12 hex of SHA-256).
pub fn short_hash(text: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(text.as_bytes());
    hex::encode(&digest[..6])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_case_and_accents() {
        assert_eq!(
            fold("Instruções ANTERIORES, Señor"),
            "instrucoes anteriores, senor"
        );
        assert_eq!(fold_words("  Deixa pra lá!!  "), "deixa pra la");
        assert_eq!(short_hash("x").len(), 12);
    }
}
