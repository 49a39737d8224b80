//! The safety net (seed 000, decision #6): a risk score for every proposed
//! action and the policy that says whether it must, should or need not be
//! simulated first. Simulations themselves run in the app, against a
//! scratch copy of the ledger's state (nothing is committed).

use runtime::ToolCategory;
use serde::Serialize;
use serde_json::Value;

use crate::affordances::Intent;

/// Above this a simulation is required.
pub const REQUIRED_ABOVE: f32 = 0.7;
/// Above this a simulation is recommended.
pub const RECOMMENDED_ABOVE: f32 = 0.5;
/// Below this it is skipped.
pub const SKIP_BELOW: f32 = 0.3;

/// Kinds that always need a simulation, whatever their score.
pub const CRITICAL_KINDS: &[&str] = &["delete_all_memories", "submit:withdraw"];
/// Kinds that never do (they change nothing binding).
pub const SAFE_KINDS: &[&str] = &["query", "write_note", "bookmark", "log_reasoning", "verify", "simulate", "search_items"];

/// What the policy asks for before an action runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SimulationLevel {
    Required,
    Recommended,
    /// Between the thresholds: allowed, not asked for.
    Optional,
    Skipped,
}

/// An action's risk and what the policy makes of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RiskAssessment {
    /// `tool`, or `submit:<intent>` for a submitted intent.
    pub kind: String,
    pub score: f32,
    pub critical: bool,
    /// The persona has never carried out an action of this kind.
    pub first_time: bool,
    pub level: SimulationLevel,
}

/// The facts about a tool the score depends on.
#[derive(Debug, Clone, Copy)]
pub struct ToolFacts<'a> {
    pub name: &'a str,
    pub category: ToolCategory,
    /// The registry's base risk (0.0–1.0).
    pub base_risk: f32,
}

/// The action's kind: submitted intents are told apart by their intent.
pub fn kind_of(tool: &str, args: &Value) -> String {
    match (tool, args.get("intent").and_then(Value::as_str)) {
        ("submit", Some(intent)) => format!("submit:{}", intent.trim().to_lowercase()),
        _ => tool.to_owned(),
    }
}

/// Risk by tool category, kind and arguments. The registry's base risk
/// is the floor; arguments can only raise it.
pub fn risk_score(tool: ToolFacts<'_>, args: &Value) -> f32 {
    let mut score = tool.base_risk;
    score = score.max(match tool.category {
        ToolCategory::Read => 0.0,
        ToolCategory::External => 0.1,
        ToolCategory::Write => 0.2,
        ToolCategory::Destructive => 0.6,
    });
    if tool.name == "submit" {
        score = score.max(match Intent::parse(args) {
            Ok(Intent::Withdraw { .. }) => 0.9,
            Ok(Intent::Commit { .. }) => 0.55,
            Ok(Intent::Fulfil { .. }) => 0.35,
            // An unusable intent is rejected before it does anything.
            Err(_) => 0.3,
        });
    }
    // Long free text in a binding act is more to get wrong.
    let words = args.to_string().split_whitespace().count();
    if tool.category != ToolCategory::Read && words > 60 {
        score += 0.1;
    }
    score.clamp(0.0, 1.0)
}

/// The seed's policy: required above 0.7 or for a critical kind;
/// skipped for a safe kind; recommended above 0.5 or the first time the
/// persona does this kind of action; skipped below 0.3.
pub fn policy(kind: &str, score: f32, first_time: bool) -> SimulationLevel {
    if score > REQUIRED_ABOVE || CRITICAL_KINDS.contains(&kind) {
        SimulationLevel::Required
    } else if SAFE_KINDS.contains(&kind) {
        SimulationLevel::Skipped
    } else if score > RECOMMENDED_ABOVE || first_time {
        SimulationLevel::Recommended
    } else if score < SKIP_BELOW {
        SimulationLevel::Skipped
    } else {
        SimulationLevel::Optional
    }
}

/// Whether the first action of this kind is told apart: reads and safe
/// kinds change nothing binding, so they are never "the first time".
pub fn tracks_first_time(kind: &str, category: ToolCategory) -> bool {
    category != ToolCategory::Read && !SAFE_KINDS.contains(&kind)
}

/// `first_time`: the persona has no executed action of this kind yet (the
/// app reads it from the ledger's `action_executed` events).
pub fn assess(tool: ToolFacts<'_>, args: &Value, first_time: bool) -> RiskAssessment {
    let kind = kind_of(tool.name, args);
    let score = risk_score(tool, args);
    let first_time = first_time && tracks_first_time(&kind, tool.category);
    RiskAssessment {
        critical: CRITICAL_KINDS.contains(&kind.as_str()),
        level: policy(&kind, score, first_time),
        first_time,
        kind,
        score,
    }
}

pub use ledger::SimulatedChanges;

