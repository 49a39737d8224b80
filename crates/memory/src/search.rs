//! Ranking: FTS5 query sanitising, visibility, weighted Reciprocal Rank
//! Fusion and the recency re-rank. Pure functions, so the reply pipeline,
//! the CLI and the benchmark rank with exactly the same code.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// Who may see what. One function decides it ([`Scope::for_viewer`]): the
/// index stores a visibility key on every row (a persona id for a message,
/// [`group_key`] for a memory) and a scope is the set of keys a viewer may read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Everything (the built-in Ei).
    All,
    /// Only rows with these visibility keys.
    Keys(Vec<String>),
}

/// The visibility key of a memory filed under `group`.
pub fn group_key(group: &str) -> String {
    format!("group:{group}")
}

impl Scope {
    /// The visibility rule, and the security boundary between personas: a
    /// persona reads its own conversation and the memories filed under its
    /// groups (`group_primary ∪ groups_visible`), nothing else; Ei (the
    /// system persona) reads everything.
    pub fn for_viewer(persona_id: &str, is_system: bool, groups: &[String]) -> Self {
        if is_system || persona_id == ledger::EI_PERSONA_ID {
            Self::All
        } else {
            Self::Keys(std::iter::once(persona_id.to_owned()).chain(groups.iter().map(|g| group_key(g))).collect())
        }
    }

    pub fn allows(&self, key: &str) -> bool {
        match self {
            Self::All => true,
            Self::Keys(keys) => keys.iter().any(|k| k == key),
        }
    }
}

/// The fusion and re-rank settings. Defaults were tuned on our recall
/// benchmark (see `examples/recall_bench.rs` and the README of this crate).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RecallSettings {
    pub vector_weight: f32,
    pub keyword_weight: f32,
    /// RRF constant: score = Σ weight / (k + rank).
    pub rrf_k: f32,
    /// Share of the final score given to recency (seed: 0.15).
    pub recency_weight: f32,
    /// How many candidates each retriever contributes.
    pub candidates: usize,
}

impl RecallSettings {
    /// The seed's values (0.7 vector / 0.3 keyword, k = 60, 15 % recency).
    pub const SEED: Self =
        Self { vector_weight: 0.7, keyword_weight: 0.3, rrf_k: 60.0, recency_weight: 0.15, candidates: 100 };
    pub fn keyword_only(self) -> Self {
        Self { vector_weight: 0.0, keyword_weight: 1.0, ..self }
    }
    pub fn vector_only(self) -> Self {
        Self { vector_weight: 1.0, keyword_weight: 0.0, ..self }
    }
}

impl Default for RecallSettings {
    fn default() -> Self {
        crate::DEFAULT_SETTINGS
    }
}

/// The seed's four recency bands, by age in days.
pub fn recency_bonus(age_days: f64) -> f32 {
    if age_days < 30.0 {
        1.0
    } else if age_days < 90.0 {
        0.7
    } else if age_days < 365.0 {
        0.4
    } else {
        0.1
    }
}

/// Ranked lists from both retrievers (row ids, best first), plus each
/// candidate's timestamp for the recency re-rank.
#[derive(Debug, Clone, Default)]
pub struct Candidates {
    pub keyword: Vec<i64>,
    pub vector: Vec<i64>,
    /// False when no query vector could be made (no model): keyword only.
    pub vector_available: bool,
    pub ts_ms: HashMap<i64, i64>,
}

/// Weighted RRF of the two lists, normalised to 0..1 by the best possible
/// score, then `(1 - r) · relevance + r · recency`. Ties: newer row first.
pub fn rank(c: &Candidates, s: &RecallSettings, now_ms: i64) -> Vec<(i64, f32)> {
    let wv = if c.vector_available { s.vector_weight.max(0.0) } else { 0.0 };
    let wk = s.keyword_weight.max(0.0);
    let mut fused: HashMap<i64, f32> = HashMap::new();
    let mut best = 0.0;
    for (list, w) in [(&c.keyword, wk), (&c.vector, wv)] {
        if w <= 0.0 || list.is_empty() {
            continue;
        }
        best += w / (s.rrf_k + 1.0);
        for (i, &row) in list.iter().take(s.candidates).enumerate() {
            *fused.entry(row).or_insert(0.0) += w / (s.rrf_k + 1.0 + i as f32);
        }
    }
    if best <= 0.0 {
        return Vec::new();
    }
    let r = s.recency_weight.clamp(0.0, 1.0);
    let mut out: Vec<(i64, f32)> = fused
        .into_iter()
        .map(|(row, score)| {
            let ts = c.ts_ms.get(&row).copied().unwrap_or(now_ms);
            let age_days = (now_ms - ts) as f64 / 86_400_000.0;
            (row, (1.0 - r) * (score / best) + r * recency_bonus(age_days))
        })
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    out
}

const STOPWORDS: &[&str] = &[
    "a", "about", "am", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can", "could", "did",
    "do", "does", "for", "from", "had", "has", "have", "he", "her", "him", "his", "how", "i", "if", "in", "into",
    "is", "it", "its", "me", "my", "of", "on", "or", "our", "she", "so", "that", "the", "their", "them", "then",
    "there", "they", "this", "to", "was", "we", "were", "what", "when", "where", "which", "who", "why", "will",
    "with", "would", "you", "your", "ever", "again", "remember", "tell", "told", "said", "did", "mentioned",
];

