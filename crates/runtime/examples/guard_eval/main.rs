//! Evaluates the guard on the **test** split of the public corpus (never
//! trained or tuned on) and on the repository's own corpora, in one run,
//! three ways: the baseline (the guard before this work, a frozen copy in
//! `baseline/`), the current rules alone, and the current rules + the
//! trained classifier; then the p95 latency of each on 2 000-character inputs.
//!
//! Run: `cargo run -p runtime --example guard_eval -- CORPUS.jsonl MODEL.bin [REPO_CORPUS.jsonl ...]`
//! A text counts as detected (or as a false positive) at risk medium or high.
//!
//! `GUARD_EVAL_OLD=OLD_MODEL.bin` adds a column: the rules with another
//! classifier (the one trained before a corpus change), on the same rows in
//! the same run. An extra corpus whose rows carry a `split` (the LoCoMo rows
//! `guard-corpus.py --bench` writes) is read on its `test` rows only: the
//! ones no classifier trained or tuned on.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use runtime::guard::{analyze_using, Classifier, GuardOptions, RiskLevel};
use serde::Deserialize;

#[allow(dead_code, unused_imports, clippy::all)]
mod baseline;
/// What the frozen baseline's `crate::text` pointed at.
mod text {
    pub use runtime::text::{fold, fold_into};
}

#[derive(Deserialize)]
struct Row {
    text: String,
    attack: bool,
    #[serde(default)]
    family: String,
    #[serde(default)]
    category: String,
    #[serde(default)]
    lang: String,
    #[serde(default)]
    split: String,
}

#[derive(Default)]
struct Tally {
    n: usize,
    base: usize,
    rules: usize,
    old: usize,
    new: usize,
}

fn flagged(text: &str, options: GuardOptions, c: Option<&Classifier>) -> bool {
    analyze_using(text, options, c).risk_level >= RiskLevel::Medium
}

fn flagged_baseline(text: &str, options: GuardOptions) -> bool {
    let r = baseline::analyze_with(text, baseline::GuardOptions { max_chars: options.max_chars });
    r.risk_level >= baseline::RiskLevel::Medium
}

fn pct(k: usize, n: usize) -> f64 {
    100.0 * k as f64 / n.max(1) as f64
}

fn report(
    title: &str,
    rows: &[Row],
    key: impl Fn(&Row) -> String,
    (c, old): (&Classifier, Option<&Classifier>),
    options: GuardOptions,
    show_missed: usize,
) {
    let mut attacks: BTreeMap<String, Tally> = BTreeMap::new();
    let mut benign: BTreeMap<String, Tally> = BTreeMap::new();
    let (mut all_a, mut all_b) = (Tally::default(), Tally::default());
    let mut missed = Vec::new();
    let mut false_pos = Vec::new();
    for r in rows {
        let b = flagged_baseline(&r.text, options);
        let o = flagged(&r.text, options, None);
        let n = flagged(&r.text, options, Some(c));
        let od = old.is_some_and(|oc| flagged(&r.text, options, Some(oc)));
        let (m, all) = if r.attack { (&mut attacks, &mut all_a) } else { (&mut benign, &mut all_b) };
        for t in [m.entry(key(r)).or_default(), all] {
            t.n += 1;
            t.base += usize::from(b);
            t.rules += usize::from(o);
            t.old += usize::from(od);
            t.new += usize::from(n);
        }
        let short: String = r.text.chars().take(90).collect::<String>().replace('\n', " ");
        if r.attack && !n {
            missed.push(format!("[{}] {short}", key(r)));
        }
        if !r.attack && n {
            false_pos.push(format!("[{}] {short}", key(r)));
        }
    }
    println!("\n== {title}");
    let has_old = old.is_some();
    let line = |k: &str, t: &Tally| {
        let old = if has_old { format!(" {:>9.1}%", pct(t.old, t.n)) } else { String::new() };
        println!(
            "  {k:32} {:>6} {:>9.1}% {:>9.1}%{old} {:>9.1}%   ({} of {})",
            t.n,
            pct(t.base, t.n),
            pct(t.rules, t.n),
            pct(t.new, t.n),
            t.new,
            t.n
        );
    };
    let old_head = if has_old { format!(" {:>10}", "+old clf") } else { String::new() };
    println!("{:34} {:>6} {:>10} {:>10}{old_head} {:>10}", "attacks detected: family", "n", "baseline", "rules", "rules+clf");
    for (k, t) in &attacks {
        line(k, t);
    }
    line("ALL ATTACKS detected", &all_a);
    println!("{:34} {:>6} {:>10} {:>10}{old_head} {:>10}", "benign rated medium+: source", "n", "baseline", "rules", "rules+clf");
    for (k, t) in &benign {
        line(k, t);
    }
    line("ALL BENIGN flagged", &all_b);
    for m in missed.iter().take(show_missed) {
        println!("  missed: {m}");
    }
    for m in false_pos.iter().take(show_missed) {
        println!("  false positive: {m}");
    }
}

fn read(path: &str) -> Result<Vec<Row>, Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?)
}

