//! The conversation state machine in the app (seed 003 §1.2):
//! IDLE → PROCESSING_INTENT → TOOL_PROPOSED / RESPONDING → EXECUTING …,
//! one machine per conversation, driven by the real flow: a reply job
//! starting, the planner's verdict, the reply being delivered, Confirm,
//! Reject and the deterministic intents. The table lives in
//! `runtime::state`; a transition it does not allow is rejected (the state
//! stays) and logged, and Confirm / Reject are refused when the
//! conversation is not waiting for them.
//!
//! Timeouts: the waiting states (IDLE, AWAITING_INPUT, TOOL_PROPOSED) expire
//! by the seed's timeouts whenever the conversation is next touched. The
//! working states (PROCESSING_INTENT, EXECUTING, RESPONDING) time out on a
//! lack of progress: no token and no finished step for the stall limit
//! (the seed's 30 s by default, `LEDGERMIND_STALL_TIMEOUT_SECS`; four times
//! that before the model's first token, while it reads the prompt). A slow
//! CPU model that keeps writing is never cut off; a model or tool that
//! stops moving is (`LLM_TIMEOUT` / `TOOL_TIMEOUT`, shown to the user), the
//! machine goes back by its Timeout transition, and the turn is not retried,
//! so nothing runs twice. A tool is stopped by the pipeline's executor
//! (`runtime::Stoppable`): its later writes are refused, its action ends
//! FAILED, and a plan's earlier steps are undone.
//!
//! A proposal left unanswered for its 5 minutes is expired by a timer
//! ([`Tools::expire_proposals`]): its card is settled and the chat says so.
//!
//! AWAITING_INPUT: a call that lacks a required argument waits here for the
//! user's answer ([`Awaiting`], see `awaiting.rs`); the same timer ends the
//! wait after the inactivity TTL.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use runtime::state::{Conversation, ConversationEvent as Ev, ConversationState as St, InvalidTransition};
use runtime::slots::Lang;
use runtime::{Clock, Role};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::Tools;
use crate::error::AppError;
use crate::events::AppEvent;
use crate::Result;

/// The working states' limit without progress when none is configured
/// (seed 003 §1.2: 30 s).
pub const DEFAULT_STALL_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);
/// Overrides the limit, in seconds.
pub const STALL_LIMIT_ENV: &str = "LEDGERMIND_STALL_TIMEOUT_SECS";

/// The configured limit (`LEDGERMIND_STALL_TIMEOUT_SECS`, else 30 s).
pub fn stall_limit_from_env() -> std::time::Duration {
    std::env::var(STALL_LIMIT_ENV)
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|&s| s > 0)
        .map_or(DEFAULT_STALL_LIMIT, std::time::Duration::from_secs)
}

pub(crate) struct Conversations {
    clock: Arc<dyn Clock>,
    map: Mutex<HashMap<String, Conversation>>,
    stall_limit: time::Duration,
    /// The calls waiting for the user's answer, by conversation.
    awaiting: Mutex<HashMap<String, Awaiting>>,
}

/// A call waiting for the user's answer (AWAITING_INPUT): the tool, the
/// arguments it has, the ones it lacks, and the question asked. `tool` is
/// None for a question the persona asked itself (`request_clarification`):
/// its answer goes to the model like any message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Awaiting {
    pub tool: Option<String>,
    pub args: Map<String, Value>,
    pub missing: Vec<String>,
    pub question: String,
    pub correlation_id: String,
    pub lang: Lang,
    /// RFC 3339; the inactivity TTL counts from here.
    pub asked_at: String,
}

impl Awaiting {
    pub(crate) fn asked_at(&self) -> Option<time::OffsetDateTime> {
        time::OffsetDateTime::parse(&self.asked_at, &time::format_description::well_known::Rfc3339).ok()
    }

