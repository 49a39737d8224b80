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

/// Whose key signs a key replacement (the event's signer is always the human).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyAuthority {
    /// The human key in force before the event: the human endorses a
    /// persona's new key, or hands its own epoch to a new key.
    KeyInForce,
    /// The new key itself (self-certified). Only for the human's own key,
    /// and only because its old private key is gone: nothing older is left
    /// to vouch for it. Verify accepts it and always reports it.
    NewKey,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventBody {
    /// First event of every ledger.
    LedgerCreated { profile_id: String, format: u32 },
    /// Binds an entity to its Ed25519 public key (hex). Never erased.
    EntityKeyRegistered { entity_id: String, entity_kind: String, public_key: String },
    /// A new key epoch for one entity: its signing key is replaced (the old
    /// private key was lost). Events before it keep verifying with the old
    /// key, events after it with the new one. Never erased. Who may sign it
    /// is `verify`'s trust rule (see `KeyAuthority`).
    EntityKeyReplaced {
        entity_id: String,
        old_public_key: String,
        new_public_key: String,
        reason: String,
        authority: KeyAuthority,
        /// The new key's signature (hex) over `key_proof_message`: whoever
        /// wrote this event holds the new private key.
        new_key_proof: String,
    },
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
        /// When the message was said, for one said before it was recorded
        /// (an imported conversation): the chat shows this time, not the
        /// import's. RFC 3339, as event times are.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        said_at: Option<String>,
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
    // ----- runtime: tool results, audit, settings -----
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
    /// The prompt-injection guard sanitized or blocked a text: `source` is
    /// where it came from ("input", "import", "metadata"), `subject` names
    /// it there (an imported row's id); categories only, never the text.
    GuardFlagged {
        correlation_id: String,
        source: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subject: Option<String>,
        risk_level: String,
        action: String,
        categories: Vec<String>,
    },
    /// A runtime setting (e.g. the metadata service URL); None clears it.
    RuntimeSettingSet {
        key: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<String>,
    },
    // ----- end runtime -----

    // --- office: obligations, bookmarks, handovers, governance,
    // dreaming outputs, token usage. Projections in `office.rs`.
    /// An obligation with an optional deadline (RFC 3339, UTC).
    ReminderSet {
        reminder_id: String,
        persona_id: String,
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        due_at: Option<String>,
        #[serde(default)]
        obligation: ObligationKind,
    },
    ReminderDone { reminder_id: String },
    /// `target_id` is an event or message id.
    BookmarkAdded { bookmark_id: String, persona_id: String, target_id: String, label: String },
    /// The free-text note one session leaves to the next (empty or >= 50 chars).
    HandoverWritten {
        persona_id: String,
        session_id: String,
        text: String,
        author: HandoverAuthor,
        /// Why the session ended: `idle`, `closed`, `new`.
        reason: String,
    },
    /// A sanity-check disagreement between a handover and the ledger's facts.
    GovernanceNoteAdded { persona_id: String, handover_seq: i64, note: String, findings: Vec<String> },
    /// Behavioural directives, versioned per persona; the latest wins.
    ConstitutionSet { persona_id: String, version: u32, core_directive: String, overrides: Vec<String> },
    /// A dreaming-cycle summary of a span of time (RFC 3339 bounds).
    PeriodSynthesized { persona_id: String, period_start: String, period_end: String, summary: String },
    BaselineNarrativeSet { persona_id: String, text: String },
    /// Tokens spent by one LLM call; `day` is the UTC date `YYYY-MM-DD`.
    TokensUsed { entity_id: String, day: String, prompt_tokens: u32, completion_tokens: u32 },
    /// 0 means no limit.
    TokenQuotaSet { entity_id: String, daily_limit: u32 },
    /// BCP 47 tag of the language the persona is narrated in (`en`, `pt-BR`).
    PersonaLanguageSet { persona_id: String, language: String },
    /// The context frame a reply was generated from (`frame` is its JSON).
    ReplyFramed { persona_id: String, message_id: String, frame_hash: String, frame: String },
    /// The session type and mode the persona works in from now on
    /// (`work|assist|deliberate|research`, `deliberation|commitment`).
    SessionModeSet { persona_id: String, session_type: String, mode: String },
    /// A signed intent the persona submitted (affordance `submit`); its
    /// effects follow as their own events in the same batch.
    IntentSubmitted { persona_id: String, intent_id: String, intent: String, payload: serde_json::Value },
    /// The reasoning behind a decision, for the audit trail.
    ReasoningLogged { persona_id: String, reasoning: String },
    /// A working note a persona leaves for its later sessions.
    NoteWritten { persona_id: String, note_id: String, content: String },
    /// A statement the persona signed: the event's own signature is it.
    StatementSigned { persona_id: String, statement: String },
    /// A question the persona put to the person.
    ClarificationRequested { persona_id: String, request_id: String, question: String },
    /// A simulation against a scratch copy of the state: nothing it
    /// describes was committed. `risk_permille` is the risk score × 1000.
    SimulationRun {
        persona_id: String,
        action: String,
        args_hash: String,
        risk_permille: u32,
        level: String,
        changes: Vec<String>,
        /// The state the simulation ran against (see `Ledger::simulation_state`);
        /// absent before session 5. A later run of the same action and
        /// arguments is covered by this simulation only in the same state.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state_hash: Option<String>,
    },
    /// A persona's tool call carried out for real (not simulated, not
    /// refused): `action` is its kind (`tool`, or `submit:<intent>`). The
    /// first action of a kind is recommended a simulation.
    ActionExecuted { persona_id: String, action: String, correlation_id: String },
    // --- end office
    // ----- memory: persona groups, the human's memories, reply sources -----
    /// A persona sees data filed under `group_primary ∪ groups_visible`; what
    /// it learns is filed under `group_primary`.
    PersonaGroupsSet { persona_id: String, group_primary: String, groups_visible: Vec<String> },
    /// Something a persona learned about the human, filed under `group`.
    MemoryLearned {
        memory_id: String,
        memory_kind: MemoryKind,
        #[serde(default)]
        subject: String,
        text: String,
        group: String,
        learned_by: String,
        #[serde(default)]
        source_ids: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        quote: Option<QuoteSpan>,
        confidence: f64,
    },
    /// A change to a memory. A superseded memory stays (validity window).
    MemoryUpdated {
        memory_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        confidence: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        validation: Option<Validation>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        superseded_by: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        add_source_ids: Vec<String>,
    },
    /// The messages and memories retrieval gave the reply `message_id`.
    ReplySources { message_id: String, persona_id: String, item_ids: Vec<String> },
    /// The nightly ceremony's decay: every memory not confirmed by the
    /// human has its exposure multiplied by `factor` = 0.5^(elapsed/half-life).
    ExposureDecayed { at: String, elapsed_days: f64, half_life_days: f64, factor: f64 },
    /// A persona's traits and topics, replaced whole. `source`: who filled
    /// them (`llm`, `human`, `fallback` when the model failed, `pending`
    /// while the model is asked).
    PersonaProfileSet { persona_id: String, traits: Vec<String>, topics: Vec<PersonaTopic>, source: String },
    /// Paused until `until` (RFC 3339 UTC); None resumes it.
    PersonaPaused {
        persona_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until: Option<String>,
    },
    /// How often the persona may reach out, and how far back its prompt looks.
    PersonaSettingsSet { persona_id: String, heartbeat_minutes: u32, context_window_hours: u32 },
    /// Whether a message goes into the persona's prompts.
    MessageContextSet { persona_id: String, message_id: String, status: ContextStatus },
    /// The conversation so far (previous summary + new messages), up to the
    /// message at `up_to_seq`. `source`: `llm` or `fallback`.
    SummaryWritten { persona_id: String, text: String, up_to_seq: i64, source: String },
    // ----- voice -----
    /// A turn of the conversation that was spoken, not typed: `message_id`
    /// is the person's transcribed message, `reply_id` the persona's reply
    /// (None when there was none). `interrupted`: the person cut the reply
    /// off, and only its first `spoken_chars` characters were said aloud.
    /// Carries no text, so erasing the messages leaves nothing behind here.
    VoiceTurn {
        persona_id: String,
        message_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply_id: Option<String>,
        interrupted: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        spoken_chars: Option<u32>,
    },

    // ----- documents -----
    /// A document entered the library (`added`), a new version of it was
    /// indexed (`updated`), or it was removed (`removed`). Carries the
    /// library's id, the SHA-256 of the file's bytes and its passage count,
    /// never its name or text, so removing it leaves nothing of it here.
    DocumentChanged {
        change: String,
        document_id: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sha256: Option<String>,
        chunks: u32,
    },
}

