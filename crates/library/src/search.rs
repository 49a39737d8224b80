//! Hybrid search: BM25 over FTS5 (Porter stemmer) and cosine over the
//! local embeddings, fused by weighted Reciprocal Rank Fusion, a word-match
//! signal (the query's words and quoted runs in the passage), then the
//! seed's threshold and recency re-rank. Each retriever can run alone
//! (the benchmark prints all three side by side).

use serde::{Deserialize, Serialize};

/// How a query is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchMode {
    /// BM25 and embeddings fused (the product's search).
    Hybrid,
    /// BM25 only (the baseline).
    Keyword,
    /// Embeddings only.
    Vector,
}

/// Search settings (seed 003 §4.4–4.5 by default).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SearchSettings {
    pub vector_weight: f64,
    pub keyword_weight: f64,
    /// RRF's k: 1 / (k + rank).
    pub rrf_k: f64,
    /// Candidates taken from each retriever.
    pub candidates: usize,
    /// Fused scores (0–1, 1 = first in both lists) below this are dropped.
    pub min_score: f64,
    /// Share of the final score given to recency (the seed's 15 %).
    pub recency_weight: f64,
    /// Postings FTS5 may score alone for one query (`None`: no limit).
    /// BM25 costs about a microsecond per passage holding any query word,
    /// so in a large library one common word ("python" in Python's
    /// manual, a third of its passages) makes the keyword search slower
    /// than the rest of the search together. Beyond this budget, words in
    /// more than `common_term_share` of the passages only count in pairs:
    /// a passage is scored for them when it holds two of them (or a
    /// rarer word). Passages holding a single common word and nothing
    /// else rank low anyway; leaving the words out instead loses a tenth
    /// of the right answers in Python's manual.
    pub keyword_postings: Option<usize>,
    /// Share of the passages above which a word is common.
    pub common_term_share: f64,
    /// The common words' pairs are spent from the postings budget too
    /// ([`keyword_expression`]): in Python's manual "module", "use" and
    /// "html" are each in a third of the passages and their three pairs
    /// matched 31 786 passages, all scored by BM25, so a question holding
    /// three common words cost several times the budget.
    #[serde(default)]
    pub budget_pairs: bool,
    /// Weight of [`word_match`] added to a hybrid candidate's fused score.
    /// Fusion ranks by rank, so a passage near in meaning that holds some of
    /// the words can outrank the one that holds all of them, or the quoted
    /// sentence itself; this puts the passage holding the words first.
    #[serde(default)]
    pub word_match_weight: f64,
    /// Weight of [`quote_match`] added to a hybrid candidate's fused
    /// score: a query quoting a passage (a pasted sentence, a remembered
    /// phrase) puts that passage first, where the embeddings alone rank a
    /// passage near in meaning above it; a question in its own words holds
    /// no long run and is left as fused.
    #[serde(default)]
    pub quote_weight: f64,
    /// A hybrid candidate quoting at least this share of the query
    /// ([`quote_match`]) ranks above every candidate that does not: the
    /// query is a quote and the passage holding it is its answer, however
    /// far the embeddings put it. Ranks are kept among the leaders (by
    /// their scores) and among the rest. 0: off.
    #[serde(default)]
    pub quote_lead: f64,
    /// The keyword retriever's first this many passages are scored by the
    /// word signals even when fusion put them past `candidates`: fusion
    /// ranks by rank, so a passage only BM25 lists (first, even) scores
    /// below every passage the embeddings list, and with a full list from
    /// each retriever it was cut before a quote could count. 0: off.
    #[serde(default)]
    pub keyword_kept: usize,
    /// BM25's weight of a passage's heading path against its text (1):
    /// the headings name what a passage is about, but every passage under
    /// one heading shares them.
    #[serde(default = "half")]
    pub section_weight: f64,
    /// A passage that crosses a page break cites the page of the words the
    /// query matched ([`matched_page`]); off: the page holding most of it.
    #[serde(default = "yes")]
    pub cite_matched_page: bool,
    /// Factor on a hybrid candidate's score when the passage is a table
    /// of contents ([`is_contents`]): a manual's contents list every
    /// heading's words on one page, so a question matches the list before
    /// the page that answers it, and the citation opens the list. 1: off.
    #[serde(default = "one")]
    pub contents_factor: f64,
}

