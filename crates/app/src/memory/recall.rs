//! Memory retrieval in the engine: the search index (`<home>/index.db`, a
//! projection of the ledger), conversation import, recall for the CLI and
//! the UI, and the memories put into each reply's prompt.
//!
//! One ranking for everyone: [`Memories::recall`] and the reply pipeline
//! both call `MemoryIndex::recall` with the same scope and settings.

use std::path::Path;
use std::sync::Arc;

use ledger::{Ledger, Message, Persona};
use memory::{ItemKind, MemoryError, MemoryIndex, MiniLm, NewItem, Scope, MINILM_DIR};
use serde::Serialize;

use super::Memories;
use crate::error::AppError;
use crate::paths::DataDir;
use crate::screening::ConversationImport;
use crate::Result;

pub use memory::{EmbedProgress, ImportReport, RecallSettings};

/// How many recalled items go into a reply's prompt.
pub const PROMPT_MEMORIES: usize = 5;
/// A recalled text is cut to this many characters in the prompt.
const PROMPT_MEMORY_CHARS: usize = 400;

impl From<MemoryError> for AppError {
    fn from(e: MemoryError) -> Self {
        match e {
            MemoryError::Ledger(l) => l.into(),
            e if e.disk_full() => {
                tracing::error!(error = %e, "search index: the disk is full");
                AppError::disk_full()
            }
            MemoryError::Load(inner) | MemoryError::Save(inner) => {
                tracing::error!(error = %inner, "search index failed");
                AppError::new("STORAGE_LOAD_FAILED", "The search index could not be used. Restart Ledgermind: a damaged index is rebuilt from the ledger when the app starts.")
            }
            other => AppError::new(other.code(), other.to_string()),
        }
    }
}

/// One recalled item, as shown to shells.
#[derive(Debug, Clone, Serialize)]
pub struct RecallItem {
    /// The external id when there is one (imported messages), else the item id.
    pub id: String,
    pub item_id: String,
    /// "message" or "memory".
    pub kind: &'static str,
    pub score: f32,
    pub text: String,
    /// For a memory: the messages it came from.
    pub source_ids: Vec<String>,
    pub persona_id: String,
    pub ts_ms: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct RecallView {
    pub query: String,
    /// "hybrid", or "keyword" when no embedding model is available.
    pub mode: &'static str,
    pub results: Vec<RecallItem>,
}

impl From<memory::Hit> for RecallItem {
    fn from(h: memory::Hit) -> Self {
        Self {
            id: h.public_id().to_owned(),
            kind: h.kind.as_str(),
            item_id: h.item_id,
            score: h.score,
            text: h.text,
            source_ids: h.source_ids,
            persona_id: h.persona_id,
            ts_ms: h.ts_ms,
        }
    }
}

/// Opens the index and catches it up with the ledger (called by `Memories::open`).
pub(crate) async fn open_index(data_dir: &DataDir, ledger: &Ledger) -> Result<Arc<MemoryIndex>> {
    // On a full disk SQLite cannot size its shared-memory file and says only
    // "I/O error": name the cause.
    let full = |e: MemoryError| -> AppError {
        if ledger::no_room_in(data_dir.root()) {
            tracing::error!(error = %e, "opening the search index failed on a full disk");
            AppError::disk_full()
        } else {
            e.into()
        }
    };
    let path = data_dir.root().join("index.db");
    let index = match MemoryIndex::open(&path).await {
        Ok(index) => index,
        Err(e) if ledger::no_room_in(data_dir.root()) => return Err(full(e)),
        // The index is derived from the ledger: a damaged one is rebuilt.
        Err(e) => {
            tracing::warn!(error = %e, "the search index could not be opened; rebuilding it from the ledger");
            for suffix in ["", "-wal", "-shm"] {
                let mut file = path.as_os_str().to_owned();
                file.push(suffix);
                if let Err(e) = std::fs::remove_file(&file) {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        return Err(AppError::new("STORAGE_LOAD_FAILED", format!("cannot remove the damaged search index {file:?}: {e}")));
                    }
                }
            }
            MemoryIndex::open(&path).await.map_err(full)?
        }
    };
    let added = index.sync_from_ledger(ledger).await.map_err(full)?;
    if added > 0 {
        tracing::info!(added, "search index caught up with the ledger");
    }
    Ok(Arc::new(index))
}

/// Loads the local embedding model off the async threads, then embeds
/// whatever is pending in the background. Without the model files recall
/// stays keyword-only and says so in its status; it never fails.
/// Longer drafts are not embedded ahead of time (the model truncates anyway).
const PREFETCH_MAX_CHARS: usize = 4_000;

/// Recent texts whose embeddings are kept (drafts, sent messages, queries).
const EMBED_CACHE: usize = 256;

