//! Detection and false-positive rates of the injection guard on labelled
//! corpora. In `guard_corpus.jsonl` every 4th line is held out from tuning;
//! `guard_holdout.jsonl` was written later and never tuned on at all.

use runtime::guard::{analyze_using, Action, Classifier, GuardOptions, RiskLevel, CLASSIFIER_FILE};
use serde::Deserialize;

#[derive(Deserialize)]
struct Case {
    text: String,
    attack: bool,
    category: String,
}

#[derive(Default)]
struct Tally {
    attacks: usize,
    detected: usize,
    benign: usize,
    false_positives: usize,
    missed: Vec<String>,
    flagged: Vec<String>,
}

impl Tally {
    fn add(&mut self, case: &Case) {
        self.add_with(case, None);
    }

    fn add_with(&mut self, case: &Case, classifier: Option<&Classifier>) {
        let report = analyze_using(&case.text, GuardOptions::default(), classifier);
        let short: String = case.text.chars().take(70).collect();
        if case.attack {
            self.attacks += 1;
            if report.risk_level >= RiskLevel::Medium {
                self.detected += 1;
            } else {
                self.missed.push(format!(
                    "[{}] {short:?} -> {:?}",
                    case.category, report.risk_level
                ));
            }
        } else {
            self.benign += 1;
            if report.risk_level >= RiskLevel::Medium || report.action == Action::Block {
                self.false_positives += 1;
                self.flagged.push(format!(
                    "{short:?} -> {:?} {:?}",
                    report.risk_level, report.findings
                ));
            }
        }
    }

    fn detection(&self) -> f64 {
        self.detected as f64 / self.attacks.max(1) as f64
    }

    fn fp_rate(&self) -> f64 {
        self.false_positives as f64 / self.benign.max(1) as f64
    }

    fn print(&self, name: &str) {
        println!(
            "{name}: detection {}/{} = {:.1}%, false positives {}/{} = {:.1}%",
            self.detected,
            self.attacks,
            100.0 * self.detection(),
            self.false_positives,
            self.benign,
            100.0 * self.fp_rate()
        );
        for m in &self.missed {
            println!("  missed  {m}");
        }
        for f in &self.flagged {
            println!("  flagged {f}");
        }
    }
}

fn corpus() -> Vec<Case> {
    parse(include_str!("guard_corpus.jsonl"))
}

fn parse(text: &str) -> Vec<Case> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("valid corpus line"))
        .collect()
}

#[test]
fn guard_meets_detection_and_false_positive_targets() {
    let cases = corpus();
    let attacks = cases.iter().filter(|c| c.attack).count();
    assert!(attacks >= 60, "need at least 60 attacks, have {attacks}");
    assert!(
        cases.len() - attacks >= 60,
        "need at least 60 benign messages"
    );

    let (mut all, mut tuned, mut held_out) = (Tally::default(), Tally::default(), Tally::default());
    for (i, case) in cases.iter().enumerate() {
        all.add(case);
        if i % 4 == 3 {
            held_out.add(case);
        } else {
            tuned.add(case);
        }
    }
    all.print("all");
    tuned.print("tuned");
    held_out.print("held-out (every 4th line)");
    assert!(
        all.detection() >= 0.90,
        "detection {:.3} < 0.90",
        all.detection()
    );
    assert!(
        all.fp_rate() <= 0.05,
        "false positives {:.3} > 0.05",
        all.fp_rate()
    );
}

#[test]
fn corpus_covers_every_category_in_english_and_portuguese() {
    let cases = corpus();
    for cat in [
        "role_override",
        "system_prompt_leak",
        "delimiter_injection",
        "encoding_evasion",
        "excessive_length",
        "suspicious_repetition",
        "privilege_escalation",
        "data_exfiltration",
    ] {
        assert!(
            cases.iter().any(|c| c.attack && c.category == cat),
            "no {cat} attack"
        );
    }
}

/// A second set written after the first round of fixes and never tuned on:
/// its rates are reported as measured; the floor only catches regressions.
#[test]
fn fresh_holdout_rates() {
    let mut t = Tally::default();
    for case in parse(include_str!("guard_holdout.jsonl")) {
        t.add(&case);
    }
    t.print("fresh hold-out (guard_holdout.jsonl)");
    assert!(
        t.detection() >= 0.80,
        "hold-out detection {:.3}",
        t.detection()
    );
    assert!(
        t.fp_rate() <= 0.10,
        "hold-out false positives {:.3}",
        t.fp_rate()
    );
}

