//! The composition root: builds Ledgermind's engine (ledger, model providers,
//! the reply queue worker) from a data directory and settings, and exposes
//! the typed API both shells call: the desktop app's commands and the CLI.
//!
//! It must never know about Tauri or the terminal; shells only translate.

mod chat;
mod engine;
mod memory;
mod error;
mod models;
mod paths;
mod prompt;
mod vault;
mod views;

pub use engine::{Engine, EngineConfig};
pub use memory::{EmbedProgress, ImportReport, RecallItem, RecallSettings, RecallView};
pub use error::AppError;
pub use models::{ModelSpec, DEFAULT_LOCAL_MODEL};
pub use paths::DataDir;
pub use views::*;

pub type Result<T, E = AppError> = std::result::Result<T, E>;
