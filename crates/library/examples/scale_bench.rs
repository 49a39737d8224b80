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
//! target, and MiniLM's query embedding alone, in the same run. The
//! keyword search runs twice: with every query word ("BM25 all", the
//! baseline) and within the keyword budget the product uses, with the
//! share of questions whose section is in the top 5 for both (the pages
//! keep their question headings here, so that figure is only a check of
//! what the budget loses) and how many top-5 passages are the same.
//! The hybrid runs twice, citing each passage's stored page ("ours
//! stored") and the page of the query's matched words ("ours"); PDFs in
//! the folder give passages that cross page breaks. "BM25 main" and
//! "main" are the keyword search and the hybrid under main's settings
//! (no quote leads, none of BM25's first passages kept past fusion). The arms
//! alternate question by question, after one untimed keyword pass (the
//! words' passage counts are then known, as in the app after its first
//! questions until the library changes).
//! `SCALE_BENCH_POSTINGS` / `SCALE_BENCH_COMMON_SHARE` try other budgets;
//! `SCALE_BENCH_SLOWEST=1` lists the slowest keyword questions.

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

/// Milliseconds of one vector search.
async fn first_search(lib: &Library, query: &str) -> Result<f64, library::LibraryError> {
    let t = Instant::now();
    lib.search(query, 5, SearchMode::Vector).await?;
    Ok(t.elapsed().as_secs_f64() * 1000.0)
}

/// A FAQ question and the page it heads a section of.
struct Question {
    file: String,
    text: String,
}

impl Question {
    /// Whether `hit` is in the section this question heads. The pages keep
    /// their headings here, so this is an easy test; what it shows is what
    /// leaving common words out of the keyword search loses.
    fn answered_by(&self, hit: &library::SearchHit) -> bool {
        hit.document.ends_with(&format!("faq/{}", self.file))
            && hit.section.as_deref().is_some_and(|s| s.trim_end().ends_with(self.text.trim()))
    }
}

/// One way of searching the bench times.
struct Arm {
    label: &'static str,
    mode: SearchMode,
    settings: library::SearchSettings,
}