/// Makes any user text safe for FTS5 MATCH: words only (letters and
/// digits), each quoted, joined by OR; operators, quotes, `*`, `:`, `^`,
/// parentheses and column filters are dropped. Common words are dropped
/// unless nothing else is left. `None` when no word remains.
pub fn fts_query(text: &str) -> Option<String> {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let mut kept: Vec<&String> = words.iter().filter(|w| !STOPWORDS.contains(&w.as_str())).collect();
    if kept.is_empty() {
        kept = words.iter().collect();
    }
    let mut seen = std::collections::HashSet::new();
    let terms: Vec<String> =
        kept.into_iter().filter(|w| seen.insert(w.as_str())).take(32).map(|w| format!("\"{w}\"")).collect();
    if terms.is_empty() {
        None
    } else {
        Some(terms.join(" OR "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_persona_sees_its_conversation_and_its_groups_only() {
        let s = Scope::for_viewer("ada", false, &["Work".into(), "General".into()]);
        assert!(s.allows("ada") && s.allows("group:Work") && s.allows("group:General"));
        assert!(!s.allows("bob") && !s.allows("group:Family") && !s.allows("group:work"));
        assert!(!Scope::for_viewer("ada", false, &[]).allows("group:General"));
        assert_eq!(Scope::for_viewer("x", true, &[]), Scope::All);
        assert_eq!(Scope::for_viewer(ledger::EI_PERSONA_ID, false, &[]), Scope::All);
    }

    #[test]
    fn fts_queries_are_quoted_words_without_operators() {
        assert_eq!(fts_query("Where did I park the car?").as_deref(), Some("\"park\" OR \"car\""));
        assert_eq!(fts_query("NEAR(a b) OR x* AND \"y\" col:z ^w").as_deref(), Some("\"near\" OR \"b\" OR \"x\" OR \"y\" OR \"col\" OR \"z\" OR \"w\""));
        assert_eq!(fts_query("the of"), Some("\"the\" OR \"of\"".into()));
        assert_eq!(fts_query("?!  ()"), None);
        assert_eq!(fts_query("Ça été"), Some("\"ça\" OR \"été\"".into()));
    }

    #[test]
    fn recency_bands_follow_the_seed() {
        assert_eq!(recency_bonus(0.0), 1.0);
        assert_eq!(recency_bonus(29.9), 1.0);
        assert_eq!(recency_bonus(30.0), 0.7);
        assert_eq!(recency_bonus(89.0), 0.7);
        assert_eq!(recency_bonus(90.0), 0.4);
        assert_eq!(recency_bonus(364.0), 0.4);
        assert_eq!(recency_bonus(365.0), 0.1);
    }

    #[test]
    fn rrf_prefers_items_found_by_both_and_respects_weights() {
        let now = 1_000 * 86_400_000;
        let mut c = Candidates { keyword: vec![1, 2, 3], vector: vec![3, 4, 1], vector_available: true, ..Default::default() };
        for r in 1..=4 {
            c.ts_ms.insert(r, now);
        }
        let s = RecallSettings { vector_weight: 0.5, keyword_weight: 0.5, rrf_k: 60.0, recency_weight: 0.0, candidates: 10 };
        // 1 and 3 tie (ranks 1+3 and 3+1): the newer row wins.
        let r = rank(&c, &s, now);
        assert_eq!((r[0].0, r[1].0), (3, 1));
        assert!((r[0].1 - r[1].1).abs() < 1e-6);
        // Keyword weighted higher: 1 (keyword rank 1) wins.
        let s = RecallSettings { vector_weight: 0.4, keyword_weight: 0.6, ..s };
        let r = rank(&c, &s, now);
        assert_eq!((r[0].0, r[1].0), (1, 3));
        assert!((r[0].1 - 1.0).abs() < 0.05);
        let kw = rank(&c, &s.keyword_only(), now);
        assert_eq!(kw.iter().map(|x| x.0).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert!((kw[0].1 - 1.0).abs() < 1e-6);
        let vec_only = rank(&c, &s.vector_only(), now);
        assert_eq!(vec_only.iter().map(|x| x.0).collect::<Vec<_>>(), vec![3, 4, 1]);
        // Without a query vector the vector weight is ignored.
        c.vector_available = false;
        assert_eq!(rank(&c, &s, now).iter().map(|x| x.0).collect::<Vec<_>>(), vec![1, 2, 3]);
    }

    #[test]
    fn recency_reorders_equal_relevance() {
        let now = 1_000 * 86_400_000i64;
        let mut c = Candidates { keyword: vec![1, 2], vector_available: false, ..Default::default() };
        c.ts_ms.insert(1, now - 400 * 86_400_000);
        c.ts_ms.insert(2, now - 86_400_000);
        let s = RecallSettings { recency_weight: 0.5, ..RecallSettings::SEED };
        assert_eq!(rank(&c, &s, now)[0].0, 2);
        let s = RecallSettings { recency_weight: 0.0, ..RecallSettings::SEED };
        assert_eq!(rank(&c, &s, now)[0].0, 1);
    }
}
