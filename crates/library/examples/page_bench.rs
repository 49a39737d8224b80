//! Page citations on third-party PDFs, judged by poppler: the page of each
//! answer is known from `pdftotext -f N -l N`, not from the library's own
//! extraction. Two kinds of query:
//! - run: for every page, a run of 10 words found on that page only;
//! - question: the numbered questions of a FAQ manual ("8.3 How can I tell
//!   what packages are installed?"), asked without their number; the answer
//!   page is where the question heads its answer in the body (the next page
//!   too when fewer than 15 words follow it on its page), never the table
//!   of contents.
//!
//! ```text
//! LEDGERMIND_MINILM_DIR=… page_bench --set tune PDF_OR_DIR... --set held-out PDF_OR_DIR...
//! ```
//! Sets are reported apart (a held-out set is one never tuned on). Every
//! file is indexed twice, with passages kept to one page (as before) and
//! with passages crossing page breaks; the arms, in the same run:
//! BM25 and the hybrid on one-page passages ("BM25 old", "old"), and on
//! crossing passages BM25 and the hybrid citing the page of the matched
//! words ("BM25", "ours"), and the hybrid citing the page holding most of
//! the passage ("ours main"); "old+toc" and "ours+toc" are "old" and
//! "ours" with table-of-contents passages' scores multiplied by
//! `BENCH_CONTENTS_FACTOR` (the product's default unless set; the other
//! arms without it). cite@1: the top result is the right document
//! and cites the answer's page; cite@5: one of the first five does;
//! doc@1: the top result is the right document; p50/p95: milliseconds of
//! a search (queries of each arm run in turn). Identical files are
//! counted once. `scripts/setup.sh --test` fetches the sets (Debian's
//! debian-faq and r-doc-pdf packages, pypdf's test files).
//! "main" and "product" are main's and the product's whole settings on
//! one-page passages; `BENCH_SETTINGS="NAME=JSON;…"` adds arms whose JSON
//! patches the product's settings, `BENCH_ARMS=A,B` keeps only those arms,
//! `BENCH_MISSES[=ARM]` prints an arm's misses ("product" by default).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use library::{Extractor, Library, SearchMode, SearchSettings, TokenCounter, DEFAULT_SEARCH};
use sha2::{Digest, Sha256};
use memory::{Embedder, MiniLm, WordPiece};

/// Words of a query: long enough to be unique, short enough to sit inside
/// one passage.
const QUERY_WORDS: usize = 10;
/// Words after a question on its page below which its answer is (also)
/// on the next page.
const ANSWER_WORDS_ON_PAGE: usize = 15;

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

/// The numbered questions heading their answers on each page (poppler's
/// lines: a section number, then text ending in "?" on that line or the
/// next), with the pages their answer is on. Pages of a table of contents
/// are skipped.
fn questions(page_texts: &[String]) -> Vec<(String, Vec<u32>)> {
    let numbered = regex::Regex::new(r"^(\d+\.)+\d*\.?\s+(\S.*)$").expect("regex");
    let mut out = Vec::new();
    for (i, text) in page_texts.iter().enumerate() {
        // A table of contents lists the questions with dot leaders.
        if text.matches(". . .").count() >= 5 {
            continue;
        }
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for (l, line) in lines.iter().enumerate() {
            let Some(c) = numbered.captures(line) else { continue };
            let mut q = c[2].to_owned();
            let mut last = l;
            if !q.ends_with('?') && l + 1 < lines.len() && lines[l + 1].ends_with('?') && !numbered.is_match(lines[l + 1]) {
                q = format!("{q} {}", lines[l + 1]);
                last = l + 1;
            }
            if !q.ends_with('?') || q.contains(". .") {
                continue;
            }
            let after: usize = lines[last + 1..].iter().map(|x| x.split_whitespace().count()).sum();
            let mut pages = vec![i as u32 + 1];
            if after < ANSWER_WORDS_ON_PAGE && i + 1 < page_texts.len() {
                pages.push(i as u32 + 2);
            }
            // A question seen again (listed before its answer): the later one.
            out.retain(|(seen, _)| *seen != q);
            out.push((q, pages));
        }
    }
    out
}

