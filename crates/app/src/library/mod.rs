//! The document library composed for the app and the CLI: where it lives
//! in the data directory, which embedder and tokenizer it uses (the same
//! local all-MiniLM-L6-v2 as memory, or multilingual-e5-small when chosen;
//! passages are sized by MiniLM's word pieces either way), how files are extracted (this very executable
//! re-run as a child process), and the cited passages a persona's reply
//! may use.
//!
//! Public surface: [`Documents`] (imports, the Library view's queries, and
//! the passages and citations of a reply) and the views in `views`. It
//! calls the memory capability only for its embedding model.

mod documents;
mod passages;
pub(crate) mod views;
mod watch;

use std::path::PathBuf;
use std::sync::Arc;

use ::library::{Extractor, LibraryError, TokenCounter};
use memory::{Embedder, MiniLm, WordPiece, MINILM_DIR};

use crate::error::AppError;
use crate::paths::DataDir;

pub use ::library::{
    run_if_worker, AddReport, DocumentView, Library, SearchHit, SearchMode, Status as DocumentStatus, WORKER_ARG,
};
pub use documents::{Documents, REPLY_PASSAGES};
pub use passages::{cited_passages, passages_prompt, with_passages, without_passage_text, CitedPassage};
pub use watch::{watch_folders, WatchChange, SETTLE};
pub use views::{CitationView, DocumentHitView, DocumentItemView, ImportProgressView, PassageView};

/// A model file (imported as a model, not as a document) when dropped.
pub fn is_model_file(path: &std::path::Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
}

/// Where the library's database lives under the data directory.
pub fn library_dir(data_dir: &DataDir) -> PathBuf {
    data_dir.root().join("library")
}

impl From<LibraryError> for AppError {
    fn from(e: LibraryError) -> Self {
        match e {
            LibraryError::NotFound(what) => AppError::new("NOT_FOUND", format!("No document {what} in the library.")),
            LibraryError::Read { path, reason } => AppError::invalid(format!("Cannot read {path}: {reason}.")),
            LibraryError::Embed(inner) => AppError::new("MODEL_UNAVAILABLE", inner.to_string()),
            LibraryError::Storage(inner) => {
                tracing::error!(error = %inner, "document library storage failed");
                if inner.to_string().contains("full") {
                    return AppError::disk_full();
                }
                AppError::new("STORAGE_SAVE_FAILED", "The document library could not be read or saved.")
            }
            other => AppError::new("STORAGE_LOAD_FAILED", other.to_string()),
        }
    }
}

/// Opens the library of `data_dir` with the local MiniLM embedder; fails
/// with MODEL_UNAVAILABLE when the model files are missing (passages
/// without embeddings would rank worse than the library promises).
pub async fn open_library(data_dir: &DataDir) -> Result<Library, AppError> {
    // Passages are screened as they are indexed: the guard's classifier
    // must be in place first (without it the guard runs on rules alone).
    let guard = crate::guard_model::install_guard_model(&crate::guard_model::guard_model_dirs(&data_dir.models()));
    tracing::info!("{}", guard.describe());
    let models = data_dir.models();
    let model_dir = models.join(MINILM_DIR);
    let loaded = tokio::task::spawn_blocking(move || {
        let model: Arc<dyn Embedder> = match chosen_embedder(&models) {
            Some(e5) => e5,
            None => Arc::new(MiniLm::load(&model_dir)?),
        };
        // The splitter counts the chunk's real word pieces, never truncated.
        let counter = WordPiece::from_file(&model_dir.join("vocab.txt"), usize::MAX / 2)?;
        Ok::<_, memory::MemoryError>((model, counter))
    })
    .await
    .map_err(|e| AppError::new("INTERNAL", e.to_string()))?;
    let (model, counter) = loaded.map_err(|e| {
        AppError::new(
            "MODEL_UNAVAILABLE",
            format!("{e}. Run scripts/setup.sh to install {MINILM_DIR} into the models folder."),
        )
    })?;
    let counter: Arc<dyn TokenCounter> = Arc::new(counter);
    let library = Library::open(&library_dir(data_dir), model, counter, Extractor::current_exe()).await?;
    reembed(&library).await?;
    Ok(library)
}

/// Environment variable choosing the library's embedder: `e5` for
/// multilingual-e5-small (installed under `models`); anything else, or
/// nothing, MiniLM. MiniLM is the default: on the FAQ benchmark's tuning
/// half the 4-bit e5 ranked worse than MiniLM (docs/STATUS.md, session 12).
pub const LIBRARY_EMBEDDER_VAR: &str = "LEDGERMIND_LIBRARY_EMBEDDER";

/// The library's e5 embedder when chosen and installed; None means the
/// caller uses MiniLM. A file that does not load is logged and MiniLM used.
pub fn chosen_embedder(models: &std::path::Path) -> Option<Arc<dyn Embedder>> {
    if std::env::var(LIBRARY_EMBEDDER_VAR).ok().as_deref() != Some("e5") {
        return None;
    }
    match ::library::e5::installed(models)? {
        Ok(e5) => Some(Arc::new(e5)),
        Err(e) => {
            tracing::warn!(error = %e, "the library's e5 model did not load; using MiniLM");
            None
        }
    }
}

/// Re-embeds what an earlier embedder indexed (a library is searched with
/// one model's vectors).
pub async fn reembed(library: &Library) -> Result<usize, AppError> {
    let stale = library.stale_chunks().await?;
    if stale == 0 {
        return Ok(0);
    }
    tracing::info!(stale, "re-embedding the library's passages with its current embedder");
    Ok(library.reembed(|done, total| tracing::debug!(done, total, "re-embedding")).await?)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use crate::context::testing;
    use crate::memory::Memories;

    /// The library, built on a context and the memory capability (for its
    /// embedding model) only: an imported file is indexed and found.
    /// Needs the real embedding model (LEDGERMIND_TEST_EMBEDDER).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_imported_file_is_found_with_only_a_context_and_the_memory() {
        let Some(model) = std::env::var_os("LEDGERMIND_TEST_EMBEDDER").map(PathBuf::from) else {
            eprintln!("LEDGERMIND_TEST_EMBEDDER is not set: skipped");
            return;
        };
        let t = testing::context(&[]).await;
        let models = t.dir.path().join("models");
        std::fs::create_dir_all(&models).expect("models dir");
        std::os::unix::fs::symlink(model, models.join(memory::MINILM_DIR)).expect("link the model");
        let memory = Arc::new(Memories::open(t.ctx.clone(), Duration::from_secs(90)).await.expect("index"));
        let docs = Arc::new(super::Documents::new(t.ctx.clone(), memory, ::library::Extractor::InProcess));
        let folder = tempfile::tempdir().expect("folder");
        std::fs::write(folder.path().join("clock.md"), "# Clocks\n\nA pendulum clock needs winding once a week.")
            .expect("write");
        docs.import_documents(vec![folder.path().join("clock.md")], false).await.expect("import");
        let start = Instant::now();
        loop {
            let listed = docs.documents().await.expect("documents");
            if listed.iter().any(|d| d.name == "clock.md" && d.status == "indexed") {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(60), "not indexed: {listed:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let hits = docs.search_documents("how often to wind the clock", 3).await.expect("search");
        assert!(hits.first().is_some_and(|h| h.document.ends_with("clock.md")), "{hits:?}");
        docs.stop_documents().await;
    }
}
