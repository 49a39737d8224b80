//! The dreaming cycle's synthesis: when it is due, and what it writes (a
//! summary of the period since the last dream and a new baseline
//! narrative). It runs in the background, never during an invocation; the
//! app turns its output into `period_synthesized` and
//! `baseline_narrative_set` events.

use ledger::{Handover, Message, MessageRole};
use providers::{ChatMessage, CompletionRequest, Provider, Role};
use serde::Deserialize;
use serde_json::json;
use time::{Duration, OffsetDateTime, Time};

use crate::frame::truncate_chars;
use crate::session::Language;
use crate::OfficeError;

/// Sessions (handovers) after which a dream is due regardless of the hour.
pub const SESSIONS_PER_DREAM: u64 = 50;
const MIN_TEXT: usize = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DreamReason {
    Daily,
    Sessions,
    Critical,
}

/// Whether a dream is due now. `daily_at` is the UTC time of the nightly
/// run; a dream is due once per day after it, after `SESSIONS_PER_DREAM`
/// sessions since the last dream, or right after a critical event.
pub fn due(
    last_dream: Option<OffsetDateTime>,
    now: OffsetDateTime,
    daily_at: Time,
    sessions_since: u64,
    critical_since: bool,
) -> Option<DreamReason> {
    if critical_since {
        return Some(DreamReason::Critical);
    }
    if sessions_since >= SESSIONS_PER_DREAM {
        return Some(DreamReason::Sessions);
    }
    let today_at = now.replace_time(daily_at);
    let last_slot = if now >= today_at { today_at } else { today_at - Duration::days(1) };
    match last_dream {
        Some(last) if last >= last_slot => None,
        // Nothing to dream about before the first session ends.
        None if sessions_since == 0 => None,
        _ => Some(DreamReason::Daily),
    }
}

/// What a dream looks at.
pub struct DreamInput<'a> {
    pub persona_name: &'a str,
    pub language: Language,
    pub messages: &'a [Message],
    pub handovers: &'a [Handover],
    pub previous_baseline: Option<&'a str>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DreamOutput {
    pub summary: String,
    pub baseline: String,
}

#[derive(Deserialize)]
struct Answer {
    summary: String,
    baseline: String,
}

/// Asks the persona's model for the period summary and the new baseline.
pub async fn dream(provider: &dyn Provider, model: &str, input: DreamInput<'_>) -> Result<DreamOutput, OfficeError> {
    let pt = input.language == Language::PtBr;
    let mut material = String::new();
    if let Some(b) = input.previous_baseline {
        material.push_str(if pt { "Visão anterior: " } else { "Previous view: " });
        material.push_str(b);
        material.push('\n');
    }
    for h in input.handovers.iter().filter(|h| !h.text.is_empty()) {
        material.push_str(if pt { "Nota: " } else { "Note: " });
        material.push_str(&truncate_chars(&h.text, 300));
        material.push('\n');
    }
    for m in input.messages {
        let who = match (m.role, pt) {
            (MessageRole::Human, false) => "Person",
            (MessageRole::Human, true) => "Pessoa",
            (_, _) => input.persona_name,
        };
        material.push_str(&format!("{who}: {}\n", truncate_chars(&m.content, 200)));
    }
    let ask = if pt {
        format!(
            "Você é {}. Releia o período abaixo e responda em JSON com \"summary\" (o que aconteceu, em 2 ou 3 \
             frases) e \"baseline\" (quem você é para esta pessoa agora, em 2 frases, na primeira pessoa).\n\n{material}",
            input.persona_name
        )
    } else {
        format!(
            "You are {}. Read the period below and answer as JSON with \"summary\" (what happened, in 2 or 3 \
             sentences) and \"baseline\" (who you are to this person now, in 2 sentences, first person).\n\n{material}",
            input.persona_name
        )
    };
    let mut req = CompletionRequest::chat(model.to_owned(), vec![ChatMessage::new(Role::User, ask)]);
    req.max_tokens = 256;
    req.json_schema = Some(json!({
        "type": "object",
        "properties": {
            "summary": {"type": "string", "minLength": MIN_TEXT, "maxLength": 800},
            "baseline": {"type": "string", "minLength": MIN_TEXT, "maxLength": 600},
        },
        "required": ["summary", "baseline"],
        "additionalProperties": false,
    }));
    let done = provider.complete(req, None).await?;
    let a: Answer = serde_json::from_str(done.text.trim()).map_err(|e| OfficeError::Unusable(e.to_string()))?;
    let (summary, baseline) = (a.summary.trim().to_owned(), a.baseline.trim().to_owned());
    if summary.chars().count() < MIN_TEXT || baseline.chars().count() < MIN_TEXT {
        return Err(OfficeError::Unusable("summary or baseline too short".into()));
    }
    Ok(DreamOutput { summary, baseline })
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::{datetime, time};

    #[test]
    fn a_dream_is_due_daily_after_fifty_sessions_and_after_critical_events() {
        let at = time!(03:00);
        let now = datetime!(2026-01-02 04:00 UTC);
        assert_eq!(due(None, now, at, 0, false), None, "nothing to dream about yet");
        assert_eq!(due(None, now, at, 1, false), Some(DreamReason::Daily));
        assert_eq!(due(Some(datetime!(2026-01-02 03:30 UTC)), now, at, 3, false), None, "already dreamt today");
        assert_eq!(due(Some(datetime!(2026-01-01 03:30 UTC)), now, at, 3, false), Some(DreamReason::Daily));
        // Before today's slot, yesterday's slot counts.
        let early = datetime!(2026-01-02 02:00 UTC);
        assert_eq!(due(Some(datetime!(2026-01-01 03:30 UTC)), early, at, 3, false), None);
        assert_eq!(due(Some(datetime!(2026-01-02 03:30 UTC)), now, at, 50, false), Some(DreamReason::Sessions));
        assert_eq!(due(Some(datetime!(2026-01-02 03:30 UTC)), now, at, 0, true), Some(DreamReason::Critical));
    }
}
