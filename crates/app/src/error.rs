//! The one error of the crate and its shape at the boundary.

use ledger::{KeyStoreError, LedgerError};
use providers::ProviderError;

use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// The one error that crosses to the shells: a stable code and a sentence a
/// person can act on. Never SQL text, never a secret.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct AppError {
    pub code: &'static str,
    pub message: String,
}

impl AppError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new("INVALID_INPUT", message)
    }
    /// A write failed for lack of space: nothing was written.
    pub fn disk_full() -> Self {
        Self::new(
            "STORAGE_SAVE_FAILED",
            "Could not save: the disk is full. Nothing was written; free some space and try again.",
        )
    }
    pub fn view(&self) -> ErrorView {
        ErrorView { code: self.code.to_owned(), message: self.message.clone() }
    }
}

impl From<LedgerError> for AppError {
    fn from(e: LedgerError) -> Self {
        if e.disk_full() {
            tracing::error!(error = %e, "the disk is full");
            return Self::disk_full();
        }
        if e.damaged() {
            tracing::error!(error = %e, "the ledger file is damaged");
            return Self::new(
                "STORAGE_LOAD_FAILED",
                "Your ledger file is damaged. Nothing was changed and the file is kept as it is. You can still \
                 import an export (`ledgermind import`), and `ledgermind verify` names the first bad event.",
            );
        }
        let message = match &e {
            // The sqlx text may name tables and statements: keep it in logs only.
            LedgerError::Load(inner) => {
                tracing::error!(error = %inner, "ledger read failed");
                "Could not read your data. The database may be damaged or in use; run Verify for details.".to_owned()
            }
            LedgerError::Save(inner) => {
                tracing::error!(error = %inner, "ledger write failed");
                "Could not save your change. Nothing was written; check that the data folder is writable.".to_owned()
            }
            other => other.to_string(),
        };
        Self { code: e.code(), message }
    }
}

impl From<KeyStoreError> for AppError {
    fn from(e: KeyStoreError) -> Self {
        Self::new("KEYCHAIN_UNAVAILABLE", e.to_string())
    }
}

impl From<ProviderError> for AppError {
    fn from(e: ProviderError) -> Self {
        Self::new(e.code(), e.to_string())
    }
}

/// The one error shape that crosses the boundary to the UI and the CLI's JSON.
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct ErrorView {
    pub code: String,
    pub message: String,
}

