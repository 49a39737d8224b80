//! The library inside the running engine: opened on first need with the
//! memory's embedder (one MiniLM in memory, not two) unless e5 is chosen
//! (`LEDGERMIND_LIBRARY_EMBEDDER=e5`), imports as owned
//! tasks that report progress and can be cancelled between files, the
//! Library view's queries, and the passages and citations of a reply.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use ::library::{Extractor, Library, SearchMode, TokenCounter, Visibility, DB_FILE};
use memory::{WordPiece, MINILM_DIR};

use super::passages::{cited_passages, CitedPassage};
use super::views::{CitationView, DocumentHitView, DocumentItemView, ImportProgressView, PassageView};
use crate::context::Context;
use crate::memory::Memories;
use crate::error::AppError;

/// How long the start-up work waits for the embedding model to load.
const MODEL_LOAD_PATIENCE: std::time::Duration = std::time::Duration::from_secs(180);
use crate::events::AppEvent;
use crate::Result;

/// Passages a reply is given at most.
pub const REPLY_PASSAGES: usize = 3;

/// The engine's share of the library: the open library and the running
/// imports' cancel flags.
pub struct Documents {
    ctx: Arc<Context>,
    memory: Arc<Memories>,
    extractor: Extractor,
    library: tokio::sync::OnceCell<Arc<Library>>,
    imports: Mutex<HashMap<String, Arc<AtomicBool>>>,
    /// Whether the folder watcher runs (one per engine).
    watching: AtomicBool,
    /// Wakes the watcher when a folder is added as watched.
    roots_changed: Arc<tokio::sync::Notify>,
    /// The start-up work and the watcher, ended at shutdown so nothing of
    /// this engine indexes or records after it (see `stop_documents`).
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Documents {
    pub fn new(ctx: Arc<Context>, memory: Arc<Memories>, extractor: Extractor) -> Self {
        Self {
            ctx,
            memory,
            extractor,
            library: Default::default(),
            imports: Default::default(),
            watching: Default::default(),
            roots_changed: Default::default(),
            task: Default::default(),
        }
    }
}

impl Documents {
    /// The library, opened on first use with the memory's embedder.
    pub(crate) async fn library(&self) -> Result<Arc<Library>> {
        let lib = self
            .library
            .get_or_try_init(|| async {
                let models = self.ctx.data_dir().models();
                let own = tokio::task::spawn_blocking(move || super::chosen_embedder(&models))
                    .await
                    .map_err(|e| AppError::new("INTERNAL", e.to_string()))?;
                let embedder = match own {
                    Some(e5) => e5,
                    None => {
                        self.memory.ensure_embedder().await;
                        self.memory.index.embedder().ok_or_else(|| {
                            AppError::new(
                                "MODEL_UNAVAILABLE",
                                format!(
                                    "The embedding model is not loaded ({}). Run scripts/setup.sh.",
                                    self.memory.index.embedder_status()
                                ),
                            )
                        })?
                    }
                };
                let vocab = self.ctx.data_dir().models().join(MINILM_DIR).join("vocab.txt");
                let counter = tokio::task::spawn_blocking(move || WordPiece::from_file(&vocab, usize::MAX / 2))
                    .await
                    .map_err(|e| AppError::new("INTERNAL", e.to_string()))?
                    .map_err(|e| AppError::new("MODEL_UNAVAILABLE", e.to_string()))?;
                let counter: Arc<dyn TokenCounter> = Arc::new(counter);
                let dir = super::library_dir(self.ctx.data_dir());
                let lib = Library::open(&dir, embedder, counter, self.extractor.clone()).await?;
                Ok::<_, AppError>(Arc::new(lib))
            })
            .await?;
        Ok(lib.clone())
    }

    /// Whether the person ever added a document (no library file is made
    /// for someone who never did).
    fn has_library(&self) -> bool {
        self.library.initialized() || super::library_dir(self.ctx.data_dir()).join(DB_FILE).exists()
    }