impl SearchSettings {
    /// These settings with the fields a JSON object names replaced
    /// (`{"quote_lead": 0.6}`): benchmarks compare variations of the
    /// product's settings in one run.
    pub fn patched(&self, json: &str) -> Result<SearchSettings, serde_json::Error> {
        let mut value = serde_json::to_value(self)?;
        let patch: serde_json::Value = serde_json::from_str(json)?;
        if let (Some(fields), Some(changes)) = (value.as_object_mut(), patch.as_object()) {
            for (k, v) in changes {
                if !fields.contains_key(k) {
                    return Err(serde::de::Error::custom(format!("no search setting {k}")));
                }
                fields.insert(k.clone(), v.clone());
            }
        }
        serde_json::from_value(value)
    }
}

fn half() -> f64 {
    0.5
}

fn one() -> f64 {
    1.0
}

fn yes() -> bool {
    true
}

/// Runs of consecutive query words shorter than this are not a quote.
const MIN_QUOTE_WORDS: usize = 3;

fn lower_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// Two forms of one word: equal, or one a prefix of the other of at least
/// four letters ("install" / "installing"), as a stemmer would roughly have it.
fn same_word(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short == long || (short.chars().count() >= 4 && long.starts_with(short))
}

/// How much of `query` `text` holds word for word, in 0..=1: the mean of
/// the share of the query's content words it holds ([`memory::fts_terms`],
/// each once) and the longest run of consecutive query words it holds in
/// the same order, over the query's length (runs of fewer than
/// [`MIN_QUOTE_WORDS`] count 0: two words in a row are common).
pub fn word_match(text: &str, query: &str) -> f64 {
    let terms = memory::fts_terms(query);
    let words = lower_words(text);
    if terms.is_empty() || words.is_empty() {
        return 0.0;
    }
    let held = terms.iter().filter(|t| words.iter().any(|w| same_word(w, t))).count();
    let coverage = held as f64 / terms.len() as f64;
    (coverage + quote_in(&words, &lower_words(query))) / 2.0
}

/// The longest run of consecutive query words `text` holds in the same
/// order, over the query's length, in 0..=1; only a run of at least
/// [`QUOTE_WORDS`] words holding at least [`QUOTE_CONTENT_WORDS`] content
/// words ([`memory::fts_terms`]) counts. A query that quotes a passage
/// scores 1 on it; a question in its own words shares at most a phrase
/// like "how do I install" with a passage and scores 0 (with shorter runs
/// counted, the Python FAQ's questions ranked their answers lower).
pub fn quote_match(text: &str, query: &str) -> f64 {
    let asked = lower_words(query);
    if asked.is_empty() {
        return 0.0;
    }
    let content: std::collections::HashSet<String> = memory::fts_terms(query).into_iter().collect();
    let words = lower_words(text);
    let mut longest = 0;
    for start in 0..words.len() {
        for q in 0..asked.len() {
            let run = words[start..].iter().zip(&asked[q..]).take_while(|(w, a)| same_word(w, a)).count();
            if run > longest
                && run >= QUOTE_WORDS
                && asked[q..q + run].iter().filter(|a| content.contains(a.as_str())).count() >= QUOTE_CONTENT_WORDS
            {
                longest = run;
            }
        }
    }
    longest as f64 / asked.len() as f64
}

/// Words in a row that make a quote for [`quote_match`].
const QUOTE_WORDS: usize = 4;
/// Content words a quote holds at least.
const QUOTE_CONTENT_WORDS: usize = 3;

/// The run half of [`word_match`] (looser than [`quote_match`]).
fn quote_in(words: &[String], asked: &[String]) -> f64 {
    if asked.is_empty() {
        return 0.0;
    }
    let mut longest = 0;
    for start in 0..words.len() {
        for q in 0..asked.len() {
            let run = words[start..].iter().zip(&asked[q..]).take_while(|(w, a)| same_word(w, a)).count();
            longest = longest.max(run);
        }
    }
    if longest >= MIN_QUOTE_WORDS { longest as f64 / asked.len() as f64 } else { 0.0 }
}

/// Whether `text` is (mostly) a table of contents or an index: at least
/// three lines with dot leaders ("Installing . . . . 12"), and they are at
/// least a third of its lines.
pub fn is_contents(text: &str) -> bool {
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let leaders = lines
        .iter()
        .filter(|l| {
            let squeezed: String = l.chars().filter(|c| !c.is_whitespace()).collect();
            squeezed.contains("....") || squeezed.contains('…')
        })
        .count();
    leaders >= 3 && leaders * 3 >= lines.len()
}

