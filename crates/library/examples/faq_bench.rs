//! Retrieval on the Python 3.11 FAQ (Debian's python3.11-doc), questions
//! asked against the pages with every question heading removed, so a
//! question must find its answer, not its own title.
//!
//! ```text
//! cargo run -p library --features test-support --example faq_bench -- \
//!     GOLD.tsv FAQ_HTML_DIR [--keep DIR]
//! ```
//! Prints R@1, R@5, MRR@10 for BM25 alone, and embeddings alone and the
//! product's hybrid with each embedder (MiniLM, and multilingual-e5-small
//! when installed), on the tuning and held-out halves (split by a hash of
//! the section id; the held-out half is never used to choose settings),
//! plus citation accuracy, import speed against the embedder's raw rate
//! and the query's embedding time.
//! Settings can be varied with BENCH_CHUNK_TOKENS, BENCH_VECTOR_WEIGHT,
//! BENCH_KEYWORD_WEIGHT, BENCH_RRF_K; "product" is the product's settings
//! whole and `BENCH_SETTINGS="NAME=JSON;…"` adds arms patching them.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use library::{e5, extract_bytes, Extraction, Extractor, Library, SearchMode, SearchSettings, TokenCounter};
use memory::{Embedder, MiniLm, WordPiece};
use regex::Regex;

/// The embedder as the import calls it: each call's texts are kept so the
/// same calls can be timed on the bare model.
struct Recorder {
    inner: Arc<dyn Embedder>,
    calls: std::sync::Mutex<Vec<Vec<String>>>,
}

