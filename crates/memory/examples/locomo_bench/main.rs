//! Recall on real long conversations (LoCoMo): each conversation goes
//! through the import path `ledgermind import-conversation` uses
//! (`parse_conversation` + `import_rows`; speaker A is the human, speaker
//! B the persona), is embedded, and each question of categories 1–4 is
//! asked through `MemoryIndex::recall` (the ranking replies and
//! `ledgermind recall` use). Recall@5/10/20 of the evidence turns (the
//! share of a question's evidence ids in the first k, averaged), on the
//! tuning conversations (the first three of the file) and the held-out ones
//! (the rest, never used to choose anything), overall and per category,
//! for ours, the settings before neighbours, each retriever alone and a plain
//! BM25 over the turns computed in the same run.
//!
//! ```text
//! target/debug/examples/locomo_bench [--data FILE]
//!     [--model DIR] [--keep DIR] [--settings JSON] [--tune-count 3]
//! ```
//! The data (snap-research/locomo, CC BY-NC 4.0) is read at run time and
//! never copied into the repository: `--data FILE`, else
//! `$LEDGERMIND_BENCH/locomo-tune.json`; without it the benchmark says so
//! and exits. `--keep DIR` keeps each conversation's embedded index and reuses
//! it (embedding is most of a first run). `--settings` adds an arm with
//! other `RecallSettings` (JSON; repeat it for more arms) for an
//! experiment. `BENCH_GRID=1` prints every point of `recall_bench/grid.rs`
//! on the tuning conversations; `BENCH_SHORT=1` runs only ours, ours
//! without the lift of the side a question names, ours without the lift of
//! the date a question names, the settings before
//! turns had neighbours and the ways of embedding the names (`grid::name_arms`,
//! `BENCH_SHARES=0.01,0.05` adds shares of common names left out). `BENCH_DUMP=1` writes
//! each question with its query embedding beside the kept index for
//! `replay/replay.py`.

mod bm25;
#[path = "../recall_bench/grid.rs"]
mod grid;
mod locomo;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use ledger::{Draft, EventBody, Ledger, LedgerOptions, MemoryKeyStore, Persona, HUMAN_ENTITY};
use memory::{import_rows, parse_conversation, Embedder, MemoryIndex, MiniLm, RecallSettings, Scope};

type Error = Box<dyn std::error::Error>;

struct Args {
    data: PathBuf,
    model: PathBuf,
    keep: Option<PathBuf>,
    settings: Vec<RecallSettings>,
    tune_count: usize,
}

