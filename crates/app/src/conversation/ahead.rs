//! Reading the next prompt ahead. While the person reads a reply and types
//! the next message, the start of the next reply's prompt (system message
//! and window of turns) is read into the local model, so that reply's first
//! token waits only for the new message, however long the conversation is
//! and even when the window of turns has just moved. It runs as background
//! work: a message sent meanwhile stops it, keeping what was read so far.
//!
//! Only a process that stays between turns reads ahead (the window, a
//! spoken conversation, benchmarks); one `ledgermind chat` process ends
//! with its reply, and reading ahead would only delay its exit.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use providers::{CancelFlag, CompletionRequest};
use tokio::sync::Notify;

use super::Conversation;
use crate::context::jobs::Failure;
use crate::models::registry::Serving;
use crate::models::ModelSpec;
use crate::prompt::PromptProfile;
use crate::Result;

/// The longest [`Conversation::until_read_ahead`] waits.
const LONGEST_WAIT: Duration = Duration::from_secs(300);

#[derive(Debug, Default)]
pub(crate) struct ReadAhead {
    enabled: AtomicBool,
    /// A reply finished and its read-ahead has not ended yet.
    pending: AtomicBool,
    done: Notify,
    /// The read of the draft being typed, which the next draft or the send
    /// stops (keeping what it read).
    draft: Mutex<Option<(u64, CancelFlag)>>,
    drafts: AtomicU64,
    /// Messages sent so far: a draft read that started before a send does
    /// not start reading after it.
    sends: AtomicU64,
}

impl ReadAhead {
    /// A message is being sent: the draft's read gives way to its reply.
    pub(crate) fn message_sent(&self) {
        self.sends.fetch_add(1, Ordering::SeqCst);
        if let Some((_, flag)) = self.draft.lock().ok().and_then(|mut d| d.take()) {
            flag.cancel();
        }
    }
}

impl Conversation {
    /// Whether the next prompt is read ahead between turns (off by default).
    pub fn read_ahead_between_turns(&self, on: bool) {
        self.ahead.enabled.store(on, Ordering::SeqCst);
    }

    /// The person opened `persona`'s chat: its model is loaded, then the
    /// start of the next reply's prompt is read ahead.
    pub async fn open(&self, persona: &str) {
        self.warm_up(persona).await;
        if let Ok(p) = self.ctx.ledger.find_persona(persona).await {
            self.ahead_due();
            self.read_ahead(&p.id).await;
        }
    }

    /// Marks a read-ahead as coming (set before the reply is announced, so
    /// whoever waits on the announcement also waits for it).
    pub(crate) fn ahead_due(&self) {
        if self.ahead.enabled.load(Ordering::SeqCst) {
            self.ahead.pending.store(true, Ordering::SeqCst);
        }
    }

    /// Reads the start of `persona_id`'s next reply prompt into its model,
    /// when reading ahead is on. Failures only cost the head start.
    pub(crate) async fn read_ahead(&self, persona_id: &str) {
        if self.ahead.enabled.load(Ordering::SeqCst) {
            if let Err(e) = self.read_next_prompt(persona_id).await {
                tracing::debug!(code = e.code, "the next prompt was not read ahead: {}", e.message);
            }
        }
        self.ahead.pending.store(false, Ordering::SeqCst);
        self.ahead.done.notify_waiters();
    }

    /// Waits until no read-ahead is coming or running: a person who reads
    /// the reply and types for at least that long. Benchmarks use it.
    pub async fn until_read_ahead(&self) {
        let deadline = tokio::time::Instant::now() + LONGEST_WAIT;
        while self.ahead.pending.load(Ordering::SeqCst) && tokio::time::Instant::now() < deadline {
            let _ = tokio::time::timeout(Duration::from_millis(50), self.ahead.done.notified()).await;
        }
    }

    /// The person paused while typing `draft` (in `persona`'s chat, when
    /// known): its embedding is made now, and the prompt its reply would
    /// get is read ahead ([`Conversation::read_draft`]).
    pub async fn draft_typed(&self, persona: Option<&str>, draft: &str) {
        self.person_composing();
        self.memory.prefetch_embedding(draft);
        if let Some(persona) = persona {
            self.read_draft(persona, draft).await;
        }
    }

    /// The person is writing or saying a message: queued background work
    /// keeps off the model meanwhile (see
    /// [`crate::context::Context::person_composing`]).
    pub fn person_composing(&self) {
        self.ctx.person_composing();
    }

