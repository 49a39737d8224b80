use thiserror::Error;

#[derive(Debug, Error)]
pub enum MemoryError {
    #[error("could not read the search index: {0}")]
    Load(#[source] sqlx::Error),
    #[error("could not write the search index: {0}")]
    Save(#[source] sqlx::Error),
    #[error("could not prepare the search index: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("the embedding model is not available: {0}")]
    ModelUnavailable(String),
    #[error("embedding failed: {0}")]
    Embed(String),
    #[error("row {index}: {reason}")]
    BadRow { index: usize, reason: String },
    #[error("the import file is not usable: {0}")]
    BadFile(String),
    #[error(transparent)]
    Ledger(#[from] ledger::LedgerError),
    #[error("invalid input: {0}")]
    Invalid(String),
}

impl MemoryError {
    /// Whether this failure is a full disk.
    pub fn disk_full(&self) -> bool {
        match self {
            Self::Load(e) | Self::Save(e) => ledger::is_disk_full(e),
            Self::Migrate(sqlx::migrate::MigrateError::Execute(e)) => ledger::is_disk_full(e),
            Self::Ledger(l) => l.disk_full(),
            _ => false,
        }
    }

    /// Stable error code, in the product's error vocabulary.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Load(_) => "STORAGE_LOAD_FAILED",
            Self::Save(_) | Self::Migrate(_) => "STORAGE_SAVE_FAILED",
            Self::ModelUnavailable(_) => "EMBEDDER_UNAVAILABLE",
            Self::Embed(_) => "EMBEDDING_FAILED",
            Self::BadRow { .. } | Self::BadFile(_) => "IMPORT_INVALID",
            Self::Ledger(e) => e.code(),
            Self::Invalid(_) => "INVALID_INPUT",
        }
    }
}

impl From<candle_core::Error> for MemoryError {
    fn from(e: candle_core::Error) -> Self {
        Self::Embed(e.to_string())
    }
}