    /// When the wait ends unanswered.
    pub(crate) fn expires_at(&self) -> Option<time::OffsetDateTime> {
        self.asked_at().map(|t| t + St::AwaitingInput.timeout())
    }
}

impl Conversations {
    pub(crate) fn new(clock: Arc<dyn Clock>, stall_limit: std::time::Duration) -> Self {
        let stall_limit = time::Duration::try_from(stall_limit).unwrap_or(time::Duration::seconds(30));
        Self { clock, map: Mutex::new(HashMap::new()), stall_limit, awaiting: Mutex::new(HashMap::new()) }
    }

    fn awaiting_map(&self) -> MutexGuard<'_, HashMap<String, Awaiting>> {
        self.awaiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The call this conversation waits on, if any.
    pub(crate) fn awaiting(&self, id: &str) -> Option<Awaiting> {
        self.awaiting_map().get(id).cloned()
    }

    pub(crate) fn set_awaiting(&self, id: &str, waiting: Awaiting) {
        self.awaiting_map().insert(id.to_owned(), waiting);
    }

    pub(crate) fn take_awaiting(&self, id: &str) -> Option<Awaiting> {
        self.awaiting_map().remove(id)
    }

    /// The waits whose inactivity TTL has passed, taken out.
    pub(crate) fn take_due(&self) -> Vec<(String, Awaiting)> {
        let now = self.clock.now();
        let mut map = self.awaiting_map();
        let due: Vec<String> =
            map.iter().filter(|(_, w)| w.expires_at().is_none_or(|end| end <= now)).map(|(id, _)| id.clone()).collect();
        due.into_iter().filter_map(|id| map.remove(&id).map(|w| (id, w))).collect()
    }

    /// Every wait as one JSON object (None when nothing waits), for the ledger.
    pub(crate) fn awaiting_snapshot(&self) -> Option<String> {
        let map = self.awaiting_map();
        (!map.is_empty()).then(|| serde_json::to_string(&*map).unwrap_or_default())
    }

    /// After a restart: the waits recorded in the ledger, each conversation
    /// back in AWAITING_INPUT since its question.
    pub(crate) fn restore(&self, waits: HashMap<String, Awaiting>) {
        let mut map = self.lock();
        for (id, w) in &waits {
            let since = w.asked_at().unwrap_or_else(|| self.clock.now());
            map.insert(id.clone(), Conversation::awaiting_since(since));
        }
        drop(map);
        self.awaiting_map().extend(waits);
    }

    /// How long a working state may go without progress.
    pub(crate) fn stall_limit(&self) -> std::time::Duration {
        std::time::Duration::try_from(self.stall_limit).unwrap_or(DEFAULT_STALL_LIMIT)
    }

    /// Progress in a working state (a token, a finished step).
    pub(crate) fn progress(&self, id: &str) {
        let now = self.clock.now();
        if let Some(c) = self.lock().get_mut(id) {
            c.touch(now);
        }
    }

    /// Another model call starts in this turn (the next step of a plan).
    pub(crate) fn model_call(&self, id: &str) {
        let now = self.clock.now();
        if let Some(c) = self.lock().get_mut(id) {
            c.model_call(now);
        }
    }

