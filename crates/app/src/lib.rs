//! Ledgermind's engine as plain Rust: the capabilities a person uses (the
//! conversation, personas, memory, the document library, tools, the
//! office, the vault, keys and models), each a folder that owns its state,
//! built by the composition root (`engine`) on a narrow shared context
//! (`context`: the ledger, the event sink, the providers, the queue's bell,
//! shutdown). Both shells (the desktop app's commands and the CLI) call the
//! capabilities' typed APIs through [`Engine`].
//!
//! It must never know about Tauri or the terminal; shells only translate.
//!
//! Layers, each calling only those below it: `context` (and the leaves:
//! `error`, `events`, `paths`, `prompt`, `screening`) ← `memory`, `keys`,
//! `models` ← `vault`, `library`, `tools` ← `office` ← `personas`,
//! `conversation` ← `worker`, `engine`.

mod browse;
pub mod context;
pub mod conversation;
mod desktop;
mod engine;
mod error;
mod events;
mod guard_model;
pub mod keys;
pub mod library;
pub mod memory;
pub mod models;
pub mod office;
mod paths;
pub mod personas;
mod prompt;
mod screening;
pub mod tools;
pub mod vault;
/// Voice turns for the shells (the tray's Talk, the global shortcut).
pub mod voice;
mod worker;

pub use ::office::dreaming::{DreamReason, SESSIONS_PER_DREAM};
pub use ::office::{ContextFrame, SessionMode, SessionType};
pub use browse::{browse, FolderEntryView, FolderView, PlaceView};
pub use context::Context;
pub use conversation::{Conversation, MessageView, QueueItemView, QueueView, ReplyTiming, VoiceTurn};
pub use conversation::views::MessageRole;
pub use desktop::{DesktopSettings, DesktopView, ShortcutMode, VoiceSettings, DEFAULT_SHORTCUT};
pub use engine::{Engine, EngineConfig, StatusView};
pub use error::{AppError, ErrorView};
pub use events::AppEvent;
pub use guard_model::{guard_model_dirs, install_guard_model, GuardModelStatus};
pub use keys::{KeyEpochView, KeyReplacementView, KeyStatusView, Keys};
pub use self::library::Documents;
pub use self::memory::{
    EmbedProgress, ImportReport, Memories, MemoryView, PersonaGroupsView, QuoteView, RecallItem, RecallSettings, RecallView,
    UsedItemView,
};
pub use models::{
    AccountView, ModelChoiceView, ModelNeeds, ModelPullState, ModelSpec, ModelView, Models, NewAccount, Providers, ServerView, SpeedView, DEFAULT_LOCAL_MODEL, TINY_LOCAL_MODEL,
};
pub use self::office::{
    ConstitutionView, HandoverView, ObligationView, Office, SectionView, SessionEnd, SessionModeView, SimulationView,
    TokenUsageView, WhyView, LOCAL_NARRATIVE_TOKENS,
};
pub use paths::DataDir;
pub use personas::{ceremony_due, CeremonySettingsView, CeremonyView, PersonaEdit, PersonaProfileView, PersonaView, Personas};
pub use screening::{ConversationImport, ImportScreening};
pub use tools::{
    AwaitingInputView, ItemView, MetadataServiceView, ProposalView, ToolResultView, ToolSettingView, Tools, CONFIRMATION_TTL_ENV,
};
pub use vault::{CheckpointView, EventView, ExportView, ImportView, ReceiptView, Vault, VerifyView};

pub type Result<T, E = AppError> = std::result::Result<T, E>;
