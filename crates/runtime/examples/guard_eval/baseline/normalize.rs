//! Deep normalisation: undo the tricks that hide words from a matcher.
//! NFKC (full-width, math letters, ligatures), invisible and bidi characters
//! removed, Unicode tag characters decoded, Cyrillic/Greek look-alikes mapped
//! to Latin, accents and case folded, leetspeak undone inside words that mix
//! letters and digits, separators inside words dropped ("ig-no*re"), and
//! letter-by-letter spacing ("i g n o r e") joined back into words.

use unicode_normalization::UnicodeNormalization;

use crate::text::fold;

/// Characters that render as nothing (or reorder text) and can split words.
pub fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}'
        | '\u{E0000}'..='\u{E007F}')
}

/// Unicode "tag" characters spell ASCII invisibly (U+E0041 is a hidden 'A').
fn tag_to_ascii(c: char) -> Option<char> {
    let v = c as u32;
    (0xE0020..=0xE007E)
        .contains(&v)
        .then(|| char::from_u32(v - 0xE0000))
        .flatten()
}

/// Cyrillic and Greek letters that look like Latin ones.
pub fn homoglyph(c: char) -> Option<char> {
    Some(match c {
        'а' | 'α' => 'a',
        'в' | 'β' => 'b',
        'с' | 'ϲ' => 'c',
        'ԁ' => 'd',
        'е' | 'ε' | 'ё' => 'e',
        'ɡ' => 'g',
        'һ' | 'н' | 'η' => 'h',
        'і' | 'ї' | 'ι' | 'ı' | 'ɩ' => 'i',
        'ј' => 'j',
        'к' | 'κ' => 'k',
        'ӏ' => 'l',
        'м' => 'm',
        'п' | 'ν' => 'n',
        'о' | 'ο' | 'σ' => 'o',
        'р' | 'ρ' => 'p',
        'ԛ' => 'q',
        'ѕ' => 's',
        'т' | 'τ' => 't',
        'υ' | 'ц' => 'u',
        'ѵ' => 'v',
        'ԝ' | 'ω' => 'w',
        'х' | 'χ' => 'x',
        'у' | 'γ' => 'y',
        'А' | 'Α' => 'A',
        'В' | 'Β' => 'B',
        'С' => 'C',
        'Е' | 'Ε' => 'E',
        'Н' | 'Η' => 'H',
        'І' | 'Ι' => 'I',
        'Ј' => 'J',
        'К' | 'Κ' => 'K',
        'М' | 'Μ' => 'M',
        'Ν' => 'N',
        'О' | 'Ο' => 'O',
        'Р' | 'Ρ' => 'P',
        'Ѕ' => 'S',
        'Т' | 'Τ' => 'T',
        'Υ' | 'Ү' => 'Y',
        'Х' | 'Χ' => 'X',
        'Ζ' => 'Z',
        _ => return None,
    })
}

fn is_cyrillic_or_greek(c: char) -> bool {
    matches!(c as u32, 0x0370..=0x052F)
}

/// Words mixing Latin with Cyrillic/Greek letters (a classic spoofing sign).
pub fn mixed_script_words(text: &str) -> usize {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| {
            w.chars().any(|c| c.is_ascii_alphabetic()) && w.chars().any(is_cyrillic_or_greek)
        })
        .count()
}

fn leet(c: char) -> Option<char> {
    Some(match c {
        '0' => 'o',
        '1' => 'i',
        '3' => 'e',
        '4' | '@' => 'a',
        '5' | '$' => 's',
        '7' => 't',
        _ => return None,
    })
}

/// Undoes leetspeak in runs that mix letters with leet symbols ("1gn0r3").
fn unleet(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        let letters = run.chars().filter(|c| c.is_alphabetic()).count();
        let leets = run.chars().filter(|c| leet(*c).is_some()).count();
        if letters >= 1 && leets >= 1 && run.chars().count() >= 2 {
            out.extend(run.chars().map(|c| leet(c).unwrap_or(c)));
        } else {
            out.push_str(run);
        }
        run.clear();
    };
    for c in text.chars() {
        if c.is_alphanumeric() || matches!(c, '@' | '$') {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// Drops separators between two letters: "ig-no*re" → "ignore", "I.G.N.O.R.E" → "IGNORE".
fn drop_inner_separators(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    for (i, &c) in chars.iter().enumerate() {
        let is_sep = matches!(c, '*' | '_' | '-' | '.' | '`' | '~' | '^' | '\'' | '’');
        if is_sep
            && i > 0
            && i + 1 < chars.len()
            && chars[i - 1].is_alphanumeric()
            && chars[i + 1].is_alphanumeric()
        {
            continue;
        }
        out.push(c);
    }
    out
}

/// Joins letter-by-letter spacing: "i g n o r e   a l l" → "ignore all".
/// Within a run of single letters, one space joins; two or more break words.
fn join_spaced_letters(text: &str) -> String {
    // (whitespace before, token)
    let mut tokens: Vec<(usize, &str)> = Vec::new();
    let mut gap = 0;
    let mut start = None;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            if let Some(s) = start.take() {
                tokens.push((gap, &text[s..i]));
                gap = 0;
            }
            gap += 1;
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        tokens.push((gap, &text[s..]));
    }
    let single = |t: &str| {
        let t = t.trim_matches(|c: char| !c.is_alphanumeric());
        t.chars().count() == 1
    };
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < tokens.len() {
        let mut j = i;
        while j < tokens.len() && single(tokens[j].1) {
            j += 1;
        }
        if j - i >= 3 {
            if !out.is_empty() {
                out.push(' ');
            }
            for (k, (gap, tok)) in tokens[i..j].iter().enumerate() {
                if k > 0 && *gap >= 2 {
                    out.push(' ');
                }
                out.extend(tok.chars().filter(|c| c.is_alphanumeric()));
            }
            i = j;
        } else {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(tokens[i].1);
            i += 1;
        }
    }
    out
}

/// The fully normalised, lowercase form used by the second detection pass.
pub fn deep(text: &str) -> String {
    if text.is_ascii() {
        // No invisible, tag, full-width or look-alike characters: NFKC and
        // the homoglyph map change nothing.
        let folded = text.to_ascii_lowercase();
        return join_spaced_letters(&drop_inner_separators(&unleet(&folded)));
    }
    let hidden = text.chars().any(|c| tag_to_ascii(c).is_some() || is_invisible(c));
    let visible: std::borrow::Cow<'_, str> = if hidden {
        text.chars()
            .filter_map(|c| match tag_to_ascii(c) {
                Some(a) => Some(a),
                None if is_invisible(c) => None,
                None => Some(c),
            })
            .collect::<String>()
            .into()
    } else {
        text.into()
    };
    // Most text (precomposed accents included) is already NFKC: the quick
    // check spares the decompose-recompose round.
    let nfkc: String = if unicode_normalization::is_nfkc_quick(visible.chars()) == unicode_normalization::IsNormalized::Yes {
        visible.chars().map(|c| homoglyph(c).unwrap_or(c)).collect()
    } else {
        visible.nfkc().map(|c| homoglyph(c).unwrap_or(c)).collect()
    };
    let folded = fold(&nfkc);
    let unleeted = unleet(&folded);
    let joined = drop_inner_separators(&unleeted);
    join_spaced_letters(&joined)
}