    /// At start, for a person who has a library: finishes an import the
    /// last run left unfinished, catches up with the watched folders
    /// (file-system events are lost while the app is closed) and the
    /// ledger with the library, then watches the folders while the engine
    /// runs.
    pub(crate) fn start_documents(self: &Arc<Self>) {
        if self.has_library() {
            self.watch_documents(true);
        }
    }

    /// The library once the embedding model is loaded. At start the model
    /// may take longer to load than a reply can wait (a busy machine), so
    /// this waits for as long as it is still loading.
    async fn library_when_loaded(&self) -> Result<Arc<Library>> {
        let started = std::time::Instant::now();
        loop {
            match self.library().await {
                Err(e) if e.code == "MODEL_UNAVAILABLE"
                    && !self.ctx.is_shutting_down()
                    && !self.memory.index.embedder_status().starts_with("keyword")
                    && started.elapsed() < MODEL_LOAD_PATIENCE =>
                {
                    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                }
                other => return other,
            }
        }
    }

    /// Starts the folder watcher, or tells the running one that a folder
    /// was added as watched. `at_start`: the app just started, so the
    /// ledger is brought level with the library before anything else runs.
    fn watch_documents(self: &Arc<Self>, at_start: bool) {
        if self.watching.swap(true, Ordering::SeqCst) {
            self.roots_changed.notify_one();
            return;
        }
        let weak = Arc::downgrade(self);
        let shutdown = self.ctx.shutdown_signal();
        let roots_changed = self.roots_changed.clone();
        let task = tokio::spawn(async move {
            let Some(library) = (match weak.upgrade() {
                Some(docs) => docs.library_when_loaded().await.map_err(|e| tracing::warn!(code = e.code, "{}", e.message)).ok(),
                None => None,
            }) else {
                return;
            };
            let changed = {
                let weak = weak.clone();
                move || {
                    if let Some(docs) = weak.upgrade() {
                        docs.ctx.emit(AppEvent::DocumentsChanged {});
                    }
                }
            };
            let catch_up = {
                let (library, weak, changed) = (library.clone(), weak.clone(), changed.clone());
                async move {
                    let finished = library.resume(|_| changed()).await;
                    // Passages indexed with another embedder are embedded again
                    // before the scan (found by keyword only until then).
                    if let Err(e) = super::reembed(&library).await {
                        tracing::warn!(code = e.code, "the library could not be re-embedded: {}", e.message);
                    }
                    let reconciled = library.reconcile(|_| changed()).await;
                    for (what, reports) in [("an unfinished import", finished), ("the watched folders' scan", reconciled)] {
                        match reports {
                            Ok(reports) => {
                                if let Some(docs) = weak.upgrade() {
                                    for report in &reports {
                                        docs.record_added(report).await;
                                    }
                                }
                            }
                            Err(e) => tracing::warn!(error = %e, "{what} could not be finished"),
                        }
                    }
                    if let Some(docs) = weak.upgrade().filter(|_| at_start) {
                        docs.catch_up_ledger(&library).await;
                    }
                    if at_start {
                        if let Err(e) = library.preload().await {
                            tracing::warn!(error = %e, "the library's vectors could not be loaded ahead of the first search");
                        }
                    }
                }
            };
            let on_change = {
                let weak = weak.clone();
                move |change: super::WatchChange| {
                    match &change {
                        super::WatchChange::Failed { path, message } => tracing::warn!(%path, %message, "watched folder"),
                        other => tracing::debug!(change = ?other, "watched folder"),
                    }
                    if let Some(docs) = weak.upgrade() {
                        tokio::spawn(async move {
                            match change {
                                super::WatchChange::Indexed(report) => docs.record_added(&report).await,
                                super::WatchChange::Removed(doc) => docs.record_removed(&doc).await,
                                super::WatchChange::Failed { .. } => {}
                            }
                        });
                    }
                    changed();
                }
            };
            if let Err(e) = super::watch_folders(library, super::SETTLE, shutdown, roots_changed, on_change, catch_up).await {
                tracing::warn!(code = e.code, "folders are not watched: {}", e.message);
            }
        });
        if let Ok(mut slot) = self.task.lock() {
            *slot = Some(task);
        }
    }

