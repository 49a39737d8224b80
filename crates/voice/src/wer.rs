//! Word error rate with a Whisper-style English normaliser, for the
//! benchmark and tests. The normaliser is a subset of OpenAI's
//! `EnglishTextNormalizer`: lower case, bracketed asides dropped, titles
//! spelled out ("mr" → "mister"), common contractions expanded, hyphens
//! and punctuation to spaces, spelled numbers below a thousand to digits,
//! British spellings that Whisper's list maps kept as they are (none occur
//! in our clips). It is the same for reference and hypothesis.

/// Normalises English text for scoring.
pub fn normalize_en(text: &str) -> String {
    let lower = text.to_lowercase();
    // Drop [bracketed] and (parenthesised) asides, as Whisper's normaliser does.
    let mut cleaned = String::with_capacity(lower.len());
    let mut depth = 0i32;
    for c in lower.chars() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth = (depth - 1).max(0),
            _ if depth == 0 => cleaned.push(c),
            _ => {}
        }
    }
    // Apostrophes inside words stay (for contractions) until expanded.
    let spaced: String = cleaned
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '\'' || c == '’' {
                if c == '’' {
                    '\''
                } else {
                    c
                }
            } else {
                ' '
            }
        })
        .collect();
    let mut words: Vec<String> = Vec::new();
    for raw in spaced.split_whitespace() {
        let w = raw.trim_matches('\'');
        if w.is_empty() {
            continue;
        }
        match expand(w) {
            Some(parts) => words.extend(parts.iter().map(|s| (*s).to_owned())),
            None => words.push(w.replace('\'', "")),
        }
    }
    numbers_to_digits(&words).join(" ")
}

/// Lower case and punctuation removed, nothing else (accents kept): for
/// languages the English rules do not fit.
pub fn normalize_basic(text: &str) -> String {
    text.to_lowercase()
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn expand(word: &str) -> Option<&'static [&'static str]> {
    Some(match word {
        "mr" => &["mister"],
        "mrs" => &["missus"],
        "ms" => &["miss"],
        "dr" => &["doctor"],
        "st" => &["saint"],
        "won't" => &["will", "not"],
        "can't" => &["can", "not"],
        "cannot" => &["can", "not"],
        "n't" => &["not"],
        "i'm" => &["i", "am"],
        "it's" => &["it", "is"],
        "that's" => &["that", "is"],
        "don't" => &["do", "not"],
        "doesn't" => &["does", "not"],
        "didn't" => &["did", "not"],
        "isn't" => &["is", "not"],
        "wasn't" => &["was", "not"],
        "i'll" => &["i", "will"],
        "you're" => &["you", "are"],
        "we're" => &["we", "are"],
        "they're" => &["they", "are"],
        "i've" => &["i", "have"],
        "okay" => &["ok"],
        _ => return None,
    })
}

fn small_number(w: &str) -> Option<u32> {
    const ONES: [&str; 20] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
    ];
    const TENS: [&str; 8] = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"];
    if let Some(i) = ONES.iter().position(|o| *o == w) {
        return Some(i as u32);
    }
    TENS.iter().position(|t| *t == w).map(|i| 20 + 10 * i as u32)
}

/// "twenty five" → "25", "three hundred and two" → "302"; below a thousand.
fn numbers_to_digits(words: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(words.len());
    let mut i = 0;
    while i < words.len() {
        let Some(first) = small_number(&words[i]) else {
            out.push(words[i].clone());
            i += 1;
            continue;
        };
        let mut value = first;
        let mut j = i + 1;
        if first >= 20 && first % 10 == 0 {
            if let Some(unit) = words.get(j).and_then(|w| small_number(w)).filter(|u| (1..10).contains(u)) {
                value += unit;
                j += 1;
            }
        }
        if value < 10 && words.get(j).map(String::as_str) == Some("hundred") {
            value *= 100;
            j += 1;
            let mut k = j;
            if words.get(k).map(String::as_str) == Some("and") {
                k += 1;
            }
            if let Some(rest) = words.get(k).and_then(|w| small_number(w)).filter(|r| *r > 0) {
                let mut rest = rest;
                let mut m = k + 1;
                if rest >= 20 && rest % 10 == 0 {
                    if let Some(unit) = words.get(m).and_then(|w| small_number(w)).filter(|u| (1..10).contains(u)) {
                        rest += unit;
                        m += 1;
                    }
                }
                value += rest;
                j = m;
            }
        }
        out.push(value.to_string());
        i = j;
    }
    out
}

/// Word-level edit distance between two normalised texts: (errors, reference words).
pub fn word_errors(reference: &str, hypothesis: &str) -> (usize, usize) {
    let r: Vec<&str> = reference.split_whitespace().collect();
    let h: Vec<&str> = hypothesis.split_whitespace().collect();
    let mut prev: Vec<usize> = (0..=h.len()).collect();
    for (i, rw) in r.iter().enumerate() {
        let mut cur = vec![i + 1; h.len() + 1];
        for (j, hw) in h.iter().enumerate() {
            let sub = prev[j] + usize::from(rw != hw);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    (prev[h.len()], r.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_normaliser_spells_titles_splits_hyphens_and_drops_punctuation() {
        assert_eq!(
            normalize_en("And Mr. John Dashwood had then leisure..."),
            "and mister john dashwood had then leisure"
        );
        assert_eq!(normalize_en("He was not an ill-disposed young man."), "he was not an ill disposed young man");
        assert_eq!(normalize_en("[MUSIC] It's cold-hearted!"), "it is cold hearted");
    }

    #[test]
    fn spelled_numbers_become_digits() {
        assert_eq!(normalize_en("ten of clubs"), "10 of clubs");
        assert_eq!(normalize_en("twenty five and three hundred and two"), "25 and 302");
        assert_eq!(normalize_en("nine hundred"), "900");
        assert_eq!(normalize_en("one two"), "1 2");
    }

    #[test]
    fn word_errors_count_substitutions_insertions_and_deletions() {
        assert_eq!(word_errors("a b c d", "a b c d"), (0, 4));
        assert_eq!(word_errors("a b c d", "a x c d"), (1, 4));
        assert_eq!(word_errors("a b c d", "a b d"), (1, 4));
        assert_eq!(word_errors("a b c d", "a b c d e"), (1, 4));
        assert_eq!(word_errors("a more a amiable", "a more amiable"), (1, 4));
        assert_eq!(word_errors("", "x"), (1, 0));
    }
}