/// One English line per change, for the model and the logs.
pub fn change_lines(c: &SimulatedChanges) -> Vec<String> {
    let mut out = Vec::new();
    let mut push = |label: &str, v: &[String]| out.extend(v.iter().map(|x| format!("{label} {x}")));
    push("+ item", &c.items_added);
    push("- item", &c.items_removed);
    push("+ obligation", &c.obligations_added);
    push("✓ obligation closed:", &c.obligations_closed);
    push("+ bookmark", &c.bookmarks_added);
    out
}

/// The seed's recommendation: proceed, unless the action would remove or
/// close several things at once (look again, perhaps modify).
pub fn recommendation(c: &SimulatedChanges) -> &'static str {
    if c.items_removed.len() > 1 || c.obligations_closed.len() > 1 {
        "modify"
    } else {
        "proceed"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn facts(name: &str, category: ToolCategory, base_risk: f32) -> ToolFacts<'_> {
        ToolFacts { name, category, base_risk }
    }

    #[test]
    fn the_policy_thresholds_are_the_seeds() {
        assert_eq!(policy("x", 0.71, false), SimulationLevel::Required);
        assert_eq!(policy("x", 0.7, false), SimulationLevel::Recommended);
        assert_eq!(policy("x", 0.51, false), SimulationLevel::Recommended);
        assert_eq!(policy("x", 0.5, false), SimulationLevel::Optional);
        assert_eq!(policy("x", 0.3, false), SimulationLevel::Optional);
        assert_eq!(policy("x", 0.29, false), SimulationLevel::Skipped);
        // Critical kinds are required at any score, safe kinds skipped.
        assert_eq!(policy("delete_all_memories", 0.0, false), SimulationLevel::Required);
        assert_eq!(policy("submit:withdraw", 0.1, false), SimulationLevel::Required);
        assert_eq!(policy("write_note", 0.6, false), SimulationLevel::Skipped);
    }

    #[test]
    fn the_first_time_of_a_kind_is_recommended_a_simulation() {
        // "Recomendada se: risk > 0.5 OU primeira vez fazendo ação".
        assert_eq!(policy("x", 0.5, true), SimulationLevel::Recommended);
        assert_eq!(policy("x", 0.1, true), SimulationLevel::Recommended);
        // Required stays required; a safe kind is never worth simulating.
        assert_eq!(policy("x", 0.9, true), SimulationLevel::Required);
        assert_eq!(policy("query", 0.0, true), SimulationLevel::Skipped);
        let submit = facts("submit", ToolCategory::Write, 0.5);
        let fulfil = json!({"intent": "fulfil", "payload": {"obligation_id": "r1"}});
        let first = assess(submit, &fulfil, true);
        assert_eq!((first.level, first.first_time), (SimulationLevel::Recommended, true));
        let again = assess(submit, &fulfil, false);
        assert_eq!((again.level, again.first_time), (SimulationLevel::Optional, false));
    }

    #[test]
    fn scores_follow_category_kind_and_arguments() {
        let none = json!({});
        assert_eq!(assess(facts("search_items", ToolCategory::Read, 0.0), &none, false).level, SimulationLevel::Skipped);
        assert_eq!(assess(facts("save_movie", ToolCategory::Write, 0.2), &json!({"title": "Heat"}), false).level, SimulationLevel::Skipped);
        let delete = assess(facts("delete_memory", ToolCategory::Destructive, 0.6), &json!({"item_id": "a"}), false);
        assert_eq!(delete.level, SimulationLevel::Recommended);
        let all = assess(facts("delete_all_memories", ToolCategory::Destructive, 0.95), &none, false);
        assert!(all.critical && all.level == SimulationLevel::Required);
        let submit = facts("submit", ToolCategory::Write, 0.5);
        let withdraw = assess(submit, &json!({"intent": "withdraw", "payload": {"obligation_id": "r1", "reason": "no"}}), false);
        assert_eq!((withdraw.kind.as_str(), withdraw.level), ("submit:withdraw", SimulationLevel::Required));
        let commit = assess(submit, &json!({"intent": "commit", "payload": {"text": "Call Ana", "due": "2030-01-01T00:00:00Z"}}), false);
        assert_eq!(commit.level, SimulationLevel::Recommended);
        let fulfil = assess(submit, &json!({"intent": "fulfil", "payload": {"obligation_id": "r1"}}), false);
        assert_eq!(fulfil.level, SimulationLevel::Optional);
        // A long binding text raises the score.
        let long = json!({"content": "word ".repeat(80)});
        assert!(risk_score(facts("save_note", ToolCategory::Write, 0.2), &long) > 0.2);
        assert_eq!(risk_score(facts("search_items", ToolCategory::Read, 0.0), &long), 0.0);
    }

    #[test]
    fn changes_read_as_lines_and_recommend() {
        let mut c = SimulatedChanges { events: vec!["item_deleted".into(), "item_deleted".into()], ..Default::default() };
        c.items_removed = vec!["movie “Heat”".into(), "note “milk”".into()];
        assert_eq!(change_lines(&c), ["- item movie “Heat”", "- item note “milk”"]);
        assert_eq!(recommendation(&c), "modify");
        c.items_removed.pop();
        assert_eq!(recommendation(&c), "proceed");
    }
}
