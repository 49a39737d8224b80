//! A conversation's messages as the shells see them.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

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
    /// default | always | never: whether it goes into reply prompts.
    pub context_status: String,
    /// A spoken reply the person cut off: how many of its characters were
    /// said aloud before it stopped (the rest was never heard).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub spoken_chars: Option<u32>,
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

