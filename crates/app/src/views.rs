//! The shapes the shells (desktop UI, CLI) see. TypeScript types for the UI
//! are generated from these by `ts-rs` into `ui/src/lib/bindings/`; CI fails
//! when the checked-in copies drift.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct PersonaView {
    pub id: String,
    pub name: String,
    pub short_description: String,
    pub long_description: String,
    /// Model spec `account:model`, e.g. `local:SmolLM2-135M-Instruct.Q4_1`.
    pub model: String,
    pub is_system: bool,
    pub archived: bool,
    #[ts(type = "number")]
    pub unread: u32,
    #[ts(type = "number")]
    pub created_seq: i64,
    /// RFC 3339 UTC while paused (memory #4); may lie in the past once over.
    pub paused_until: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, TS, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub enum MessageRole {
    Human,
    Persona,
    System,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct MessageView {
    pub id: String,
    pub persona_id: String,
    pub role: MessageRole,
    pub content: String,
    /// RFC 3339, UTC.
    pub ts: String,
    pub read: bool,
    #[ts(type = "number")]
    pub seq: i64,
    /// default | always | never: whether it goes into reply prompts (memory #4).
    pub context_status: String,
    /// A spoken reply the person cut off: how many of its characters were
    /// said aloud before it stopped (the rest was never heard).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub spoken_chars: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct EventView {
    #[ts(type = "number")]
    pub seq: i64,
    pub id: String,
    pub ts: String,
    pub entity_id: String,
    pub kind: String,
    /// Pretty JSON of the payload, or null when it was erased.
    pub payload: Option<String>,
    pub hash: String,
    pub prev_hash: String,
    pub signer: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct VerifyView {
    pub ok: bool,
    #[ts(type = "number")]
    pub events: u64,
    /// The first event that failed, with the reason, when `ok` is false.
    #[ts(type = "number | null")]
    pub first_bad_seq: Option<i64>,
    pub reason: Option<String>,
    pub millis: f64,
    /// Where signing keys were replaced (new key epochs), oldest first.
    pub key_epochs: Vec<crate::keys::KeyEpochView>,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct AccountView {
    pub name: String,
    pub base_url: String,
    pub default_model: String,
    pub enabled: bool,
    /// Whether a key for this account is present in the OS keychain. The key
    /// itself never leaves the backend.
    pub has_key: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct NewAccount {
    pub name: String,
    pub base_url: String,
    pub api_key: String,
    pub default_model: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct ModelView {
    /// Spec to store on a persona: `account:model`.
    pub spec: String,
    pub label: String,
    pub local: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct StatusView {
    pub data_dir: String,
    pub keychain_ok: bool,
    pub keychain_message: Option<String>,
    pub local_model: Option<String>,
    pub local_model_message: Option<String>,
    #[ts(type = "number")]
    pub events: u64,
    pub queue_busy: bool,
    #[ts(type = "number")]
    pub queue_pending: u32,
}

/// The one error shape that crosses the boundary to the UI and the CLI's JSON.
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct ErrorView {
    pub code: String,
    pub message: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct CheckpointView {
    /// 0–9 auto-saves (oldest first), 10–14 manual.
    pub slot: u8,
    pub manual: bool,
    /// The ledger seq a restore goes back to.
    #[ts(type = "number")]
    pub seq: i64,
    pub name: String,
    pub created_at: String,
}

/// Proof that an action was committed.
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct ReceiptView {
    #[ts(type = "number")]
    pub seq: i64,
    pub event_id: String,
    pub kind: String,
    pub action_hash: String,
    pub state_before: String,
    pub state_after: String,
    pub signer: String,
    pub signature: String,
}

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
    // runtime (issue #6)
    ToolProposed { proposal: crate::ProposalView },
    /// `outcome`: confirmed, rejected, superseded, failed, or a confirmation error code in lowercase.
    ProposalSettled { persona_id: String, nonce: String, outcome: String },
    ToolExecuted { result: crate::ToolResultView },
    ItemsChanged {},
    /// The persona waits for the user's answer (AWAITING_INPUT).
    InputAwaited { awaiting: crate::AwaitingInputView },
    /// The wait ended: `outcome` answered, cancelled, expired or superseded.
    InputSettled { persona_id: String, correlation_id: String, outcome: String },
    // ----- memory (#4) -----
    /// What the personas know about the human changed: reload memory lists.
    MemoriesChanged { persona_id: Option<String> },
    /// Background work (e.g. extraction) failed for good and was dead-lettered.
    JobFailed { request_id: String, kind: String, persona_id: String, error: ErrorView },
    // ----- documents -----
    /// An import started a file, finished one, or ended.
    DocumentImport { progress: crate::library::ImportProgressView },
    /// The library's documents changed: reload the Library view.
    DocumentsChanged {},
    /// The passages a reply was given, to show under it.
    ReplyCitations { persona_id: String, message_id: String, citations: Vec<crate::library::CitationView> },
}

impl From<ledger::Persona> for PersonaView {
    fn from(p: ledger::Persona) -> Self {
        Self {
            id: p.id,
            name: p.name,
            short_description: p.short_description,
            long_description: p.long_description,
            model: p.model,
            is_system: p.is_system,
            archived: p.archived,
            unread: p.unread,
            created_seq: p.created_seq,
            paused_until: p.paused_until,
        }
    }
}

impl From<ledger::MessageRole> for MessageRole {
    fn from(r: ledger::MessageRole) -> Self {
        match r {
            ledger::MessageRole::Human => Self::Human,
            ledger::MessageRole::Persona => Self::Persona,
            ledger::MessageRole::System => Self::System,
        }
    }
}

impl From<ledger::Message> for MessageView {
    fn from(m: ledger::Message) -> Self {
        Self {
            id: m.id,
            persona_id: m.persona_id,
            role: m.role.into(),
            content: m.content,
            ts: m.ts,
            read: m.read,
            seq: m.seq,
            context_status: m.context_status.as_str().to_owned(),
            spoken_chars: None,
        }
    }
}

impl From<ledger::StoredEvent> for EventView {
    fn from(e: ledger::StoredEvent) -> Self {
        Self {
            seq: e.seq,
            id: e.id,
            ts: e.ts,
            entity_id: e.entity_id,
            kind: e.kind,
            payload: e.payload.map(|p| serde_json::to_string_pretty(&p).unwrap_or_default()),
            hash: e.hash,
            prev_hash: e.prev_hash,
            signer: e.signer,
        }
    }
}

impl StatusView {
    /// What the status panel shows when the engine could not start at all.
    pub fn unavailable(error: &crate::AppError) -> Self {
        let keychain = error.code == "KEYCHAIN_UNAVAILABLE";
        Self {
            data_dir: crate::DataDir::from_env().root().display().to_string(),
            keychain_ok: !keychain,
            keychain_message: keychain.then(|| error.message.clone()),
            local_model: None,
            local_model_message: (!keychain).then(|| error.message.clone()),
            events: 0,
            queue_busy: false,
            queue_pending: 0,
        }
    }
}

impl From<ledger::CheckpointInfo> for CheckpointView {
    fn from(c: ledger::CheckpointInfo) -> Self {
        Self {
            slot: c.slot,
            manual: matches!(c.kind, ledger::CheckpointKind::Manual),
            seq: c.seq,
            name: c.name,
            created_at: c.created_at,
        }
    }
}

impl From<ledger::Receipt> for ReceiptView {
    fn from(r: ledger::Receipt) -> Self {
        Self {
            seq: r.seq,
            event_id: r.event_id,
            kind: r.kind,
            action_hash: r.action_hash,
            state_before: r.state_before,
            state_after: r.state_after,
            signer: r.signer,
            signature: r.signature,
        }
    }
}

/// An import staged for the next start (see `Engine::stage_import`).
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct ImportView {
    pub profile_id: String,
    #[ts(type = "number")]
    pub events: u64,
    /// The current profile had conversations: it is kept in a folder beside
    /// the data, not deleted.
    pub replaces_current: bool,
}

/// A finished export: where the encrypted profile went and what it holds.
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct ExportView {
    pub path: String,
    #[ts(type = "number")]
    pub events: u64,
    #[ts(type = "number")]
    pub bytes: u64,
}
