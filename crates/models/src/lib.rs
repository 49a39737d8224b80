//! Ledgermind's model manager, Tauri-free: it owns the catalog of chat
//! models (pinned repository, revision, size, SHA-256, licence, languages,
//! KV cache size, registry copies), the fit check (weights + KV cache at our
//! context against available memory), the GGUF header reader, the
//! resumable and verified downloader, the models folder (what is installed,
//! the default model) and discovery of the model servers and Ollama blobs
//! already on the machine. The app and the CLI call it; it calls no app code.

pub mod catalog;
pub mod discover;
pub mod download;
pub mod fit;
pub mod gguf;
pub mod store;
pub mod testkit;

pub use catalog::{find, CatalogEntry, CATALOG, DEFAULT_MODEL_ID};
pub use download::{DownloadError, DownloadEvent, DownloadOptions, DownloadRequest, Downloader, Outcome};
pub use fit::Fit;
pub use store::{read_default, DefaultModel};
pub use tokio_util::sync::CancellationToken;

/// The download request for a catalog entry from its Hugging Face source,
/// installed into `models_dir` under the publisher's file name.
pub fn hf_request(entry: &CatalogEntry, models_dir: &std::path::Path, endpoint: &str) -> Option<DownloadRequest> {
    let hf = entry.hf?;
    Some(DownloadRequest {
        id: entry.id.to_owned(),
        url: hf.resolve_url(endpoint),
        revision: hf.revision.to_owned(),
        sha256: entry.sha256.to_owned(),
        size: entry.size_bytes,
        dest: models_dir.join(entry.file),
    })
}
