//! Tools: what a persona's planner may do besides talking, and the
//! conversation state machine that the planner, Confirm and Reject drive.
//!
//! Inside:
//! - `assistant`: the planner in the reply path, the deterministic intents,
//!   the pipeline with confirmations, and the guards on what goes out;
//! - `plans`: multi-step plans (native tool calls, and a local model's open
//!   plans, one command at a time);
//! - `awaiting`: a call missing an argument waits for the person's answer;
//! - `turns`: the conversation state machine and its timeouts;
//! - `exec`: the executors that write the tools' effects to the ledger;
//! - `metadata`: the enrichment service the tools may call;
//! - `items`: the "Saved items" the tools keep.
//!
//! Public surface: [`Tools`] (proposals, settings, the pending question,
//! saved items) and the views in `views`. It receives the [`Context`] only;
//! the reply pipeline above it calls in, never the other way round.

pub(crate) mod assistant;
pub(crate) mod awaiting;
pub(crate) mod exec;
pub(crate) mod items;
pub(crate) mod metadata;
pub(crate) mod outcome;
pub(crate) mod plans;
pub(crate) mod turns;
pub(crate) mod views;

use std::sync::Arc;

use crate::context::Context;
use assistant::Assistant;
pub use assistant::CONFIRMATION_TTL_ENV;
pub use items::ItemView;
pub use metadata::MetadataServiceView;
pub use turns::{stall_limit_from_env, DEFAULT_STALL_LIMIT, STALL_LIMIT_ENV};
pub use views::{AwaitingInputView, ProposalView, ToolResultView, ToolSettingView};

/// The tools capability: the pipeline, its plans, waits and conversations.
pub struct Tools {
    pub(crate) ctx: Arc<Context>,
    pub(crate) assistant: Assistant,
}

impl Tools {
    /// Must be called inside the tokio runtime.
    pub fn new(ctx: Arc<Context>, stall_limit: std::time::Duration, metadata_timeout: std::time::Duration) -> Self {
        let assistant = Assistant::new(ctx.clone(), stall_limit, metadata_timeout);
        Self { ctx, assistant }
    }

    /// Whether `persona_id`'s current turn has run a tool that may write
    /// (its reply job must then never run again).
    pub(crate) fn acted_in_turn(&self, persona_id: &str) -> bool {
        self.assistant.tools.acted(persona_id)
    }

    /// Whether `persona_id`'s current turn quotes text the person did not
    /// write (see [`Self::quote_documents_in_turn`]).
    pub(crate) fn quotes_untrusted_text(&self, persona_id: &str) -> bool {
        self.assistant.quoted_turns.lock().is_ok_and(|q| q.contains(persona_id))
    }

    /// Marks (or clears) `persona_id`'s current turn as quoting documents:
    /// while marked, every tool call of the turn needs confirmation.
    pub(crate) fn quote_documents_in_turn(&self, persona_id: &str, quoted: bool) {
        if let Ok(mut turns) = self.assistant.quoted_turns.lock() {
            if quoted {
                turns.insert(persona_id.to_owned());
            } else {
                turns.remove(persona_id);
            }
        }
    }

}