/// Page marks as stored with a chunk: "offset:page" pairs, comma-separated.
pub fn format_page_marks(marks: &[(usize, u32)]) -> Option<String> {
    (!marks.is_empty()).then(|| marks.iter().map(|(at, p)| format!("{at}:{p}")).collect::<Vec<_>>().join(","))
}

/// Stored page marks back as (offset, page); unreadable pairs are skipped.
pub fn parse_page_marks(stored: &str) -> Vec<(usize, u32)> {
    stored
        .split(',')
        .filter_map(|m| m.split_once(':').and_then(|(a, p)| Some((a.trim().parse().ok()?, p.trim().parse().ok()?))))
        .collect()
}

/// The page to cite for a passage that crosses page breaks: the page of
/// the part that matches `query` best (by [`word_match`], then by how often
/// the query's words occur in it), so a citation opens where the matched
/// words are. `default` (the page holding most of the passage) when no
/// part holds a query word, or when it is among the best. Only the
/// results shown are looked at, and only a passage's own text: no cost
/// beyond a few hundred words per result.
pub fn matched_page(text: &str, marks: &[(usize, u32)], query: &str, default: Option<u32>) -> Option<u32> {
    if marks.len() < 2 {
        return default;
    }
    let terms = memory::fts_terms(query);
    let ends = marks.iter().skip(1).map(|m| m.0).chain(std::iter::once(text.len()));
    let mut best: Option<((f64, usize), u32)> = None;
    for ((start, page), end) in marks.iter().zip(ends) {
        let Some(part) = text.get(*start..end.max(*start)) else { continue };
        let occurrences =
            lower_words(part).iter().filter(|w| terms.iter().any(|t| same_word(w, t))).count();
        let score = (word_match(part, query), occurrences);
        let better = match &best {
            None => true,
            Some((b, bp)) => {
                score.0 > b.0 || (score.0 == b.0 && (score.1 > b.1 || (score.1 == b.1 && Some(*page) == default && Some(*bp) != default)))
            }
        };
        if better {
            best = Some((score, *page));
        }
    }
    match best {
        Some(((w, n), page)) if w > 0.0 || n > 0 => Some(page),
        _ => default,
    }
}

/// Common words paired at most (their pairs grow as n²).
const MAX_PAIRED: usize = 4;

/// An FTS5 MATCH expression for `terms` with their passage counts, in
/// `total` passages (see [`SearchSettings::keyword_postings`]). Rarest
/// first, a word stands alone while the postings stay within `budget`, or
/// when it is not common; the others are ANDed in pairs. The rarest word
/// always stands alone. With `budget_pairs`, the pairs are spent from the
/// same budget, each at the passages it would match were its words
/// independent, smallest first; when no pair fits, all the common words
/// ANDed together stand in for them if that fits (see
/// [`SearchSettings::budget_pairs`]). `None` when there is no term.
pub fn keyword_expression(
    mut terms: Vec<(String, usize)>,
    total: usize,
    budget: Option<usize>,
    common_share: f64,
    budget_pairs: bool,
) -> Option<String> {
    terms.sort_by_key(|(_, df)| *df);
    let common = (total as f64 * common_share) as usize;
    let mut spent = 0usize;
    let (mut alone, mut paired) = (Vec::new(), Vec::new());
    for (term, df) in terms {
        if alone.is_empty() || budget.is_none_or(|b| spent + df <= b) || df <= common {
            spent += df;
            alone.push(term);
        } else {
            paired.push((term, df));
        }
    }
    paired.truncate(MAX_PAIRED);
    let mut parts: Vec<String> = alone.iter().map(|t| quoted(t)).collect();
    let mut pairs = Vec::new();
    for (i, (a, da)) in paired.iter().enumerate() {
        for (b, db) in &paired[i + 1..] {
            pairs.push((expected_matches(&[*da, *db], total), format!("({} AND {})", quoted(a), quoted(b))));
        }
    }
    match budget.filter(|_| budget_pairs) {
        None => parts.extend(pairs.into_iter().map(|(_, p)| p)),
        Some(budget) => {
            pairs.sort_by_key(|(n, _)| *n);
            let before = parts.len();
            for (n, pair) in pairs {
                if spent + n <= budget {
                    spent += n;
                    parts.push(pair);
                }
            }
            if parts.len() == before && paired.len() > 2 {
                let counts: Vec<usize> = paired.iter().map(|(_, df)| *df).collect();
                if spent + expected_matches(&counts, total) <= budget {
                    let all: Vec<String> = paired.iter().map(|(t, _)| quoted(t)).collect();
                    parts.push(format!("({})", all.join(" AND ")));
                }
            }
        }
    }
    (!parts.is_empty()).then(|| parts.join(" OR "))
}