    /// The person paused while typing `draft` to `persona`: the prompt its
    /// reply would get if it were sent now (remembered lines and passages
    /// picked for it) is read into the model, so that once it is sent the
    /// first token waits only for what changed since. Only when reading
    /// ahead is on, the last message has its reply and the persona gets the
    /// compact prompt. The next draft or the send stops it, keeping what was
    /// read. Returns once the draft is read (or it gave way).
    pub async fn read_draft(&self, persona: &str, draft: &str) {
        let draft = draft.trim();
        if draft.is_empty() || !self.ahead.enabled.load(Ordering::SeqCst) {
            return;
        }
        let sends = self.ahead.sends.load(Ordering::SeqCst);
        let cancel = CancelFlag::default();
        let id = self.ahead.drafts.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut slot) = self.ahead.draft.lock() {
            if let Some((_, earlier)) = slot.replace((id, cancel.clone())) {
                earlier.cancel();
            }
        }
        match self.read_draft_prompt(persona, draft, &cancel, sends).await {
            Ok(Some(tokens)) => tracing::debug!(tokens, "a draft was read ahead"),
            Ok(None) => {}
            Err(e) => tracing::debug!(code = e.code, "the draft was not read ahead: {}", e.message),
        }
        if let Ok(mut slot) = self.ahead.draft.lock() {
            if slot.as_ref().is_some_and(|(mine, _)| *mine == id) {
                *slot = None;
            }
        }
    }

    async fn read_draft_prompt(&self, persona: &str, draft: &str, cancel: &CancelFlag, sends: u64) -> Result<Option<u32>> {
        let persona = self.ctx.ledger.find_persona(persona).await?;
        let Some(reader) = self.compact_reader(&persona).await? else { return Ok(None) };
        let history = self.office.prompt_history(&persona, &reader.profile).await?;
        // The person's last message still waits for its reply: the prompt
        // of the draft is not known before that reply is.
        if history.last().is_some_and(|m| m.role == ledger::MessageRole::Human) {
            return Ok(None);
        }
        let history = crate::office::with_sent(history, &persona.id, draft);
        // What the reply does with the sent message, in the same order.
        let memories = crate::memory::recall::memories_for_reply(&self.memory, &persona, &history).await;
        let messages = self.compact_messages_kept(&persona, &history, &memories, false).await;
        let passages = self.library.reply_passages(&persona, draft).await;
        let mut request = reader.request(crate::library::with_passages(messages, &passages));
        request.cancel = cancel.clone();
        if cancel.is_cancelled() || self.ahead.sends.load(Ordering::SeqCst) != sends {
            return Ok(None);
        }
        let read = reader.served.provider.prefill(request).await?;
        Ok(Some(read.prompt_tokens))
    }

    /// What reads `persona`'s replies, when they get the compact prompt: the
    /// full profile's system message is the office's narrative, written
    /// again for every message, so there is no stable start to read ahead.
    async fn compact_reader(&self, persona: &ledger::Persona) -> Result<Option<CompactReader>> {
        if persona.archived {
            return Ok(None);
        }
        let profile = self.ctx.ledger.persona_profile(&persona.id).await?;
        let served = self.ctx.serving(&ModelSpec::parse(&persona.model)?).await?;
        let chosen = self.prompt_profile(served.provider.as_ref(), &served.spec.model, served.spec.is_local()).await;
        Ok((chosen.profile == PromptProfile::Compact).then_some(CompactReader { profile, served }))
    }

    async fn read_next_prompt(&self, persona_id: &str) -> Result<()> {
        let persona = self.ctx.ledger.persona(persona_id).await?;
        let Some(reader) = self.compact_reader(&persona).await? else { return Ok(()) };
        let history = self.office.prompt_history(&persona, &reader.profile).await?;
        let request = reader.request(self.next_turn_prefix(&persona, &history).await);
        match self.ctx.prefill_in_background(reader.served.provider.as_ref(), request).await {
            Ok(read) => tracing::debug!(tokens = read.prompt_tokens, "the next prompt was read ahead"),
            Err(Failure::Preempted) => tracing::debug!("a message came before the next prompt was read ahead"),
            Err(Failure::Retry(e) | Failure::Final(e)) => return Err(e),
            Err(Failure::Deferred(_)) => {}
        }
        Ok(())
    }
}

/// The persona's profile and the model that reads its compact prompt.
struct CompactReader {
    profile: ledger::PersonaProfile,
    served: Serving,
}

impl CompactReader {
    fn request(&self, messages: Vec<providers::ChatMessage>) -> CompletionRequest {
        let mut request = CompletionRequest::chat(self.served.spec.model.clone(), messages);
        request.max_tokens = PromptProfile::Compact.max_tokens();
        request
    }
}
