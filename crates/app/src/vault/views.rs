//! The ledger as the shells see it: events, verification, receipts,
//! checkpoints, and the encrypted export and import of a profile.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::keys::views::KeyEpochView;

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
    pub key_epochs: Vec<KeyEpochView>,
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

/// An import staged for the next start (see `Vault::stage_import`).
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