/// Passages holding every word of these passage counts, out of `total`,
/// were the words independent (common words co-occur more: a floor).
fn expected_matches(counts: &[usize], total: usize) -> usize {
    let total = total.max(1) as f64;
    (counts.iter().map(|&n| n as f64 / total).product::<f64>() * total) as usize
}

fn quoted(term: &str) -> String {
    memory::fts_or(&[term]).unwrap_or_default()
}

pub const DEFAULT_SEARCH: SearchSettings = SearchSettings {
    vector_weight: 0.7,
    keyword_weight: 0.3,
    rrf_k: 60.0,
    candidates: 50,
    min_score: 0.0,
    recency_weight: 0.15,
    keyword_postings: Some(20_000),
    common_term_share: 0.05,
    budget_pairs: true,
    word_match_weight: 0.0,
    // The largest weight that left the Python FAQ's tuning questions as
    // they were (faq_bench: R@5 0.812, MRR 0.718 at 0, 0.1, 0.2 and 0.3;
    // MRR 0.712 at 0.5); a quote scores the whole weight.
    quote_weight: 0.3,
    // Chosen on page_bench's tuning set (Debian FAQ + pypdf's PDFs) among
    // leads 0.5–0.8 and 5, 10 or 50 kept passages: cite@1 0.760 -> 0.846
    // (quoted runs 0.685 -> 0.801); the Python FAQ's tuning questions
    // unchanged (R@5 0.812, MRR 0.718; a lead of 0.5 cost MRR 0.006).
    quote_lead: 0.6,
    keyword_kept: 10,
    section_weight: 0.5,
    cite_matched_page: true,
    // Chosen before any run, kept on the tuning set (page_bench: FAQ
    // questions' cite@1 0.675 -> 0.940 on the Debian FAQ).
    contents_factor: 0.5,
};

/// The seed's four age bands: < 30 days 1.0, < 90 0.7, < 365 0.4, older 0.1.
pub fn recency_bonus(age_days: f64) -> f64 {
    match age_days {
        d if d < 30.0 => 1.0,
        d if d < 90.0 => 0.7,
        d if d < 365.0 => 0.4,
        _ => 0.1,
    }
}

