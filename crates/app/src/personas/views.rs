//! The persona as the shells see it.

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
    /// RFC 3339 UTC while paused; may lie in the past once over.
    pub paused_until: Option<String>,
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