    /// A working state without progress for the stall limit times out:
    /// the Timeout transition is applied and the new state returned.
    pub(crate) fn check_stall(&self, id: &str) -> Option<St> {
        let now = self.clock.now();
        let mut map = self.lock();
        let c = map.get_mut(id)?;
        let from = c.state();
        let to = c.stall(now, self.stall_limit)?;
        tracing::warn!(persona = id, ?from, ?to, limit_s = self.stall_limit.whole_seconds(), "no progress: conversation timed out");
        Some(to)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Conversation>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn with<T>(&self, id: &str, f: impl FnOnce(&mut Conversation, time::OffsetDateTime) -> T) -> T {
        let now = self.clock.now();
        let mut map = self.lock();
        let c = map.entry(id.to_owned()).or_insert_with(|| Conversation::new(now));
        if matches!(c.state(), St::Idle | St::AwaitingInput | St::ToolProposed) {
            let from = c.state();
            if let Some(to) = c.tick(now) {
                if from != to {
                    tracing::info!(persona = id, ?from, ?to, "conversation timed out");
                }
            }
        }
        f(c, now)
    }

    pub(crate) fn state(&self, id: &str) -> St {
        self.with(id, |c, _| c.state())
    }

    /// Applies `event`; a transition the table does not allow is rejected
    /// (the state stays) and logged.
    pub(crate) fn apply(&self, id: &str, event: Ev) -> Result<St, InvalidTransition> {
        self.with(id, |c, now| {
            let from = c.state();
            let result = c.apply(event, now);
            match &result {
                Ok(to) => tracing::debug!(persona = id, ?from, ?event, ?to, "conversation"),
                Err(e) => tracing::warn!(persona = id, error = %e, "conversation transition rejected"),
            }
            result
        })
    }

    /// Applies `event` only from `from` (a no-op otherwise).
    pub(crate) fn apply_from(&self, id: &str, from: St, event: Ev) {
        if self.state(id) == from {
            let _logged_when_rejected = self.apply(id, event);
        }
    }

    /// A working state's timeout, now (a call that outlived the limit).
    pub(crate) fn time_out(&self, id: &str) {
        if self.state(id).is_working() {
            let _logged_when_rejected = self.apply(id, Ev::Timeout);
        }
    }

    /// Starts over in IDLE, after a rejected transition the flow cannot
    /// stop at (a new turn must be served); logged.
    fn reset(&self, id: &str) {
        let now = self.clock.now();
        tracing::warn!(persona = id, "conversation reset to IDLE");
        self.lock().insert(id.to_owned(), Conversation::new(now));
    }
}

fn state_error(e: &InvalidTransition) -> AppError {
    AppError::new("CONVERSATION_STATE", format!("Not now: the conversation cannot do that in its current state ({e})."))
}

impl Tools {
    /// The conversation's state, as the seed names it (e.g. "TOOL_PROPOSED").
    pub async fn conversation_state(&self, persona: &str) -> Result<String> {
        let p = self.ctx.ledger.find_persona(persona).await?;
        let state = self.assistant.conversations.state(&p.id);
        Ok(serde_json::to_value(state).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default())
    }

    /// A user turn starts being processed (a reply job, or an intent). A
    /// proposal still waiting is set aside: one pending proposal per
    /// conversation, and the user has moved on.
    pub(crate) fn turn_started(&self, persona_id: &str) {
        self.assistant.tools.forget_acted(persona_id);
        let conversations = &self.assistant.conversations;
        if conversations.state(persona_id) == St::ToolProposed {
            if let Some(old) = self.assistant.pipeline.confirmations().supersede(persona_id) {
                tracing::info!(persona = persona_id, tool = %old.tool, "a new message set the waiting proposal aside");
                self.ctx.emit(AppEvent::ProposalSettled {
                    persona_id: persona_id.to_owned(),
                    nonce: old.nonce,
                    outcome: "superseded".into(),
                });
            }
            self.assistant.plans.cancel(persona_id);
        }
        if conversations.apply(persona_id, Ev::UserMessage).is_err() {
            // E.g. a turn whose job died without reporting: serve this one.
            conversations.reset(persona_id);
            let _logged_when_rejected = conversations.apply(persona_id, Ev::UserMessage);
        }
    }

    /// The planner has decided: the user is asked for what is missing, a
    /// proposal waits, or the reply is ready.
    pub(crate) fn turn_decided(&self, persona_id: &str) {
        let waiting = self.assistant.pipeline.confirmations().pending(persona_id).is_some();
        let asking = self.assistant.conversations.awaiting(persona_id).is_some();
        let event = match (asking, waiting) {
            (true, _) => Ev::NeedInput,
            (false, true) => Ev::ActionProposed,
            (false, false) => Ev::ReplyReady,
        };
        let _logged_when_rejected = self.assistant.conversations.apply(persona_id, event);
    }