/// Fuses two ranked lists of chunk ids (best first) into (id, score),
/// best first; the score is normalised so that first in both lists is 1.
pub fn fuse(vector: &[i64], keyword: &[i64], s: &SearchSettings) -> Vec<(i64, f64)> {
    let mut scores: std::collections::HashMap<i64, f64> = std::collections::HashMap::new();
    for (list, w) in [(vector, s.vector_weight), (keyword, s.keyword_weight)] {
        for (rank, id) in list.iter().enumerate() {
            *scores.entry(*id).or_default() += w / (s.rrf_k + rank as f64 + 1.0);
        }
    }
    let best = (s.vector_weight + s.keyword_weight) / (s.rrf_k + 1.0);
    let mut out: Vec<(i64, f64)> = scores.into_iter().map(|(id, v)| (id, if best > 0.0 { v / best } else { 0.0 })).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

/// A snippet of at most `max_chars` around the first query word found.
pub fn snippet(text: &str, query: &str, max_chars: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let chars: Vec<char> = flat.chars().collect();
    if chars.len() <= max_chars {
        return flat;
    }
    let lower = flat.to_lowercase();
    let at = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() > 3)
        .filter_map(|w| lower.find(&w.to_lowercase()))
        .min()
        .map(|byte| lower[..byte].chars().count())
        .unwrap_or(0);
    let start = at.saturating_sub(max_chars / 4).min(chars.len() - max_chars);
    let mut s: String = chars[start..start + max_chars].iter().collect();
    if start > 0 {
        s.insert(0, '…');
    }
    if start + max_chars < chars.len() {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fusion_prefers_agreement_and_normalises_to_one() {
        let fused = fuse(&[1, 2, 3], &[1, 3], &DEFAULT_SEARCH);
        assert_eq!(fused[0].0, 1);
        assert!((fused[0].1 - 1.0).abs() < 1e-9, "{fused:?}");
        assert_eq!(fused[1].0, 3, "second in both lists beats second in one: {fused:?}");
        let vector_only = fuse(&[7], &[], &DEFAULT_SEARCH);
        assert!((vector_only[0].1 - 0.7).abs() < 1e-9);
    }

    #[test]
    fn common_words_over_budget_count_only_in_pairs() {
        let t = |v: &[(&str, usize)]| v.iter().map(|(w, n)| (w.to_string(), *n)).collect::<Vec<_>>();
        let e = |v: &[(&str, usize)], budget| keyword_expression(t(v), 100_000, budget, 0.05, false).unwrap_or_default();
        // 100 000 passages: "python", "use" and "module" are common, "indentation" rare.
        let q = [("why", 600), ("python", 37_000), ("use", 39_000), ("indentation", 900)];
        assert_eq!(e(&q, Some(20_000)), r#""why" OR "indentation" OR ("python" AND "use")"#);
        assert_eq!(e(&q, None), r#""why" OR "indentation" OR "python" OR "use""#);
        // Within budget every word stands alone, however common.
        assert_eq!(e(&q, Some(100_000)), r#""why" OR "indentation" OR "python" OR "use""#);
        // Over budget but each word in ≤ 5 % of passages: all alone.
        let mid = [("a1", 5_000), ("a2", 5_000), ("a3", 5_000), ("a4", 5_000), ("a5", 5_000)];
        assert_eq!(e(&mid, Some(20_000)).matches(" OR ").count(), 4);
        assert!(!e(&mid, Some(20_000)).contains("AND"));
        // One common word left has no pair: it is left out.
        assert_eq!(e(&[("x", 50_000), ("y", 30_000)], Some(20_000)), r#""y""#);
        // At most four common words are paired: six pairs.
        let many = [("r", 10), ("c1", 30_000), ("c2", 31_000), ("c3", 32_000), ("c4", 33_000), ("c5", 34_000)];
        assert_eq!(e(&many, Some(20_000)).matches(" AND ").count(), 6);
        assert!(!e(&many, Some(20_000)).contains("c5"));
        assert_eq!(keyword_expression(vec![], 10, Some(1), 0.05, false), None);
    }

    #[test]
    fn budgeted_pairs_of_common_words_stay_within_the_postings_budget() {
        let t = |v: &[(&str, usize)]| v.iter().map(|(w, n)| (w.to_string(), *n)).collect::<Vec<_>>();
        let e = |v: &[(&str, usize)]| keyword_expression(t(v), 120_000, Some(20_000), 0.05, true).unwrap_or_default();
        // Python's manual: two words within budget (11 700 postings), three
        // common ones whose pairs would match ~10 000–15 000 passages each.
        let q = [("help", 2_200), ("generating", 9_500), ("module", 31_600), ("use", 39_900), ("html", 46_700)];
        // No pair fits the 8 300 postings left; the three ANDed (~3 800) do.
        assert_eq!(e(&q), r#""help" OR "generating" OR ("module" AND "use" AND "html")"#);
        // One rare word: the smallest pair fits (~10 500), the next
        // (~12 300) would not.
        let q = [("indentation", 900), ("module", 31_600), ("use", 39_900), ("html", 46_700)];
        assert_eq!(e(&q), r#""indentation" OR ("module" AND "use")"#);
        // Nothing common fits: the common words are left out.
        let q = [("rare", 19_000), ("module", 31_600), ("use", 39_900)];
        assert_eq!(e(&q), r#""rare""#);
        // Unbudgeted pairs as before.
        assert_eq!(
            keyword_expression(t(&q), 120_000, Some(20_000), 0.05, false).unwrap_or_default(),
            r#""rare" OR ("module" AND "use")"#
        );
    }

    #[test]
    fn only_a_long_run_of_the_query_counts_as_a_quote() {
        let page = "The bin/windows directory of a CRAN site contains binaries for a base distribution.";
        // The whole query, in order (forms of a word count: "contains" / "contain").
        assert_eq!(quote_match(page, "directory of a CRAN site contain binaries"), 1.0);
        // Five of ten query words in a row ("the" is not followed by "directory" in the page).
        assert!((quote_match(page, "the directory of a cran site holds some other files") - 0.5).abs() < 1e-9);
        // The same words out of order, or two in a row, are no quote.
        assert_eq!(quote_match(page, "binaries site directory windows"), 0.0);
        assert_eq!(quote_match(page, "cran site downloads for linux"), 0.0);
        // Nor is a question's common phrase: five words in a row, one of them a content word.
        assert_eq!(quote_match("How do I install it on Windows?", "how do i install it from source"), 0.0);
        // Three content words but three words in a row only.
        assert_eq!(quote_match(page, "cran site contains"), 0.0);
        assert_eq!(quote_match(page, ""), 0.0);
        assert_eq!(quote_match("", "a cran site"), 0.0);
        assert_eq!(word_match(page, "directory of a CRAN site contain binaries"), 1.0);
    }

    #[test]
    fn a_passage_holding_the_quoted_words_matches_best() {
        let q = "the interpreter reads the source file line by line";
        let quoted = "Before running, the interpreter reads the source file line by line and compiles it.";
        let near = "Source files are compiled to bytecode which the virtual machine runs.";
        let scattered = "Line numbers point into the source; the interpreter file reads are buffered.";
        let (a, b, c) = (word_match(quoted, q), word_match(near, q), word_match(scattered, q));
        assert!((a - 1.0).abs() < 1e-9, "{a}");
        assert!(a > c && c > b, "{a} {c} {b}");
        // All the words, out of order: coverage 1, no quote.
        assert!((c - 0.5).abs() < 1e-9, "{c}");
        assert_eq!(word_match("", q), 0.0);
        assert_eq!(word_match(quoted, "?!"), 0.0);
        // Word forms: "installing" holds "install".
        assert!(word_match("Installing Python packages", "install python package") > 0.99);
    }

    #[test]
    fn a_passage_across_a_page_break_cites_the_page_of_the_matched_words() {
        let first = "Installing the package puts the program on your path.";
        let second = "To uninstall it later, remove the folder and delete the configuration file.";
        let text = format!("{first}\n\n{second}");
        let marks = [(0, 7), (first.len() + 2, 8)];
        assert_eq!(matched_page(&text, &marks, "how do I remove the configuration file", Some(7)), Some(8));
        assert_eq!(matched_page(&text, &marks, "installing the program", Some(8)), Some(7));
        // No query word in any part: the passage's main page.
        assert_eq!(matched_page(&text, &marks, "zebra", Some(7)), Some(7));
        // A passage on one page keeps its page.
        assert_eq!(matched_page(&text, &[], "configuration", Some(3)), Some(3));
        assert_eq!(parse_page_marks(&format_page_marks(&marks).unwrap_or_default()), marks);
        assert_eq!(format_page_marks(&[]), None);
    }

    #[test]
    fn a_table_of_contents_is_recognised_by_its_dot_leaders() {
        let toc = "CONTENTS\n8.1 What programs does Debian provide? . . . . . . 35\n8.1.1 dpkg . . . . . . . . 35\n8.2 How is this done? . . . . 38\n8.3 How can I tell what is installed? . . . . 39";
        assert!(is_contents(toc));
        assert!(!is_contents("8.3 How can I tell what is installed?\nUse dpkg-query... or aptitude.\nIt lists every package."));
    }

    #[test]
    fn settings_are_patched_by_the_fields_named() {
        let s = DEFAULT_SEARCH.patched(r#"{"quote_lead": 0.6, "keyword_kept": 10}"#).expect("patch");
        assert_eq!((s.quote_lead, s.keyword_kept), (0.6, 10));
        assert_eq!(SearchSettings { quote_lead: DEFAULT_SEARCH.quote_lead, keyword_kept: DEFAULT_SEARCH.keyword_kept, ..s }, DEFAULT_SEARCH);
        assert!(DEFAULT_SEARCH.patched(r#"{"quote_leed": 0.6}"#).is_err());
        assert!(DEFAULT_SEARCH.patched(r#"{"keyword_kept": "ten"}"#).is_err());
    }

    #[test]
    fn recency_uses_the_four_bands() {
        assert_eq!([1.0, 45.0, 200.0, 900.0].map(recency_bonus), [1.0, 0.7, 0.4, 0.1]);
    }

    #[test]
    fn snippets_centre_on_the_query() {
        let text = format!("{} the needle is here {}", "hay ".repeat(200), "straw ".repeat(200));
        let s = snippet(&text, "where is the needle", 80);
        assert!(s.contains("needle") && s.starts_with('…') && s.ends_with('…') && s.chars().count() <= 82, "{s}");
        assert_eq!(snippet("short  text\n here", "x", 80), "short text here");
    }
}
