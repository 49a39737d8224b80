//! The two state machines of seed 003: the conversation (§1.2) and the
//! action lifecycle (§2.1). Transitions are a pure table; anything not in
//! the table is rejected with an error and logged.

use serde::Serialize;
use thiserror::Error;
use time::{Duration, OffsetDateTime};

/// Where a conversation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ConversationState {
    Idle,
    ProcessingIntent,
    ToolProposed,
    Executing,
    Responding,
    AwaitingInput,
}

/// What can happen to a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConversationEvent {
    /// The user sent a message.
    UserMessage,
    /// The intent needs a tool that waits for confirmation.
    ActionProposed,
    /// The intent is a question or chat: answer directly.
    ReplyReady,
    /// Information is missing: ask the user.
    NeedInput,
    /// The user confirmed with a valid nonce (checked by `confirm`).
    Confirmed,
    /// The user rejected the proposal.
    Rejected,
    /// The action finished (successfully or not); the result is reported.
    ActionFinished,
    ActionFailed,
    /// The reply reached the user.
    ResponseDelivered,
    /// The deterministic "cancel" intent.
    Cancel,
    /// The state's timeout elapsed.
    Timeout,
}

impl ConversationState {
    pub const ALL: [ConversationState; 6] = [
        Self::Idle,
        Self::ProcessingIntent,
        Self::ToolProposed,
        Self::Executing,
        Self::Responding,
        Self::AwaitingInput,
    ];

    /// Inactivity TTL of a session (seed 003 §1.2).
    pub const INACTIVITY_TTL: Duration = Duration::minutes(10);

    /// The states where the app works for the user (the model writing, a
    /// tool running). Their timeout measures a lack of progress, not the
    /// whole turn: a slow CPU model that keeps writing is not cut off.
    pub fn is_working(self) -> bool {
        matches!(self, Self::ProcessingIntent | Self::Executing | Self::Responding)
    }

    /// How long the conversation may stay in this state (a working state:
    /// without progress).
    pub fn timeout(self) -> Duration {
        match self {
            Self::Idle | Self::AwaitingInput => Self::INACTIVITY_TTL,
            Self::ProcessingIntent | Self::Executing | Self::Responding => Duration::seconds(30),
            Self::ToolProposed => Duration::minutes(5),
        }
    }
}

impl ConversationEvent {
    pub const ALL: [ConversationEvent; 11] = [
        Self::UserMessage,
        Self::ActionProposed,
        Self::ReplyReady,
        Self::NeedInput,
        Self::Confirmed,
        Self::Rejected,
        Self::ActionFinished,
        Self::ActionFailed,
        Self::ResponseDelivered,
        Self::Cancel,
        Self::Timeout,
    ];
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid {machine} transition: {from} on {event}")]
pub struct InvalidTransition {
    pub machine: &'static str,
    pub from: String,
    pub event: String,
}

fn reject<S: std::fmt::Debug, E: std::fmt::Debug>(
    machine: &'static str,
    from: S,
    event: E,
) -> InvalidTransition {
    tracing::warn!(machine, from = ?from, event = ?event, "invalid state transition rejected");
    InvalidTransition {
        machine,
        from: format!("{from:?}"),
        event: format!("{event:?}"),
    }
}

/// The conversation transition table.
///
/// A timeout returns to IDLE from every state except EXECUTING: an action
/// already running cannot be abandoned, so its timeout is reported to the
/// user as a failure (RESPONDING). An IDLE timeout is the session's
/// inactivity expiry and stays IDLE.
///
/// Two transitions beyond seed 003's table, both needed by the product:
/// a new message while a proposal waits (TOOL_PROPOSED → PROCESSING_INTENT:
/// the waiting proposal is set aside, "one pending proposal per
/// conversation"), and the next step of a multi-step plan waiting for its
/// own confirmation (EXECUTING → TOOL_PROPOSED).
pub fn next_conversation_state(
    from: ConversationState,
    event: ConversationEvent,
) -> Result<ConversationState, InvalidTransition> {
    use ConversationEvent as E;
    use ConversationState as S;
    let to = match (from, event) {
        (S::Idle | S::AwaitingInput | S::ToolProposed, E::UserMessage) => S::ProcessingIntent,
        (S::Executing, E::ActionProposed) => S::ToolProposed,
        (S::ProcessingIntent, E::ActionProposed) => S::ToolProposed,
        (S::ProcessingIntent, E::ReplyReady) => S::Responding,
        (S::ProcessingIntent, E::NeedInput) => S::AwaitingInput,
        (S::ToolProposed, E::Confirmed) => S::Executing,
        (S::ToolProposed, E::Rejected | E::Cancel) => S::Responding,
        (S::Executing, E::ActionFinished | E::ActionFailed | E::Timeout) => S::Responding,
        (S::Responding, E::ResponseDelivered) => S::Idle,
        (S::ProcessingIntent | S::AwaitingInput, E::Cancel) => S::Idle,
        (
            S::Idle | S::ProcessingIntent | S::ToolProposed | S::Responding | S::AwaitingInput,
            E::Timeout,
        ) => S::Idle,
        _ => return Err(reject("conversation", from, event)),
    };
    Ok(to)
}

/// How many stall limits a model may take before its first token.
pub const FIRST_PROGRESS_FACTOR: i32 = 4;

/// A conversation's state with the instant it entered it and the last
/// sign of progress in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversation {
    state: ConversationState,
    since: OffsetDateTime,
    progress: OffsetDateTime,
}