    /// The turn's reply (or its error) reached the user.
    pub(crate) fn turn_delivered(&self, persona_id: &str) {
        self.assistant.conversations.apply_from(persona_id, St::Responding, Ev::ResponseDelivered);
    }

    /// The turn failed: its error is the response the user sees.
    pub(crate) fn turn_failed(&self, persona_id: &str) {
        let conversations = &self.assistant.conversations;
        conversations.apply_from(persona_id, St::ProcessingIntent, Ev::ReplyReady);
        conversations.apply_from(persona_id, St::Responding, Ev::ResponseDelivered);
    }

    /// Confirm / Reject / Cancel of a waiting proposal: refused unless the
    /// conversation is waiting for it.
    pub(crate) fn proposal_answered(&self, persona_id: &str, event: Ev) -> Result<()> {
        self.assistant.conversations.apply(persona_id, event).map(|_| ()).map_err(|e| state_error(&e))
    }

    /// Proposals left unanswered past their 5 minutes expire: the plan
    /// they belong to stops, the conversation leaves TOOL_PROPOSED, the
    /// card is settled as "expired" and the chat says so. Returns how many.
    pub async fn expire_proposals(&self) -> Result<usize> {
        // Most ticks find nothing waiting: no thread is woken for them.
        if self.assistant.pipeline.confirmations().is_empty() {
            return Ok(0);
        }
        // The audit sink blocks on the ledger: off the async threads.
        let pipeline = self.assistant.pipeline.clone();
        let expired = tokio::task::spawn_blocking(move || pipeline.expire_proposals(Role::Human))
            .await
            .map_err(|e| AppError::new("TOOL_FAILED", format!("the proposal timer stopped: {e}")))?;
        for p in &expired {
            let persona_id = &p.conversation_id;
            let plan = self.assistant.plans.cancel(persona_id);
            self.assistant.conversations.apply_from(persona_id, St::ToolProposed, Ev::Timeout);
            tracing::info!(persona = %persona_id, tool = %p.tool, correlation_id = %p.correlation_id, "proposal expired unanswered");
            self.ctx.emit(AppEvent::ProposalSettled { persona_id: persona_id.clone(), nonce: p.nonce.clone(), outcome: "expired".into() });
            if self.ctx.ledger.persona(persona_id).await.is_ok() {
                self.post_system(persona_id, &expired_line(&p.tool, plan, p.expires_at - p.created_at)).await?;
            }
        }
        Ok(expired.len())
    }

    /// Expires unanswered proposals and questions every few seconds (stops
    /// with the engine).
    pub(crate) fn spawn_proposal_timer(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        self.ctx.spawn_timer(self, std::time::Duration::from_secs(5), false, |tools| async move {
            if let Err(e) = tools.expire_proposals().await {
                tracing::warn!(code = e.code, "could not expire proposals: {}", e.message);
            }
            if let Err(e) = tools.expire_awaiting_inputs().await {
                tracing::warn!(code = e.code, "could not end unanswered questions: {}", e.message);
            }
        })
    }

