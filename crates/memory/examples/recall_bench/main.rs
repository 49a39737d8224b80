//! Recall benchmark: quality (recall@5/@10 of the evidence turn for ours,
//! keyword-only and embeddings-only, same run) on two generators — A
//! (`data.rs`: settings chosen on its even questions, reported on the odd
//! ones) and B (`data2.rs`: other templates, people, topics, a bilingual
//! English / Portuguese user; never used to choose anything) — import speed,
//! and recall latency at 100 000 messages.
//!
//! ```text
//! cargo build --workspace --all-targets && target/debug/examples/recall_bench \
//!     [--messages 8000] [--questions 400] [--latency-messages 100000] [--model DIR] [--hash] [--small] [--keep DIR]
//!     [--latency-only]
//! ```
//! `--small` (CI): 1 500 messages, no latency run. `--hash` uses the
//! hashing fake instead of all-MiniLM-L6-v2 (logic check only). `--keep DIR`
//! keeps each dataset's embedded index in DIR and reuses it on the next run
//! (same seed and size: the generators are deterministic).
//! `BENCH_MISSES=1` lists the questions ours or embeddings-only miss at @5
//! (A's tuning split and B); `BENCH_EXPERIMENTS=1` adds other fusions
//! (`experiments.rs`) beside ours. `BENCH_GRID=1` prints every point of
//! `grid.rs` on A's tuning split (`locomo_bench` prints the same points on
//! LoCoMo's tuning conversations).

mod data;
mod data2;
mod experiments;
mod grid;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use ledger::{Draft, EventBody, Ledger, LedgerOptions, MemoryKeyStore, Persona, HUMAN_ENTITY};
use memory::{
    import_rows, parse_conversation, rank, Candidates, Embedder, Fusion, HashingEmbedder, MemoryError, MemoryIndex,
    MiniLm, RecallSettings, Scope,
};

struct Args {
    messages: usize,
    questions: usize,
    latency_messages: usize,
    model: PathBuf,
    hash: bool,
    seed: u64,
    keep: Option<PathBuf>,
    latency_only: bool,
}