/// MiniLM with each text embedded once: both indexes share most passages.
struct Cached {
    inner: Arc<MiniLm>,
    seen: std::sync::Mutex<HashMap<String, Vec<f32>>>,
}

impl Embedder for Cached {
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn model_id(&self) -> String {
        self.inner.model_id()
    }
    fn max_tokens(&self) -> usize {
        self.inner.max_tokens()
    }
    fn embed_query(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, memory::MemoryError> {
        self.inner.embed_query(texts)
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, memory::MemoryError> {
        let missing: Vec<&str> = {
            let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            texts.iter().copied().filter(|t| !seen.contains_key(*t)).collect()
        };
        let vectors = if missing.is_empty() { vec![] } else { self.inner.embed(&missing)? };
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        for (t, v) in missing.into_iter().zip(vectors) {
            seen.insert(t.to_owned(), v);
        }
        Ok(texts.iter().map(|t| seen.get(*t).cloned().unwrap_or_default()).collect())
    }
}

#[derive(Default, Clone)]
struct Tally {
    queries: usize,
    document: usize,
    cite1: usize,
    cite5: usize,
    /// Milliseconds of each search.
    times: Vec<f64>,
}

struct Query {
    file: PathBuf,
    set: String,
    kind: &'static str,
    text: String,
    pages: Vec<u32>,
}

const ARMS: [&str; 7] = ["BM25 old", "old", "old+toc", "BM25", "ours main", "ours", "ours+toc"];

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        return Err("usage: page_bench [--set NAME] PDF_OR_DIR... [--set NAME PDF_OR_DIR...]".into());
    }
    if std::process::Command::new("pdftotext").arg("-v").output().is_err() {
        return Err("pdftotext (poppler-utils) is needed as the referee".into());
    }
    let model_dir = PathBuf::from(std::env::var("LEDGERMIND_MINILM_DIR").map_err(|_| "set LEDGERMIND_MINILM_DIR")?);
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    let mut set = "all".to_owned();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--set" {
            set = it.next().ok_or("--set NAME")?.clone();
            continue;
        }
        let mut found: Vec<PathBuf> = library::expand(Path::new(a))
            .into_iter()
            .filter(|f| f.extension().is_some_and(|e| e.eq_ignore_ascii_case("pdf")))
            .collect();
        found.sort();
        files.extend(found.into_iter().map(|f| (set.clone(), f)));
    }

    // Multi-page PDFs poppler reads, each distinct file once, with their queries.
    let mut seen = HashSet::new();
    let mut picked: Vec<PathBuf> = Vec::new();
    let mut queries: Vec<Query> = Vec::new();
    for (set, f) in &files {
        let Some(n) = page_count(f).filter(|&n| n > 1) else { continue };
        let texts: Vec<String> = (1..=n).map(|p| pdftotext(f, p).unwrap_or_default()).collect();
        let pages: Vec<Vec<String>> = texts.iter().map(|t| words(t)).collect();
        // Files that differ only in their outline read the same: one of them.
        let text: Vec<&str> = pages.iter().flatten().map(String::as_str).collect();
        if !seen.insert(Sha256::digest(text.join(" ").as_bytes())) {
            continue;
        }
        let before = queries.len();
        for p in 0..pages.len() {
            if let Some(q) = unique_run(&pages, p) {
                queries.push(Query { file: f.clone(), set: set.clone(), kind: "run", text: q, pages: vec![p as u32 + 1] });
            }
        }
        for (q, at) in questions(&texts) {
            queries.push(Query { file: f.clone(), set: set.clone(), kind: "question", text: q, pages: at });
        }
        if queries.len() > before {
            picked.push(f.clone());
        }
    }

    let model = Arc::new(Cached { inner: Arc::new(MiniLm::load(&model_dir)?), seen: Default::default() });
    let counter: Arc<dyn TokenCounter> = Arc::new(WordPiece::from_file(&model_dir.join("vocab.txt"), usize::MAX / 2)?);
    let base = std::env::temp_dir().join(format!("page_bench_{}", std::process::id()));
    let mut old = Library::open(&base.join("old"), model.clone(), counter.clone(), Extractor::InProcess).await?;
    old.cross_pages = false;
    let mut new = Library::open(&base.join("new"), model, counter, Extractor::InProcess).await?;
    new.cross_pages = true;
    let mut indexed = HashSet::new();
    for f in &picked {
        let a = old.add_file(f, None).await?;
        let b = new.add_file(f, None).await?;
        let n = queries.iter().filter(|q| &q.file == f).count();
        let crossing = new.crossing_passages(b.id).await?;
        println!(
            "{:<70} {:>3} pages, {:>4} queries, {} → {} passages ({} cross a page break)",
            f.display(),
            b.pages.unwrap_or(0),
            n,
            a.chunks,
            b.chunks,
            crossing
        );
        if a.chunks > 0 && b.chunks > 0 {
            indexed.insert(f.clone());
        }
    }
    // The factor on table-of-contents passages for "old+toc" and "ours+toc".
    let toc_factor: f64 =
        std::env::var("BENCH_CONTENTS_FACTOR").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_SEARCH.contents_factor);
    // Extra arms on one-page passages with table-of-contents scoring: the
    // word-match and quote signals at each weight listed in
    // BENCH_WORD_MATCH / BENCH_QUOTE (comma-separated); the named arms keep
    // both signals off, as before they existed. Weights are
    // compared in one run on one index.
    let weights = |var: &str| -> Vec<f64> {
        std::env::var(var).unwrap_or_default().split(',').filter_map(|w| w.trim().parse().ok()).collect()
    };
    let mut arms: Vec<String> = ARMS.iter().map(|a| (*a).to_owned()).collect();
    let mut extra: HashMap<String, (f64, f64)> = HashMap::new();
    // Whole settings on one-page passages: the product's defaults, main's
    // (before quotes could lead and BM25's first passages were kept), and
    // each `BENCH_SETTINGS` arm, "NAME=JSON;NAME=JSON" with JSON patching
    // the product's defaults (`SearchSettings::patched`).
    let mut whole: HashMap<String, SearchSettings> = HashMap::new();
    let main_settings = SearchSettings { quote_lead: 0.0, keyword_kept: 0, ..DEFAULT_SEARCH };
    for (name, settings) in [("main", main_settings), ("product", DEFAULT_SEARCH)] {
        arms.push(name.to_owned());
        whole.insert(name.to_owned(), settings);
    }
    for arm in std::env::var("BENCH_SETTINGS").unwrap_or_default().split(';').filter(|a| !a.trim().is_empty()) {
        let (name, json) = arm.split_once('=').ok_or("BENCH_SETTINGS: NAME=JSON;…")?;
        arms.push(name.trim().to_owned());
        whole.insert(name.trim().to_owned(), DEFAULT_SEARCH.patched(json)?);
    }
    // Misses are printed for this arm (BENCH_MISSES=ARM; "product" when empty).
    let missed_arm = std::env::var("BENCH_MISSES").ok().map(|a| if a.is_empty() { "product".to_owned() } else { a });
    for w in weights("BENCH_WORD_MATCH") {
        arms.push(format!("old+toc+wm{w}"));
        extra.insert(format!("old+toc+wm{w}"), (w, 0.0));
    }
    for w in weights("BENCH_QUOTE") {
        arms.push(format!("old+toc+q{w}"));
        extra.insert(format!("old+toc+q{w}"), (0.0, w));
    }
    // BENCH_ARMS=A,B,…: only these arms.
    if let Ok(only) = std::env::var("BENCH_ARMS") {
        let only: Vec<&str> = only.split(',').map(str::trim).collect();
        arms.retain(|a| only.contains(&a.as_str()));
    }
    let mut tallies: HashMap<(String, &str, String), Tally> = HashMap::new();
    for q in queries.iter().filter(|q| indexed.contains(&q.file)) {
        for arm in &arms {
            let arm = arm.as_str();
            let (word_match, quote) = extra.get(arm).copied().unwrap_or((0.0, 0.0));
            // The named arms are the states before quotes could lead.
            old.settings = main_settings;
            new.settings = main_settings;
            new.settings.cite_matched_page = arm != "ours main";
            new.settings.contents_factor = if arm == "ours+toc" { toc_factor } else { 1.0 };
            old.settings.contents_factor = if arm == "old+toc" || extra.contains_key(arm) { toc_factor } else { 1.0 };
            old.settings.word_match_weight = word_match;
            old.settings.quote_weight = quote;
            new.settings.word_match_weight = 0.0;
            new.settings.quote_weight = 0.0;
            if let Some(settings) = whole.get(arm) {
                old.settings = *settings;
            }
            let (lib, mode) = match arm {
                _ if whole.contains_key(arm) => (&old, SearchMode::Hybrid),
                "BM25 old" => (&old, SearchMode::Keyword),
                "old" | "old+toc" => (&old, SearchMode::Hybrid),
                _ if extra.contains_key(arm) => (&old, SearchMode::Hybrid),
                "BM25" => (&new, SearchMode::Keyword),
                _ => (&new, SearchMode::Hybrid),
            };
            let started = std::time::Instant::now();
            let hits = lib.search(&q.text, 5, mode).await?;
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            let right = |h: &library::SearchHit| Path::new(&h.document) == q.file && h.page.is_some_and(|p| q.pages.contains(&p));
            for key in [(q.set.clone(), q.kind, arm.to_owned()), (q.set.clone(), "all", arm.to_owned())] {
                let t = tallies.entry(key).or_default();
                t.queries += 1;
                t.document += usize::from(hits.first().is_some_and(|h| Path::new(&h.document) == q.file));
                t.cite1 += usize::from(hits.first().is_some_and(right));
                t.cite5 += usize::from(hits.iter().any(right));
                t.times.push(ms);
            }
            if missed_arm.as_deref() == Some(arm) && !hits.first().is_some_and(right) {
                eprintln!(
                    "{arm:<4} {} {:?} cited {:?} of {}: {}\n      top: {:?}",
                    q.kind,
                    q.pages,
                    hits.first().map(|h| h.page),
                    hits.first().map(|h| h.document.rsplit('/').next().unwrap_or_default().to_owned()).unwrap_or_default(),
                    q.text,
                    hits.first().map(|h| h.text.chars().take(160).collect::<String>())
                );
            }
        }
    }
    println!("documents: {} multi-page PDFs poppler reads", indexed.len());
    println!(
        "{:<10} {:<9} {:<14} {:>7} {:>7} {:>7} {:>7} {:>8} {:>8}",
        "set", "queries", "search", "n", "doc@1", "cite@1", "cite@5", "p50 ms", "p95 ms"
    );
    let mut sets: Vec<String> = queries.iter().map(|q| q.set.clone()).collect();
    sets.sort();
    sets.dedup();
    for set in &sets {
        for kind in ["run", "question", "all"] {
            for arm in &arms {
                let Some(t) = tallies.get(&(set.clone(), kind, arm.clone())) else { continue };
                let n = t.queries.max(1) as f64;
                let mut times = t.times.clone();
                times.sort_by(f64::total_cmp);
                let pct = |p: usize| times.get((times.len() * p / 100).min(times.len().saturating_sub(1))).copied().unwrap_or(0.0);
                println!(
                    "{set:<10} {kind:<9} {arm:<14} {:>7} {:>7.3} {:>7.3} {:>7.3} {:>8.1} {:>8.1}",
                    t.queries,
                    t.document as f64 / n,
                    t.cite1 as f64 / n,
                    t.cite5 as f64 / n,
                    pct(50),
                    pct(95)
                );
            }
        }
    }
    old.close().await;
    new.close().await;
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}
