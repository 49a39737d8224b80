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
    #[error("no memory {0} (it may have been forgotten)")]
    MemoryNotFound(String),
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
    #[error("persona {0} must be archived before it can be deleted")]
    PersonaNotArchived(String),
    #[error("checkpoint slot {0} is empty")]
    CheckpointSlotEmpty(u8),
    #[error("checkpoint slot {0} does not exist: slots are 0-9 (auto-saves) and 10-14 (manual saves)")]
    CheckpointInvalidSlot(i64),
    #[error("checkpoint slot {0} is an auto-save: it cannot be deleted or written by hand (use slots 10-14)")]
    CheckpointSlotProtected(u8),
    #[error("wrong passphrase for this export file")]
    ExportBadPassphrase,
    #[error("the export file is damaged: {0}")]
    ExportDamaged(String),
    #[error("the export file was written by a newer Ledgermind (format {0}); update Ledgermind to import it")]
    ExportNewerVersion(u16),
    #[error("import needs an empty home: {0} already exists")]
    ImportTargetNotEmpty(String),
    #[error("the proof does not hold: {0}")]
    ProofInvalid(String),
    #[error("no event {0}")]
    EventNotFound(i64),
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
            Self::MemoryNotFound(_) => "MEMORY_NOT_FOUND",
            Self::AccountNotFound(_) => "ACCOUNT_NOT_FOUND",
            Self::AccountExists(_) => "ACCOUNT_EXISTS",
            Self::Invalid(_) => "INVALID_INPUT",
            Self::PersonaNotArchived(_) => "PERSONA_NOT_ARCHIVED",
            Self::CheckpointSlotEmpty(_) => "CHECKPOINT_SLOT_EMPTY",
            Self::CheckpointInvalidSlot(_) => "CHECKPOINT_INVALID_SLOT",
            Self::CheckpointSlotProtected(_) => "CHECKPOINT_SLOT_PROTECTED",
            Self::ExportBadPassphrase => "EXPORT_BAD_PASSPHRASE",
            Self::ExportDamaged(_) => "EXPORT_DAMAGED",
            Self::ExportNewerVersion(_) => "EXPORT_NEWER_VERSION",
            Self::ImportTargetNotEmpty(_) => "IMPORT_TARGET_NOT_EMPTY",
            Self::ProofInvalid(_) => "PROOF_INVALID",
            Self::EventNotFound(_) => "EVENT_NOT_FOUND",
        }
    }
}
