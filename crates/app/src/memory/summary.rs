//! Conversation summaries: every [`EVERY`] messages a
//! low-priority job folds the previous summary and the new messages into a
//! new one of at most [`MAX_WORDS`] words. When no model can do it (none
//! installed, or it keeps failing) a plain extractive summary is written
//! instead, marked `fallback`. The latest summary goes into every reply's
//! prompt beside what retrieval found.

use std::sync::Arc;

use ledger::{EventBody, Message, MessageRole, Persona, QueueItem};
use providers::{ChatMessage, CompletionRequest, Role};
use serde::{Deserialize, Serialize};

use crate::context::jobs::{Failure, MAX_ATTEMPTS, PRIORITY_LOW};
use super::Memories;
use crate::error::AppError;
use crate::models::ModelSpec;

pub(crate) const SUMMARY_KIND: &str = "summarize";
/// A summary is due once this many messages are not in it yet.
pub(crate) const EVERY: usize = 10;
pub(crate) const MAX_WORDS: usize = 200;
/// At most this many new messages are folded in at once.
const BATCH: u32 = 40;
const SUMMARY_MAX_TOKENS: u32 = 320;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SummaryJob {
    persona_id: String,
}

/// At most `max` words of `text`, whitespace normalised.
pub(crate) fn clip_words(text: &str, max: usize) -> String {
    text.split_whitespace().take(max).collect::<Vec<_>>().join(" ")
}

/// The summary without a model: the previous one, then the first sentence
/// of each new message with its speaker, keeping the newest when it must
/// cut (the recent turns matter most), within [`MAX_WORDS`].
pub(crate) fn fallback_summary(previous: Option<&str>, persona_name: &str, messages: &[Message]) -> String {
    let lines: Vec<String> = messages
        .iter()
        .filter(|m| m.role != MessageRole::System)
        .map(|m| {
            let who = if m.role == MessageRole::Human { "The human" } else { persona_name };
            let first = m.content.split_inclusive(['.', '!', '?', '\n']).next().unwrap_or(&m.content).trim();
            format!("{who}: {}", clip_words(first, 30))
        })
        .collect();
    // Newest lines first until the budget is used, then back in order.
    let mut budget = MAX_WORDS;
    let mut kept: Vec<&String> = Vec::new();
    for line in lines.iter().rev() {
        let words = line.split_whitespace().count();
        if words > budget {
            break;
        }
        budget -= words;
        kept.push(line);
    }
    kept.reverse();
    let previous = previous.map(|p| clip_words(p, budget)).unwrap_or_default();
    let mut out = previous;
    for line in kept {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(line);
    }
    clip_words(&out, MAX_WORDS)
}

fn summary_prompt(persona: &Persona, previous: Option<&str>, messages: &[Message]) -> Vec<ChatMessage> {
    let mut transcript = String::new();
    for m in messages {
        let who = match m.role {
            MessageRole::Human => "Human",
            MessageRole::Persona => persona.name.as_str(),
            MessageRole::System => continue,
        };
        transcript.push_str(&format!("{who}: {}\n", m.content));
    }
    vec![
        ChatMessage::new(
            Role::System,
            format!(
                "You keep a running summary of a conversation between a person and {name}. \
                 Write at most {MAX_WORDS} words: who the person is, what they said that matters, what is still open. \
                 Plain prose, no lists.",
                name = persona.name
            ),
        ),
        ChatMessage::new(
            Role::User,
            format!(
                "Summary so far: {}\n\nNew messages:\n{transcript}\nWrite the new summary.",
                previous.unwrap_or("(none yet)")
            ),
        ),
    ]
}

impl Memories {
    /// The latest summary of a conversation (None before the first).
    pub async fn conversation_summary(&self, persona: &str) -> crate::Result<Option<ledger::Summary>> {
        let p = self.ctx.ledger.find_persona(persona).await?;
        Ok(self.ctx.ledger.summary(&p.id).await?)
    }
}

/// Queues a summary when [`EVERY`] messages are not in the latest one yet
/// (once per conversation; it waits for the conversation to go quiet).
pub(crate) async fn maybe_enqueue(memory: &Memories, persona_id: &str) {
    let after = match memory.ctx.ledger.summary(persona_id).await {
        Ok(s) => s.map(|s| s.up_to_seq).unwrap_or(0),
        Err(e) => return tracing::warn!(error = %e, "could not read the summary"),
    };
    let new = match memory.ctx.ledger.messages_after(persona_id, after, EVERY as u32).await {
        Ok(m) => m.len(),
        Err(e) => return tracing::warn!(error = %e, "could not count messages for the summary"),
    };
    if new < EVERY {
        return;
    }
    let queued = memory.ctx.ledger.queue_items(None).await.map(|items| {
        items.iter().any(|i| i.kind == SUMMARY_KIND && i.persona_id.as_deref() == Some(persona_id) && i.state != ledger::QueueState::Dead)
    });
    if !matches!(queued, Ok(false)) {
        return;
    }
    let Ok(body) = serde_json::to_value(SummaryJob { persona_id: persona_id.to_owned() }) else { return };
    let delay = time::Duration::try_from(memory.extraction_delay).unwrap_or(time::Duration::ZERO);
    let at = memory.ctx.ledger.now() + delay;
    match memory.ctx.ledger.enqueue_at(SUMMARY_KIND, PRIORITY_LOW, Some(persona_id), &body, at).await {
        Ok(_) => memory.ctx.wake.notify_one(),
        Err(e) => tracing::warn!(error = %e, "could not queue a summary"),
    }
}

