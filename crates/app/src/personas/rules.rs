//! Small rules about personas that the office, the conversation and the
//! persona jobs share: whether a pause is on, the persona's profile as prompt
//! lines, and the JSON object in a model's answer.

use crate::error::AppError;

/// Whether `paused_until` is still in the future at `now`.
pub(crate) fn paused_at(paused_until: Option<&str>, now: time::OffsetDateTime) -> Option<time::OffsetDateTime> {
    let until = time::OffsetDateTime::parse(paused_until?, &time::format_description::well_known::Rfc3339).ok()?;
    (until > now).then_some(until)
}

/// The persona's traits and topics as prompt lines (none when it has none).
pub(crate) fn profile_lines(profile: &ledger::PersonaProfile) -> Vec<String> {
    let mut lines = Vec::new();
    if !profile.traits.is_empty() {
        lines.push(format!("You are: {}.", profile.traits.join(", ")));
    }
    if !profile.topics.is_empty() {
        let topics: Vec<String> = profile
            .topics
            .iter()
            .map(|t| if t.perspective.is_empty() { t.name.clone() } else { format!("{} ({})", t.name, t.perspective) })
            .collect();
        lines.push(format!("You care about: {}.", topics.join("; ")));
    }
    lines
}

/// The JSON object in a model's answer (bare, in prose or in a code fence),
/// as `T`; anything else is `LLM_INVALID_JSON` naming `what` was asked for.
pub(crate) fn parse_json_object<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> std::result::Result<T, AppError> {
    let invalid = |why: String| AppError::new("LLM_INVALID_JSON", format!("the {what} was not the JSON asked for: {why}"));
    let start = text.find('{').ok_or_else(|| invalid("no JSON object".into()))?;
    let end = text.rfind('}').ok_or_else(|| invalid("no JSON object".into()))?;
    if end < start {
        return Err(invalid("no JSON object".into()));
    }
    serde_json::from_str(&text[start..=end]).map_err(|e| invalid(e.to_string()))
}

