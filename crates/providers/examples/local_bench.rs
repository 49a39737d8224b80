//! First-token latency and decode speed of the local engine with 1 and 2
//! threads, in one run:
//!
//! ```text
//! cargo run --example local_bench -p providers -- MODEL_PATH [RUNS] [MAX_TOKENS]
//! ```

use std::path::PathBuf;
use std::time::Instant;

use providers::{ChatMessage, CompletionRequest, LocalEngine, Provider, ProviderError, Role};

struct Sample {
    first_token_ms: f64,
    tokens: u32,
    prompt_tokens: u32,
    total_ms: f64,
}

impl Sample {
    /// Generated tokens per second after the first one.
    fn decode_tps(&self) -> f64 {
        let decode_ms = self.total_ms - self.first_token_ms;
        if self.tokens <= 1 || decode_ms <= 0.0 {
            0.0
        } else {
            f64::from(self.tokens - 1) * 1000.0 / decode_ms
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// About 150 tokens read before the reply: a prompt of the size a
/// conversation's new turn and recalled memories add.
const PASSAGE: &str = "The lighthouse keeper wrote in the log every evening at six. \
He noted the wind, the colour of the sea, the ships that passed and the birds that rested on the gallery. \
In winter the entries were short: fog, rain, a trawler heading north. In summer they grew longer, \
with visitors who climbed the hundred and twelve steps and asked whether he was ever lonely. \
He always answered that the sea was company enough, and that the light needed someone who paid attention.";

fn request(stem: &str, max_tokens: u32, run: usize) -> CompletionRequest {
    // A new opening each run, so no run reuses the last one's evaluated
    // prompt: the first token then includes reading the whole prompt.
    let system = format!("Run {run}. You are a helpful assistant. {PASSAGE}");
    let mut r = CompletionRequest::chat(
        stem,
        vec![
            ChatMessage::new(Role::System, &system),
            ChatMessage::new(
                Role::User,
                "Write a detailed story about a lighthouse keeper who finds a message in a bottle.",
            ),
        ],
    );
    r.max_tokens = max_tokens;
    // Greedy: the same tokens for every thread count.
    r.temperature = 0.0;
    r
}

async fn run(engine: &LocalEngine, stem: &str, max_tokens: u32, index: usize) -> Result<Sample, ProviderError> {
    run_as(engine, stem, max_tokens, index, false).await
}

/// `background`: read the prompt as background work does (short chunks).
async fn run_as(
    engine: &LocalEngine,
    stem: &str,
    max_tokens: u32,
    index: usize,
    background: bool,
) -> Result<Sample, ProviderError> {
    let started = Instant::now();
    let mut r = request(stem, max_tokens, index);
    r.background = background;
    let c = engine.complete(r, None).await?;
    Ok(Sample {
        first_token_ms: c.first_token_ms.unwrap_or(0.0),
        tokens: c.completion_tokens,
        prompt_tokens: c.prompt_tokens,
        total_ms: started.elapsed().as_secs_f64() * 1000.0,
    })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = PathBuf::from(
        args.next()
            .ok_or("usage: local_bench MODEL_PATH [RUNS] [MAX_TOKENS]")?,
    );
    let runs: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(3);
    let max_tokens: u32 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(128);
    let dir = path
        .parent()
        .ok_or("the model path has no directory")?
        .to_path_buf();
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or("bad file name")?
        .to_string();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    println!(
        "model: {}  cores: {cores}  runs: {runs}  max_tokens: {max_tokens}",
        path.display()
    );

    let base = LocalEngine::new(dir, 1);
    let load = Instant::now();
    base.preload(&stem).await?;
    println!(
        "model load: {:.0} ms",
        load.elapsed().as_secs_f64() * 1000.0
    );

    let mut results = Vec::new();
    for threads in [1usize, 2] {
        let engine = base.with_threads(threads);
        // Warm-up (caches, page-in), not measured.
        run(&engine, &stem, 8, 0).await?;
        let mut samples = Vec::new();
        for i in 0..runs {
            samples.push(run(&engine, &stem, max_tokens, threads * 1000 + i + 1).await?);
        }
        let ttft = median(samples.iter().map(|s| s.first_token_ms).collect());
        let tps = median(samples.iter().map(Sample::decode_tps).collect());
        let tokens = samples.iter().map(|s| s.tokens).max().unwrap_or(0);
        let prompt = samples.first().map_or(0, |s| s.prompt_tokens);
        println!(
            "threads={threads}: first token {ttft:.1} ms (prompt {prompt} tokens), \
             decode {tps:.1} tok/s ({tokens} tokens), median of {runs}"
        );
        results.push((threads, ttft, tps));
    }
    // What reading a prompt in background work's short chunks costs beside
    // a reply's long ones, on the machine's threads, alternated run by run.
    let engine = base.with_threads(cores.min(2));
    let (mut reply, mut background) = (Vec::new(), Vec::new());
    for i in 0..runs {
        reply.push(run_as(&engine, &stem, 1, 5000 + 2 * i, false).await?.first_token_ms);
        background.push(run_as(&engine, &stem, 1, 5001 + 2 * i, true).await?.first_token_ms);
    }
    println!(
        "prompt read, threads={}: reply chunks {:.1} ms, background chunks {:.1} ms (median of {runs})",
        cores.min(2),
        median(reply),
        median(background)
    );
    if let [(_, ttft1, tps1), (_, ttft2, tps2)] = results[..] {
        println!(
            "threads=2 / threads=1 tok/s ratio: {:.2}",
            tps2 / tps1.max(f64::EPSILON)
        );
        println!(
            "threads=2 / threads=1 first-token latency ratio: {:.2}",
            ttft2 / ttft1.max(f64::EPSILON)
        );
    }
    Ok(())
}