/// p95 over every timed call, and p95 of each input's fastest of 5 calls
/// (its own cost, without the time a loaded machine kept the thread waiting).
fn p95(inputs: &[String], f: impl Fn(&str)) -> (Duration, Duration) {
    let mut times = Vec::new();
    let mut fastest = vec![Duration::MAX; inputs.len()];
    for _ in 0..5 {
        for (i, t) in inputs.iter().enumerate() {
            let at = Instant::now();
            f(t);
            let d = at.elapsed();
            times.push(d);
            fastest[i] = fastest[i].min(d);
        }
    }
    times.sort();
    fastest.sort();
    (times[(times.len() - 1) * 95 / 100], fastest[(fastest.len() - 1) * 95 / 100])
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, model] = args.as_slice() {
        if flag == "--score" {
            // One text per stdin line: the classifier's probability and the
            // current guard's verdict, for looking at single cases.
            let c = Classifier::from_bytes(&std::fs::read(model)?)?;
            for line in std::io::stdin().lines() {
                let line = line?.replace("\\n", "\n");
                let r = analyze_using(&line, GuardOptions::default(), Some(&c));
                println!("{:.3} {:?} {line}", c.score(&line).probability, r.risk_level);
            }
            return Ok(());
        }
    }
    let (corpus, model) = match args.as_slice() {
        [c, m, ..] => (c, m),
        _ => return Err("usage: guard_eval CORPUS.jsonl MODEL.bin [REPO_CORPUS.jsonl ...]".into()),
    };
    let c = Classifier::from_bytes(&std::fs::read(model)?)?;
    let old = match std::env::var_os("GUARD_EVAL_OLD").filter(|p| !p.is_empty()) {
        Some(p) => {
            println!("old classifier (column +old clf): {}", std::path::Path::new(&p).display());
            Some(Classifier::from_bytes(&std::fs::read(p)?)?)
        }
        None => None,
    };
    let pair = (&c, old.as_ref());
    let show: usize = std::env::var("GUARD_EVAL_SHOW").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    // GUARD_EVAL_SPLIT=validation looks at the split that tuning may use;
    // the figures to report are the default, "test".
    let split = std::env::var("GUARD_EVAL_SPLIT").unwrap_or_else(|_| "test".to_owned());
    let rows: Vec<Row> = read(corpus)?.into_iter().filter(|r| r.split == split).collect();
    // Documents have no length limit; messages longer than 8 000
    // characters would be flagged for their length alone, by both.
    let doc = GuardOptions { max_chars: None };
    let title = if split == "test" { "public corpus, TEST split (never trained or tuned on), by family".to_owned() } else { format!("public corpus, {split} split, by family") };
    report(&title, &rows, |r| r.family.clone(), pair, doc, show);
    report(&format!("public corpus, {split} split, by language"), &rows, |r| format!("{} ({})", r.lang, if r.attack { "attack" } else { "benign" }), pair, doc, 0);
    for path in &args[2..] {
        let mut repo = read(path)?;
        let split_rows = repo.iter().any(|r| !r.split.is_empty());
        if split_rows {
            repo.retain(|r| r.split == "test");
        }
        let what = if split_rows { "measured corpus, test rows only" } else { "regression" };
        report(&format!("repository corpus {path} ({what}; as `ledgermind guard` sees it)"), &repo, |r| r.category.clone(), pair, GuardOptions::default(), show);
        if repo.iter().any(|r| !r.lang.is_empty()) {
            report(&format!("repository corpus {path}, by language"), &repo, |r| format!("{} ({})", r.lang, if r.attack { "attack" } else { "benign" }), pair, GuardOptions::default(), 0);
        }
    }

    // Latency on 2 000-character inputs cut from the test split.
    let mut inputs = Vec::new();
    let mut buf = String::new();
    for r in &rows {
        buf.push_str(&r.text);
        buf.push(' ');
        while buf.chars().count() >= 2000 {
            let cut: String = buf.chars().take(2000).collect();
            buf = buf.chars().skip(2000).collect();
            inputs.push(cut);
        }
        if inputs.len() >= 200 {
            break;
        }
    }
    let opts = GuardOptions::default();
    std::hint::black_box(analyze_using(&inputs[0], opts, Some(&c)));
    std::hint::black_box(baseline::analyze(&inputs[0]));
    let base = p95(&inputs, |t| {
        std::hint::black_box(baseline::analyze(t));
    });
    let rules = p95(&inputs, |t| {
        std::hint::black_box(analyze_using(t, opts, None));
    });
    let new = p95(&inputs, |t| {
        std::hint::black_box(analyze_using(t, opts, Some(&c)));
    });
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "\nlatency, {} inputs x 2000 chars x 5 rounds (load average {}):",
        inputs.len(),
        load.split_whitespace().next().unwrap_or("?")
    );
    println!("  p95 of all calls:          baseline {:.3} ms, rules {:.3} ms, rules+classifier {:.3} ms", ms(base.0), ms(rules.0), ms(new.0));
    println!("  p95 of fastest-of-5:       baseline {:.3} ms, rules {:.3} ms, rules+classifier {:.3} ms", ms(base.1), ms(rules.1), ms(new.1));
    println!("  goal p95 <= 5 ms (all calls, rules+classifier): {}", if new.0 <= Duration::from_millis(5) { "met" } else { "NOT met" });
    Ok(())
}