pub(crate) fn start_embedder(index: &Arc<MemoryIndex>, models: &Path) {
    let dir = models.join(MINILM_DIR);
    let index = index.clone();
    tokio::spawn(async move {
        let loaded = tokio::task::spawn_blocking(move || MiniLm::load(&dir)).await;
        match loaded {
            Ok(Ok(model)) => {
                // Each text reaches the model once: a reply's query and the
                // index share embeddings (see `Memories::prefetch_embedding`).
                let model = memory::CachedEmbedder::new(Arc::new(model), EMBED_CACHE);
                if let Err(e) = index.set_embedder(Arc::new(model)).await {
                    index.set_embedder_unavailable(&e.to_string());
                    return;
                }
                index.run_embedder().await;
            }
            Ok(Err(e)) => index.set_embedder_unavailable(&format!(
                "{e}. Run scripts/setup.sh to install {MINILM_DIR} into the models folder."
            )),
            Err(e) => index.set_embedder_unavailable(&e.to_string()),
        }
    });
}

/// Makes a message just appended to the ledger searchable (keyword at once,
/// vector in the background). Failures are logged: the ledger is the truth
/// and the next start re-derives the index from it.
pub(crate) async fn index_message(
    memory: &Memories,
    message_id: &str,
    persona_id: &str,
    role: ledger::MessageRole,
    text: &str,
    seq: i64,
) {
    let item = NewItem {
        item_id: message_id.to_owned(),
        kind: ItemKind::Message,
        persona_id: persona_id.to_owned(),
        external_id: None,
        source_ids: Vec::new(),
        text: text.to_owned(),
        ts_ms: memory::now_ms(),
        seq: Some(seq),
        role: Some(role),
    };
    if let Err(e) = memory.index.index_items(&[item]).await {
        tracing::warn!(error = %e, "could not index a message; it will be indexed on the next start");
    }
}

/// What retrieval gave one reply: lines for the prompt and the items' ids.
#[derive(Debug, Default)]
pub(crate) struct ReplyMemories {
    pub lines: Vec<String>,
    pub item_ids: Vec<String>,
}

/// Past messages and memories worth showing the model for this reply: the
/// same ranking as `recall`, for the human's latest message, minus what the
/// prompt already holds. Never fails the reply: errors give no memories.
pub(crate) async fn memories_for_reply(memory: &Memories, persona: &Persona, history: &[Message]) -> ReplyMemories {
    let Some(query) = history.iter().rev().find(|m| m.role == ledger::MessageRole::Human) else {
        return ReplyMemories::default();
    };
    memory.ensure_embedder().await;
    let k = 2 * PROMPT_MEMORIES + history.len();
    let recall = match memory.scope_of(persona).await {
        Ok(scope) => memory.index.recall(&scope, Some(&persona.name), &query.content, k, memory::now_ms()).await,
        Err(e) => Err(MemoryError::Invalid(e.message)),
    };
    let recall = match recall {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "recall for a reply failed; replying without memories");
            return ReplyMemories::default();
        }
    };
    let mut out = ReplyMemories::default();
    // The same words said twice (a greeting, a line the person repeats) tell
    // the model nothing the first time did not, and would push a different
    // memory out of the few the prompt holds.
    let same = |t: &str| t.split_whitespace().map(str::to_lowercase).collect::<Vec<_>>().join(" ");
    let mut seen: std::collections::HashSet<String> = history.iter().map(|m| same(&m.content)).collect();
    let fresh = recall.hits.into_iter().filter(|h| !history.iter().any(|m| m.id == h.item_id) && seen.insert(same(&h.text)));
    for h in fresh.take(PROMPT_MEMORIES) {
        let date = time::OffsetDateTime::from_unix_timestamp(h.ts_ms / 1000)
            .ok()
            .map(|t| t.date().to_string())
            .unwrap_or_default();
        let mut text: String = h.text.chars().take(PROMPT_MEMORY_CHARS).collect();
        if h.text.chars().count() > PROMPT_MEMORY_CHARS {
            text.push('…');
        }
        out.lines.push(match h.kind {
            ItemKind::Memory => format!("[known about them] {text}"),
            ItemKind::Message => format!("[{date}] {text}"),
        });
        out.item_ids.push(h.item_id);
    }
    out
}

/// Records which items retrieval gave the reply `message_id` ("memories
/// used"). Logged on failure: the reply itself is already saved.
pub(crate) async fn record_reply_sources(memory: &Memories, persona_id: &str, message_id: &str, used: &ReplyMemories) {
    if used.item_ids.is_empty() {
        return;
    }
    let body = ledger::EventBody::ReplySources {
        message_id: message_id.to_owned(),
        persona_id: persona_id.to_owned(),
        item_ids: used.item_ids.clone(),
    };
    if let Err(e) = memory.ctx.ledger.append(persona_id, body).await {
        tracing::warn!(error = %e, "could not record the memories a reply used");
    }
}