fn args() -> Result<Args, Error> {
    let mut a = Args {
        // Third-party data lives outside the repository; where is the
        // person's to say.
        data: std::env::var_os("LEDGERMIND_BENCH").map(|d| PathBuf::from(d).join("locomo-tune.json")).unwrap_or_default(),
        model: std::env::var_os("LEDGERMIND_MINILM_DIR").map(PathBuf::from).unwrap_or_else(|| "models/all-MiniLM-L6-v2".into()),
        keep: None,
        settings: Vec::new(),
        tune_count: 3,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let val = pair.get(1).cloned().ok_or_else(|| format!("{} needs a value", pair[0]))?;
        match pair[0].as_str() {
            "--data" => a.data = val.into(),
            "--model" => a.model = val.into(),
            "--keep" => a.keep = Some(val.into()),
            "--settings" => a.settings.push(serde_json::from_str(&val)?),
            "--tune-count" => a.tune_count = val.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(a)
}

async fn new_ledger(dir: &Path, name: &str) -> Result<(Ledger, Persona), Error> {
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
            name: name.into(),
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

/// The conversation's index, imported and embedded (or reused from `--keep`).
async fn prepare(c: &locomo::Conversation, embedder: Arc<dyn Embedder>, root: &Path) -> Result<(MemoryIndex, Scope), Error> {
    let dir = root.join(format!("{}-{}", c.id, embedder.model_id().replace(['/', ':'], "_")));
    let id_file = dir.join("persona_id");
    if let Ok(id) = std::fs::read_to_string(&id_file) {
        let index = MemoryIndex::open(&dir.join("index.db")).await?;
        index.set_embedder(embedder).await?;
        index.embed_all_pending().await?;
        return Ok((index, Scope::Keys(vec![id])));
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?; // an interrupted run: start over
    }
    std::fs::create_dir_all(&dir)?;
    let index = MemoryIndex::open(&dir.join("index.db")).await?;
    let (ledger, persona) = new_ledger(&dir, &c.speaker_b).await?;
    let t = Instant::now();
    let rows = parse_conversation(locomo::to_import_json(c).as_bytes(), &persona.name)?;
    let report = import_rows(&ledger, &index, &persona, rows, &|_, _| {}).await?;
    let imported = t.elapsed().as_secs_f64();
    index.set_embedder(embedder).await?;
    let t = Instant::now();
    index.embed_all_pending().await?;
    println!("{}: {} turns imported in {:.2} s, embedded in {:.1} s", c.id, report.imported, imported, t.elapsed().as_secs_f64());
    ledger.close().await;
    std::fs::write(&id_file, &persona.id)?;
    Ok((index, Scope::Keys(vec![persona.id])))
}

const KS: [usize; 3] = [5, 10, 20];
const CATEGORIES: [(u8, &str); 4] = [(1, "multi-hop"), (2, "temporal"), (3, "open-domain"), (4, "single-hop")];
const PLAIN_BM25: &str = "plain BM25";

/// Sums of recall@k per (arm, held out?, category).
#[derive(Default)]
struct Tally {
    sums: BTreeMap<(String, bool, u8), ([f64; 3], usize)>,
}

impl Tally {
    fn add(&mut self, arm: &str, held: bool, cat: u8, evidence: &HashSet<String>, ids: &[String]) {
        let e = self.sums.entry((arm.to_owned(), held, cat)).or_default();
        for (j, k) in KS.iter().enumerate() {
            let found = ids.iter().take(*k).filter(|id| evidence.contains(*id)).collect::<HashSet<_>>().len();
            e.0[j] += found as f64 / evidence.len() as f64;
        }
        e.1 += 1;
    }

    /// Mean recall@k over the given categories, and the number of questions.
    fn mean(&self, arm: &str, held: bool, cats: &[u8]) -> ([f64; 3], usize) {
        let (mut s, mut n) = ([0.0; 3], 0);
        for c in cats {
            if let Some((x, m)) = self.sums.get(&(arm.to_owned(), held, *c)) {
                for j in 0..3 {
                    s[j] += x[j];
                }
                n += m;
            }
        }
        (s.map(|x| x / n.max(1) as f64), n)
    }
}

/// BENCH_DUMP=1 (with `--keep`): each question of categories 1-4 as one
/// JSON line in `questions.jsonl` beside the kept index, with the query's
/// embedding as recall makes it (the names in at least 2 % of the turns,
/// and at least 10, left out), for an offline replay of the ranking.
fn dump(c: &locomo::Conversation, held: bool, embedder: &Arc<dyn Embedder>, dir: &Path) -> Result<(), Error> {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(dir.join("questions.jsonl"))?);
    let needed = memory::COMMON_NAME_MIN_ITEMS.max((0.02 * c.turns.len() as f64).ceil() as i64);
    let common = |name: &str| c.turns.iter().filter(|t| t.text.contains(name)).count() as i64 >= needed;
    for q in c.questions.iter().filter(|q| (1..=4).contains(&q.category)) {
        let meaning = memory::without_names_if(&q.text, common);
        let v = embedder.embed(&[meaning.as_str()])?.remove(0);
        let line = serde_json::json!({
            "text": q.text, "meaning": meaning, "category": q.category, "held": held,
            "evidence": q.evidence, "vector": v,
        });
        writeln!(out, "{line}")?;
    }
    Ok(())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Error> {
    let a = args()?;
    if !a.data.is_file() {
        println!(
            "LoCoMo data not found at {:?}: nothing measured. Pass --data FILE, or LEDGERMIND_BENCH=DIR holding \
             locomo-tune.json (the snap-research/locomo JSON, kept outside the repository).",
            a.data.display()
        );
        return Ok(());
    }
    let convs = locomo::load(&a.data)?;
    let ours = memory::DEFAULT_SETTINGS;
    let mut arms: Vec<(String, RecallSettings)> = vec![
        ("ours".into(), ours),
        ("ours, no speaker weight".into(), RecallSettings { speaker_weight: 0.0, ..ours }),
        ("ours, questions as other turns".into(), RecallSettings { answer_context: 0.0, question_penalty: 0.0, ..ours }),
        ("ours, no date lift".into(), RecallSettings { date_weight: 0.0, ..ours }),
        ("before neighbours".into(), memory::PREVIOUS_SETTINGS),
    ];
    // Ours with the query's names embedded, all left out, and the common
    // ones left out at each share of `BENCH_SHARES`.
    arms.extend(grid::name_arms().into_iter().map(|(n, s)| (format!("ours, {n}"), s)));
    // BENCH_SHORT=1: only those (plain BM25 is always printed), for a
    // loaded machine where each arm costs minutes.
    if std::env::var_os("BENCH_SHORT").is_none() {
        arms.extend([
            ("keyword only".into(), ours.keyword_only()),
            ("embeddings only".into(), RecallSettings { density_weight: 0.0, ..ours.vector_only() }),
            ("ours, no neighbours".into(), RecallSettings { keyword_context: [0.0; 2], vector_context: [0.0; 2], ..ours }),
            ("ours, no density".into(), RecallSettings { density_weight: 0.0, ..ours }),
        ]);
    }
    for (i, s) in a.settings.iter().enumerate() {
        arms.push((format!("--settings {}", i + 1), *s));
    }
    let embedder: Arc<dyn Embedder> = Arc::new(MiniLm::load(&a.model)?);
    let mut tally = Tally::default();
    // BENCH_GRID=1: every point of `grid::points` on the tuning conversations only.
    let grid_points = if std::env::var_os("BENCH_GRID").is_some() { grid::points() } else { Vec::new() };
    let mut grid_tally = Tally::default();
    let mut latency = Vec::new();
    let mut asked = [0usize; 2];
    let mut unanswerable = 0;
    let scratch = tempfile::tempdir()?;
    let root = a.keep.clone().unwrap_or_else(|| scratch.path().to_path_buf());
    for (ci, c) in convs.iter().enumerate() {
        let held = ci >= a.tune_count;
        let (index, scope) = prepare(c, embedder.clone(), &root).await?;
        let known: HashSet<&str> = c.turns.iter().map(|t| t.dia_id.as_str()).collect();
        let bm25 = bm25::Bm25::new(&c.turns.iter().map(|t| format!("{}: {}", t.speaker, t.text)).collect::<Vec<_>>());
        let now = memory::now_ms();
        let public = if grid_points.is_empty() || held { Default::default() } else { index.public_ids().await? };
        for q in c.questions.iter().filter(|q| (1..=4).contains(&q.category)) {
            let evidence: HashSet<String> = q.evidence.iter().filter(|e| known.contains(e.as_str())).cloned().collect();
            if evidence.is_empty() {
                unanswerable += 1;
                continue;
            }
            asked[held as usize] += 1;
            for (name, s) in &arms {
                index.set_settings(*s);
                let t = Instant::now();
                let hits = index.recall(&scope, Some(&c.speaker_b), &q.text, 20, now).await?.hits;
                if name == "ours" {
                    latency.push(t.elapsed().as_secs_f64() * 1e3);
                }
                let ids: Vec<String> = hits.iter().map(|h| h.public_id().to_owned()).collect();
                tally.add(name, held, q.category, &evidence, &ids);
            }
            let ids: Vec<String> = bm25.rank(&q.text).into_iter().take(20).map(|i| c.turns[i].dia_id.clone()).collect();
            tally.add(PLAIN_BM25, held, q.category, &evidence, &ids);
            if !held && !grid_points.is_empty() {
                let mut by_names = Vec::new();
                for names in [true, false] {
                    index.set_settings(grid::candidate_settings(names));
                    by_names.push(index.candidates(&scope, Some(&c.speaker_b), &q.text, 50).await?);
                }
                for (label, s) in &grid_points {
                    let c = &by_names[usize::from(!s.names_by_keyword)];
                    let ids: Vec<String> =
                        memory::rank(c, s, now).into_iter().take(20).filter_map(|(r, _)| public.get(&r).cloned()).collect();
                    grid_tally.add(label, false, q.category, &evidence, &ids);
                }
            }
        }
        if let (Some(keep), Some(_)) = (&a.keep, std::env::var_os("BENCH_DUMP")) {
            dump(c, held, &embedder, &keep.join(format!("{}-{}", c.id, embedder.model_id().replace(['/', ':'], "_"))))?;
        }
        index.close().await;
    }
    let split = |held: bool| {
        convs.iter().enumerate().filter(|(i, _)| (*i >= a.tune_count) == held).map(|(_, c)| c.id.as_str()).collect::<Vec<_>>().join(", ")
    };
    println!(
        "\nLoCoMo evidence recall, categories 1-4 ({} questions whose evidence names no turn left out); data {}\n\
         tuning: {} ({} questions) | held out: {} ({} questions)\n",
        unanswerable,
        a.data.display(),
        split(false),
        asked[0],
        split(true),
        asked[1]
    );
    let mut names: Vec<String> = arms.iter().map(|(n, _)| n.clone()).collect();
    names.push(PLAIN_BM25.into());
    println!("{:<36} {:>22}   {:>22}", "recall @5/@10/@20", "tuning", "held out");
    let all: Vec<u8> = CATEGORIES.iter().map(|c| c.0).collect();
    let fmt = |x: [f64; 3]| format!("{:.3} / {:.3} / {:.3}", x[0], x[1], x[2]);
    for name in &names {
        println!("{:<36} {:>22}   {:>22}", name, fmt(tally.mean(name, false, &all).0), fmt(tally.mean(name, true, &all).0));
    }
    for held in [false, true] {
        println!("\nrecall@10 per category, {}", if held { "held out" } else { "tuning" });
        print!("{:<36}", "");
        for (c, name) in CATEGORIES {
            print!(" {:>18}", format!("{c} {name} ({})", tally.mean("ours", held, &[c]).1));
        }
        println!();
        for name in &names {
            print!("{name:<36}");
            for (c, _) in CATEGORIES {
                print!(" {:>18.3}", tally.mean(name, held, &[c]).0[1]);
            }
            println!();
        }
    }
    for (label, _) in &grid_points {
        let (all, n) = grid_tally.mean(label, false, &all);
        let cats: Vec<String> = CATEGORIES.iter().map(|(c, _)| format!("{:.3}", grid_tally.mean(label, false, &[*c]).0[1])).collect();
        println!("grid\t{label}\t{n}\t{:.4}\t{:.4}\t{}", all[0], all[1], cats.join("\t"));
    }
    latency.sort_by(f64::total_cmp);
    println!(
        "\nours: recall latency over {} questions (~{} turns per conversation): p50 {:.1} ms, p95 {:.1} ms",
        latency.len(),
        convs.iter().map(|c| c.turns.len()).sum::<usize>() / convs.len().max(1),
        percentile(&latency, 0.5),
        percentile(&latency, 0.95)
    );
    for (name, s) in &arms {
        println!("{name} = {}", serde_json::to_string(s)?);
    }
    Ok(())
}
