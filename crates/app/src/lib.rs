//! The composition root: builds Ledgermind's engine (ledger, model providers,
//! the reply queue worker) from a data directory and settings, and exposes
//! the typed API both shells call: the desktop app's commands and the CLI.
//!
//! It must never know about Tauri or the terminal; shells only translate.

mod assistant;
mod browse;
mod ceremony;
mod chat;
mod desktop;
mod engine;
mod extraction;
mod human_memory;
mod memory;
mod metadata;
mod items;
mod keys;
pub mod library;
mod error;
mod models;
mod office;
mod paths;
mod guard_model;
// memory (#4): persona management, chat state, summaries, heartbeat
mod exploration;
mod heartbeat;
mod personas;
mod summary;
// voice: spoken turns marked in the ledger
mod spoken;
mod prompt;
mod queue_control;
// runtime (#6): the guard on typed and imported text
mod screening;
mod plans;
mod conversation;
mod awaiting;
mod vault;
mod tools_exec;
mod views;
/// Voice turns for the shells (the tray's Talk, the global shortcut).
pub mod voice;

pub use assistant::{ProposalView, ToolResultView, ToolSettingView, CONFIRMATION_TTL_ENV};
pub use awaiting::AwaitingInputView;
pub use screening::{ConversationImport, ImportScreening};
pub use browse::{browse, FolderEntryView, FolderView, PlaceView};
pub use chat::ReplyTiming;
pub use desktop::{DesktopSettings, DesktopView, ShortcutMode, VoiceSettings, DEFAULT_SHORTCUT};
pub use engine::{Engine, EngineConfig};
pub use items::ItemView;
pub use keys::{KeyEpochView, KeyReplacementView, KeyStatusView};
pub use metadata::MetadataServiceView;
pub use memory::{EmbedProgress, ImportReport, RecallItem, RecallSettings, RecallView};
pub use ceremony::{ceremony_due, CeremonySettingsView, CeremonyView};
pub use error::AppError;
pub use human_memory::{MemoryView, PersonaGroupsView, QuoteView, UsedItemView};
pub use queue_control::{QueueItemView, QueueView};
pub use models::{ModelSpec, DEFAULT_LOCAL_MODEL, TINY_LOCAL_MODEL};
pub use self::office::{
    ConstitutionView, HandoverView, ObligationView, SectionView, SessionEnd, SessionModeView, SimulationView, TokenUsageView, WhyView,
    LOCAL_NARRATIVE_TOKENS,
};
pub use ::office::dreaming::{DreamReason, SESSIONS_PER_DREAM};
pub use ::office::{ContextFrame, SessionMode, SessionType};
pub use paths::DataDir;
pub use spoken::VoiceTurn;
pub use guard_model::{guard_model_dirs, install_guard_model, GuardModelStatus};
pub use personas::{PersonaEdit, PersonaProfileView};
pub use views::*;

pub type Result<T, E = AppError> = std::result::Result<T, E>;
