use thiserror::Error;

use crate::keys::KeyStoreError;

#[derive(Debug, Error)]
pub enum LedgerError {
    #[error("{}", load_message(.0))]
    Load(#[source] sqlx::Error),
    #[error("could not write to the ledger: {0}")]
    Save(#[source] sqlx::Error),
    #[error("could not prepare the database: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error(transparent)]
    Keychain(#[from] KeyStoreError),
    #[error("no signing key for {0}: its private key is not in this keychain, so nothing can be signed or saved. If the key is lost, start a new key epoch with `ledgermind keys rotate --all-missing` (or the window's \"Start a new key epoch\" button); if you still have the old keychain or an export that holds the key, restore that instead")]
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
    #[error("message {0} was deleted")]
    SourceGone(String),
    #[error("the disk holding {0} is full: nothing was written; free some space and try again")]
    DiskFull(String),
}

/// Whether a database error means the file itself is damaged (SQLite's
/// `SQLITE_CORRUPT` 11 or `SQLITE_NOTADB` 26).
pub fn is_corrupt(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(db) => {
            db.code().is_some_and(|c| c.parse::<i32>().is_ok_and(|n| matches!(n & 0xff, 11 | 26)))
                || db.message().contains("malformed")
        }
        _ => false,
    }
}

/// Whether `dir`'s file system has no room left: writing 64 KiB there fails
/// with "no space left on device". (For errors whose cause SQLite does not
/// name, such as failing to size its shared-memory file at open.)
pub fn no_room_in(dir: &std::path::Path) -> bool {
    use std::io::Write;
    let probe = dir.join(format!(".ledgermind-space-probe-{}", std::process::id()));
    let full = match std::fs::File::create(&probe) {
        Ok(mut f) => f.write_all(&[0u8; 64 * 1024]).and_then(|()| f.sync_all()).is_err_and(|e| e.raw_os_error() == Some(28)),
        Err(e) => e.raw_os_error() == Some(28),
    };
    let _ = std::fs::remove_file(&probe);
    full
}

fn load_message(e: &sqlx::Error) -> String {
    if is_corrupt(e) {
        format!("the ledger file is damaged ({e}); nothing was changed")
    } else {
        format!("could not read the ledger: {e}")
    }
}

/// Whether a database error means the disk (or the database's size limit)
/// is full: SQLite's `SQLITE_FULL` (code 13, also as an extended code), or
/// the operating system's "no space left on device".
pub fn is_disk_full(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(db) => {
            db.code().is_some_and(|c| c.parse::<i32>().is_ok_and(|n| n & 0xff == 13))
                || db.message().contains("database or disk is full")
        }
        sqlx::Error::Io(io) => io.raw_os_error() == Some(28) || io.kind() == std::io::ErrorKind::StorageFull,
        _ => e.to_string().contains("disk is full"),
    }
}

impl LedgerError {
    /// Whether the database file itself is damaged (see [`is_corrupt`]).
    pub fn damaged(&self) -> bool {
        matches!(self, Self::Load(e) | Self::Save(e) if is_corrupt(e))
    }

    /// Whether this failure is a full disk (see [`is_disk_full`]).
    pub fn disk_full(&self) -> bool {
        match self {
            Self::Save(e) | Self::Load(e) => is_disk_full(e),
            Self::Migrate(sqlx::migrate::MigrateError::Execute(e)) => is_disk_full(e),
            Self::DataDir(m) => m.contains("No space left") || m.contains("os error 28"),
            Self::DiskFull(_) => true,
            _ => false,
        }
    }

    /// Stable code for the UI and scripts.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Load(_) | Self::Corrupt { .. } => "STORAGE_LOAD_FAILED",
            Self::Save(_) | Self::Migrate(_) | Self::DataDir(_) => "STORAGE_SAVE_FAILED",
            Self::Keychain(_) => "KEYCHAIN_UNAVAILABLE",
            Self::MissingKey(_) => "KEY_MISSING",
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
            Self::SourceGone(_) => "MESSAGE_NOT_FOUND",
            Self::DiskFull(_) => "STORAGE_SAVE_FAILED",
        }
    }
}
