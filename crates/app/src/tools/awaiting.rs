//! AWAITING_INPUT in the app (seed 003 §1.2 "Falta informacao"):
//! when a tool call lacks a required argument, the persona asks for exactly
//! that, in the user's language, and the conversation waits for the answer.
//!
//! - **Asked** by a bare command ("save a movie", "lembra de"; no model
//!   needed), by a planner call whose arguments fail the schema only for
//!   missing required fields, or by the persona's own `request_clarification`.
//! - **Answered** by the next message: it fills the first missing argument
//!   and the same call goes on under the same correlation id (→
//!   PROCESSING_INTENT → executed, proposed, or the next question). An
//!   answer that does not fit (not a link…) is asked for again, with why.
//!   The persona's own question is answered through the model.
//! - **Dropped** by "cancel" / "cancela", by a new request (a command, an
//!   intent), or by the inactivity TTL (10 minutes, the proposal timer):
//!   nothing runs, and the chat says so.
//!
//! Every step is a `tool_audited` record (step `await_input`, or `validate`
//! for the incomplete call) under the call's correlation id. The waiting
//! calls are also kept in the ledger as one runtime setting, so a restart
//! does not lose them: the conversation is back in AWAITING_INPUT and its
//! TTL still counts from the question.

use std::collections::HashMap;

use ledger::{EventBody, MessageRole, Persona, HUMAN_ENTITY};
use runtime::slots::{self, Lang};
use runtime::state::{ConversationEvent as Ev, ConversationState as St};
use runtime::{CallContext, DeterministicIntent, Outcome, PipelineError, Role};
use serde_json::{Map, Value};

use super::outcome::{refusal, role_of, Planned};
use super::views::{rfc3339, AwaitingInputView};
use super::turns::Awaiting;
use super::Tools;
use crate::error::AppError;
use crate::events::AppEvent;
use crate::Result;

/// The runtime setting that keeps the waiting calls across a restart.
const AWAITING_KEY: &str = "conversation.awaiting_input";

fn view(persona_id: &str, w: &Awaiting) -> AwaitingInputView {
    AwaitingInputView {
        persona_id: persona_id.to_owned(),
        tool: w.tool.clone(),
        missing: w.missing.clone(),
        question: w.question.clone(),
        correlation_id: w.correlation_id.clone(),
        asked_at: w.asked_at.clone(),
        expires_at: w.expires_at().map(rfc3339).unwrap_or_default(),
    }
}

/// How a message is handled without a reply job (and without the model).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direct {
    /// Delete all, list all, cancel.
    Intent,
    /// The answer to the question a waiting call asked.
    Answer,
    /// A command naming this tool without its argument: ask for it.
    Ask(&'static str),
}

/// What became of a wait, as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Answered,
    Cancelled,
    Expired,
    Superseded,
}

impl Ended {
    fn outcome(self) -> &'static str {
        match self {
            Self::Answered => "answered",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
            Self::Superseded => "superseded",
        }
    }

    fn detail(self) -> String {
        match self {
            Self::Answered => "answered by the user".to_owned(),
            Self::Cancelled => "cancelled by the user; nothing ran".to_owned(),
            Self::Expired => format!(
                "no answer within {} minutes; nothing ran",
                St::AwaitingInput.timeout().whole_minutes()
            ),
            Self::Superseded => "set aside by a new request; nothing ran".to_owned(),
        }
    }
}

impl Tools {
    /// The question this conversation waits on, if any.
    pub async fn awaiting_input(&self, persona: &str) -> Result<Option<AwaitingInputView>> {
        let p = self.ctx.ledger.find_persona(persona).await?;
        Ok(self.assistant.conversations.awaiting(&p.id).map(|w| view(&p.id, &w)))
    }

