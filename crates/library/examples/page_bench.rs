//! Page citations on third-party PDFs, judged by poppler: for every page of
//! every multi-page PDF that both poppler and the library read, a run of
//! words found on that page only (per `pdftotext -f N -l N`) is asked as a
//! query; the top result must be that document, and its cited page must be
//! N. Poppler is the referee, not the library's own extraction.
//!
//! ```text
//! LEDGERMIND_MINILM_DIR=… target/debug/examples/page_bench PDF_OR_DIR...
//! ```
//! Prints, for BM25 alone and the product's hybrid: queries, top result in
//! the right document, and page right (of all queries and of those whose
//! document was right). Identical files are counted once.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use library::{Extractor, Library, SearchMode, TokenCounter};
use sha2::{Digest, Sha256};
use memory::{MiniLm, WordPiece};

/// Words of a query: long enough to be unique, short enough to sit inside
/// one passage.
const QUERY_WORDS: usize = 10;

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

fn pdftotext(file: &Path, page: u32) -> Option<String> {
    let p = page.to_string();
    let out = std::process::Command::new("pdftotext").args(["-q", "-f", &p, "-l", &p]).arg(file).arg("-").output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn page_count(file: &Path) -> Option<u32> {
    let out = std::process::Command::new("pdfinfo").arg(file).output().ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("Pages:").and_then(|n| n.trim().parse().ok()))
}

/// A run of `QUERY_WORDS` words from the middle of page `p` that appears on
/// no other page of the document (as poppler reads it).
fn unique_run(pages: &[Vec<String>], p: usize) -> Option<String> {
    let own = &pages[p];
    if own.len() < QUERY_WORDS {
        return None;
    }
    let others: Vec<String> = pages.iter().enumerate().filter(|(i, _)| *i != p).map(|(_, w)| w.join(" ")).collect();
    let mid = (own.len() - QUERY_WORDS) / 2;
    // From the middle outwards, the first run no other page holds.
    let mut starts: Vec<usize> = (0..=own.len() - QUERY_WORDS).collect();
    starts.sort_by_key(|s| s.abs_diff(mid));
    starts.into_iter().map(|s| own[s..s + QUERY_WORDS].join(" ")).find(|run| {
        // Short words repeat across pages; a run of mostly digits is a table.
        run.chars().filter(|c| c.is_alphabetic()).count() >= 30 && !others.iter().any(|o| o.contains(run.as_str()))
    })
}

#[derive(Default)]
struct Tally {
    queries: usize,
    document: usize,
    page: usize,
    /// Top results whose cited page is where poppler finds their text.
    cited: usize,
    /// Top results poppler could place at all.
    placed: usize,
}

fn shingles(words: &[String]) -> HashSet<String> {
    words.windows(4).map(|w| w.join(" ")).collect()
}

