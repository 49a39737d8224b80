//! Everything the backend tells the shells, in one enum, emitted from one
//! place (`Context::emit`). The TypeScript type for the UI is generated
//! from it by `ts-rs` into `ui/src/lib/bindings/`; CI fails when the
//! checked-in copy drifts.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::conversation::views::MessageView;
use crate::error::ErrorView;
use crate::library::views::{CitationView, ImportProgressView};
use crate::personas::views::PersonaView;
use crate::tools::views::{AwaitingInputView, ProposalView, ToolResultView};
use crate::vault::views::{CheckpointView, ReceiptView};

/// Everything the backend tells the UI, in one enum, emitted from one place.
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub enum AppEvent {
    PersonaChanged { persona: PersonaView },
    MessageAdded { message: MessageView },
    ReplyStarted { request_id: String, persona_id: String },
    ReplyDelta { request_id: String, persona_id: String, text: String },
    ReplyFinished { request_id: String, message: MessageView },
    ReplyFailed { request_id: String, persona_id: String, error: ErrorView },
    QueueChanged { busy: bool, #[ts(type = "number")] pending: u32 },
    LedgerAppended { #[ts(type = "number")] seq: i64, kind: String },
    /// A checkpoint operation began: the UI holds interactions until it ends.
    CheckpointStarted { op: String, slot: Option<u8> },
    CheckpointCreated { checkpoint: CheckpointView },
    /// The projected state changed wholesale: reload personas and messages.
    CheckpointRestored { slot: Option<u8>, receipt: ReceiptView },
    CheckpointDeleted { slot: u8 },
    CheckpointFailed { op: String, slot: Option<u8>, error: ErrorView },
    // ----- tools: proposals, results, questions -----
    ToolProposed { proposal: ProposalView },
    /// `outcome`: confirmed, rejected, superseded, failed, or a confirmation error code in lowercase.
    ProposalSettled { persona_id: String, nonce: String, outcome: String },
    ToolExecuted { result: ToolResultView },
    ItemsChanged {},
    /// The persona waits for the user's answer (AWAITING_INPUT).
    InputAwaited { awaiting: AwaitingInputView },
    /// The wait ended: `outcome` answered, cancelled, expired or superseded.
    InputSettled { persona_id: String, correlation_id: String, outcome: String },
    // ----- memory and background work -----
    /// What the personas know about the human changed: reload memory lists.
    MemoriesChanged { persona_id: Option<String> },
    /// Background work (e.g. extraction) failed for good and was dead-lettered.
    JobFailed { request_id: String, kind: String, persona_id: String, error: ErrorView },
    // ----- documents -----
    /// An import started a file, finished one, or ended.
    DocumentImport { progress: ImportProgressView },
    /// The library's documents changed: reload the Library view.
    DocumentsChanged {},
    /// The passages a reply was given, to show under it.
    ReplyCitations { persona_id: String, message_id: String, citations: Vec<CitationView> },
}

