//! Search latency at 100 000 passages. The passages are real text: the
//! HTML pages of the Python 3.11 documentation (Debian's python3.11-doc),
//! imported again under new paths (hard links) until the library holds the
//! target. Embedding 100 000 passages with MiniLM would take hours on this
//! machine, so the import stores stand-in vectors of the model's width; the
//! queries (the FAQ gold questions) are embedded by MiniLM as in the
//! product, so every search pays the real query embedding, the scan of
//! 100 000 vectors, FTS5 and the fetch of the hits.
//!
//! ```text
//! LEDGERMIND_MINILM_DIR=… target/debug/examples/scale_bench GOLD.tsv PYTHON_DOC_HTML_DIR [--passages N] [--keep DIR]
//! ```
//! With `--keep DIR` the library is built in DIR and left there; a later
//! run with the same DIR searches it without importing again.
//! Prints p50/p95 per search mode at the size of one copy and at the
//! target, and MiniLM's query embedding alone, in the same run.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use library::{Extractor, Library, SearchMode, TokenCounter};
use memory::{Embedder, HashingEmbedder, MemoryError, MiniLm, WordPiece};

/// MiniLM for queries; while `importing`, stand-in vectors of the same
/// width under MiniLM's model id.
struct StandIn {
    real: Arc<MiniLm>,
    fake: HashingEmbedder,
    importing: AtomicBool,
}

impl Embedder for StandIn {
    fn dim(&self) -> usize {
        self.real.dim()
    }
    fn model_id(&self) -> String {
        self.real.model_id()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, MemoryError> {
        if self.importing.load(Ordering::Relaxed) {
            self.fake.embed(texts)
        } else {
            self.real.embed(texts)
        }
    }
}

fn percentile(sorted: &[f64], p: usize) -> f64 {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

async fn passages(lib: &Library) -> Result<usize, Box<dyn std::error::Error>> {
    Ok(lib.list().await?.iter().map(|d| d.chunks.max(0) as usize).sum())
}

async fn time_searches(lib: &Library, questions: &[String], label: &str, n: usize) -> Result<(), Box<dyn std::error::Error>> {
    for (mode_label, mode) in [("BM25", SearchMode::Keyword), ("embedding", SearchMode::Vector), ("ours", SearchMode::Hybrid)] {
        // One search first so the vector table is loaded, as after the app's start.
        lib.search(&questions[0], 5, mode).await?;
        let mut times = Vec::with_capacity(questions.len());
        for q in questions {
            let t = Instant::now();
            std::hint::black_box(lib.search(q, 5, mode).await?);
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        times.sort_by(f64::total_cmp);
        println!(
            "{label:<10} {n:>8} {mode_label:<10} p50 {:>7.1} ms  p95 {:>7.1} ms",
            percentile(&times, 50),
            percentile(&times, 95)
        );
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (gold, docs) = match (args.first(), args.get(1)) {
        (Some(g), Some(d)) => (PathBuf::from(g), PathBuf::from(d)),
        _ => return Err("usage: scale_bench GOLD.tsv PYTHON_DOC_HTML_DIR [--passages N]".into()),
    };
    let target: usize =
        args.iter().position(|a| a == "--passages").and_then(|i| args.get(i + 1)).and_then(|n| n.parse().ok()).unwrap_or(100_000);
    let model_dir = PathBuf::from(std::env::var("LEDGERMIND_MINILM_DIR").map_err(|_| "set LEDGERMIND_MINILM_DIR")?);
    let questions: Vec<String> =
        std::fs::read_to_string(&gold)?.lines().skip(1).filter_map(|l| l.split('\t').nth(2).map(str::to_owned)).collect();
    if questions.is_empty() {
        return Err("no questions in the gold file".into());
    }

    let real = Arc::new(MiniLm::load(&model_dir)?);
    let embedder = Arc::new(StandIn { real: real.clone(), fake: HashingEmbedder { dim: real.dim() }, importing: AtomicBool::new(true) });
    let counter: Arc<dyn TokenCounter> = Arc::new(WordPiece::from_file(&model_dir.join("vocab.txt"), usize::MAX / 2)?);
    let keep = args.iter().position(|a| a == "--keep").and_then(|i| args.get(i + 1)).map(PathBuf::from);
    let work = keep.clone().unwrap_or_else(|| std::env::temp_dir().join(format!("scale_bench_{}", std::process::id())));
    std::fs::create_dir_all(&work)?;
    let lib = Library::open(&work.join("library"), embedder.clone(), counter, Extractor::InProcess).await?;

    let copy = |k: usize| -> Result<PathBuf, Box<dyn std::error::Error>> {
        let dest = work.join(format!("copy{k:02}"));
        if dest.exists() {
            return Ok(dest);
        }
        let status = std::process::Command::new("cp").arg("-al").arg(&docs).arg(&dest).status()?;
        if !status.success() {
            return Err(format!("cp -al {} failed", docs.display()).into());
        }
        Ok(dest)
    };
    let started = Instant::now();
    lib.add_paths(&[copy(0)?], false, |_| {}).await?;
    let one = passages(&lib).await?;
    println!("one copy of {}: {one} passages, imported in {:.0} s", docs.display(), started.elapsed().as_secs_f64());
    if one == 0 {
        return Err("the pages gave no passages".into());
    }
    embedder.importing.store(false, Ordering::Relaxed);
    time_searches(&lib, &questions, "one copy", one).await?;

    embedder.importing.store(true, Ordering::Relaxed);
    let mut k = 1;
    while passages(&lib).await? < target {
        lib.add_paths(&[copy(k)?], false, |_| {}).await?;
        k += 1;
    }
    let total = passages(&lib).await?;
    println!("{k} copies: {total} passages, imported in {:.0} s", started.elapsed().as_secs_f64());
    embedder.importing.store(false, Ordering::Relaxed);
    time_searches(&lib, &questions, "target", total).await?;

    // The query's embedding alone, the floor under every embedding search.
    let mut times = Vec::with_capacity(questions.len());
    for q in &questions {
        let t = Instant::now();
        std::hint::black_box(real.embed(&[q.as_str()])?);
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    println!("MiniLM query embedding alone: p50 {:>7.1} ms  p95 {:>7.1} ms", percentile(&times, 50), percentile(&times, 95));
    let db = std::fs::metadata(work.join("library").join(library::DB_FILE)).map(|m| m.len()).unwrap_or(0);
    println!("library.db: {:.0} MB", db as f64 / 1e6);
    lib.close().await;
    if keep.is_none() {
        let _ = std::fs::remove_dir_all(&work);
    }
    Ok(())
}