impl Conversation {
    pub fn new(now: OffsetDateTime) -> Self {
        Self {
            state: ConversationState::Idle,
            since: now,
            progress: now,
        }
    }

    /// A conversation restored after a restart, waiting for the user's
    /// answer since `since`: its inactivity TTL counts from then.
    pub fn awaiting_since(since: OffsetDateTime) -> Self {
        Self {
            state: ConversationState::AwaitingInput,
            since,
            progress: since,
        }
    }

    /// A new model call in the same working state: it reads its prompt
    /// before its first token, like the first call.
    pub fn model_call(&mut self, now: OffsetDateTime) {
        if self.state.is_working() {
            self.since = now;
            self.progress = now;
        }
    }

    /// Progress in a working state: a token written, a step finished.
    pub fn touch(&mut self, now: OffsetDateTime) {
        self.progress = self.progress.max(now);
    }

    /// A working state with no progress for `limit` times out (applied and
    /// returned). Before the first sign of progress in PROCESSING_INTENT or
    /// RESPONDING the model is still reading its prompt, which a slow CPU
    /// does without a token to show: it gets [`FIRST_PROGRESS_FACTOR`]
    /// times the limit. The waiting states are left to [`Conversation::tick`].
    pub fn stall(&mut self, now: OffsetDateTime, limit: Duration) -> Option<ConversationState> {
        let reading = self.progress <= self.since && self.state != ConversationState::Executing;
        let allowed = if reading { limit * FIRST_PROGRESS_FACTOR } else { limit };
        if self.state.is_working() && now - self.progress >= allowed {
            self.apply(ConversationEvent::Timeout, now).ok()
        } else {
            None
        }
    }

    pub fn state(&self) -> ConversationState {
        self.state
    }

    pub fn since(&self) -> OffsetDateTime {
        self.since
    }

    pub fn apply(
        &mut self,
        event: ConversationEvent,
        now: OffsetDateTime,
    ) -> Result<ConversationState, InvalidTransition> {
        let to = next_conversation_state(self.state, event)?;
        self.state = to;
        self.since = now;
        self.progress = now;
        Ok(to)
    }

    /// Applies the timeout if a waiting state has outlived it (working
    /// states time out by [`Conversation::stall`]).
    pub fn tick(&mut self, now: OffsetDateTime) -> Option<ConversationState> {
        if !self.state.is_working() && now - self.since >= self.state.timeout() {
            self.apply(ConversationEvent::Timeout, now).ok()
        } else {
            None
        }
    }
}

/// The lifecycle of one action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ActionState {
    Detected,
    Proposed,
    Executing,
    Completed,
    Failed,
    Cancelled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionEvent {
    /// Shown to the user for confirmation.
    Propose,
    /// A tool that needs no confirmation starts at once.
    ExecuteDirectly,
    /// A valid nonce was presented.
    Confirm,
    /// Rejected by the user or superseded by a newer proposal.
    Cancel,
    Succeed,
    Fail,
    /// PROPOSED expires after 5 minutes; EXECUTING fails after 30 seconds.
    Timeout,
}