/// One thing a persona cares about (seed 002's persona topics). Also what
/// the persona editor shows and sends back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct PersonaTopic {
    pub name: String,
    /// How the persona sees it.
    #[serde(default)]
    pub perspective: String,
    /// How it approaches it in conversation.
    #[serde(default)]
    pub approach: String,
    /// Why it matters to the persona itself.
    #[serde(default)]
    pub personal_stake: String,
    /// -1 (dislikes) … 1 (loves).
    #[serde(default)]
    pub sentiment: f64,
    /// How present the topic has been lately (0–1) and how present the
    /// persona would like it to be; the heartbeat prefers topics whose
    /// desired exposure exceeds the current one.
    #[serde(default)]
    pub exposure_current: f64,
    #[serde(default = "half")]
    pub exposure_desired: f64,
}

fn half() -> f64 {
    0.5
}

impl PersonaTopic {
    /// A topic with only a name and its exposures (the rest empty, neutral).
    pub fn with_exposure(name: &str, current: f64, desired: f64) -> Self {
        Self {
            name: name.to_owned(),
            perspective: String::new(),
            approach: String::new(),
            personal_stake: String::new(),
            sentiment: 0.0,
            exposure_current: current,
            exposure_desired: desired,
        }
    }
}

/// Whether a message goes into the reply prompt: within the context window
/// (default), whatever its age (always), or not at all (never).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContextStatus {
    #[default]
    Default,
    Always,
    Never,
}

