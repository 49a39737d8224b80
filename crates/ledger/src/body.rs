//! Typed event payloads. The stored payload is exactly `serde_json` of this
//! enum; its `kind` tag must equal the header's kind.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageRole {
    Human,
    Persona,
    System,
}

impl MessageRole {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Human => "human",
            Self::Persona => "persona",
            Self::System => "system",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "human" => Some(Self::Human),
            "persona" => Some(Self::Persona),
            "system" => Some(Self::System),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventBody {
    /// First event of every ledger.
    LedgerCreated { profile_id: String, format: u32 },
    /// Binds an entity to its Ed25519 public key (hex). Never erased.
    EntityKeyRegistered { entity_id: String, entity_kind: String, public_key: String },
    PersonaCreated {
        persona_id: String,
        name: String,
        short_description: String,
        long_description: String,
        model: String,
        is_system: bool,
    },
    PersonaUpdated {
        persona_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        short_description: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        long_description: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    PersonaArchived { persona_id: String, archived: bool },
    MessageAdded {
        message_id: String,
        persona_id: String,
        role: MessageRole,
        content: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        external_id: Option<String>,
    },
    MessagesRead { persona_id: String, up_to_seq: i64 },
    ProviderAccountAdded { name: String, base_url: String, default_model: String },
    ProviderAccountRemoved { name: String },
    /// Records that the payload of `target_seq` was removed, and why.
    PayloadErased { target_seq: i64, reason: String },
    /// Resets the projections to the state as of `target_seq` (replay
    /// rebuilds events `1..=target_seq`, with erased payloads still erased,
    /// then continues after this event). `slot` is the checkpoint slot
    /// restored, or None for an undo. Never erased: replay depends on it.
    CheckpointRestored {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        slot: Option<u8>,
        target_seq: i64,
    },
    // ----- runtime (issue #6): tool results, audit, settings -----
    /// A tool saved an item (note, movie, tv_show, video, link, fact…).
    ItemSaved {
        item_id: String,
        item_kind: String,
        title: String,
        data: serde_json::Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        persona_id: Option<String>,
        correlation_id: String,
    },
    /// A tool deleted a saved item (the event that saved it stays).
    ItemDeleted { item_id: String, correlation_id: String },
    /// One step of the tool pipeline (parse, validate, …, audit).
    ToolAudited {
        correlation_id: String,
        step: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        detail: String,
    },
    /// PII removed before text went to a cloud provider (kinds and
    /// placeholders only, never the removed values).
    PiiScrubbed { correlation_id: String, provider: String, removed: Vec<String>, withheld_messages: u32 },
    /// A runtime setting (e.g. the metadata service URL); None clears it.
    RuntimeSettingSet {
        key: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<String>,
    },
    // ----- end runtime -----
}

impl EventBody {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::LedgerCreated { .. } => "ledger_created",
            Self::EntityKeyRegistered { .. } => "entity_key_registered",
            Self::PersonaCreated { .. } => "persona_created",
            Self::PersonaUpdated { .. } => "persona_updated",
            Self::PersonaArchived { .. } => "persona_archived",
            Self::MessageAdded { .. } => "message_added",
            Self::MessagesRead { .. } => "messages_read",
            Self::ProviderAccountAdded { .. } => "provider_account_added",
            Self::ProviderAccountRemoved { .. } => "provider_account_removed",
            Self::PayloadErased { .. } => "payload_erased",
            Self::CheckpointRestored { .. } => "checkpoint_restored",
            // runtime (issue #6)
            Self::ItemSaved { .. } => "item_saved",
            Self::ItemDeleted { .. } => "item_deleted",
            Self::ToolAudited { .. } => "tool_audited",
            Self::PiiScrubbed { .. } => "pii_scrubbed",
            Self::RuntimeSettingSet { .. } => "runtime_setting_set",
        }
    }

    /// Kinds whose payload must survive erasure (verification depends on them).
    pub fn is_erasable(&self) -> bool {
        !matches!(
            self,
            Self::LedgerCreated { .. }
                | Self::EntityKeyRegistered { .. }
                | Self::PayloadErased { .. }
                | Self::CheckpointRestored { .. }
        )
    }
}