impl ActionState {
    pub const ALL: [ActionState; 6] = [
        Self::Detected,
        Self::Proposed,
        Self::Executing,
        Self::Completed,
        Self::Failed,
        Self::Cancelled,
    ];

    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }

    pub fn timeout(self) -> Option<Duration> {
        match self {
            Self::Proposed => Some(Duration::minutes(5)),
            Self::Executing => Some(Duration::seconds(30)),
            _ => None,
        }
    }
}

impl ActionEvent {
    pub const ALL: [ActionEvent; 7] = [
        Self::Propose,
        Self::ExecuteDirectly,
        Self::Confirm,
        Self::Cancel,
        Self::Succeed,
        Self::Fail,
        Self::Timeout,
    ];
}

/// The action transition table. EXECUTING cannot be cancelled.
pub fn next_action_state(
    from: ActionState,
    event: ActionEvent,
) -> Result<ActionState, InvalidTransition> {
    use ActionEvent as E;
    use ActionState as S;
    let to = match (from, event) {
        (S::Detected, E::Propose) => S::Proposed,
        (S::Detected, E::ExecuteDirectly) => S::Executing,
        (S::Detected | S::Proposed, E::Cancel) => S::Cancelled,
        (S::Proposed, E::Confirm) => S::Executing,
        (S::Proposed, E::Timeout) => S::Cancelled,
        (S::Executing, E::Succeed) => S::Completed,
        (S::Executing, E::Fail | E::Timeout) => S::Failed,
        _ => return Err(reject("action", from, event)),
    };
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ConversationEvent as CE;
    use ConversationState as CS;

    /// The expected table, written out independently of the implementation.
    fn expected_conversation(from: CS, ev: CE) -> Option<CS> {
        let table: &[(CS, CE, CS)] = &[
            (CS::Idle, CE::UserMessage, CS::ProcessingIntent),
            (CS::Idle, CE::Timeout, CS::Idle),
            (CS::ProcessingIntent, CE::ActionProposed, CS::ToolProposed),
            (CS::ProcessingIntent, CE::ReplyReady, CS::Responding),
            (CS::ProcessingIntent, CE::NeedInput, CS::AwaitingInput),
            (CS::ProcessingIntent, CE::Cancel, CS::Idle),
            (CS::ProcessingIntent, CE::Timeout, CS::Idle),
            (CS::ToolProposed, CE::Confirmed, CS::Executing),
            (CS::ToolProposed, CE::Rejected, CS::Responding),
            (CS::ToolProposed, CE::Cancel, CS::Responding),
            (CS::ToolProposed, CE::Timeout, CS::Idle),
            (CS::ToolProposed, CE::UserMessage, CS::ProcessingIntent),
            (CS::Executing, CE::ActionProposed, CS::ToolProposed),
            (CS::Executing, CE::ActionFinished, CS::Responding),
            (CS::Executing, CE::ActionFailed, CS::Responding),
            (CS::Executing, CE::Timeout, CS::Responding),
            (CS::Responding, CE::ResponseDelivered, CS::Idle),
            (CS::Responding, CE::Timeout, CS::Idle),
            (CS::AwaitingInput, CE::UserMessage, CS::ProcessingIntent),
            (CS::AwaitingInput, CE::Cancel, CS::Idle),
            (CS::AwaitingInput, CE::Timeout, CS::Idle),
        ];
        table
            .iter()
            .find(|(f, e, _)| *f == from && *e == ev)
            .map(|(_, _, t)| *t)
    }

    #[test]
    fn conversation_table_is_exhaustively_as_specified() {
        let mut valid = 0;
        for from in CS::ALL {
            for ev in CE::ALL {
                let got = next_conversation_state(from, ev).ok();
                assert_eq!(got, expected_conversation(from, ev), "{from:?} + {ev:?}");
                valid += usize::from(got.is_some());
            }
        }
        assert_eq!(valid, 21);
    }

    #[test]
    fn executing_cannot_be_cancelled() {
        let err = next_conversation_state(CS::Executing, CE::Cancel).unwrap_err();
        assert_eq!(err.machine, "conversation");
        assert_eq!(err.from, "Executing");
        assert_eq!(
            next_action_state(ActionState::Executing, ActionEvent::Cancel)
                .unwrap_err()
                .machine,
            "action"
        );
    }

    #[test]
    fn timeouts_match_seed_003() {
        assert_eq!(CS::Idle.timeout(), Duration::minutes(10));
        assert_eq!(CS::ProcessingIntent.timeout(), Duration::seconds(30));
        assert_eq!(CS::ToolProposed.timeout(), Duration::minutes(5));
        assert_eq!(CS::Executing.timeout(), Duration::seconds(30));
        assert_eq!(CS::Responding.timeout(), Duration::seconds(30));
        assert_eq!(CS::AwaitingInput.timeout(), Duration::minutes(10));
        assert_eq!(ActionState::Proposed.timeout(), Some(Duration::minutes(5)));
        assert_eq!(
            ActionState::Executing.timeout(),
            Some(Duration::seconds(30))
        );
    }

    #[test]
    fn conversation_times_out_only_after_its_state_timeout() {
        let t0 = time::macros::datetime!(2025-01-01 00:00 UTC);
        let mut c = Conversation::new(t0);
        c.apply(CE::UserMessage, t0).unwrap();
        c.apply(CE::ActionProposed, t0).unwrap();
        assert_eq!(c.tick(t0 + Duration::seconds(299)), None);
        assert_eq!(c.state(), CS::ToolProposed);
        assert_eq!(c.tick(t0 + Duration::minutes(5)), Some(CS::Idle));
        assert_eq!(c.since(), t0 + Duration::minutes(5));
    }

    #[test]
    fn a_working_state_times_out_on_lack_of_progress_not_on_length() {
        let t0 = time::macros::datetime!(2025-01-01 00:00 UTC);
        let limit = Duration::seconds(30);
        let mut c = Conversation::new(t0);
        c.apply(CE::UserMessage, t0).unwrap();
        // A slow model: a token every 20 s for five minutes is progress.
        for k in 1..=15 {
            let now = t0 + Duration::seconds(20 * k);
            assert_eq!(c.stall(now, limit), None, "at {k}");
            c.touch(now);
        }
        assert_eq!(c.state(), CS::ProcessingIntent);
        let last = t0 + Duration::seconds(300);
        assert_eq!(c.stall(last + Duration::seconds(29), limit), None);
        assert_eq!(c.stall(last + Duration::seconds(30), limit), Some(CS::Idle));
        // Before the first token (the prompt being read): four limits.
        c.apply(CE::UserMessage, last).unwrap();
        assert_eq!(c.stall(last + Duration::seconds(119), limit), None);
        assert_eq!(c.stall(last + Duration::seconds(120), limit), Some(CS::Idle));
        // A second model call in the same turn reads its prompt too.
        c.apply(CE::UserMessage, last).unwrap();
        c.touch(last + Duration::seconds(10));
        c.model_call(last + Duration::seconds(20));
        assert_eq!(c.stall(last + Duration::seconds(139), limit), None);
        assert_eq!(c.stall(last + Duration::seconds(140), limit), Some(CS::Idle));
        // EXECUTING cannot be abandoned: its timeout is reported (RESPONDING).
        c.apply(CE::UserMessage, last).unwrap();
        c.apply(CE::ActionProposed, last).unwrap();
        c.apply(CE::Confirmed, last).unwrap();
        assert_eq!(c.stall(last + Duration::seconds(31), limit), Some(CS::Responding));
        // Waiting states never stall; tick leaves working states alone.
        let mut w = Conversation::new(t0);
        w.apply(CE::UserMessage, t0).unwrap();
        w.apply(CE::ActionProposed, t0).unwrap();
        assert_eq!(w.stall(t0 + Duration::minutes(4), limit), None);
        let mut r = Conversation::new(t0);
        r.apply(CE::UserMessage, t0).unwrap();
        assert_eq!(r.tick(t0 + Duration::hours(1)), None);
        assert!(CS::ALL.iter().filter(|s| s.is_working()).count() == 3);
    }

    #[test]
    fn every_timeout_of_the_seed_ends_its_state_on_a_fake_clock() {
        let t0 = time::macros::datetime!(2025-01-01 00:00 UTC);
        let limit = Duration::seconds(30);
        // PROCESSING_INTENT, after its first sign of progress: 30 s.
        let mut c = Conversation::new(t0);
        c.apply(CE::UserMessage, t0).unwrap();
        c.touch(t0 + Duration::seconds(1));
        assert_eq!(c.stall(t0 + Duration::seconds(30), limit), None);
        assert_eq!(c.stall(t0 + Duration::seconds(31), limit), Some(CS::Idle));
        // RESPONDING: the reply being written, 30 s without a token.
        let mut c = Conversation::new(t0);
        c.apply(CE::UserMessage, t0).unwrap();
        c.apply(CE::ReplyReady, t0).unwrap();
        c.touch(t0 + Duration::seconds(5));
        assert_eq!(c.stall(t0 + Duration::seconds(34), limit), None);
        assert_eq!(c.stall(t0 + Duration::seconds(35), limit), Some(CS::Idle));
        // EXECUTING: 30 s, no grace for a prompt; reported as RESPONDING.
        let mut c = Conversation::new(t0);
        c.apply(CE::UserMessage, t0).unwrap();
        c.apply(CE::ActionProposed, t0).unwrap();
        c.apply(CE::Confirmed, t0).unwrap();
        assert_eq!(c.stall(t0 + Duration::seconds(29), limit), None);
        assert_eq!(c.stall(t0 + Duration::seconds(30), limit), Some(CS::Responding));
        // TOOL_PROPOSED: 5 minutes.
        let mut c = Conversation::new(t0);
        c.apply(CE::UserMessage, t0).unwrap();
        c.apply(CE::ActionProposed, t0).unwrap();
        assert_eq!(c.tick(t0 + Duration::seconds(299)), None);
        assert_eq!(c.tick(t0 + Duration::seconds(300)), Some(CS::Idle));
        // AWAITING_INPUT: the inactivity TTL (10 minutes), then IDLE; an
        // answer before it goes on.
        let mut c = Conversation::new(t0);
        c.apply(CE::UserMessage, t0).unwrap();
        c.apply(CE::NeedInput, t0).unwrap();
        assert_eq!(c.stall(t0 + Duration::hours(1), limit), None, "waiting for the user is not a stall");
        assert_eq!(c.tick(t0 + Duration::seconds(599)), None);
        assert_eq!(c.state(), CS::AwaitingInput);
        assert_eq!(c.tick(t0 + Duration::minutes(10)), Some(CS::Idle));
        let mut c = Conversation::new(t0);
        c.apply(CE::UserMessage, t0).unwrap();
        c.apply(CE::NeedInput, t0).unwrap();
        assert_eq!(c.apply(CE::UserMessage, t0 + Duration::minutes(9)), Ok(CS::ProcessingIntent));
        // Restored after a restart: the TTL still counts from the question.
        let mut c = Conversation::awaiting_since(t0);
        assert_eq!(c.tick(t0 + Duration::seconds(599)), None);
        assert_eq!(c.tick(t0 + Duration::minutes(10)), Some(CS::Idle));
        // IDLE's inactivity expiry stays IDLE and restarts its clock.
        let mut c = Conversation::new(t0);
        assert_eq!(c.tick(t0 + Duration::minutes(10)), Some(CS::Idle));
        assert_eq!(c.since(), t0 + Duration::minutes(10));
    }

    #[test]
    fn a_rejected_transition_leaves_the_state_unchanged() {
        let t0 = time::macros::datetime!(2025-01-01 00:00 UTC);
        let mut c = Conversation::new(t0);
        assert!(c.apply(CE::Confirmed, t0).is_err());
        assert_eq!(c.state(), CS::Idle);
    }

    fn expected_action(from: ActionState, ev: ActionEvent) -> Option<ActionState> {
        use ActionEvent as E;
        use ActionState as S;
        let table: &[(S, E, S)] = &[
            (S::Detected, E::Propose, S::Proposed),
            (S::Detected, E::ExecuteDirectly, S::Executing),
            (S::Detected, E::Cancel, S::Cancelled),
            (S::Proposed, E::Confirm, S::Executing),
            (S::Proposed, E::Cancel, S::Cancelled),
            (S::Proposed, E::Timeout, S::Cancelled),
            (S::Executing, E::Succeed, S::Completed),
            (S::Executing, E::Fail, S::Failed),
            (S::Executing, E::Timeout, S::Failed),
        ];
        table
            .iter()
            .find(|(f, e, _)| *f == from && *e == ev)
            .map(|(_, _, t)| *t)
    }

    #[test]
    fn action_table_is_exhaustively_as_specified() {
        for from in ActionState::ALL {
            for ev in ActionEvent::ALL {
                let got = next_action_state(from, ev).ok();
                assert_eq!(got, expected_action(from, ev), "{from:?} + {ev:?}");
                if from.is_terminal() {
                    assert!(got.is_none(), "terminal {from:?} accepted {ev:?}");
                }
            }
        }
    }
}