    /// At shutdown: lets the watcher end (it listens for the shutdown
    /// signal), or stops the start-up work where it is waiting. A file
    /// being indexed then is rolled back with its transaction and read
    /// again at the next start.
    pub(crate) async fn stop_documents(&self) {
        let Some(mut task) = self.task.lock().ok().and_then(|mut t| t.take()) else { return };
        if tokio::time::timeout(std::time::Duration::from_secs(5), &mut task).await.is_err() {
            task.abort();
            let _ = task.await;
        }
    }

    /// Starts importing files and folders (folders recursively; with
    /// `watch`, folders stay watched); progress arrives as
    /// `DocumentImport` events. Returns the import's id.
    pub async fn import_documents(self: &Arc<Self>, paths: Vec<PathBuf>, watch: bool) -> Result<String> {
        let library = self.library().await?;
        let import_id = uuid::Uuid::now_v7().to_string();
        let cancel = Arc::new(AtomicBool::new(false));
        if let Ok(mut imports) = self.imports.lock() {
            imports.insert(import_id.clone(), cancel.clone());
        }
        // Queued before the call returns: quitting now still leaves the
        // files to be read at the next start.
        let queued = library.enqueue(&paths, watch).await?;
        if watch {
            self.watch_documents(false);
        }
        let docs = self.clone();
        let id = import_id.clone();
        tokio::spawn(async move {
            docs.run_import(&library, &id, queued, &cancel).await;
            if let Ok(mut imports) = docs.imports.lock() {
                imports.remove(&id);
            }
        });
        Ok(import_id)
    }

    async fn run_import(&self, library: &Library, import_id: &str, files: Vec<::library::Queued>, cancel: &AtomicBool) {
        let mut progress = ImportProgressView {
            import_id: import_id.to_owned(),
            done: 0,
            total: files.len() as u32,
            current: None,
            last_status: None,
            last_error: None,
            chunks: 0,
            finished: false,
            cancelled: false,
        };
        let mut files = files.into_iter();
        for queued in files.by_ref() {
            if cancel.load(Ordering::SeqCst) || self.ctx.is_shutting_down() {
                progress.cancelled = true;
                if !self.ctx.is_shutting_down() {
                    // Cancelled by the person: the rest is not wanted.
                    self.dequeue_all(library, std::iter::once(queued)).await;
                }
                break;
            }
            let file = queued.file;
            progress.current = Some(file.display().to_string());
            self.ctx.emit(AppEvent::DocumentImport { progress: progress.clone() });
            let added = library.add_file(&file, queued.root.as_deref()).await;
            if let Err(e) = library.dequeue(&file).await {
                tracing::warn!(error = %e, "the import queue could not be updated");
            }
            match added {
                Ok(report) => {
                    self.record_added(&report).await;
                    progress.chunks += report.chunks as u64;
                    progress.last_status = Some(report.status.as_str().to_owned());
                    progress.last_error = report.error;
                }
                Err(e) => {
                    tracing::warn!(file = %file.display(), error = %e, "a document could not be imported");
                    progress.last_status = Some("failed".into());
                    progress.last_error = Some(e.to_string());
                }
            }
            progress.done += 1;
            self.ctx.emit(AppEvent::DocumentsChanged {});
        }
        if progress.cancelled && !self.ctx.is_shutting_down() {
            self.dequeue_all(library, files).await;
        }
        progress.current = None;
        progress.finished = true;
        self.ctx.emit(AppEvent::DocumentImport { progress });
    }

    /// Records in the ledger that a document entered the library or a
    /// new version of it was indexed (nothing for an unchanged file or one
    /// without text). Signed by the person; no name, no text.
    async fn record_added(&self, report: &::library::AddReport) {
        if report.status == ::library::Status::Indexed {
            let change = if report.replaced { "updated" } else { "added" };
            self.record_document(change, report.id, report.sha256.clone(), report.chunks).await;
        }
    }