impl Embedder for Recorder {
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn model_id(&self) -> String {
        self.inner.model_id()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, memory::MemoryError> {
        if let Ok(mut calls) = self.calls.lock() {
            calls.push(texts.iter().map(|t| (*t).to_owned()).collect());
        }
        self.inner.embed(texts)
    }
    fn embed_query(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, memory::MemoryError> {
        self.inner.embed_query(texts)
    }
    fn max_tokens(&self) -> usize {
        self.inner.max_tokens()
    }
}

struct Question {
    file: String,
    id: String,
    question: String,
    /// Word 5-grams of the answer.
    shingles: HashSet<String>,
    /// Heading text of the enclosing section (what a citation should name).
    parent: String,
    held_out: bool,
}

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

fn shingles(text: &str) -> HashSet<String> {
    let w = words(text);
    if w.len() < 5 {
        return std::iter::once(w.join(" ")).filter(|s| !s.is_empty()).collect();
    }
    w.windows(5).map(|g| g.join(" ")).collect()
}

fn strip_tags(html: &str) -> String {
    let tag = Regex::new(r"<[^>]*>").expect("regex");
    tag.replace_all(html, "").replace('¶', "").replace("&#8217;", "’").trim().to_owned()
}

fn env_num<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// The main column of a Sphinx page, with every question heading removed
/// (each section in the gold set, and any other heading ending in "?").
fn prepare_page(html: &str, gold_ids: &HashSet<&str>) -> String {
    let start = html.find("<div class=\"body\" role=\"main\">").unwrap_or(0);
    let end = html[start..].find("<div class=\"sphinxsidebar\"").map_or(html.len(), |e| start + e);
    let mut body = html[start..end].to_owned();
    // The page's own table of contents lists every question.
    let toc = Regex::new(r#"(?s)<nav class="contents[^"]*"[^>]*>.*?</nav>"#).expect("regex");
    body = toc.replace_all(&body, "").into_owned();
    let heading = Regex::new(r#"(?s)(<section id="([^"]+)">\s*)<h([1-6])>(.*?)</h[1-6]>"#).expect("regex");
    heading
        .replace_all(&body, |c: &regex::Captures<'_>| {
            let question = gold_ids.contains(&c[2]) || strip_tags(&c[4]).trim_end().ends_with('?');
            if question {
                c[1].to_owned()
            } else {
                c[0].to_owned()
            }
        })
        .into_owned()
}

/// The answer text of section `id` (up to the next section) and the
/// heading of its parent section, from the original page.
fn answer_and_parent(html: &str, id: &str) -> Option<(String, String)> {
    let open = format!("<section id=\"{id}\">");
    let at = html.find(&open)?;
    let rest = &html[at + open.len()..];
    let end = rest.find("<section id=").unwrap_or(rest.len()).min(rest.find("</section>").unwrap_or(rest.len()));
    let level_re = Regex::new(r"<h([1-6])>").expect("regex");
    let level: usize = level_re.captures(rest).and_then(|c| c[1].parse().ok())?;
    let answer_html = Regex::new(r"(?s)^\s*<h[1-6]>.*?</h[1-6]>").expect("regex").replace(&rest[..end], "").into_owned();
    let text = match extract_bytes(Path::new("a.html"), format!("<html><body>{answer_html}</body></html>").as_bytes()) {
        Extraction::Text { blocks, .. } => blocks.iter().map(|b| b.text.as_str()).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    };
    let parent_re = Regex::new(&format!(r"(?s)<h{}>(.*?)</h{}>", level - 1, level - 1)).expect("regex");
    let parent = parent_re.captures_iter(&html[..at]).last().map(|c| strip_tags(&c[1])).unwrap_or_default();
    Some((text, parent))
}

fn held_out(id: &str) -> bool {
    library::sha256_hex(&[id]).as_bytes()[0] % 2 == 1
}

#[derive(Default, Clone, Copy)]
struct Scores {
    n: usize,
    r1: usize,
    r5: usize,
    mrr: f64,
    cited: usize,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (gold_path, faq_dir) = match (args.first(), args.get(1)) {
        (Some(g), Some(f)) => (PathBuf::from(g), PathBuf::from(f)),
        _ => return Err("usage: faq_bench GOLD.tsv FAQ_HTML_DIR [--keep DIR]".into()),
    };
    let keep = args.iter().position(|a| a == "--keep").and_then(|i| args.get(i + 1)).map(PathBuf::from);
    let model_dir = PathBuf::from(std::env::var("LEDGERMIND_MINILM_DIR").map_err(|_| "set LEDGERMIND_MINILM_DIR")?);

    let gold_text = std::fs::read_to_string(&gold_path)?;
    let gold: Vec<(String, String, String)> = gold_text
        .lines()
        .skip(1)
        .filter_map(|l| {
            let mut f = l.split('\t');
            Some((f.next()?.to_owned(), f.next()?.to_owned(), f.next()?.to_owned()))
        })
        .collect();
    let corpus = match &keep {
        Some(k) => {
            std::fs::create_dir_all(k)?;
            k.clone()
        }
        None => std::env::temp_dir().join(format!("faq_bench_{}", std::process::id())),
    };
    let pages_dir = corpus.join("faq");
    std::fs::create_dir_all(&pages_dir)?;
    let mut questions = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&faq_dir)?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    for path in files.iter().filter(|p| p.extension().is_some_and(|e| e == "html")) {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        let html = std::fs::read_to_string(path)?;
        let ids: HashSet<&str> = gold.iter().filter(|g| g.0 == name).map(|g| g.1.as_str()).collect();
        std::fs::write(pages_dir.join(&name), prepare_page(&html, &ids))?;
        for g in gold.iter().filter(|g| g.0 == name) {
            let Some((answer, parent)) = answer_and_parent(&html, &g.1) else {
                eprintln!("no section {} in {name}", g.1);
                continue;
            };
            questions.push(Question {
                file: name.clone(),
                id: g.1.clone(),
                question: g.2.clone(),
                shingles: shingles(&answer),
                parent,
                held_out: held_out(&g.1),
            });
        }
    }
    // Nothing of a question may be left in the indexed pages.
    let mut leaks = 0;
    for q in &questions {
        let page = std::fs::read_to_string(pages_dir.join(&q.file))?;
        leaks += usize::from(page.contains(&q.question));
    }

    let minilm = Arc::new(MiniLm::load(&model_dir)?);
    let counter: Arc<dyn TokenCounter> = Arc::new(WordPiece::from_file(&model_dir.join("vocab.txt"), usize::MAX / 2)?);
    // The library's stronger embedder, when setup installed it (or
    // LEDGERMIND_E5_FILE names a packed e5 file).
    let e5_path = std::env::var_os("LEDGERMIND_E5_FILE").map(PathBuf::from).or_else(|| {
        std::env::var_os("LEDGERMIND_CACHE").map(|c| PathBuf::from(c).join("models").join(e5::E5_DIR).join(e5::E5_FILE))
    });
    let mut embedders: Vec<(&str, Arc<dyn Embedder>)> = vec![("MiniLM", minilm.clone())];
    match e5_path.filter(|p| p.is_file()) {
        Some(p) => embedders.push(("e5", Arc::new(e5::E5::load(&p)?))),
        None => eprintln!("no e5 model file (run scripts/setup.sh): MiniLM only"),
    }
    if std::env::var("BENCH_ONLY_E5").is_ok() && embedders.len() > 1 {
        embedders.remove(0);
    }
    println!(
        "Python 3.11 FAQ: {} questions ({} held out); question text left in the pages: {leaks}",
        questions.len(),
        questions.iter().filter(|q| q.held_out).count(),
    );
    println!("{:<10} {:<14} {:>4} {:>6} {:>6} {:>7} {:>9} {:>8}", "split", "retrieval", "n", "R@1", "R@5", "MRR@10", "cite@1", "p95 ms");
    let misses = std::env::var("BENCH_MISSES").is_ok();
    let mut summaries = Vec::new();
    for (i, (name, embedder)) in embedders.iter().enumerate() {
        let db_dir = corpus.join(format!("library-{name}"));
        // BENCH_REUSE=1 with --keep: the library of the last run is reused
        // (its files unchanged, nothing is embedded again; import figures
        // are then meaningless).
        if std::env::var_os("BENCH_REUSE").is_none() || keep.is_none() {
            let _ = std::fs::remove_dir_all(&db_dir);
        }
        let recorder = Arc::new(Recorder { inner: embedder.clone(), calls: std::sync::Mutex::new(Vec::new()) });
        let mut lib = Library::open(&db_dir, recorder.clone(), counter.clone(), Extractor::InProcess).await?;
        if let Some(t) = env_num("BENCH_CHUNK_TOKENS") {
            lib.chunk_tokens = t;
        }
        if let Some(w) = env_num("BENCH_VECTOR_WEIGHT") {
            lib.settings.vector_weight = w;
        }
        if let Some(w) = env_num("BENCH_KEYWORD_WEIGHT") {
            lib.settings.keyword_weight = w;
        }
        if let Some(k) = env_num("BENCH_RRF_K") {
            lib.settings.rrf_k = k;
        }
        if let Some(w) = env_num("BENCH_WORD_MATCH") {
            lib.settings.word_match_weight = w;
        }
        let word_match = lib.settings.word_match_weight;
        let start = Instant::now();
        let reports = lib.add_paths(&[pages_dir.clone()], false, |_| {}).await?;
        let import_s = start.elapsed().as_secs_f64();
        let chunks: usize = reports.iter().map(|r| r.chunks).sum();
        // The embedder's raw rate: the very calls the import made (same
        // texts, same batches), replayed on the bare model in the same run.
        let calls: Vec<Vec<String>> = recorder.calls.lock().map(|mut c| std::mem::take(&mut *c)).unwrap_or_default();
        let raw_start = Instant::now();
        for call in &calls {
            let refs: Vec<&str> = call.iter().map(String::as_str).collect();
            embedder.embed(&refs)?;
        }
        let raw_s = raw_start.elapsed().as_secs_f64();
        let inputs: usize = calls.iter().map(Vec::len).sum();
        // The injection guard's share: every embedded input screened again.
        let guard_start = Instant::now();
        for text in calls.iter().flatten() {
            std::hint::black_box(runtime::guard::screen_document(text));
        }
        let guard_s = guard_start.elapsed().as_secs_f64();
        // The query's embedding alone, every question.
        let mut query_ms = Vec::new();
        for q in &questions {
            let t = Instant::now();
            embedder.embed_query(&[q.question.as_str()])?;
            query_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        query_ms.sort_by(f64::total_cmp);
        summaries.push(format!(
            "{name}: {} pages, {chunks} chunks of <= {} tokens; import {:.1} s, {:.2} chunks/s; the model alone on the same {} inputs ({} calls): {:.1} s, {:.2} chunks/s; ratio {:.2}; guard screening {:.2} s ({:.1} % of the import); query embedding p50 {:.1} ms, p95 {:.1} ms",
            reports.len(),
            lib.chunk_tokens,
            import_s,
            chunks as f64 / import_s,
            inputs,
            calls.len(),
            raw_s,
            chunks as f64 / raw_s,
            raw_s / import_s,
            guard_s,
            100.0 * guard_s / import_s,
            query_ms[query_ms.len() / 2],
            query_ms[(query_ms.len() * 95 / 100).min(query_ms.len() - 1)],
        ));
        summaries.push(format!(
            "{name} settings: vector {:.2} / keyword {:.2}, RRF k {}, candidates {}, word match {}, quote {}",
            lib.settings.vector_weight, lib.settings.keyword_weight, lib.settings.rrf_k, lib.settings.candidates, word_match, lib.settings.quote_weight
        ));
        if let Ok(dump) = std::env::var("BENCH_DUMP") {
            dump_judgements(&lib, &db_dir, &questions, &format!("{dump}.{name}.json")).await?;
        }
        let quote = lib.settings.quote_weight;
        let mut modes = vec![
            (format!("emb {name}"), SearchMode::Vector, word_match, quote),
            (format!("fusion {name}"), SearchMode::Hybrid, 0.0, 0.0),
            (format!("ours {name}"), SearchMode::Hybrid, word_match, quote),
        ];
        // BENCH_QUOTE=W1,W2,…: the hybrid with the quote signal at each
        // weight, beside the arms above in the same run.
        for w in std::env::var("BENCH_QUOTE").unwrap_or_default().split(',').filter_map(|w| w.trim().parse::<f64>().ok()) {
            modes.push((format!("+q{w} {name}"), SearchMode::Hybrid, word_match, w));
        }
        if i == 0 {
            modes.insert(0, ("BM25".to_owned(), SearchMode::Keyword, word_match, quote));
        }
        let product = lib.settings;
        let mut modes: Vec<(String, SearchMode, SearchSettings)> = modes
            .into_iter()
            .map(|(label, mode, weight, quote)| {
                (label, mode, SearchSettings { word_match_weight: weight, quote_weight: quote, ..main_settings(product) })
            })
            .collect();
        // The product's settings as they are, and BENCH_SETTINGS="NAME=JSON;…"
        // arms patching them (`SearchSettings::patched`).
        modes.push((format!("product {name}"), SearchMode::Hybrid, product));
        for arm in std::env::var("BENCH_SETTINGS").unwrap_or_default().split(';').filter(|a| !a.trim().is_empty()) {
            let (label, json) = arm.split_once('=').ok_or("BENCH_SETTINGS: NAME=JSON;…")?;
            modes.push((format!("{} {name}", label.trim()), SearchMode::Hybrid, product.patched(json)?));
        }
        for (label, mode, settings) in modes {
            lib.settings = settings;
            let mut by_split: HashMap<bool, Scores> = HashMap::new();
            let mut times = Vec::new();
            for q in &questions {
                let t = Instant::now();
                let hits = lib.search(&q.question, 10, mode).await?;
                times.push(t.elapsed().as_secs_f64() * 1000.0);
                let rank = hits.iter().position(|h| answers(h, q));
                let sc = by_split.entry(q.held_out).or_default();
                sc.n += 1;
                if let Some(r) = rank {
                    sc.r1 += usize::from(r == 0);
                    sc.r5 += usize::from(r < 5);
                    sc.mrr += 1.0 / (r as f64 + 1.0);
                    let top = &hits[0];
                    if r == 0 && top.section.as_deref().is_some_and(|s| s.ends_with(&q.parent)) {
                        sc.cited += 1;
                    }
                }
                // Misses are shown for the tuning half only.
                if misses && label.starts_with("product") && rank.is_none_or(|r| r >= 5) && !q.held_out {
                    eprintln!(
                        "miss {name} [{}] rank {:?} {} -> {:?}",
                        q.id,
                        rank.map(|r| r + 1),
                        q.question,
                        hits.first().map(|h| format!("{} | {}", h.document.rsplit('/').next().unwrap_or_default(), h.snippet.chars().take(100).collect::<String>()))
                    );
                }
            }
            times.sort_by(f64::total_cmp);
            let p95 = times[(times.len() * 95 / 100).min(times.len() - 1)];
            for held in [false, true] {
                let s = by_split.get(&held).copied().unwrap_or_default();
                let n = s.n.max(1) as f64;
                println!(
                    "{:<10} {:<14} {:>4} {:>6.3} {:>6.3} {:>7.3} {:>9.3} {:>8.1}",
                    if held { "held-out" } else { "tuning" },
                    label,
                    s.n,
                    s.r1 as f64 / n,
                    s.r5 as f64 / n,
                    s.mrr / n,
                    s.cited as f64 / s.r1.max(1) as f64,
                    p95
                );
            }
        }
        lib.close().await;
    }
    for line in summaries {
        println!("{line}");
    }
    println!("cite@1 = share of right top results whose section path names the answer's enclosing section");
    if keep.is_none() {
        let _ = std::fs::remove_dir_all(&corpus);
    }
    Ok(())
}

/// `settings` as on main, before quotes could lead and BM25's first
/// passages were kept past fusion: the named arms keep that state.
fn main_settings(settings: SearchSettings) -> SearchSettings {
    SearchSettings { quote_lead: 0.0, keyword_kept: 0, ..settings }
}

/// Whether a hit is the question's answer: in its page, and half of the
/// smaller side's word 5-grams shared.
fn answers(h: &library::SearchHit, q: &Question) -> bool {
    answers_text(&h.document, &h.text, q)
}

fn answers_text(document: &str, text: &str, q: &Question) -> bool {
    if !document.ends_with(&format!("/{}", q.file)) {
        return false;
    }
    let s = shingles(text);
    let overlap = s.intersection(&q.shingles).count();
    overlap > 0 && overlap * 2 >= s.len().min(q.shingles.len())
}

/// BENCH_DUMP=PREFIX: per embedder, every passage, each question's
/// answering passages and the top 50 of BM25 and of the embeddings, as
/// JSON, so fusion settings can be tried offline on the tuning half.
async fn dump_judgements(lib: &Library, db_dir: &Path, questions: &[Question], dump: &str) -> Result<(), Box<dyn std::error::Error>> {
    let url = format!("sqlite://{}?mode=ro", db_dir.join(library::DB_FILE).display());
    let pool = sqlx::SqlitePool::connect(&url).await?;
    let rows = sqlx::query_as::<_, (i64, String, Option<String>, String)>(
        "SELECT c.id, d.path, c.section, c.text FROM chunks c JOIN documents d ON d.id = c.document_id ORDER BY c.id",
    )
    .fetch_all(&pool)
    .await?;
    pool.close().await;
    let mut out_q = Vec::new();
    for q in questions {
        let relevant: Vec<i64> = rows.iter().filter(|(_, path, _, text)| answers_text(path, text, q)).map(|r| r.0).collect();
        let bm25: Vec<i64> = lib.search(&q.question, 50, SearchMode::Keyword).await?.iter().map(|h| h.chunk_id).collect();
        let vector: Vec<i64> = lib.search(&q.question, 50, SearchMode::Vector).await?.iter().map(|h| h.chunk_id).collect();
        out_q.push(serde_json::json!({"id": q.id, "question": q.question, "held_out": q.held_out, "relevant": relevant, "bm25": bm25, "vector": vector}));
    }
    let chunks: Vec<_> =
        rows.iter().map(|(id, path, section, text)| serde_json::json!({"id": id, "path": path, "section": section, "text": text})).collect();
    std::fs::write(dump, serde_json::to_string(&serde_json::json!({"questions": out_q, "chunks": chunks}))?)?;
    println!("dumped {} passages and {} questions to {dump}", rows.len(), questions.len());
    Ok(())
}
