//! The office (seed 000): everything a persona's LLM call starts from. It
//! builds the context frame from the ledger, narrates it in the persona's
//! language within the session type's token budget, checks handovers
//! against the ledger's facts, and runs the dreaming cycle's synthesis.
//!
//! It reads the ledger and calls a model only through the `Provider` trait;
//! it must never know about Tauri, never write to the ledger by itself
//! during an invocation (its outputs become events in the app), and never
//! let a narrative exceed its budget.

pub mod affordances;
pub mod dreaming;
pub mod frame;
pub mod handover;
pub mod narrator;
pub mod sanity;
pub mod session;
pub mod simulation;
pub mod tokens;

pub use frame::{as_heard, build_frame, capabilities, frame_hash, Capabilities, ContextFrame, FrameRequest, Restriction};
pub use narrator::{minimal, narrate, reply_prompt, NarrativeBudget, SectionShare};
pub use session::{Language, SessionMode, SessionRule, SessionType};
pub use tokens::{Estimate, TokenCounter};

#[derive(Debug, thiserror::Error)]
pub enum OfficeError {
    #[error(transparent)]
    Ledger(#[from] ledger::LedgerError),
    #[error(transparent)]
    Provider(#[from] providers::ProviderError),
    #[error("the model's answer was not usable: {0}")]
    Unusable(String),
}

impl OfficeError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::Ledger(e) => e.code(),
            Self::Provider(e) => e.code(),
            Self::Unusable(_) => "LLM_INVALID_JSON",
        }
    }
}
