use thiserror::Error;

/// Everything that can go wrong in the library, with the context a person
/// needs. Extraction problems of one file are not errors: they are that
/// document's status ([`crate::Status`]).
#[derive(Debug, Error)]
pub enum LibraryError {
    #[error("cannot open the document library: {0}")]
    Open(String),
    #[error("document library storage failed: {0}")]
    Storage(#[from] sqlx::Error),
    #[error("embedding failed: {0}")]
    Embed(#[from] memory::MemoryError),
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("no document {0} in the library")]
    NotFound(String),
    #[error("the background task failed: {0}")]
    Task(String),
}

pub type Result<T, E = LibraryError> = std::result::Result<T, E>;
