//! Probe: the questions a local model writes for each passage of a dump
//! (faq_bench's BENCH_DUMP JSON), greedy, one JSON line per passage.
//!
//! ```text
//! target/debug/examples/d2q_probe MODEL_PATH DUMP.json OUT.jsonl [THREADS] [MAX_TOKENS]
//! ```

use std::io::Write;
use std::num::NonZeroU32;
use std::time::Instant;

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = &args[1];
    let dump: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&args[2]).expect("dump")).expect("json");
    let out_path = &args[3];
    let threads: i32 = args.get(4).and_then(|a| a.parse().ok()).unwrap_or(2);
    let max_tokens: usize = args.get(5).and_then(|a| a.parse().ok()).unwrap_or(80);
    let done: std::collections::HashSet<i64> = std::fs::read_to_string(out_path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["id"].as_i64())
        .collect();
    let mut out = std::fs::OpenOptions::new().create(true).append(true).open(out_path).expect("out");
    let mut backend = LlamaBackend::init().expect("backend");
    backend.void_logs();
    let model = LlamaModel::load_from_file(&backend, path, &LlamaModelParams::default()).expect("model");
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(2048))
        .with_n_batch(512)
        .with_n_ubatch(512)
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let mut ctx = model.new_context(&backend, params).expect("context");
    let chunks = dump["chunks"].as_array().expect("chunks");
    let started = Instant::now();
    for (n, c) in chunks.iter().enumerate() {
        let id = c["id"].as_i64().unwrap_or_default();
        if done.contains(&id) {
            continue;
        }
        let text: String = c["text"].as_str().unwrap_or_default().chars().take(1500).collect();
        let section = c["section"].as_str().unwrap_or_default();
        let prompt = format!(
            "<|im_start|>system\nYou write the questions a reader would ask that a passage of a manual answers.<|im_end|>\n<|im_start|>user\nSection: {section}\nPassage:\n{text}\n\nWrite three short, different questions that this passage answers, one per line, nothing else.<|im_end|>\n<|im_start|>assistant\n"
        );
        let tokens = model.vocab().tokenize(prompt.as_bytes(), false, true);
        ctx.clear_kv_cache();
        let mut batch = LlamaBatch::new(2048, 1);
        for (i, t) in tokens.iter().enumerate() {
            batch.add(*t, i as i32, &[0], i + 1 == tokens.len()).expect("batch");
        }
        ctx.decode(&mut batch).expect("decode");
        let mut sampler = LlamaSampler::chain_simple([LlamaSampler::penalties(model.n_vocab(), 64, 1.1, 0.0, 0.0), LlamaSampler::greedy()]);
        let mut pos = tokens.len() as i32;
        let mut bytes = Vec::new();
        let mut last = batch.n_tokens() - 1;
        for _ in 0..max_tokens {
            let token = sampler.sample(&ctx, last);
            sampler.accept(token);
            if model.vocab().is_eog(token) {
                break;
            }
            bytes.extend(model.vocab().token_to_piece(token, false, None));
            batch.clear();
            batch.add(token, pos, &[0], true).expect("batch");
            pos += 1;
            ctx.decode(&mut batch).expect("decode");
            last = 0;
        }
        let reply = String::from_utf8_lossy(&bytes).to_string();
        writeln!(out, "{}", serde_json::json!({"id": id, "questions": reply})).expect("write");
        eprintln!("{n}/{} {:.0}s {}", chunks.len(), started.elapsed().as_secs_f64(), reply.replace('\n', " | "));
    }
}