/// The page (1-based) poppler finds most of `text` on, when one holds at
/// least half of its word 4-grams.
fn poppler_page(pages: &[HashSet<String>], text: &str) -> Option<u32> {
    let own = shingles(&words(text));
    if own.is_empty() {
        return None;
    }
    let (best, overlap) = pages.iter().enumerate().map(|(i, p)| (i, own.intersection(p).count())).max_by_key(|(_, n)| *n)?;
    (overlap * 2 >= own.len()).then_some(best as u32 + 1)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        return Err("usage: page_bench PDF_OR_DIR...".into());
    }
    if std::process::Command::new("pdftotext").arg("-v").output().is_err() {
        return Err("pdftotext (poppler-utils) is needed as the referee".into());
    }
    let model_dir = PathBuf::from(std::env::var("LEDGERMIND_MINILM_DIR").map_err(|_| "set LEDGERMIND_MINILM_DIR")?);
    let mut files: Vec<PathBuf> = args
        .iter()
        .flat_map(|a| library::expand(Path::new(a)))
        .filter(|f| f.extension().is_some_and(|e| e.eq_ignore_ascii_case("pdf")))
        .collect();
    files.sort();

    // Multi-page PDFs poppler reads, each distinct file once, with a query per page.
    let mut seen = HashSet::new();
    let mut picked: Vec<(PathBuf, Vec<(u32, String)>)> = Vec::new();
    let mut poppler_pages: HashMap<PathBuf, Vec<HashSet<String>>> = HashMap::new();
    for f in &files {
        let Some(n) = page_count(f).filter(|&n| n > 1) else { continue };
        let pages: Vec<Vec<String>> = (1..=n).map(|p| pdftotext(f, p).map(|t| words(&t)).unwrap_or_default()).collect();
        // Files that differ only in their outline read the same: one of them.
        let text: Vec<&str> = pages.iter().flatten().map(String::as_str).collect();
        if !seen.insert(Sha256::digest(text.join(" ").as_bytes())) {
            continue;
        }
        let queries: Vec<(u32, String)> =
            (0..pages.len()).filter_map(|p| unique_run(&pages, p).map(|q| (p as u32 + 1, q))).collect();
        if !queries.is_empty() {
            poppler_pages.insert(f.clone(), pages.iter().map(|w| shingles(w)).collect());
            picked.push((f.clone(), queries));
        }
    }

    let model = Arc::new(MiniLm::load(&model_dir)?);
    let counter: Arc<dyn TokenCounter> = Arc::new(WordPiece::from_file(&model_dir.join("vocab.txt"), usize::MAX / 2)?);
    let dir = std::env::temp_dir().join(format!("page_bench_{}", std::process::id()));
    let lib = Library::open(&dir, model, counter, Extractor::InProcess).await?;
    let mut indexed = Vec::new();
    for (f, queries) in &picked {
        let r = lib.add_file(f, None).await?;
        println!("{:<60} {:>3} pages, {:>3} queries, status {}", f.display(), r.pages.unwrap_or(0), queries.len(), r.status.as_str());
        if r.chunks > 0 {
            indexed.push((f, queries));
        }
    }
    let mut tallies: HashMap<&str, Tally> = HashMap::new();
    let verbose = std::env::var("BENCH_MISSES").is_ok();
    // "fusion" is ours without the word-match signal (BENCH_WORD_MATCH
    // sets ours' weight for an experiment).
    let word_match = std::env::var("BENCH_WORD_MATCH").ok().and_then(|w| w.parse().ok()).unwrap_or(lib.settings.word_match_weight);
    let mut lib = lib;
    for (label, mode, weight) in
        [("BM25", SearchMode::Keyword, 0.0), ("fusion", SearchMode::Hybrid, 0.0), ("ours", SearchMode::Hybrid, word_match)]
    {
        lib.settings.word_match_weight = weight;
        let t = tallies.entry(label).or_default();
        for (f, queries) in &indexed {
            for (page, q) in queries.iter() {
                let hits = lib.search(q, 5, mode).await?;
                t.queries += 1;
                let Some(top) = hits.first() else { continue };
                if let Some(at) = poppler_pages.get(Path::new(&top.document)).and_then(|p| poppler_page(p, &top.text)) {
                    t.placed += 1;
                    t.cited += usize::from(top.page == Some(at));
                }
                if Path::new(&top.document) != f.as_path() {
                    continue;
                }
                t.document += 1;
                if top.page == Some(*page) {
                    t.page += 1;
                } else if verbose && mode == SearchMode::Hybrid {
                    eprintln!("{} p. {page} cited as {:?}: {q}", f.display(), top.page);
                }
            }
        }
    }
    println!("documents: {} of {} multi-page PDFs poppler reads", indexed.len(), picked.len());
    println!("(a top result is placed when one page of poppler's text holds half of its word 4-grams)");
    println!(
        "{:<6} {:>7} {:>10} {:>14} {:>18} {:>22}",
        "search", "queries", "document", "page (of all)", "page (doc right)", "top cites its page"
    );
    println!("ours: word match weight {word_match}");
    for label in ["BM25", "fusion", "ours"] {
        let t = &tallies[label];
        println!(
            "{label:<6} {:>7} {:>10.3} {:>14.3} {:>18.3} {:>14.3} ({}/{})",
            t.queries,
            t.document as f64 / t.queries.max(1) as f64,
            t.page as f64 / t.queries.max(1) as f64,
            t.page as f64 / t.document.max(1) as f64,
            t.cited as f64 / t.placed.max(1) as f64,
            t.cited,
            t.placed
        );
    }
    lib.close().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
