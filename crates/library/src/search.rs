//! Hybrid search: BM25 over FTS5 (Porter stemmer) and cosine over the
//! local embeddings, fused by weighted Reciprocal Rank Fusion, then the
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
}

pub const DEFAULT_SEARCH: SearchSettings = SearchSettings {
    vector_weight: 0.7,
    keyword_weight: 0.3,
    rrf_k: 60.0,
    candidates: 50,
    min_score: 0.0,
    recency_weight: 0.15,
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