async fn time_searches(lib: &mut Library, questions: &[Question], label: &str, n: usize) -> Result<(), Box<dyn std::error::Error>> {
    let ours = lib.settings;
    // Main's settings: no quote leads, no keyword passage kept past fusion.
    let main = library::SearchSettings { quote_lead: 0.0, keyword_kept: 0, ..ours };
    // "ours stored" cites each passage's stored page (as before passages
    // could cross pages); "ours" works out the page of the matched words.
    let all_words = library::SearchSettings { keyword_postings: None, ..ours };
    let arms = [
        Arm { label: "BM25 all", mode: SearchMode::Keyword, settings: all_words },
        Arm { label: "BM25 main", mode: SearchMode::Keyword, settings: main },
        Arm { label: "BM25", mode: SearchMode::Keyword, settings: ours },
        Arm { label: "embedding", mode: SearchMode::Vector, settings: ours },
        Arm { label: "main", mode: SearchMode::Hybrid, settings: main },
        Arm { label: "ours stored", mode: SearchMode::Hybrid, settings: library::SearchSettings { cite_matched_page: false, ..ours } },
        Arm { label: "ours", mode: SearchMode::Hybrid, settings: ours },
    ];
    // `SCALE_BENCH_ARMS=BM25,ours` times only those arms ("BM25 all" always
    // runs with a keyword arm: its top 5 is the budget's reference).
    let only: Option<Vec<String>> =
        std::env::var("SCALE_BENCH_ARMS").ok().map(|v| v.split(',').map(|a| a.trim().to_owned()).collect());
    let arms: Vec<&Arm> = arms
        .iter()
        .filter(|a| {
            only.as_ref().is_none_or(|only| {
                only.iter().any(|o| o == a.label) || (a.label == "BM25 all" && only.iter().any(|o| o.starts_with("BM25")))
            })
        })
        .collect();
    // One search first so the vector table is loaded, as after the app's
    // start, and one keyword pass so the words' passage counts are known,
    // as after the first questions (they are kept until the library changes).
    lib.search(&questions[0].text, 5, SearchMode::Vector).await?;
    for q in questions {
        lib.search(&q.text, 5, SearchMode::Keyword).await?;
    }
    // Arms alternate question by question, so all see the same machine load.
    let mut times = vec![Vec::with_capacity(questions.len()); arms.len()];
    let mut tops = vec![Vec::with_capacity(questions.len()); arms.len()];
    let mut found = vec![0usize; arms.len()];
    let mut slowest = vec![Vec::with_capacity(questions.len()); arms.len()];
    for q in questions {
        for (a, arm) in arms.iter().enumerate() {
            lib.settings = arm.settings;
            let t = Instant::now();
            let hits = std::hint::black_box(lib.search(&q.text, 5, arm.mode).await?);
            let ms = t.elapsed().as_secs_f64() * 1000.0;
            times[a].push(ms);
            slowest[a].push((ms, q.text.as_str()));
            found[a] += usize::from(hits.iter().any(|h| q.answered_by(h)));
            tops[a].push(hits.iter().map(|h| h.chunk_id).collect::<Vec<_>>());
        }
    }
    lib.settings = ours;
    let top_all = arms.iter().position(|a| a.label == "BM25 all").map(|a| tops[a].clone()).unwrap_or_default();
    for (a, arm) in arms.iter().enumerate() {
        times[a].sort_by(f64::total_cmp);
        let mode_label = arm.label;
        print!("{label:<10} {n:>8} {mode_label:<11} p50 {:>7.1} ms  p95 {:>7.1} ms", percentile(&times[a], 50), percentile(&times[a], 95));
        // The passages carry stand-in vectors: only keyword results mean anything.
        if arm.mode == SearchMode::Keyword {
            print!("  R@5 {:.3}", found[a] as f64 / questions.len() as f64);
        }
        if arm.mode == SearchMode::Keyword && mode_label != "BM25 all" {
            // What leaving common words out costs: the top 5 kept.
            let (same, all) = tops[a].iter().zip(&top_all).fold((0, 0), |(s, n), (t, b)| {
                (s + t.iter().filter(|id| b.contains(id)).count(), n + b.len())
            });
            println!("  top 5 as with all words: {:.3}", same as f64 / all.max(1) as f64);
            if std::env::var_os("SCALE_BENCH_SLOWEST").is_some() {
                slowest[a].sort_by(|x, y| y.0.total_cmp(&x.0));
                for (ms, q) in slowest[a].iter().take(8) {
                    println!("    {ms:>7.1} ms  {q}");
                }
            }
        } else {
            println!();
        }
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
    let questions: Vec<Question> = std::fs::read_to_string(&gold)?
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            Some(Question { file: f.first()?.to_string(), text: f.get(2)?.to_string() })
        })
        .collect();
    if questions.is_empty() {
        return Err("no questions in the gold file".into());
    }

    let real = Arc::new(MiniLm::load(&model_dir)?);
    let embedder = Arc::new(StandIn { real: real.clone(), fake: HashingEmbedder { dim: real.dim() }, importing: AtomicBool::new(true) });
    let counter: Arc<dyn TokenCounter> = Arc::new(WordPiece::from_file(&model_dir.join("vocab.txt"), usize::MAX / 2)?);
    let lib_counter = counter.clone();
    let keep = args.iter().position(|a| a == "--keep").and_then(|i| args.get(i + 1)).map(PathBuf::from);
    let work = keep.clone().unwrap_or_else(|| std::env::temp_dir().join(format!("scale_bench_{}", std::process::id())));
    std::fs::create_dir_all(&work)?;
    let mut lib = Library::open(&work.join("library"), embedder.clone(), counter, Extractor::InProcess).await?;
    // Other trade-offs of the keyword budget, for trying them.
    if let Some(budget) = std::env::var("SCALE_BENCH_POSTINGS").ok().and_then(|v| v.parse().ok()) {
        lib.settings.keyword_postings = Some(budget);
    }
    if let Some(share) = std::env::var("SCALE_BENCH_COMMON_SHARE").ok().and_then(|v| v.parse().ok()) {
        lib.settings.common_term_share = share;
    }

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
    // A kept library already at the target: the target's block below times it.
    if one < target {
        time_searches(&mut lib, &questions, "one copy", one).await?;
    }

    embedder.importing.store(true, Ordering::Relaxed);
    let mut k = 1;
    while passages(&lib).await? < target {
        lib.add_paths(&[copy(k)?], false, |_| {}).await?;
        k += 1;
    }
    let total = passages(&lib).await?;
    println!("{k} copies: {total} passages, imported in {:.0} s", started.elapsed().as_secs_f64());
    embedder.importing.store(false, Ordering::Relaxed);
    time_searches(&mut lib, &questions, "target", total).await?;

    // The query's embedding alone, the floor under every embedding search.
    let mut times = Vec::with_capacity(questions.len());
    for q in &questions {
        let t = Instant::now();
        std::hint::black_box(real.embed(&[q.text.as_str()])?);
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    println!("MiniLM query embedding alone: p50 {:>7.1} ms  p95 {:>7.1} ms", percentile(&times, 50), percentile(&times, 95));
    let db = std::fs::metadata(work.join("library").join(library::DB_FILE)).map(|m| m.len()).unwrap_or(0);
    println!("library.db: {:.0} MB", db as f64 / 1e6);

    // The first search after a change in a watched folder: one page removed
    // and added back, against loading every vector (the first search after
    // the app's start).
    lib.close().await;
    let lib = Library::open(&work.join("library"), embedder.clone(), lib_counter, Extractor::InProcess).await?;
    let q = &questions[0].text;
    let cold = first_search(&lib, q).await?;
    let page = work.join("copy00").join("faq").join("design.html");
    lib.remove(&page.display().to_string()).await?;
    let after_remove = first_search(&lib, q).await?;
    embedder.importing.store(true, Ordering::Relaxed);
    lib.add_file(&page, None).await?;
    embedder.importing.store(false, Ordering::Relaxed);
    let after_add = first_search(&lib, q).await?;
    println!(
        "first vector search: after start {cold:.0} ms (every vector loaded); after removing a page {after_remove:.0} ms, after adding it back {after_add:.0} ms"
    );
    lib.close().await;
    if keep.is_none() {
        let _ = std::fs::remove_dir_all(&work);
    }
    Ok(())
}
