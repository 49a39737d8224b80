//! Alternative fusions, evaluated beside the shipped one (BENCH_EXPERIMENTS=1).

use memory::Candidates;

/// Z-score fusion: each retriever's scores standardised over the union of
/// candidates (a missing BM25 counts 0, a missing cosine 0).
pub fn zscore(c: &Candidates, n: usize, wv: f32, wk: f32) -> Vec<i64> {
    let mut rows: Vec<i64> = c.keyword.iter().take(n).chain(c.vector.iter().take(n)).copied().collect();
    rows.sort_unstable();
    rows.dedup();
    let cos: Vec<f32> = rows.iter().map(|r| c.cosine.get(r).copied().unwrap_or(0.0).max(0.0)).collect();
    let kw: Vec<f32> = rows.iter().map(|r| c.keyword_score.get(r).copied().unwrap_or(0.0).max(0.0)).collect();
    let z = |xs: &[f32]| -> Vec<f32> {
        let m = xs.iter().sum::<f32>() / xs.len().max(1) as f32;
        let sd = (xs.iter().map(|x| (x - m) * (x - m)).sum::<f32>() / xs.len().max(1) as f32).sqrt();
        xs.iter().map(|x| if sd > 1e-6 { (x - m) / sd } else { 0.0 }).collect()
    };
    let (zc, zk) = (z(&cos), z(&kw));
    let mut scored: Vec<(i64, f32)> = rows.iter().enumerate().map(|(i, &r)| (r, wv * zc[i] + wk * zk[i])).collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    scored.into_iter().map(|x| x.0).collect()
}