    /// A confirmed action ended: the next plan step waits, or the result is
    /// the response.
    pub(crate) fn action_ended(&self, persona_id: &str, ok: bool) {
        let waiting = self.assistant.pipeline.confirmations().pending(persona_id).is_some();
        let event = match (waiting, ok) {
            (true, _) => Ev::ActionProposed,
            (false, true) => Ev::ActionFinished,
            (false, false) => Ev::ActionFailed,
        };
        let _logged_when_rejected = self.assistant.conversations.apply(persona_id, event);
    }
}

/// What the chat says when a proposal expires after `lifetime`.
fn expired_line(tool: &str, plan: Option<(usize, usize)>, lifetime: time::Duration) -> String {
    let what = match plan {
        Some((step, total)) => format!("Step {step} of {total} (`{tool}`)"),
        None => format!("The proposal to run `{tool}`"),
    };
    let after = match lifetime.whole_minutes() {
        0 => format!("{} s", lifetime.whole_seconds()),
        1 => "1 minute".to_owned(),
        m => format!("{m} minutes"),
    };
    format!("{what} expired after {after} without an answer, so nothing was done. Ask again if you still want it.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtime::ManualClock;

    #[test]
    fn waiting_states_time_out_and_working_states_wait_for_the_flow() {
        let clock = Arc::new(ManualClock::at_epoch());
        let c = Conversations::new(clock.clone(), DEFAULT_STALL_LIMIT);
        c.apply("p", Ev::UserMessage).expect("message");
        c.apply("p", Ev::ActionProposed).expect("proposed");
        clock.advance(time::Duration::minutes(4));
        assert_eq!(c.state("p"), St::ToolProposed);
        clock.advance(time::Duration::minutes(1));
        assert_eq!(c.state("p"), St::Idle, "TOOL_PROPOSED lasts 5 minutes");
        c.apply("p", Ev::UserMessage).expect("message");
        clock.advance(time::Duration::seconds(100));
        assert_eq!(c.check_stall("p"), None, "the prompt is still being read");
        c.progress("p");
        for _ in 0..6 {
            clock.advance(time::Duration::seconds(25));
            assert_eq!(c.check_stall("p"), None);
            c.progress("p");
        }
        assert_eq!(c.state("p"), St::ProcessingIntent, "a slow reply that keeps coming is not abandoned");
        clock.advance(time::Duration::seconds(30));
        assert_eq!(c.state("p"), St::ProcessingIntent, "only the stall check ends a working state");
        assert_eq!(c.check_stall("p"), Some(St::Idle));
        assert_eq!(c.check_stall("p"), None, "once");
        assert_eq!(c.check_stall("unknown"), None);
    }

    #[test]
    fn a_stalled_action_is_reported_and_the_limit_is_configurable() {
        let clock = Arc::new(ManualClock::at_epoch());
        let c = Conversations::new(clock.clone(), std::time::Duration::from_secs(5));
        assert_eq!(c.stall_limit(), std::time::Duration::from_secs(5));
        c.apply("p", Ev::UserMessage).expect("message");
        c.apply("p", Ev::ActionProposed).expect("proposed");
        clock.advance(time::Duration::seconds(60));
        assert_eq!(c.check_stall("p"), None, "a proposal waits for the user, not for progress");
        c.apply("p", Ev::Confirmed).expect("confirmed");
        clock.advance(time::Duration::seconds(4));
        assert_eq!(c.check_stall("p"), None);
        clock.advance(time::Duration::seconds(1));
        assert_eq!(c.check_stall("p"), Some(St::Responding), "EXECUTING is not abandoned: its timeout is reported");
        assert!(c.apply("p", Ev::ActionFinished).is_err(), "a late finish changes nothing");
        c.apply("p", Ev::ResponseDelivered).expect("delivered");
        assert_eq!(c.state("p"), St::Idle);
    }

    #[test]
    fn a_rejected_transition_keeps_the_state_and_apply_from_is_a_no_op_elsewhere() {
        let c = Conversations::new(Arc::new(ManualClock::at_epoch()), DEFAULT_STALL_LIMIT);
        assert!(c.apply("p", Ev::Confirmed).is_err());
        assert_eq!(c.state("p"), St::Idle);
        c.apply_from("p", St::Responding, Ev::ResponseDelivered);
        assert_eq!(c.state("p"), St::Idle);
        c.apply("p", Ev::UserMessage).expect("message");
        assert!(c.apply("p", Ev::UserMessage).is_err(), "one turn at a time");
        c.reset("p");
        assert_eq!(c.state("p"), St::Idle);
    }
}