/// Runs one summary job. A model failure that will not recover writes the
/// fallback summary instead (the job then succeeds).
pub(crate) async fn run(memory: &Arc<Memories>, item: &QueueItem) -> Result<(), Failure> {
    let job: SummaryJob = serde_json::from_value(item.body.clone())
        .map_err(|e| Failure::Final(AppError::invalid(format!("unreadable job: {e}"))))?;
    let persona = memory.ctx.ledger.persona(&job.persona_id).await.map_err(|e| Failure::Final(e.into()))?;
    let previous = memory.ctx.ledger.summary(&persona.id).await.map_err(|e| Failure::Retry(e.into()))?;
    let after = previous.as_ref().map(|s| s.up_to_seq).unwrap_or(0);
    let messages = memory.ctx.ledger.messages_after(&persona.id, after, BATCH).await.map_err(|e| Failure::Retry(e.into()))?;
    let Some(last) = messages.last() else { return Ok(()) };
    let up_to_seq = last.seq;
    let previous_text = previous.as_ref().map(|s| s.text.as_str());
    let (text, source) = match summarize(memory, &persona, previous_text, &messages).await {
        Ok(text) => (text, "llm"),
        Err(Failure::Preempted) => return Err(Failure::Preempted),
        Err(Failure::Retry(e)) if item.attempts < MAX_ATTEMPTS => return Err(Failure::Retry(e)),
        Err(Failure::Deferred(t)) => return Err(Failure::Deferred(t)),
        Err(Failure::Retry(e) | Failure::Final(e)) => {
            tracing::info!(code = e.code, persona = %persona.id, "no model for the summary; writing the fallback");
            (fallback_summary(previous_text, &persona.name, &messages), "fallback")
        }
    };
    // A message erased meanwhile must not be summarised back in.
    for m in &messages {
        if memory.ctx.ledger.message(&m.id).await.map_err(|e| Failure::Retry(e.into()))?.is_none() {
            return Err(Failure::Retry(AppError::new("STORAGE_LOAD_FAILED", "a summarised message was deleted meanwhile")));
        }
    }
    memory
        .ctx.ledger
        .append_drafts(vec![ledger::Draft::by(
            &persona.id,
            EventBody::SummaryWritten { persona_id: persona.id.clone(), text, up_to_seq, source: source.into() },
        )])
        .await
        .map_err(|e| Failure::Retry(e.into()))?;
    Ok(())
}

async fn summarize(memory: &Arc<Memories>, persona: &Persona, previous: Option<&str>, messages: &[Message]) -> Result<String, Failure> {
    let spec = ModelSpec::parse(&persona.model).map_err(Failure::Final)?;
    let served = memory.ctx.serving(&spec).await.map_err(Failure::Final)?;
    let (spec, provider) = (served.spec, served.provider);
    let mut request = CompletionRequest::chat(spec.model.clone(), summary_prompt(persona, previous, messages));
    request.max_tokens = SUMMARY_MAX_TOKENS;
    request.temperature = 0.3;
    let completion = memory.ctx.complete_in_background(provider.as_ref(), request).await?;
    let text = clip_words(&completion.text, MAX_WORDS);
    if text.is_empty() {
        return Err(Failure::Retry(AppError::new("LLM_EMPTY_REPLY", "the model returned an empty summary")));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(role: MessageRole, content: &str, seq: i64) -> Message {
        Message {
            id: format!("m{seq}"),
            persona_id: "p".into(),
            role,
            content: content.into(),
            ts: String::new(),
            read: true,
            seq,
            context_status: Default::default(),
        }
    }

    #[test]
    fn the_fallback_keeps_first_sentences_with_speakers_within_200_words() {
        let messages = vec![
            msg(MessageRole::Human, "I moved to Porto. It rains a lot.", 1),
            msg(MessageRole::Persona, "Porto is lovely! Do you like it?", 2),
        ];
        let s = fallback_summary(Some("They met last week."), "Ada", &messages);
        assert_eq!(s, "They met last week. The human: I moved to Porto. Ada: Porto is lovely!");
        let long: Vec<Message> = (0..100).map(|i| msg(MessageRole::Human, &format!("word {i} and more words here"), i)).collect();
        let s = fallback_summary(Some(&"old ".repeat(300)), "Ada", &long);
        assert!(s.split_whitespace().count() <= MAX_WORDS);
        assert!(s.ends_with("word 99 and more words here"), "the newest turns are kept: {s}");
    }

    #[test]
    fn clipping_counts_words() {
        assert_eq!(clip_words("  a  b\nc d ", 3), "a b c");
        assert_eq!(clip_words("", 3), "");
    }
}