fn args() -> Args {
    let mut a = Args {
        messages: 8_000,
        questions: 400,
        latency_messages: 100_000,
        model: std::env::var_os("LEDGERMIND_MINILM_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| "/tmp/lm/models/all-MiniLM-L6-v2".into()),
        hash: false,
        seed: 7,
        keep: None,
        latency_only: false,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let val = |i: usize| argv.get(i + 1).cloned().unwrap_or_default();
        match argv[i].as_str() {
            "--messages" => { a.messages = val(i).parse().unwrap_or(a.messages); i += 1; }
            "--questions" => { a.questions = val(i).parse().unwrap_or(a.questions); i += 1; }
            "--latency-messages" => { a.latency_messages = val(i).parse().unwrap_or(0); i += 1; }
            "--model" => { a.model = val(i).into(); i += 1; }
            "--seed" => { a.seed = val(i).parse().unwrap_or(7); i += 1; }
            "--keep" => { a.keep = Some(val(i).into()); i += 1; }
            "--hash" => a.hash = true,
            "--latency-only" => a.latency_only = true,
            "--small" => { a.messages = 1_500; a.questions = 120; a.latency_messages = 0; }
            other => eprintln!("ignoring unknown argument {other}"),
        }
        i += 1;
    }
    a
}

/// The persona the generated conversations are held with.
const PERSONA: &str = "Ada";

async fn new_ledger(dir: &std::path::Path) -> Result<(Ledger, Persona), MemoryError> {
    let mut opts = LedgerOptions::new(dir.join("ledger.db"));
    opts.durable = false;
    let l = Ledger::open(opts, Arc::new(MemoryKeyStore::default())).await?;
    let id = uuid::Uuid::now_v7().to_string();
    let public_key = l.create_key(&id)?;
    let by_human = |body| Draft { entity_id: id.clone(), signer: HUMAN_ENTITY.into(), body };
    l.append_drafts(vec![
        by_human(EventBody::EntityKeyRegistered { entity_id: id.clone(), entity_kind: "persona".into(), public_key }),
        by_human(EventBody::PersonaCreated {
            persona_id: id.clone(),
            name: PERSONA.into(),
            short_description: String::new(),
            long_description: String::new(),
            model: "local:m".into(),
            is_system: false,
        }),
    ])
    .await?;
    let p = l.persona(&id).await?;
    Ok((l, p))
}

/// Real model for queries (one text), hashing vectors for bulk fills: the
/// latency run's 100 000 stored vectors cost the same to search either way.
struct LatencyEmbedder {
    query: Arc<dyn Embedder>,
    bulk: HashingEmbedder,
}

impl Embedder for LatencyEmbedder {
    fn dim(&self) -> usize {
        self.query.dim()
    }
    fn model_id(&self) -> String {
        "bench-latency".into()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, MemoryError> {
        if texts.len() == 1 {
            self.query.embed(texts)
        } else {
            self.bulk.embed(texts)
        }
    }
}

#[derive(Clone, Copy)]
struct Score {
    r5: f64,
    r10: f64,
}

fn evaluate(
    cands: &[(Candidates, bool)],
    evidence: &[i64],
    s: &RecallSettings,
    now: i64,
    split: Option<bool>,
) -> Score {
    evaluate_with(cands, evidence, split, |c| rank(c, s, now).into_iter().map(|(r, _)| r).collect())
}

/// Recall@5 and @10 of the evidence under any ranking (best first) of the
/// candidates; `split`: only the tuning (`Some(true)`) or held-out questions.
fn evaluate_with(
    cands: &[(Candidates, bool)],
    evidence: &[i64],
    split: Option<bool>,
    ranking: impl Fn(&Candidates) -> Vec<i64>,
) -> Score {
    let (mut h5, mut h10, mut n) = (0usize, 0usize, 0usize);
    for ((c, tune), &e) in cands.iter().zip(evidence) {
        if split.is_some_and(|t| t != *tune) {
            continue;
        }
        n += 1;
        if let Some(pos) = ranking(c).iter().take(10).position(|r| *r == e) {
            h10 += 1;
            if pos < 5 {
                h5 += 1;
            }
        }
    }
    let n = n.max(1) as f64;
    Score { r5: h5 as f64 / n, r10: h10 as f64 / n }
}

fn tune(
    cands: &[(Candidates, bool)],
    evidence: &[i64],
    now: i64,
    grid: &[RecallSettings],
) -> (RecallSettings, Score) {
    let mut best = (grid[0], Score { r5: -1.0, r10: -1.0 });
    for s in grid {
        let sc = evaluate(cands, evidence, s, now, Some(true));
        if sc.r5 + sc.r10 > best.1.r5 + best.1.r10 + 1e-9 {
            best = (*s, sc);
        }
    }
    best
}

/// Imports `d` into a new ledger in `dir` and `index` (keyword-searchable,
/// not embedded yet), printing the import speed.
async fn import_timed(
    d: &data::Dataset,
    dir: &Path,
    index: &MemoryIndex,
    label: &str,
) -> Result<(Ledger, Persona), Box<dyn std::error::Error>> {
    let (l, persona) = new_ledger(dir).await?;
    let file = data::to_import_json(d, PERSONA);
    let t = Instant::now();
    let rows = parse_conversation(file.as_bytes(), PERSONA)?;
    let report = import_rows(&l, index, &persona, rows, &|_, _| {}).await?;
    let import_s = t.elapsed().as_secs_f64();
    println!(
        "{label} (validate + sign + ledger + keyword index): {} messages in {:.2} s = {:.0} messages/s",
        report.imported,
        import_s,
        report.imported as f64 / import_s
    );
    Ok((l, persona))
}

/// Each question's candidates under the settings before neighbours (the query
/// embedded whole, no neighbours: every arm but ours ranks these) and
/// under ours, and its evidence row.
/// With `BENCH_GRID`, also each question's candidates for the grid (the
/// query embedded without and with its names). Last, for each of
/// `grid::name_arms` (ways of embedding the query's names), each
/// question's candidates read under that arm's settings.
type QuestionSet =
    (Vec<(Candidates, bool)>, Vec<i64>, Vec<(Candidates, bool)>, Vec<[Candidates; 2]>, Vec<Vec<(Candidates, bool)>>);

/// Imports `d` into a fresh ledger and index (or reopens the kept index),
/// embeds everything, and returns each question's candidates and evidence row.
async fn question_candidates(
    d: &data::Dataset,
    embedder: Arc<dyn Embedder>,
    keep: Option<&Path>,
) -> Result<QuestionSet, Box<dyn std::error::Error>> {
    let tmp = tempfile::tempdir()?;
    let dir = keep.unwrap_or(tmp.path());
    let reuse = dir.join("done").is_file();
    if keep.is_some() && !reuse && dir.exists() {
        std::fs::remove_dir_all(dir)?; // an interrupted run: start over
    }
    std::fs::create_dir_all(dir)?;
    let index = MemoryIndex::open(&dir.join("index.db")).await?;
    index.set_embedder(embedder.clone()).await?;
    if reuse {
        println!("reusing the embedded index in {}", dir.display());
    } else {
        import_timed(d, dir, &index, "import").await?;
        let t = Instant::now();
        let embedded = index.embed_all_pending().await?;
        let emb_s = t.elapsed().as_secs_f64();
        println!("embedding (background in the app): {embedded} messages in {emb_s:.1} s = {:.0} /s", embedded as f64 / emb_s);
        std::fs::write(dir.join("done"), b"")?;
    }
    let ids = index.public_ids().await?;
    let row_of: std::collections::HashMap<&str, i64> = ids.iter().map(|(r, id)| (id.as_str(), *r)).collect();
    let mut cands = Vec::new();
    let mut ours = Vec::new();
    let mut evidence = Vec::new();
    let mut for_grid = Vec::new();
    let name_arms = grid::name_arms();
    let mut by_names: Vec<Vec<(Candidates, bool)>> = vec![Vec::new(); name_arms.len()];
    for q in &d.questions {
        for ((_, s), out) in name_arms.iter().zip(&mut by_names) {
            index.set_settings(*s);
            out.push((index.candidates(&Scope::All, Some(PERSONA), &q.query, 100).await?, q.tune));
        }
        if std::env::var_os("BENCH_GRID").is_some() {
            index.set_settings(grid::candidate_settings(true));
            let without = index.candidates(&Scope::All, Some(PERSONA), &q.query, 100).await?;
            index.set_settings(grid::candidate_settings(false));
            for_grid.push([without, index.candidates(&Scope::All, Some(PERSONA), &q.query, 100).await?]);
        }
        index.set_settings(memory::PREVIOUS_SETTINGS);
        cands.push((index.candidates(&Scope::All, Some(PERSONA), &q.query, 100).await?, q.tune));
        index.set_settings(memory::DEFAULT_SETTINGS);
        ours.push((index.candidates(&Scope::All, Some(PERSONA), &q.query, 100).await?, q.tune));
        evidence.push(row_of.get(q.evidence.as_str()).copied().unwrap_or(-1));
    }
    // BENCH_DUMP=1: each question's query vector, evidence row and keyword
    // scores, one JSON line each, in `<keep>/questions.jsonl` (for offline
    // experiments with the vectors in `index.db`).
    if let (Some(dir), Some(_)) = (keep, std::env::var_os("BENCH_DUMP")) {
        let mut out = String::new();
        for ((q, (c, _)), e) in d.questions.iter().zip(&cands).zip(&evidence) {
            let v = embedder.embed(&[q.query.as_str()])?.remove(0);
            let line = serde_json::json!({
                "query": q.query, "evidence": e, "tune": q.tune, "portuguese": q.portuguese,
                "vector": v, "keyword": c.keyword_score.iter().map(|(r, s)| (r.to_string(), *s)).collect::<std::collections::HashMap<_, _>>(),
            });
            out.push_str(&line.to_string());
            out.push('\n');
        }
        std::fs::write(dir.join("questions.jsonl"), out)?;
    }
    index.close().await;
    Ok((cands, evidence, ours, for_grid, by_names))
}

fn pct(x: f64) -> String {
    format!("{:5.1} %", x * 100.0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = args();
    // BENCH_EMBED=IN:OUT embeds each line of IN and writes one JSON array per line to OUT.
    if let Some(spec) = std::env::var_os("BENCH_EMBED") {
        let spec = spec.to_string_lossy().into_owned();
        let (input, output) = spec.split_once(':').ok_or("BENCH_EMBED=IN:OUT")?;
        let m = MiniLm::load(&a.model)?;
        let text = std::fs::read_to_string(input)?;
        let mut out = String::new();
        for line in text.lines() {
            out.push_str(&serde_json::to_string(&m.embed(&[line])?.remove(0))?);
            out.push('\n');
        }
        std::fs::write(output, out)?;
        return Ok(());
    }
    let embedder: Arc<dyn Embedder> = if a.hash {
        Arc::new(HashingEmbedder::default())
    } else {
        let t = Instant::now();
        let m = MiniLm::load(&a.model)?;
        println!("model: all-MiniLM-L6-v2 loaded in {:.2} s", t.elapsed().as_secs_f64());
        Arc::new(m)
    };

    // ---------- quality ----------
    if !a.latency_only {
        quality(&a, &embedder).await?;
    }
    if a.latency_messages > 0 {
        latency(&a, embedder).await?;
    }
    Ok(())
}

async fn quality(a: &Args, embedder: &Arc<dyn Embedder>) -> Result<(), Box<dyn std::error::Error>> {
    let a_set = data::generate(a.seed, a.messages, a.questions);
    let b_set = data2::generate(a.seed, a.messages, a.questions);
    let mut sets = Vec::new();
    for (name, d) in [("A", &a_set), ("B", &b_set)] {
        println!(
            "\ndataset {name}: {} messages, {} questions (evidence = one old human turn), seed {}",
            d.turns.len(),
            d.questions.len(),
            a.seed
        );
        let keep = a.keep.as_ref().map(|k| k.join(format!("{name}-{}-{}-{}", a.seed, a.messages, embedder.model_id())));
        sets.push((name, question_candidates(d, embedder.clone(), keep.as_deref()).await?));
    }
    let (cands, evidence, _, for_grid, _) = &sets[0].1;
    if !for_grid.is_empty() {
        // Set A's tuning split only: B and A's held-out split choose nothing.
        for (label, s) in grid::points() {
            let (mut h5, mut h10, mut n) = (0, 0, 0);
            for ((g, (_, tune)), e) in for_grid.iter().zip(cands).zip(evidence) {
                if !*tune {
                    continue;
                }
                n += 1;
                let c = &g[usize::from(!s.names_by_keyword)];
                if let Some(pos) = rank(c, &s, a_set.now_ms).iter().take(10).position(|(r, _)| r == e) {
                    h10 += 1;
                    h5 += usize::from(pos < 5);
                }
            }
            println!("grid\t{label}\t{:.4}\t{:.4}", h5 as f64 / n as f64, h10 as f64 / n as f64);
        }
    }
    let now = a_set.now_ms;
    let mut grid = Vec::new();
    for wv in [0.3f32, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9] {
        for sat in [2.0f32, 4.0, 8.0] {
            for r in [0.0f32, 0.05, 0.15] {
                for n in [20usize, 50, 100] {
                    grid.push(RecallSettings {
                        fusion: Fusion::Scores,
                        vector_weight: wv,
                        keyword_weight: 1.0 - wv,
                        keyword_saturation: sat,
                        recency_weight: r,
                        candidates: n,
                        ..RecallSettings::SEED
                    });
                }
            }
        }
    }
    let kw_grid: Vec<RecallSettings> =
        [0.0f32, 0.05, 0.15].iter().map(|&r| RecallSettings { recency_weight: r, ..RecallSettings::SEED }.keyword_only()).collect();
    let vec_grid: Vec<RecallSettings> =
        [0.0f32, 0.05, 0.15].iter().map(|&r| RecallSettings { recency_weight: r, ..RecallSettings::SEED }.vector_only()).collect();
    let (best, best_tune) = tune(cands, evidence, now, &grid);
    let (kw, _) = tune(cands, evidence, now, &kw_grid);
    let (vv, _) = tune(cands, evidence, now, &vec_grid);
    println!(
        "\nbest score fusion on A's {} tuning questions: vector {:.2} / keyword {:.2}, saturation {}, recency {:.2}, candidates {} (R@5 {}, R@10 {})",
        a_set.questions.iter().filter(|q| q.tune).count(),
        best.vector_weight,
        best.keyword_weight,
        best.keyword_saturation,
        best.recency_weight,
        best.candidates,
        pct(best_tune.r5),
        pct(best_tune.r10)
    );
    let previous = memory::PREVIOUS_SETTINGS;
    // Rows whose label starts with "ours" rank the candidates made under
    // the defaults (turns' neighbours read).
    let rows = [
        ("ours (shipped defaults)", memory::DEFAULT_SETTINGS),
        ("ours without the speaker lift", RecallSettings { speaker_weight: 0.0, ..memory::DEFAULT_SETTINGS }),
        (
            "ours, questions as other turns",
            RecallSettings { answer_context: 0.0, question_penalty: 0.0, ..memory::DEFAULT_SETTINGS },
        ),
        ("ours without the date lift", RecallSettings { date_weight: 0.0, ..memory::DEFAULT_SETTINGS }),
        ("ours without the density correction", RecallSettings { density_weight: 0.0, ..memory::DEFAULT_SETTINGS }),
        ("ours without neighbours", RecallSettings { keyword_context: [0.0; 2], vector_context: [0.0; 2], ..memory::DEFAULT_SETTINGS }),
        (
            "ours, earlier weights (0.8/0.2 half at 4)",
            RecallSettings { vector_weight: 0.8, keyword_weight: 0.2, keyword_saturation: 4.0, ..memory::DEFAULT_SETTINGS },
        ),
        ("score fusion, best on A tuning split", best),
        ("before neighbours (0.8/0.2 half at 4)", previous),
        ("seed (RRF 0.7/0.3 k=60 rec=0.15)", RecallSettings::SEED),
        ("keyword only (FTS5 bm25)", kw),
        ("embeddings only (MiniLM cosine)", vv),
    ];
    let name_arms = grid::name_arms();
    for ((name, (cands, evidence, ours_cands, _, by_names)), d) in sets.iter().zip([&a_set, &b_set]) {
        let pick = |label: &str| if label.starts_with("ours") { ours_cands } else { cands };
        let split = (*name == "A").then_some(false);
        let n = d.questions.iter().filter(|q| split.is_none_or(|t| q.tune == t)).count();
        let what = if split.is_some() { "held-out split" } else { "all, never tuned on" };
        println!("\n{name}: {what} ({n} questions)            recall@5   recall@10");
        for (label, s) in rows {
            let sc = evaluate(pick(label), evidence, &s, d.now_ms, split);
            print!("  {label:<38} {}   {}", pct(sc.r5), pct(sc.r10));
            match split {
                Some(_) => {
                    let t = evaluate(pick(label), evidence, &s, d.now_ms, Some(true));
                    println!("   (tuning split {} / {})", pct(t.r5), pct(t.r10));
                }
                None => println!(),
            }
        }
        for ((label, s), arm) in name_arms.iter().zip(by_names) {
            let label = format!("ours, {label}");
            let sc = evaluate(arm, evidence, s, d.now_ms, split);
            print!("  {label:<38} {}   {}", pct(sc.r5), pct(sc.r10));
            match split {
                Some(_) => {
                    let t = evaluate(arm, evidence, s, d.now_ms, Some(true));
                    println!("   (tuning split {} / {})", pct(t.r5), pct(t.r10));
                }
                None => println!(),
            }
        }
        if std::env::var_os("BENCH_EXPERIMENTS").is_some() {
            for (label, wv, wk) in [("z-score 0.5/0.5", 0.5f32, 0.5f32), ("z-score 0.7/0.3", 0.7, 0.3), ("z-score 0.8/0.2", 0.8, 0.2)] {
                let sc = evaluate_with(cands, evidence, split, |c| experiments::zscore(c, 50, wv, wk));
                let tuning = split.map(|_| evaluate_with(cands, evidence, Some(true), |c| experiments::zscore(c, 50, wv, wk)));
                print!("  experiment {label:<27} {}   {}", pct(sc.r5), pct(sc.r10));
                match tuning {
                    Some(t) => println!("   (tuning split {} / {})", pct(t.r5), pct(t.r10)),
                    None => println!(),
                }
            }
        }
        // The questions ours or embeddings miss at @5: A's tuning split only
        // (looking at held-out questions would be tuning on them), and B.
        if std::env::var_os("BENCH_MISSES").is_some() {
            for (((q, (c, _)), (oc, _)), &e) in d.questions.iter().zip(cands).zip(ours_cands).zip(evidence) {
                if split.is_some() && !q.tune {
                    continue;
                }
                let pos = |s: &RecallSettings| rank(c, s, d.now_ms).iter().position(|(r, _)| *r == e);
                let ours = rank(oc, &rows[0].1, d.now_ms).iter().position(|(r, _)| *r == e);
                let emb = pos(&vv);
                if ours.is_none_or(|p| p >= 5) || emb.is_none_or(|p| p >= 5) {
                    println!("  miss: ours {ours:?} embeddings {emb:?} keyword {:?}  {}", pos(&kw), q.query);
                }
            }
        }
        if *name == "B" {
            for (lang, pt) in [("English", false), ("Portuguese", true)] {
                let in_lang: Vec<bool> = d.questions.iter().map(|q| q.portuguese == pt).collect();
                let only = |all: &[(Candidates, bool)]| -> Vec<(Candidates, bool)> {
                    all.iter().zip(in_lang.iter()).filter(|(_, p)| **p).map(|((c, _), _)| (c.clone(), false)).collect()
                };
                let (sub, ours_sub) = (only(cands), only(ours_cands));
                let ev: Vec<i64> = evidence.iter().zip(in_lang.iter()).filter(|(_, p)| **p).map(|(e, _)| *e).collect();
                print!("  {lang} questions ({}):", sub.len());
                for (label, s) in [("ours", rows[0].1), ("before neighbours", previous), ("keyword", kw), ("embeddings", vv)] {
                    let sc = evaluate(if label == "ours" { &ours_sub } else { &sub }, &ev, &s, d.now_ms, None);
                    print!("  {label} {} / {}", pct(sc.r5), pct(sc.r10));
                }
                println!();
                for ((label, s), arm) in name_arms.iter().zip(by_names) {
                    let sc = evaluate(&only(arm), &ev, s, d.now_ms, None);
                    println!("    {lang}, ours, {label}: {} / {}", pct(sc.r5), pct(sc.r10));
                }
            }
        }
    }

    Ok(())
}

/// Recall latency at `--latency-messages` (default 100 000).
async fn latency(a: &Args, embedder: Arc<dyn Embedder>) -> Result<(), Box<dyn std::error::Error>> {
    {
        let d = data::generate(a.seed + 1, a.latency_messages, 400);
        let tmp = tempfile::tempdir()?;
        let keep = a.keep.as_ref().map(|k| k.join(format!("L-{}-{}", a.seed + 1, a.latency_messages)));
        let dir = keep.as_deref().unwrap_or(tmp.path());
        let reuse = dir.join("persona").is_file();
        if keep.is_some() && !reuse && dir.exists() {
            std::fs::remove_dir_all(dir)?; // an interrupted run: start over
        }
        std::fs::create_dir_all(dir)?;
        let index = Arc::new(MemoryIndex::open(&dir.join("index.db")).await?);
        index.set_settings(memory::DEFAULT_SETTINGS);
        index
            .set_embedder(Arc::new(LatencyEmbedder { query: embedder.clone(), bulk: HashingEmbedder { dim: embedder.dim() } }))
            .await?;
        let persona_id = if reuse {
            println!("\nscale: reusing the index in {} (import speed not measured)", dir.display());
            std::fs::read_to_string(dir.join("persona"))?
        } else {
            let (l, persona) = import_timed(&d, dir, &index, "\nscale: import").await?;
            index.embed_all_pending().await?;
            println!("  ledger events: {}", l.event_count().await?);
            std::fs::write(dir.join("persona"), &persona.id)?;
            persona.id
        };
        let scope = Scope::for_viewer(&persona_id, false, &[]);
        let vectors = index.progress().embedded;
        // Ours and the settings before neighbours alternate query by query, so both see
        // the same machine load.
        let (mut times, mut before_times) = (Vec::new(), Vec::new());
        for (i, q) in d.questions.iter().cycle().take(220).enumerate() {
            for (s, out) in [(memory::DEFAULT_SETTINGS, &mut times), (memory::PREVIOUS_SETTINGS, &mut before_times)] {
                index.set_settings(s);
                let t = Instant::now();
                let r = index.recall(&scope, Some(PERSONA), &q.query, 10, d.now_ms).await?;
                if i >= 20 {
                    out.push(t.elapsed().as_secs_f64() * 1e3);
                }
                assert_eq!(r.mode, "hybrid");
            }
        }
        index.set_settings(memory::DEFAULT_SETTINGS);
        if std::env::var_os("BENCH_BREAKDOWN").is_some() {
            let mut t_embed = Vec::new();
            for q in d.questions.iter().take(50) {
                let t = Instant::now();
                embedder.embed(&[q.query.as_str()])?;
                t_embed.push(t.elapsed().as_secs_f64() * 1e3);
            }
            t_embed.sort_by(|a, b| a.total_cmp(b));
            println!("  breakdown: query embedding alone: p50 {:.1} ms", t_embed[25]);
            for (label, query) in [("vector path only", "?!"), ("both retrievers", "Where did Clara move to?")] {
                let mut t_all = Vec::new();
                for _ in 0..50 {
                    let t = Instant::now();
                    index.candidates(&scope, Some(PERSONA), query, 50).await?;
                    t_all.push(t.elapsed().as_secs_f64() * 1e3);
                }
                t_all.sort_by(|a, b| a.total_cmp(b));
                println!("  breakdown: candidates ({label}): p50 {:.1} ms", t_all[25]);
            }
        }
        println!(
            "  recall latency over {} queries (FTS5 + query embedding + sign-bit shortlist and int8 cosine over {} vectors + both scores + fusion), same run, alternated:",
            times.len(),
            vectors,
        );
        for (label, t) in [("ours", &mut times), ("before neighbours", &mut before_times)] {
            t.sort_by(|a, b| a.total_cmp(b));
            let p = |q: f64| t[((t.len() as f64 - 1.0) * q).round() as usize];
            println!("    {label:<18} p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms", p(0.5), p(0.95), p(1.0));
        }
        index.close().await;
    }
    Ok(())
}