    /// Brings the ledger level with the library: documents added, changed
    /// or removed where the app did not see it (the command line, files
    /// gone while the app was closed) are recorded at the next start.
    pub(crate) async fn catch_up_ledger(&self, library: &Library) {
        let events = match self.ctx.ledger.events_of_kind("document_changed").await {
            Ok(events) => events,
            Err(e) => return tracing::warn!(error = %e, "the ledger's document events could not be read"),
        };
        // What the ledger last heard of each document: its content hash.
        let mut heard: HashMap<i64, Option<String>> = HashMap::new();
        for payload in events.into_iter().filter_map(|e| e.payload) {
            if let Ok(ledger::EventBody::DocumentChanged { change, document_id, sha256, .. }) = serde_json::from_value(payload) {
                if change == "removed" {
                    heard.remove(&document_id);
                } else {
                    heard.insert(document_id, sha256);
                }
            }
        }
        let documents = match library.list().await {
            Ok(documents) => documents,
            Err(e) => return tracing::warn!(error = %e, "the library could not be listed"),
        };
        for doc in documents {
            let last = heard.remove(&doc.id);
            if doc.status != ::library::Status::Indexed {
                continue;
            }
            let chunks = usize::try_from(doc.chunks).unwrap_or(0);
            match last {
                None => self.record_document("added", doc.id, doc.sha256, chunks).await,
                Some(sha) if sha != doc.sha256 => self.record_document("updated", doc.id, doc.sha256, chunks).await,
                Some(_) => {}
            }
        }
        for (document_id, sha256) in heard {
            self.record_document("removed", document_id, sha256, 0).await;
        }
    }

    async fn record_removed(&self, doc: &::library::DocumentView) {
        self.record_document("removed", doc.id, doc.sha256.clone(), usize::try_from(doc.chunks).unwrap_or(0)).await;
    }

    async fn record_document(&self, change: &str, document_id: i64, sha256: Option<String>, chunks: usize) {
        let body = ledger::EventBody::DocumentChanged {
            change: change.to_owned(),
            document_id,
            sha256,
            chunks: u32::try_from(chunks).unwrap_or(u32::MAX),
        };
        // The library already holds the change; a ledger that cannot be
        // written is said in the log, not turned into a failed import.
        match self.ctx.ledger.append(ledger::HUMAN_ENTITY, body).await {
            Ok(receipt) => self.ctx.emit(AppEvent::LedgerAppended { seq: receipt.seq, kind: receipt.kind }),
            Err(e) => tracing::warn!(error = %e, "the document's ledger event could not be recorded"),
        }
    }

    async fn dequeue_all(&self, library: &Library, files: impl Iterator<Item = ::library::Queued>) {
        for queued in files {
            if let Err(e) = library.dequeue(&queued.file).await {
                tracing::warn!(error = %e, "the import queue could not be updated");
            }
        }
    }

    /// Files and folders dropped on the window: as `import_documents`,
    /// but nobody awaits the answer, so an import that cannot start (no
    /// embedding model, a path gone) is reported as a finished import with
    /// its error, which the window shows.
    pub async fn import_dropped(self: &Arc<Self>, paths: Vec<PathBuf>) {
        if let Err(e) = self.import_documents(paths.clone(), false).await {
            tracing::warn!(code = e.code, "dropped documents were not imported: {}", e.message);
            self.ctx.emit(AppEvent::DocumentImport {
                progress: ImportProgressView {
                    import_id: uuid::Uuid::now_v7().to_string(),
                    done: 0,
                    total: paths.len() as u32,
                    current: None,
                    last_status: Some("failed".into()),
                    last_error: Some(e.message),
                    chunks: 0,
                    finished: true,
                    cancelled: false,
                },
            });
        }
    }

