use thiserror::Error;

use crate::keys::KeyStoreError;

#[derive(Debug, Error)]
pub enum LedgerError {
    #[error("could not read the ledger: {0}")]
    Load(#[source] sqlx::Error),
    #[error("could not write to the ledger: {0}")]
    Save(#[source] sqlx::Error),
    #[error("could not prepare the database: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error(transparent)]
    Keychain(#[from] KeyStoreError),
    #[error("no signing key for entity {0}")]
    MissingKey(String),
    #[error("a persona named \"{0}\" already exists")]
    PersonaExists(String),
    #[error("no persona {0}")]
    PersonaNotFound(String),
    #[error("persona {0} is archived")]
    PersonaArchived(String),
    #[error("no provider account named \"{0}\"")]
    AccountNotFound(String),
    #[error("a provider account named \"{0}\" already exists")]
    AccountExists(String),
    #[error("event {seq} is damaged: {reason}")]
    Corrupt { seq: i64, reason: String },
    #[error("the data directory is not usable: {0}")]
    DataDir(String),
    #[error("invalid input: {0}")]
    Invalid(String),
}

impl LedgerError {
    /// Stable code for the UI and scripts.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Load(_) | Self::Corrupt { .. } => "STORAGE_LOAD_FAILED",
            Self::Save(_) | Self::Migrate(_) | Self::DataDir(_) => "STORAGE_SAVE_FAILED",
            Self::Keychain(_) | Self::MissingKey(_) => "KEYCHAIN_UNAVAILABLE",
            Self::PersonaExists(_) => "PERSONA_EXISTS",
            Self::PersonaNotFound(_) => "PERSONA_NOT_FOUND",
            Self::PersonaArchived(_) => "PERSONA_ARCHIVED",
            Self::AccountNotFound(_) => "ACCOUNT_NOT_FOUND",
            Self::AccountExists(_) => "ACCOUNT_EXISTS",
            Self::Invalid(_) => "INVALID_INPUT",
        }
    }
}