    /// Ends the waits left unanswered past the inactivity TTL: the
    /// conversation goes back to IDLE, nothing runs, and the chat says so.
    /// Returns how many (the proposal timer calls this every few seconds).
    pub async fn expire_awaiting_inputs(&self) -> Result<usize> {
        let due = self.assistant.conversations.take_due();
        if due.is_empty() {
            return Ok(0);
        }
        for (persona_id, w) in &due {
            self.ended(persona_id, w, Ended::Expired).await?;
            self.assistant.conversations.apply_from(persona_id, St::AwaitingInput, Ev::Timeout);
            if self.ctx.ledger.persona(persona_id).await.is_ok() {
                let minutes = St::AwaitingInput.timeout().whole_minutes();
                let line = slots::expired_line(w.tool.as_deref(), w.missing.first().map(String::as_str), w.lang, minutes);
                self.post_system(persona_id, &line).await?;
            }
        }
        self.persist_awaiting().await?;
        Ok(due.len())
    }

    /// After a restart: the waits recorded in the ledger (of personas that
    /// still exist) are waiting again. A record that cannot be read is
    /// logged and dropped; it never stops the start.
    pub(crate) async fn restore_awaiting(&self) {
        let stored = match self.ctx.ledger.runtime_setting(AWAITING_KEY).await {
            Ok(Some(json)) => json,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "waiting questions could not be read");
                return;
            }
        };
        let mut waits: HashMap<String, Awaiting> = serde_json::from_str(&stored).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "waiting questions could not be parsed; dropped");
            HashMap::new()
        });
        let mut known = HashMap::new();
        for (persona_id, w) in waits.drain() {
            if self.ctx.ledger.persona(&persona_id).await.is_ok() {
                known.insert(persona_id, w);
            }
        }
        tracing::info!(waiting = known.len(), "questions waiting for an answer restored");
        self.assistant.conversations.restore(known);
    }

    /// Decides, before the message is stored, whether it is handled
    /// without the model. A wait the message does not answer ends here: a
    /// new request sets it aside; the persona's own question is answered
    /// through the model.
    pub(crate) async fn direct_turn(&self, persona: &Persona, content: &str) -> Result<Option<Direct>> {
        self.expire_awaiting_inputs().await?;
        let intent = runtime::detect_intent(content);
        if let Some(w) = self.assistant.conversations.awaiting(&persona.id) {
            if intent != Some(DeterministicIntent::Cancel) {
                let new_request = intent.is_some() || self.is_new_request(content);
                if w.tool.is_some() && !new_request {
                    return Ok(Some(Direct::Answer));
                }
                let ended = if new_request { Ended::Superseded } else { Ended::Answered };
                self.end_wait(&persona.id, ended).await?;
            }
        }
        if intent.is_some() {
            return Ok(Some(Direct::Intent));
        }
        Ok(slots::bare_command(content).map(Direct::Ask))
    }

    /// A command for some tool ("save the show Dark", "lembra de …"), not
    /// an answer.
    fn is_new_request(&self, content: &str) -> bool {
        let names: Vec<&str> = self.assistant.pipeline.registry().all().iter().map(|t| t.name.as_str()).collect();
        runtime::router::route(content, &names).must_call || slots::bare_command(content).is_some()
    }

    /// Handles a message [`Tools::direct_turn`] took (already stored).
    pub(crate) async fn handle_direct(&self, persona: &Persona, content: &str, direct: Direct) -> Result<()> {
        match direct {
            Direct::Intent => {
                self.handle_intent(persona, content).await?;
            }
            Direct::Answer => self.answer(persona, content).await?,
            Direct::Ask(tool) => {
                let correlation_id = runtime::pipeline::new_correlation_id();
                self.turn_started(&persona.id);
                let tool = tool.to_owned();
                let result = self
                    .assistant
                    .run(&persona.id, role_of(persona), &correlation_id, move |p, ctx| p.call(ctx, &tool, Map::new(), None))
                    .await?;
                let planned = self.after_call(persona, &correlation_id, result, slots::language_of(content)).await?;
                self.finish_direct_turn(&persona.id, planned).await?;
            }
        }
        Ok(())
    }

    /// "cancel" while a question waits: the wait ends (AWAITING_INPUT →
    /// IDLE), nothing runs. False when nothing waits.
    pub(crate) async fn cancel_wait(&self, persona_id: &str) -> Result<bool> {
        let Some(w) = self.end_wait(persona_id, Ended::Cancelled).await? else { return Ok(false) };
        self.proposal_answered(persona_id, Ev::Cancel)?;
        let line = slots::cancelled_line(w.tool.as_deref(), w.missing.first().map(String::as_str), w.lang);
        self.post_system(persona_id, &line).await?;
        Ok(true)
    }

    /// The answer fills the first missing argument and the same call goes
    /// on; an answer that does not fit is asked for again.
    async fn answer(&self, persona: &Persona, content: &str) -> Result<()> {
        let Some(w) = self.end_wait(&persona.id, Ended::Answered).await? else { return Ok(()) };
        self.turn_started(&persona.id);
        let (Some(tool), Some(field)) = (w.tool.clone(), w.missing.first().cloned()) else {
            self.turn_failed(&persona.id);
            return Ok(());
        };
        let field_schema = self
            .assistant
            .pipeline
            .registry()
            .get(&tool)
            .map(|t| t.args_schema["properties"][&field].clone())
            .unwrap_or_default();
        let mut args = w.args.clone();
        args.insert(field.clone(), slots::fill(&field_schema, content));
        let call = (tool.clone(), args);
        let result = self
            .assistant
            .run(&persona.id, role_of(persona), &w.correlation_id, move |p, ctx| p.call(ctx, &call.0, call.1, None))
            .await?;
        let planned = match result {
            // The answer does not fit its argument: asked again, with why.
            Err(PipelineError::InvalidArgs { violations, .. }) if violations.iter().all(|v| v.path == format!("/{field}")) => {
                let question = slots::retry_question(&violations, &w.question, w.lang);
                let question = self.ask_for(&persona.id, &w.correlation_id, &tool, w.args, w.missing, w.lang, Some(question)).await?;
                Planned { content: question, role: MessageRole::Persona }
            }
            other => self.after_call(persona, &w.correlation_id, other, w.lang).await?,
        };
        self.finish_direct_turn(&persona.id, planned).await
    }

    /// The line for a call's result: executed or proposed (announced), a
    /// question for what is missing, or the refusal.
    async fn after_call(
        &self,
        persona: &Persona,
        correlation_id: &str,
        result: std::result::Result<Outcome, PipelineError>,
        lang: Lang,
    ) -> Result<Planned> {
        Ok(match result {
            Ok(outcome) => self.announce(&persona.id, correlation_id, outcome).await,
            Err(PipelineError::MissingArgs { tool, args, missing }) => {
                let question = self.ask_for(&persona.id, correlation_id, &tool, args, missing, lang, None).await?;
                Planned { content: question, role: MessageRole::Persona }
            }
            Err(e) => Planned { content: refusal(&e), role: MessageRole::System },
        })
    }

    /// PROCESSING_INTENT → AWAITING_INPUT / TOOL_PROPOSED / RESPONDING, the
    /// line posted, the turn delivered.
    async fn finish_direct_turn(&self, persona_id: &str, planned: Planned) -> Result<()> {
        self.turn_decided(persona_id);
        if self.ctx.ledger.persona(persona_id).await.is_ok() && !planned.content.is_empty() {
            self.post_message(persona_id, planned.role, &planned.content).await?;
        }
        self.turn_delivered(persona_id);
        Ok(())
    }

    /// Asks for the first of `missing` (or `question` as given): the call
    /// waits with the arguments it has. Returns the question.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn ask_for(
        &self,
        persona_id: &str,
        correlation_id: &str,
        tool: &str,
        args: Map<String, Value>,
        missing: Vec<String>,
        lang: Lang,
        question: Option<String>,
    ) -> Result<String> {
        let field = missing.first().cloned().unwrap_or_default();
        let question = question.unwrap_or_else(|| {
            let description = self
                .assistant
                .pipeline
                .registry()
                .get(tool)
                .and_then(|t| t.args_schema["properties"][&field]["description"].as_str().map(str::to_owned))
                .unwrap_or_default();
            slots::question(tool, &field, &description, lang)
        });
        let w = Awaiting {
            tool: Some(tool.to_owned()),
            args,
            missing,
            question: question.clone(),
            correlation_id: correlation_id.to_owned(),
            lang,
            asked_at: now_rfc3339(self),
        };
        self.wait_for(persona_id, w, &format!("asked the user for `{field}`")).await?;
        Ok(question)
    }

    /// The persona asked a question of its own (`request_clarification`):
    /// the conversation waits for the answer, which goes to the model.
    pub(crate) async fn await_answer(&self, persona_id: &str, correlation_id: &str, question: &str) {
        let w = Awaiting {
            tool: None,
            args: Map::new(),
            missing: Vec::new(),
            question: question.to_owned(),
            correlation_id: correlation_id.to_owned(),
            lang: slots::language_of(question),
            asked_at: now_rfc3339(self),
        };
        if let Err(e) = self.wait_for(persona_id, w, "the persona asked the user").await {
            tracing::warn!(code = e.code, "the question could not be recorded: {}", e.message);
        }
    }

    async fn wait_for(&self, persona_id: &str, w: Awaiting, detail: &str) -> Result<()> {
        self.record_input(persona_id, &w, detail).await?;
        self.assistant.conversations.set_awaiting(persona_id, w.clone());
        self.persist_awaiting().await?;
        self.ctx.emit(AppEvent::InputAwaited { awaiting: view(persona_id, &w) });
        Ok(())
    }

    /// Ends the wait of this conversation (if any), recorded.
    async fn end_wait(&self, persona_id: &str, ended: Ended) -> Result<Option<Awaiting>> {
        let Some(w) = self.assistant.conversations.take_awaiting(persona_id) else { return Ok(None) };
        self.ended(persona_id, &w, ended).await?;
        self.persist_awaiting().await?;
        Ok(Some(w))
    }

    async fn ended(&self, persona_id: &str, w: &Awaiting, ended: Ended) -> Result<()> {
        tracing::info!(persona = persona_id, correlation_id = %w.correlation_id, outcome = ended.outcome(), "wait for the user's answer ended");
        self.record_input(persona_id, w, &ended.detail()).await?;
        self.ctx.emit(AppEvent::InputSettled {
            persona_id: persona_id.to_owned(),
            correlation_id: w.correlation_id.clone(),
            outcome: ended.outcome().to_owned(),
        });
        Ok(())
    }

    /// A `tool_audited` record (step `await_input`) under the call's
    /// correlation id; the audit sink blocks on the ledger: off the async threads.
    async fn record_input(&self, persona_id: &str, w: &Awaiting, detail: &str) -> Result<()> {
        let pipeline = self.assistant.pipeline.clone();
        let (persona_id, correlation_id, tool, detail) =
            (persona_id.to_owned(), w.correlation_id.clone(), w.tool.clone(), detail.to_owned());
        tokio::task::spawn_blocking(move || {
            let ctx = CallContext::new(&persona_id, Role::Human, &correlation_id);
            pipeline.record_input(&ctx, tool.as_deref(), &detail);
        })
        .await
        .map_err(|e| AppError::new("TOOL_FAILED", format!("the audit of a question stopped: {e}")))
    }

    /// Writes every wait to the ledger (one runtime setting), newest last:
    /// the snapshot is taken under the lock, so the last write is the latest.
    async fn persist_awaiting(&self) -> Result<()> {
        let _one_at_a_time = self.assistant.awaiting_writes.lock().await;
        let value = self.assistant.conversations.awaiting_snapshot();
        let receipt = self.ctx.ledger.append(HUMAN_ENTITY, EventBody::RuntimeSettingSet { key: AWAITING_KEY.to_owned(), value }).await?;
        self.ctx.emit(AppEvent::LedgerAppended { seq: receipt.seq, kind: receipt.kind });
        Ok(())
    }

    /// The language of the user's latest message (for a question the
    /// planner's call makes necessary).
    pub(crate) async fn user_language(&self, persona_id: &str) -> Lang {
        let recent = self.ctx.ledger.messages(persona_id, Some(8)).await.unwrap_or_default();
        recent.iter().rev().find(|m| m.role == MessageRole::Human).map_or(Lang::En, |m| slots::language_of(&m.content))
    }
}

fn now_rfc3339(tools: &Tools) -> String {
    rfc3339(tools.ctx.ledger.now())
}
