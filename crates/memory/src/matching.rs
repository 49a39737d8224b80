//! Matching a freshly extracted memory against what is already known:
//! candidates come from the same retrieval as replies (restricted to the
//! learner's group), then a similarity decides "the same thing" (merge and
//! gain confidence) or "something new". With an embedding model the
//! similarity is the cosine of the two sentence vectors; without one it is
//! the Dice coefficient of their content words.

use std::collections::HashSet;

use crate::embed::Embedder;
use crate::MemoryError;

/// Memories at least this alike are the same memory (spec: ≥ 0.8 merges).
pub const MERGE_THRESHOLD: f32 = 0.8;

fn content_words(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() > 2)
        .map(str::to_lowercase)
        .filter(|w| !matches!(w.as_str(), "the" | "and" | "has" | "have" | "was" | "are" | "user" | "human" | "his" | "her" | "their"))
        .collect()
}

/// Dice coefficient over content words, 0..1.
pub fn lexical_similarity(a: &str, b: &str) -> f32 {
    let (a, b) = (content_words(a), content_words(b));
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let shared = a.intersection(&b).count();
    2.0 * shared as f32 / (a.len() + b.len()) as f32
}

/// Cosine of two vectors (the embedders' vectors are unit length already).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}

/// Similarity of `text` to each candidate, by the embedder when there is one.
pub fn similarities(text: &str, candidates: &[&str], embedder: Option<&dyn Embedder>) -> Result<Vec<f32>, MemoryError> {
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    match embedder {
        Some(e) => {
            let mut texts = Vec::with_capacity(candidates.len() + 1);
            texts.push(text);
            texts.extend_from_slice(candidates);
            let v = e.embed(&texts)?;
            Ok(v[1..].iter().map(|c| cosine(&v[0], c)).collect())
        }
        None => Ok(candidates.iter().map(|c| lexical_similarity(text, c)).collect()),
    }
}

/// The best candidate at or above [`MERGE_THRESHOLD`], with its score.
pub fn best_match(text: &str, candidates: &[&str], embedder: Option<&dyn Embedder>) -> Result<Option<(usize, f32)>, MemoryError> {
    let scores = similarities(text, candidates, embedder)?;
    Ok(scores
        .into_iter()
        .enumerate()
        .filter(|(_, s)| *s >= MERGE_THRESHOLD)
        .max_by(|a, b| a.1.total_cmp(&b.1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_similarity_ignores_case_order_and_filler() {
        assert!((lexical_similarity("Lives in Lisbon", "lisbon, lives in") - 1.0).abs() < 1e-6);
        assert!(lexical_similarity("Loves green tea", "Has a dog named Rex") < 0.1);
        let s = lexical_similarity("Works as a nurse in Porto", "Works as a nurse");
        assert!(s > 0.6 && s < 1.0, "{s}");
    }

    #[test]
    fn best_match_needs_the_threshold() {
        let c = ["Has a dog named Rex", "Lives in Lisbon"];
        assert_eq!(best_match("lives in lisbon", &c, None).expect("match").map(|m| m.0), Some(1));
        assert_eq!(best_match("Moved to Porto", &c, None).expect("match"), None);
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 1.0]), 0.0);
    }
}
