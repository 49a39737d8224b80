//! How long llama.cpp takes to read a batch of N new tokens after a warm
//! prefix, for several N and thread counts, in one run (where a first
//! token's time goes when a message brings N new tokens).
//!
//! ```text
//! target/debug/examples/batch_bench MODEL_PATH [PREFIX_TOKENS] [ROUNDS]
//! ```

use std::num::NonZeroU32;
use std::time::Instant;

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).expect("MODEL_PATH");
    let prefix: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(400);
    let rounds: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(3);
    let mut backend = LlamaBackend::init().expect("backend");
    backend.void_logs();
    let model = LlamaModel::load_from_file(&backend, path, &LlamaModelParams::default()).expect("model");
    let text = "The quick brown fox jumps over the lazy dog while the people of the town watch and talk about the weather, their work, their children and the market. ".repeat(40);
    let tokens = model.vocab().tokenize(text.as_bytes(), false, false);
    for threads in [2, 1] {
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(2048))
            .with_n_batch(512)
            .with_n_ubatch(512)
            .with_n_threads(threads)
            .with_n_threads_batch(threads);
        let mut ctx = model.new_context(&backend, params).expect("context");
        let mut batch = LlamaBatch::new(512, 1);
        for (i, t) in tokens[..prefix].iter().enumerate() {
            batch.add(*t, i as i32, &[0], i + 1 == prefix).expect("llama.cpp");
        }
        ctx.decode(&mut batch).expect("llama.cpp");
        for n in [1usize, 2, 4, 8, 13, 16, 24, 32, 48, 64, 96] {
            let mut ms = Vec::new();
            for _ in 0..rounds {
                ctx.clear_kv_cache_seq(Some(0), Some(prefix as u32), None).expect("llama.cpp");
                batch.clear();
                for i in 0..n {
                    batch.add(tokens[prefix + i], (prefix + i) as i32, &[0], i + 1 == n).expect("llama.cpp");
                }
                let t0 = Instant::now();
                ctx.decode(&mut batch).expect("llama.cpp");
                ms.push(t0.elapsed().as_secs_f64() * 1000.0);
            }
            ms.sort_by(f64::total_cmp);
            let best = ms[0];
            println!("threads {threads} new {n:3}: best {best:7.1} ms, median {:7.1} ms, {:5.1} ms/token", ms[ms.len() / 2], best / n as f64);
        }
    }
}
