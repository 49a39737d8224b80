//! The heartbeat: after a persona's heartbeat delay of quiet it
//! reaches out on its own, once, preferring a topic it wants to talk about
//! more than it has (desired exposure above current). Never while paused or
//! archived; always as low-priority queued work that a reply preempts.
//!
//! Ei (the built-in system persona) has no heartbeat: it is skipped (seed
//! 002 gives Ei its own heartbeat handler, about validating what the others
//! learned, not a chat ping).
//!
//! Time comes in as a parameter (`heartbeat_tick(now)`, checked each minute
//! by the ceremony's timer, `Personas::clock_tick`, with the ledger's clock).

use std::sync::Arc;

use ledger::{EventBody, Message, MessageRole, PersonaProfile, QueueItem};
use providers::{ChatMessage, CompletionRequest, Role};
use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::context::jobs::{Failure, PRIORITY_LOW};
use super::Personas;
use crate::error::AppError;
use crate::models::ModelSpec;
use crate::conversation::views::MessageView;
use crate::events::AppEvent;

pub(crate) const HEARTBEAT_KIND: &str = "heartbeat";
const HEARTBEAT_MAX_TOKENS: u32 = 80;
const MAX_CHARS: usize = 600;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct HeartbeatJob {
    persona_id: String,
    /// The newest message when it was queued: anything newer cancels it.
    last_seq: i64,
}

/// Whether a persona should reach out at `now`. `last` holds the newest
/// messages of its conversation (oldest first). It reaches out only after
/// an exchange (the human spoke, the persona answered) followed by
/// `heartbeat_minutes` of quiet: never twice in a row, never over an
/// unanswered message of the human's, never to an empty conversation.
pub(crate) fn heartbeat_due(profile: &PersonaProfile, archived: bool, last: &[Message], now: OffsetDateTime) -> bool {
    if archived || profile.heartbeat_minutes == 0 || crate::personas::rules::paused_at(profile.paused_until.as_deref(), now).is_some() {
        return false;
    }
    let [.., before, newest] = last else { return false };
    if newest.role != MessageRole::Persona || before.role != MessageRole::Human {
        return false;
    }
    let Ok(at) = OffsetDateTime::parse(&newest.ts, &Rfc3339) else { return false };
    now - at >= time::Duration::minutes(i64::from(profile.heartbeat_minutes))
}

/// The topic the persona most wants more of, if any wants more at all.
pub(crate) fn preferred_topic(profile: &PersonaProfile) -> Option<&ledger::PersonaTopic> {
    profile
        .topics
        .iter()
        .filter(|t| t.exposure_desired > t.exposure_current)
        .max_by(|a, b| (a.exposure_desired - a.exposure_current).total_cmp(&(b.exposure_desired - b.exposure_current)))
}

impl Personas {
    /// Queues a heartbeat for every persona due at `now`; returns how many.
    pub async fn heartbeat_tick(&self, now: OffsetDateTime) -> crate::Result<usize> {
        let queued = self.ctx.ledger.queue_items(None).await?;
        let mut count = 0;
        for p in self.ctx.ledger.personas(false).await? {
            if p.is_system || queued.iter().any(|i| i.kind == HEARTBEAT_KIND && i.persona_id.as_deref() == Some(p.id.as_str())) {
                continue;
            }
            let profile = self.ctx.ledger.persona_profile(&p.id).await?;
            let last = self.ctx.ledger.messages(&p.id, Some(2)).await?;
            if !heartbeat_due(&profile, p.archived, &last, now) {
                continue;
            }
            let Some(newest) = last.last() else { continue };
            let body = serde_json::to_value(HeartbeatJob { persona_id: p.id.clone(), last_seq: newest.seq })
                .map_err(|e| AppError::invalid(e.to_string()))?;
            self.ctx.ledger.enqueue(HEARTBEAT_KIND, PRIORITY_LOW, Some(&p.id), &body).await?;
            count += 1;
        }
        if count > 0 {
            self.ctx.wake.notify_one();
            self.ctx.emit_queue().await;
        }
        Ok(count)
    }
}

