//! How the router treats commands and look-alike questions, on a labelled set
//! in English and Portuguese (`routing_set.jsonl`, written for this; the
//! `held-out` half was never used to tune the router). A command is
//! recognised when its tool is offered to the planner; a question is taken
//! for a command when any tool is offered for it.
//! Run with `--nocapture` to see the rates and the misses.

use runtime::router::route;
use runtime::{Role, ToolRegistry};
use serde::Deserialize;

#[derive(Deserialize)]
struct Case {
    text: String,
    tool: Option<String>,
    lang: String,
    split: String,
}

#[derive(Default)]
struct Tally {
    commands: usize,
    recognised: usize,
    questions: usize,
    taken: usize,
    misses: Vec<String>,
}

fn tally(cases: &[&Case]) -> Tally {
    let registry = ToolRegistry::builtin();
    let offered: Vec<&str> = registry.offered(Role::Persona, &|_| true).iter().map(|t| t.name.as_str()).collect();
    let mut t = Tally::default();
    for case in cases {
        let routing = route(&case.text, &offered);
        match &case.tool {
            Some(tool) => {
                t.commands += 1;
                if routing.tools.contains(&tool.as_str()) {
                    t.recognised += 1;
                } else {
                    t.misses.push(format!("command not recognised [{}]: {:?} → {:?} (wanted {tool})", case.lang, case.text, routing.tools));
                }
            }
            None => {
                t.questions += 1;
                if !routing.tools.is_empty() {
                    t.taken += 1;
                    t.misses.push(format!("question taken for a command [{}]: {:?} → {:?}", case.lang, case.text, routing.tools));
                }
            }
        }
    }
    t
}

#[test]
fn commands_are_recognised_and_questions_are_left_alone() {
    let cases: Vec<Case> = include_str!("routing_set.jsonl")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("a labelled case"))
        .collect();
    let mut all = Tally::default();
    for split in ["tune", "held-out"] {
        let part: Vec<&Case> = cases.iter().filter(|c| c.split == split).collect();
        let t = tally(&part);
        println!(
            "{split}: commands recognised {}/{} = {:.1}%, questions taken for commands {}/{} = {:.1}%",
            t.recognised,
            t.commands,
            100.0 * t.recognised as f64 / t.commands as f64,
            t.taken,
            t.questions,
            100.0 * t.taken as f64 / t.questions as f64
        );
        for m in &t.misses {
            println!("  {m}");
        }
        all.commands += t.commands;
        all.recognised += t.recognised;
        all.questions += t.questions;
        all.taken += t.taken;
    }
    let recognised = all.recognised as f64 / all.commands as f64;
    let taken = all.taken as f64 / all.questions as f64;
    println!("all: commands recognised {:.1}%, questions taken for commands {:.1}%", 100.0 * recognised, 100.0 * taken);
    assert!(recognised >= 0.95, "commands recognised {:.1}% < 95%", 100.0 * recognised);
    assert!(taken <= 0.02, "questions taken for commands {:.1}% > 2%", 100.0 * taken);
}
