//! Trains the guard's classifier on the public corpus written by
//! `scripts/guard-corpus.py`, deterministically: the same corpus gives the
//! same file, byte for byte. Only the `train` split is learnt from; the
//! thresholds are chosen on `validation`; `test` is never read.
//!
//! Run: `cargo run -p runtime --example guard_train -- CORPUS.jsonl MODELS_DIR`

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::PathBuf;

use runtime::guard::classifier::{text_windows, train, Example, Thresholds, WINDOW};
use runtime::guard::CLASSIFIER_FILE;
use serde::Deserialize;

#[derive(Deserialize)]
struct Row {
    text: String,
    attack: bool,
    family: String,
    split: String,
    #[serde(default)]
    injection: Option<String>,
    #[serde(default)]
    context: Option<String>,
}

/// At most `n` windows, evenly spread over the text.
fn spread(mut w: Vec<Vec<u32>>, n: usize) -> Vec<Vec<u32>> {
    if w.len() <= n {
        return w;
    }
    let len = w.len();
    let keep: HashSet<usize> = (0..n).map(|i| i * (len - 1) / (n - 1).max(1)).collect();
    let mut i = 0;
    w.retain(|_| {
        i += 1;
        keep.contains(&(i - 1))
    });
    w
}

/// The lowest threshold at which no benign family (a map's entry) has more
/// than `rate` of its texts at or above it.
fn threshold(benign: &BTreeMap<String, Vec<f32>>, rate: f64) -> f32 {
    let mut t = 0.0f32;
    for probs in benign.values() {
        let mut p = probs.clone();
        p.sort_by(|a, b| b.total_cmp(a));
        let allowed = (rate * p.len() as f64).floor() as usize;
        if let Some(&v) = p.get(allowed) {
            // Just above the first text that would exceed the allowance.
            t = t.max(v + 1e-4);
        }
    }
    t.min(0.999)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [corpus, out_dir] = args.as_slice() else {
        return Err("usage: guard_train CORPUS.jsonl MODELS_DIR".into());
    };
    let text = std::fs::read_to_string(corpus)?;
    let rows: Vec<Row> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    let mut seen = HashSet::new();
    let mut examples = Vec::new();
    let mut push = |t: &str, attack: bool, examples: &mut Vec<Example>| {
        if !seen.insert((t.to_owned(), attack)) {
            return;
        }
        for f in spread(text_windows(t), 8) {
            examples.push(Example { features: f, attack });
        }
    };
    for r in rows.iter().filter(|r| r.split == "train") {
        match (&r.injection, &r.context) {
            // An indirect injection: the injected part is the attack, the
            // document around it is ordinary text.
            (Some(inj), Some(ctx)) if r.attack => {
                push(inj, true, &mut examples);
                push(ctx, false, &mut examples);
            }
            _ => push(&r.text, r.attack, &mut examples),
        }
    }
    let attacks = examples.iter().filter(|e| e.attack).count();
    println!(
        "training on {} windows ({attacks} attack, {} benign) from the train split",
        examples.len(),
        examples.len() - attacks
    );
    let mut model = train(&examples, 6);

    // Validation scores by family, split by length: a short message is
    // judged on a few words, so its cut-offs allow fewer false positives.
    let mut benign: [BTreeMap<String, Vec<f32>>; 2] = Default::default();
    let mut attack: [BTreeMap<String, Vec<f32>>; 2] = Default::default();
    for r in rows.iter().filter(|r| r.split == "validation") {
        let s = model.score(&r.text);
        let short = usize::from(s.tokens <= WINDOW);
        let m = if r.attack { &mut attack[short] } else { &mut benign[short] };
        m.entry(r.family.clone()).or_default().push(s.probability);
    }
    let ordered = |lo: f32, me: f32, hi: f32| {
        let lo = lo.max(0.3);
        let me = me.max(lo + 0.01);
        (lo, me, hi.max(me + 0.01))
    };
    // Longer texts are fewer per family (a few dozen documents each): one
    // pool, so that one family's two texts do not set the cut-off alone.
    let pooled: BTreeMap<String, Vec<f32>> =
        std::iter::once(("all".to_owned(), benign[0].values().flatten().copied().collect())).collect();
    let (low, medium, high) = ordered(threshold(&pooled, 0.05), threshold(&pooled, 0.01), threshold(&pooled, 0.003));
    let (short_low, short_medium, short_high) =
        ordered(threshold(&benign[1], 0.05), threshold(&benign[1], 0.005), threshold(&benign[1], 0.001));
    let t = Thresholds { low, medium, high, short_low, short_medium, short_high };
    model.thresholds = t;
    println!("thresholds (validation): long texts low {low:.3} medium {medium:.3} high {high:.3}; one-window texts low {short_low:.3} medium {short_medium:.3} high {short_high:.3}");
    println!("validation, classifier alone, share at or above medium:");
    for (i, name) in ["longer texts", "one-window texts"].iter().enumerate() {
        let cut = if i == 0 { medium } else { short_medium };
        println!(" {name}:");
        for (fam, p) in attack[i].iter().chain(benign[i].iter()) {
            let n = p.iter().filter(|&&v| v >= cut).count();
            println!("  {fam:28} {n:>4}/{:<4} {:5.1}%", p.len(), 100.0 * n as f64 / p.len().max(1) as f64);
        }
    }

    let dir = PathBuf::from(out_dir);
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(CLASSIFIER_FILE);
    let tmp = dir.join(format!(".{CLASSIFIER_FILE}.partial"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&model.to_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    println!("wrote {}", path.display());
    Ok(())
}