impl ContextStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::Always => "always",
            Self::Never => "never",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "default" => Some(Self::Default),
            "always" => Some(Self::Always),
            "never" => Some(Self::Never),
            _ => None,
        }
    }
}

/// What kind of thing a memory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryKind {
    Fact,
    Trait,
    Topic,
    Person,
    Quote,
}

impl MemoryKind {
    pub const ALL: [Self; 5] = [Self::Fact, Self::Trait, Self::Topic, Self::Person, Self::Quote];
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fact => "fact",
            Self::Trait => "trait",
            Self::Topic => "topic",
            Self::Person => "person",
            Self::Quote => "quote",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// Who vouches for a fact: nobody yet, Ei, or the human (locked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Validation {
    None,
    Ei,
    Human,
}

impl Validation {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Ei => "ei",
            Self::Human => "human",
        }
    }
    pub fn parse(s: &str) -> Self {
        match s {
            "ei" => Self::Ei,
            "human" => Self::Human,
            _ => Self::None,
        }
    }
}

/// Where a quote sits in its message: character (not byte) offsets, end exclusive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuoteSpan {
    pub message_id: String,
    pub start: u32,
    pub end: u32,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ObligationKind {
    #[default]
    Reminder,
    Commitment,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HandoverAuthor {
    /// Written by the persona itself at the end of its session.
    Persona,
    /// Written by Ledgermind from the session's events when the persona could not.
    System,
}

impl EventBody {
    /// A `persona_updated` that changes only the longer description.
    pub fn persona_long_description(persona_id: &str, long_description: String) -> Self {
        Self::PersonaUpdated {
            persona_id: persona_id.to_owned(),
            name: None,
            short_description: None,
            long_description: Some(long_description),
            model: None,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Self::LedgerCreated { .. } => "ledger_created",
            Self::EntityKeyRegistered { .. } => "entity_key_registered",
            Self::EntityKeyReplaced { .. } => "entity_key_replaced",
            Self::PersonaCreated { .. } => "persona_created",
            Self::PersonaUpdated { .. } => "persona_updated",
            Self::PersonaArchived { .. } => "persona_archived",
            Self::MessageAdded { .. } => "message_added",
            Self::MessagesRead { .. } => "messages_read",
            Self::ProviderAccountAdded { .. } => "provider_account_added",
            Self::ProviderAccountRemoved { .. } => "provider_account_removed",
            Self::PayloadErased { .. } => "payload_erased",
            Self::CheckpointRestored { .. } => "checkpoint_restored",
            // runtime
            Self::ItemSaved { .. } => "item_saved",
            Self::ItemDeleted { .. } => "item_deleted",
            Self::ToolAudited { .. } => "tool_audited",
            Self::PiiScrubbed { .. } => "pii_scrubbed",
            Self::GuardFlagged { .. } => "guard_flagged",
            Self::RuntimeSettingSet { .. } => "runtime_setting_set",
            Self::ReminderSet { .. } => "reminder_set",
            Self::ReminderDone { .. } => "reminder_done",
            Self::BookmarkAdded { .. } => "bookmark_added",
            Self::HandoverWritten { .. } => "handover_written",
            Self::GovernanceNoteAdded { .. } => "governance_note_added",
            Self::ConstitutionSet { .. } => "constitution_set",
            Self::PeriodSynthesized { .. } => "period_synthesized",
            Self::BaselineNarrativeSet { .. } => "baseline_narrative_set",
            Self::TokensUsed { .. } => "tokens_used",
            Self::TokenQuotaSet { .. } => "token_quota_set",
            Self::PersonaLanguageSet { .. } => "persona_language_set",
            Self::ReplyFramed { .. } => "reply_framed",
            Self::SessionModeSet { .. } => "session_mode_set",
            Self::IntentSubmitted { .. } => "intent_submitted",
            Self::ReasoningLogged { .. } => "reasoning_logged",
            Self::NoteWritten { .. } => "note_written",
            Self::StatementSigned { .. } => "statement_signed",
            Self::ClarificationRequested { .. } => "clarification_requested",
            Self::SimulationRun { .. } => "simulation_run",
            Self::ActionExecuted { .. } => "action_executed",
            Self::PersonaGroupsSet { .. } => "persona_groups_set",
            Self::MemoryLearned { .. } => "memory_learned",
            Self::MemoryUpdated { .. } => "memory_updated",
            Self::ReplySources { .. } => "reply_sources",
            Self::ExposureDecayed { .. } => "exposure_decayed",
            Self::PersonaProfileSet { .. } => "persona_profile_set",
            Self::PersonaPaused { .. } => "persona_paused",
            Self::PersonaSettingsSet { .. } => "persona_settings_set",
            Self::MessageContextSet { .. } => "message_context_set",
            Self::SummaryWritten { .. } => "summary_written",
            Self::VoiceTurn { .. } => "voice_turn",
            Self::DocumentChanged { .. } => "document_changed",
        }
    }

    /// Kinds whose payload must survive erasure (verification depends on them).
    pub fn is_erasable(&self) -> bool {
        !matches!(
            self,
            Self::LedgerCreated { .. }
                | Self::EntityKeyRegistered { .. }
                | Self::EntityKeyReplaced { .. }
                | Self::PayloadErased { .. }
                | Self::CheckpointRestored { .. }
        )
    }
}
