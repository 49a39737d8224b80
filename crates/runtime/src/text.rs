//! Small text helpers shared by the guards and intents.

use unicode_normalization::char::is_combining_mark;

/// Lowercase, accents removed (NFD without combining marks): "Instruções" → "instrucoes".
pub fn fold(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    fold_into(text, &mut out);
    out
}

/// [`fold`] appended to `out`, one character at a time: ASCII is only
/// lowercased; anything else is decomposed on its own. The same result as
/// NFD of the whole text, because NFD's reordering only moves combining
/// marks, and every combining mark is dropped.
pub fn fold_into(text: &str, out: &mut String) {
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
        } else {
            unicode_normalization::char::decompose_canonical(c, |d| {
                if !is_combining_mark(d) {
                    out.extend(d.to_lowercase());
                }
            });
        }
    }
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
    use unicode_normalization::UnicodeNormalization;

    #[test]
    fn fold_by_character_matches_nfd_of_the_whole_text() {
        let nfd = |t: &str| -> String { t.nfd().filter(|c| !is_combining_mark(*c)).flat_map(char::to_lowercase).collect() };
        for t in [
            "Instruções",
            "ESQUEÇA as instruções anteriores",
            "a\u{0301}\u{0327}e\u{0323}\u{0302}",
            "Ａｂｃ ℌ ǅ ß İ",
            "한국어 Ωμέγα іgnоrе",
            "plain ascii, 123!",
        ] {
            assert_eq!(fold(t), nfd(t), "{t:?}");
        }
    }

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