impl Memories {
    /// Embeds `text` in the background so that a reply's retrieval for it
    /// finds the vector ready: called while a message is typed (debounced by
    /// the UI) and when it is sent. Does nothing before the model is loaded
    /// (asking for it starts the load).
    pub fn prefetch_embedding(&self, text: &str) {
        if !self.embedder_requested.swap(true, std::sync::atomic::Ordering::SeqCst) {
            start_embedder(&self.index, &self.ctx.data_dir().models());
        }
        let text = text.trim();
        let Some(embedder) = self.index.embedder() else { return };
        if text.is_empty() || text.chars().count() > PREFETCH_MAX_CHARS {
            return;
        }
        let text = text.to_owned();
        drop(tokio::task::spawn_blocking(move || {
            if let Err(e) = embedder.embed(&[text.as_str()]) {
                tracing::debug!(error = %e, "could not embed a draft ahead of time");
            }
        }));
    }

    /// The visibility rule for a persona (see `memory::Scope::for_viewer`):
    /// its own conversation and the memories filed under its groups.
    pub(crate) async fn scope_of(&self, p: &Persona) -> Result<Scope> {
        let groups = self.ctx.ledger.persona_groups(&p.id).await?;
        Ok(Scope::for_viewer(&p.id, p.is_system, &groups.readable()))
    }

    /// Loads the embedding model on first need rather than at start: it is
    /// the largest thing in memory after the web view, and an idle app or a
    /// CLI command that never searches should not pay for it. Waits (up to
    /// 10 s) for the load, so the first search already ranks by meaning.
    pub(crate) async fn ensure_embedder(&self) {
        if !self.embedder_requested.swap(true, std::sync::atomic::Ordering::SeqCst) {
            start_embedder(&self.index, &self.ctx.data_dir().models());
        }
        for _ in 0..200 {
            if self.index.progress().model_loaded || self.index.embedder_status().starts_with("keyword") {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Ranks PERSONA's visible messages and memories for QUERY (the exact
    /// ranking replies use). Items not embedded yet count by keyword only.
    pub async fn recall(&self, persona: &str, query: &str, k: usize) -> Result<RecallView> {
        let p = self.ctx.ledger.find_persona(persona).await?;
        let k = k.clamp(1, 100);
        self.ensure_embedder().await;
        let recall = self.index.recall(&self.scope_of(&p).await?, Some(&p.name), query, k, memory::now_ms()).await?;
        Ok(RecallView {
            query: query.to_owned(),
            mode: recall.mode,
            results: recall.hits.into_iter().map(RecallItem::from).collect(),
        })
    }

    /// Imports a JSON conversation file into PERSONA's conversation: every
    /// row is validated first (nothing is written if one is bad), then the
    /// messages are appended in signed batches and keyword-indexed at once.
    /// Embeddings follow in the background (see [`Memories::embed_progress`]).
    /// Every row's text passes the prompt-injection guard before it is
    /// stored (see `screening`): flagged parts are removed, high-risk rows
    /// are left out and named in the result.
    pub async fn import_conversation(&self, persona: &str, file: &Path) -> Result<ConversationImport> {
        let p = self.ctx.ledger.find_persona(persona).await?;
        if p.archived {
            return Err(ledger::LedgerError::PersonaArchived(p.name).into());
        }
        let bytes = tokio::fs::read(file)
            .await
            .map_err(|e| MemoryError::BadFile(format!("cannot read {}: {e}", file.display())))?;
        let rows = memory::parse_conversation(&bytes, &p.name)?;
        let (rows, guard) = crate::screening::screen_imported_rows(&self.ctx, rows).await?;
        let report = memory::import_rows(&self.ctx.ledger, &self.index, &p, rows, &|done, total| {
            tracing::info!(done, total, "importing");
        })
        .await?;
        self.ctx.emit(crate::events::AppEvent::PersonaChanged { persona: self.ctx.ledger.persona(&p.id).await?.into() });
        Ok(ConversationImport { report, guard })
    }

    /// Embeds everything not embedded yet, now (when the model is loaded);
    /// `progress` sees (embedded, total). Returns false without a model.
    pub async fn wait_for_embeddings(&self, progress: &(dyn Fn(EmbedProgress) + Send + Sync)) -> Result<bool> {
        self.ensure_embedder().await;
        if !self.index.progress().model_loaded {
            return Ok(false);
        }
        loop {
            let n = self.index.embed_pending_step().await?;
            progress(self.index.progress());
            if n == 0 {
                return Ok(true);
            }
        }
    }

    pub fn embed_progress(&self) -> EmbedProgress {
        self.index.progress()
    }

    /// "hybrid search" with the model loaded, else why it is keyword-only.
    pub fn memory_status(&self) -> String {
        self.index.embedder_status()
    }

    pub fn recall_settings(&self) -> RecallSettings {
        self.index.settings()
    }

    pub fn set_recall_settings(&self, s: RecallSettings) {
        self.index.set_settings(s)
    }
}
