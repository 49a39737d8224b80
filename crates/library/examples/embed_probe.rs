//! Probe: MiniLM vectors for a JSON list of texts (one JSON array per line out).
//!
//! ```text
//! LEDGERMIND_MINILM_DIR=… target/debug/examples/embed_probe IN.json OUT.jsonl
//! ```

use std::io::Write;
use std::path::PathBuf;

use memory::{Embedder, MiniLm};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let texts: Vec<String> = serde_json::from_str(&std::fs::read_to_string(&args[1]).expect("in")).expect("json");
    let dir = PathBuf::from(std::env::var("LEDGERMIND_MINILM_DIR").expect("LEDGERMIND_MINILM_DIR"));
    let model = MiniLm::load(&dir).expect("model");
    let mut out = std::fs::File::create(&args[2]).expect("out");
    for chunk in texts.chunks(16) {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        for v in model.embed(&refs).expect("embed") {
            writeln!(out, "{}", serde_json::to_string(&v).expect("json")).expect("write");
        }
    }
}