/// Runs one heartbeat: the persona writes a short message on its own.
pub(crate) async fn run(personas: &Arc<Personas>, item: &QueueItem) -> Result<(), Failure> {
    let job: HeartbeatJob = serde_json::from_value(item.body.clone())
        .map_err(|e| Failure::Final(AppError::invalid(format!("unreadable job: {e}"))))?;
    let persona = personas.ctx.ledger.persona(&job.persona_id).await.map_err(|e| Failure::Final(e.into()))?;
    let profile = personas.ctx.ledger.persona_profile(&persona.id).await.map_err(|e| Failure::Retry(e.into()))?;
    let mut history = personas.ctx.ledger.messages(&persona.id, Some(crate::prompt::HISTORY)).await.map_err(|e| Failure::Retry(e.into()))?;
    crate::office::heard::keep_what_was_heard(&personas.ctx.ledger, &persona.id, &mut history).await;
    let talked_since = history.last().map(|m| m.seq) != Some(job.last_seq);
    let paused = crate::personas::rules::paused_at(profile.paused_until.as_deref(), personas.ctx.ledger.now()).is_some();
    if persona.archived || paused || talked_since {
        return Ok(()); // the moment passed
    }
    let spec = ModelSpec::parse(&persona.model).map_err(Failure::Final)?;
    let served = personas.ctx.serving(&spec).await.map_err(Failure::Final)?;
    let (spec, provider) = (served.spec, served.provider);
    let mut lines = crate::personas::rules::profile_lines(&profile);
    if let Ok(Some(summary)) = personas.ctx.ledger.summary(&persona.id).await {
        lines.push(format!("Summary of your conversation so far: {}", summary.text));
    }
    let framed = personas.office.frame_reply(&persona, lines).await;
    let mut messages = crate::prompt::reply_prompt(&framed.narrative, &history);
    let about = preferred_topic(&profile).map(|t| format!(" You could bring up {}.", t.name)).unwrap_or_default();
    messages.push(ChatMessage::new(
        Role::System,
        format!("The person has been quiet for a while. Reach out to them on your own in one or two friendly sentences.{about}"),
    ));
    let mut request = CompletionRequest::chat(spec.model.clone(), messages);
    request.max_tokens = HEARTBEAT_MAX_TOKENS;
    let completion = personas.ctx.complete_in_background(provider.as_ref(), request).await?;
    let content: String = completion.text.trim().chars().take(MAX_CHARS).collect();
    if content.is_empty() {
        return Err(Failure::Retry(AppError::new("LLM_EMPTY_REPLY", "the model wrote nothing to reach out with")));
    }
    // The human may have written while the model ran: then this is not sent.
    let newest = personas.ctx.ledger.messages(&persona.id, Some(1)).await.map_err(|e| Failure::Retry(e.into()))?;
    if newest.last().map(|m| m.seq) != Some(job.last_seq) {
        return Ok(());
    }
    let message_id = uuid::Uuid::now_v7().to_string();
    let receipt = personas
        .ctx.ledger
        .append_drafts(vec![ledger::Draft::by(
            &persona.id,
            EventBody::MessageAdded {
                message_id: message_id.clone(),
                persona_id: persona.id.clone(),
                role: MessageRole::Persona,
                content: content.clone(),
                external_id: None,
                said_at: None,
            },
        )])
        .await
        .map_err(|e| Failure::Retry(e.into()))?
        .into_iter()
        .next()
        .ok_or_else(|| Failure::Retry(AppError::new("STORAGE_SAVE_FAILED", "the message was not saved")))?;
    crate::memory::recall::index_message(&personas.memory, &message_id, &persona.id, MessageRole::Persona, &content, receipt.seq).await;
    if let Ok(Some(m)) = personas.ctx.ledger.message(&message_id).await {
        personas.ctx.emit(AppEvent::MessageAdded { message: MessageView::from(m) });
    }
    personas.ctx.emit(AppEvent::LedgerAppended { seq: receipt.seq, kind: receipt.kind });
    if let Ok(p) = personas.ctx.ledger.persona(&persona.id).await {
        personas.ctx.emit(AppEvent::PersonaChanged { persona: p.into() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(minutes: u32, paused_until: Option<&str>) -> PersonaProfile {
        PersonaProfile {
            traits: Vec::new(),
            topics: Vec::new(),
            profile_source: "none".into(),
            paused_until: paused_until.map(str::to_owned),
            heartbeat_minutes: minutes,
            context_window_hours: 8,
        }
    }

    fn msg(role: MessageRole, ts: &str, seq: i64) -> Message {
        Message {
            id: format!("m{seq}"),
            persona_id: "p".into(),
            role,
            content: "x".into(),
            ts: ts.into(),
            read: true,
            seq,
            context_status: Default::default(),
        }
    }

    fn at(s: &str) -> OffsetDateTime {
        OffsetDateTime::parse(s, &Rfc3339).expect("time")
    }

    #[test]
    fn a_persona_reaches_out_only_after_its_delay_of_quiet_following_an_exchange() {
        let exchange = [msg(MessageRole::Human, "2026-01-01T10:00:00Z", 1), msg(MessageRole::Persona, "2026-01-01T10:00:05Z", 2)];
        let p = profile(30, None);
        assert!(!heartbeat_due(&p, false, &exchange, at("2026-01-01T10:30:04Z")), "29 min 59 s of quiet");
        assert!(heartbeat_due(&p, false, &exchange, at("2026-01-01T10:30:05Z")), "30 min of quiet");
        assert!(!heartbeat_due(&p, true, &exchange, at("2026-01-02T00:00:00Z")), "archived");
        assert!(!heartbeat_due(&profile(0, None), false, &exchange, at("2026-01-02T00:00:00Z")), "0 = never");
        let paused = profile(30, Some("2026-01-01T12:00:00Z"));
        assert!(!heartbeat_due(&paused, false, &exchange, at("2026-01-01T11:00:00Z")), "paused");
        assert!(heartbeat_due(&paused, false, &exchange, at("2026-01-01T12:00:01Z")), "the pause ended");
        // Never twice in a row, never over an unanswered message, never out of nothing.
        let twice = [msg(MessageRole::Persona, "2026-01-01T10:00:00Z", 1), msg(MessageRole::Persona, "2026-01-01T10:30:00Z", 2)];
        assert!(!heartbeat_due(&p, false, &twice, at("2026-01-02T00:00:00Z")));
        let unanswered = [msg(MessageRole::Persona, "2026-01-01T10:00:00Z", 1), msg(MessageRole::Human, "2026-01-01T10:01:00Z", 2)];
        assert!(!heartbeat_due(&p, false, &unanswered, at("2026-01-02T00:00:00Z")));
        assert!(!heartbeat_due(&p, false, &[], at("2026-01-02T00:00:00Z")));
    }

    #[test]
    fn the_preferred_topic_is_the_one_most_wanted_beyond_what_it_had() {
        let topic = ledger::PersonaTopic::with_exposure;
        let mut p = profile(30, None);
        p.topics = vec![topic("rain", 0.4, 0.5), topic("tomatoes", 0.1, 0.9), topic("soil", 0.9, 0.2)];
        assert_eq!(preferred_topic(&p).map(|t| t.name.as_str()), Some("tomatoes"));
        p.topics = vec![topic("soil", 0.9, 0.2)];
        assert!(preferred_topic(&p).is_none());
    }
}