/// The classifier that setup trains into the cache's models folder
/// (`LEDGERMIND_CACHE`, else `~/.cache/ledgermind`), if it is there.
fn trained() -> Option<Classifier> {
    let cache = std::env::var_os("LEDGERMIND_CACHE")
        .filter(|c| !c.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache/ledgermind")))?;
    let bytes = std::fs::read(cache.join("models").join(CLASSIFIER_FILE)).ok()?;
    Some(Classifier::from_bytes(&bytes).expect("the cached classifier file parses"))
}

/// The repository's own corpora stay regression tests once the classifier
/// joins the rules: it must not cost detection nor add false positives.
#[test]
fn the_trained_classifier_keeps_the_repository_corpora_passing() {
    let Some(c) = trained() else {
        eprintln!("no trained classifier in the setup cache (run scripts/setup.sh): rules-only tests cover the rest");
        return;
    };
    let (mut corpus_t, mut holdout_t) = (Tally::default(), Tally::default());
    for case in corpus() {
        corpus_t.add_with(&case, Some(&c));
    }
    for case in parse(include_str!("guard_holdout.jsonl")) {
        holdout_t.add_with(&case, Some(&c));
    }
    corpus_t.print("corpus, rules + classifier");
    holdout_t.print("hold-out, rules + classifier");
    assert!(corpus_t.detection() >= 0.95, "detection {:.3}", corpus_t.detection());
    assert!(corpus_t.fp_rate() <= 0.03, "false positives {:.3}", corpus_t.fp_rate());
    assert!(holdout_t.detection() >= 0.9, "hold-out detection {:.3}", holdout_t.detection());
    assert!(holdout_t.fp_rate() <= 0.05, "hold-out false positives {:.3}", holdout_t.fp_rate());
}

/// The kinds the issue lists as missed, and look-alikes that must pass, in
/// en/pt/es (written while fixing them: a regression set, not a measure).
#[test]
fn the_issues_missed_kinds_and_look_alikes() {
    let cases = parse(include_str!("guard_issue_cases.jsonl"));
    let mut rules = Tally::default();
    for case in &cases {
        rules.add(case);
    }
    rules.print("issue cases, rules alone");
    // Every look-alike passes on the rules alone.
    assert_eq!(rules.false_positives, 0, "{:?}", rules.flagged);
    assert!(rules.detection() >= 0.8, "rules alone: {:.3}", rules.detection());
    if let Some(c) = trained() {
        let mut both = Tally::default();
        for case in &cases {
            both.add_with(case, Some(&c));
        }
        both.print("issue cases, rules + classifier");
        assert!(both.detection() >= rules.detection());
        assert!(both.false_positives <= 1, "{:?}", both.flagged);
    }
}

/// Written after the classifier was trained (en/pt/es, the kinds the
/// product owner checks, different wording). First measured at 13/20
/// detected, 0/20 benign flagged; the rules added after that looked at its
/// misses, so it is a regression set now. The floors catch regressions.
#[test]
fn second_fresh_holdout_rates() {
    let cases = parse(include_str!("guard_fresh_holdout.jsonl"));
    let mut rules = Tally::default();
    for case in &cases {
        rules.add(case);
    }
    rules.print("second fresh hold-out, rules alone");
    assert!(rules.detection() >= 0.55, "rules alone: {:.3}", rules.detection());
    assert!(rules.fp_rate() <= 0.05, "rules alone false positives: {:.3}", rules.fp_rate());
    if let Some(c) = trained() {
        let mut both = Tally::default();
        for case in &cases {
            both.add_with(case, Some(&c));
        }
        both.print("second fresh hold-out, rules + classifier");
        assert!(both.detection() >= rules.detection());
        assert!(both.fp_rate() <= 0.05, "false positives {:.3}", both.fp_rate());
    }
}

/// A third set, written before the last rule changes and measured once
/// after them (en/pt/es, the product owner's kinds): 18/20 detected and
/// 1/20 benign flagged with the classifier, then; 17/20 once the classifier
/// stopped counting as a further signal beside the rules (so that imported
/// "[system]" rows stay medium). The floors catch regressions.
#[test]
fn third_fresh_holdout_rates() {
    let cases = parse(include_str!("guard_third_holdout.jsonl"));
    let mut rules = Tally::default();
    for case in &cases {
        rules.add(case);
    }
    rules.print("third fresh hold-out, rules alone");
    assert!(rules.detection() >= 0.75, "rules alone: {:.3}", rules.detection());
    assert!(rules.fp_rate() <= 0.05, "rules alone false positives: {:.3}", rules.fp_rate());
    if let Some(c) = trained() {
        let mut both = Tally::default();
        for case in &cases {
            both.add_with(case, Some(&c));
        }
        both.print("third fresh hold-out, rules + classifier");
        assert!(both.detection() >= 0.85, "detection {:.3}", both.detection());
        assert!(both.fp_rate() <= 0.05, "false positives {:.3}", both.fp_rate());
    }
}

/// A fourth set (41 attacks, 40 look-alikes; en/pt/es; the issue's kinds in
/// new wording, indirect ones inside documents and web pages), committed
/// before the public-data retraining it measures and never tuned on: no
/// rule or corpus change looked at its rows. Measured before that work:
/// rules alone 27/41 detected, 1/40 benign flagged; rules + the previous
/// classifier 30/41 and 1/40. After it (more public data, skip-bigrams,
/// short texts on their own validation cut-offs): 33/41 and 1/40, the same
/// through `ledgermind guard --json`. The floors only catch regressions.
#[test]
fn fourth_holdout_rates() {
    // The figure measured after the retraining (33/41 = 0.805).
    const FOURTH_FLOOR: f64 = 0.80;
    let cases = parse(include_str!("guard_fourth_holdout.jsonl"));
    let mut rules = Tally::default();
    for case in &cases {
        rules.add(case);
    }
    rules.print("fourth hold-out, rules alone");
    assert!(rules.detection() >= 0.6, "rules alone: {:.3}", rules.detection());
    assert!(rules.fp_rate() <= 0.05, "rules alone false positives: {:.3}", rules.fp_rate());
    if let Some(c) = trained() {
        let mut both = Tally::default();
        for case in &cases {
            both.add_with(case, Some(&c));
        }
        both.print("fourth hold-out, rules + classifier");
        assert!(both.detection() >= FOURTH_FLOOR, "detection {:.3}", both.detection());
        assert!(both.fp_rate() <= 0.05, "false positives {:.3}", both.fp_rate());
    }
}