    /// Stops an import after the file it is reading (that one is kept).
    pub fn cancel_import(&self, import_id: &str) -> bool {
        let flag = self.imports.lock().ok().and_then(|i| i.get(import_id).cloned());
        flag.map(|f| f.store(true, Ordering::SeqCst)).is_some()
    }

    pub async fn documents(&self) -> Result<Vec<DocumentItemView>> {
        if !self.has_library() {
            return Ok(vec![]);
        }
        Ok(self.library().await?.list().await?.into_iter().map(DocumentItemView::from).collect())
    }

    /// Removes a document: its text, passages, vectors and citations.
    pub async fn remove_document(&self, id: i64) -> Result<()> {
        let removed = self.library().await?.remove(&id.to_string()).await?;
        self.record_removed(&removed).await;
        self.ctx.emit(AppEvent::DocumentsChanged {});
        Ok(())
    }

    pub async fn set_document_groups(&self, id: i64, groups: Vec<String>) -> Result<()> {
        self.library().await?.set_groups(&id.to_string(), &groups).await?;
        self.ctx.emit(AppEvent::DocumentsChanged {});
        Ok(())
    }

    /// The Library view's search over every document.
    pub async fn search_documents(&self, query: &str, k: usize) -> Result<Vec<DocumentHitView>> {
        if !self.has_library() {
            return Ok(vec![]);
        }
        let hits = self.library().await?.search(query, k.clamp(1, 50), SearchMode::Hybrid).await?;
        Ok(hits.into_iter().map(DocumentHitView::from).collect())
    }

    pub async fn message_citations(&self, message_id: &str) -> Result<Vec<CitationView>> {
        if !self.has_library() {
            return Ok(vec![]);
        }
        Ok(self.library().await?.citations(message_id).await?.into_iter().map(CitationView::from).collect())
    }

    pub async fn document_passage(&self, chunk_id: i64) -> Result<PassageView> {
        self.library()
            .await?
            .passage(chunk_id)
            .await?
            .map(PassageView::from)
            .ok_or_else(|| AppError::new("NOT_FOUND", "This passage is no longer in the library."))
    }

    /// The passages `persona` may use for `query`: documents filed under
    /// its groups or under none (the system persona: all). Empty when the
    /// person has no library; a library error is logged, never fails the
    /// reply.
    pub(crate) async fn reply_passages(&self, persona: &ledger::Persona, query: &str) -> Vec<CitedPassage> {
        if !self.has_library() || query.trim().is_empty() {
            return vec![];
        }
        let visible = if persona.is_system || persona.id == ledger::EI_PERSONA_ID {
            Visibility::All
        } else {
            match self.ctx.ledger.persona_groups(&persona.id).await {
                Ok(groups) => Visibility::Groups(groups.readable()),
                Err(e) => {
                    tracing::warn!(error = %e, "no document passages: the persona's groups could not be read");
                    return vec![];
                }
            }
        };
        let found = match self.library().await {
            Ok(lib) => cited_passages(&lib, query, REPLY_PASSAGES, &visible).await,
            Err(e) => Err(e),
        };
        found.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "no document passages for this reply");
            vec![]
        })
    }

    /// Keeps what a reply cited and tells the window.
    pub(crate) async fn record_reply_citations(&self, persona_id: &str, message_id: &str, passages: &[CitedPassage]) {
        if passages.is_empty() {
            return;
        }
        let records: Vec<::library::Citation> =
            passages.iter().enumerate().map(|(i, p)| p.record(i as u32 + 1)).collect();
        let stored = match self.library().await {
            Ok(lib) => lib.record_citations(message_id, &records).await.map_err(AppError::from),
            Err(e) => Err(e),
        };
        if let Err(e) = stored {
            tracing::warn!(error = %e, "the reply's citations were not kept");
        }
        self.ctx.emit(AppEvent::ReplyCitations {
            persona_id: persona_id.to_owned(),
            message_id: message_id.to_owned(),
            citations: records.into_iter().map(CitationView::from).collect(),
        });
    }
}
