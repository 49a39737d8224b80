//! Plain BM25 over the turns, the baseline printed beside ours in the same
//! run: "Speaker: text", words (letters, digits, `_`) lower-cased, a short
//! English stop list, Okapi BM25 with k1 = 1.5, b = 0.75 and negative idf
//! floored at a quarter of the mean idf (the rank_bm25 package's BM25Okapi).

use std::collections::HashMap;

const STOP: &[&str] = &[
    "a", "about", "am", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can", "could", "did", "do",
    "does", "for", "from", "had", "has", "have", "he", "her", "him", "his", "how", "i", "if", "in", "into", "is", "it",
    "its", "me", "my", "of", "on", "or", "our", "she", "so", "that", "the", "their", "them", "then", "there", "they",
    "this", "to", "was", "we", "were", "what", "when", "where", "which", "who", "why", "will", "with", "would", "you",
    "your",
];

pub fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOP.contains(&w.as_str()))
        .collect()
}

pub struct Bm25 {
    docs: Vec<HashMap<String, f64>>,
    lens: Vec<f64>,
    avg: f64,
    idf: HashMap<String, f64>,
}

impl Bm25 {
    pub fn new(texts: &[String]) -> Self {
        let docs: Vec<Vec<String>> = texts.iter().map(|t| words(t)).collect();
        let n = docs.len() as f64;
        let mut df: HashMap<String, f64> = HashMap::new();
        for d in &docs {
            let mut seen: Vec<&String> = d.iter().collect();
            seen.sort();
            seen.dedup();
            for w in seen {
                *df.entry(w.clone()).or_default() += 1.0;
            }
        }
        let mut idf: HashMap<String, f64> = df.iter().map(|(w, f)| (w.clone(), ((n - f + 0.5) / (f + 0.5)).ln())).collect();
        let mean = idf.values().sum::<f64>() / idf.len().max(1) as f64;
        idf.values_mut().for_each(|v| if *v < 0.0 { *v = 0.25 * mean });
        let lens: Vec<f64> = docs.iter().map(|d| d.len() as f64).collect();
        let avg = lens.iter().sum::<f64>() / n.max(1.0);
        let docs = docs
            .into_iter()
            .map(|d| {
                let mut tf = HashMap::new();
                for w in d {
                    *tf.entry(w).or_default() += 1.0;
                }
                tf
            })
            .collect();
        Self { docs, lens, avg, idf }
    }

    /// Document indexes, best first (ties: earlier first).
    pub fn rank(&self, query: &str) -> Vec<usize> {
        let (k1, b) = (1.5, 0.75);
        let q = words(query);
        let mut scored: Vec<(f64, usize)> = self
            .docs
            .iter()
            .enumerate()
            .map(|(i, tf)| {
                let s = q
                    .iter()
                    .filter_map(|w| {
                        let f = *tf.get(w)?;
                        Some(self.idf[w] * f * (k1 + 1.0) / (f + k1 * (1.0 - b + b * self.lens[i] / self.avg)))
                    })
                    .sum::<f64>();
                (s, i)
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        scored.into_iter().map(|(_, i)| i).collect()
    }
}
