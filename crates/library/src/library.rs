//! The library itself: add (extract → chunk → screen → embed → store, the
//! swap in one transaction), list, remove (text, chunks and vectors really
//! gone) and search.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use memory::Embedder;
use runtime::guard::Treatment;
use serde::{Deserialize, Serialize};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};
use sqlx::Row;

use crate::chunk::{chunk_blocks_with, sha256_hex, split, Chunk, TokenCounter};
use crate::error::{LibraryError, Result};
use crate::extract::{Extraction, Format};
use crate::visibility::Visibility;
use crate::search::{
    format_page_marks, fuse, is_contents, keyword_expression, matched_page, parse_page_marks, quote_match, recency_bonus, snippet, word_match, SearchMode,
    SearchSettings, DEFAULT_SEARCH,
};
use crate::worker::{Extractor, MAX_FILE_BYTES};

/// File name of the library database in its directory.
pub const DB_FILE: &str = "library.db";
/// Largest chunk, in model tokens (the issue's ≤ 256).
pub const DEFAULT_CHUNK_TOKENS: usize = 256;
/// Word pieces MiniLM reads (its window minus `[CLS]`/`[SEP]`); longer
/// chunks are embedded in parts. Another embedder's window is its own
/// [`Embedder::max_tokens`] minus two.
pub const EMBED_WINDOW: usize = memory::MINILM_MAX_TOKENS - 2;
/// Embeddings computed per call (and vectors written per statement).
const EMBED_BATCH: usize = 64;
/// Characters of a result's snippet.
pub const SNIPPET_CHARS: usize = 320;

/// A document's state in the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Indexed,
    /// Reported by `add` only: the file has not changed since it was indexed.
    Unchanged,
    NeedsPassword,
    NoText,
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Indexed => "indexed",
            Self::Unchanged => "unchanged",
            Self::NeedsPassword => "needs_password",
            Self::NoText => "no_text",
            Self::Failed => "failed",
        }
    }

    fn parse(s: &str) -> Self {
        match s {
            "indexed" => Self::Indexed,
            "needs_password" => Self::NeedsPassword,
            "no_text" => Self::NoText,
            _ => Self::Failed,
        }
    }
}

/// What `add` did to one document (the CLI prints exactly these fields).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AddReport {
    pub document: String,
    pub id: i64,
    pub status: Status,
    pub pages: Option<u32>,
    pub chunks: usize,
    pub error: Option<String>,
    /// Chunks embedded for this add (the others reused stored vectors).
    #[serde(skip)]
    pub embedded: usize,
    /// Chunks the injection guard sanitized or kept out of prompts.
    #[serde(skip)]
    pub flagged: usize,
    /// SHA-256 of the file (for the ledger's document events).
    #[serde(skip)]
    pub sha256: Option<String>,
    /// An earlier version of this file was in the library.
    #[serde(skip)]
    pub replaced: bool,
}

/// A document as the library view lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DocumentView {
    pub id: i64,
    pub path: String,
    pub format: String,
    pub status: Status,
    pub size: i64,
    pub pages: Option<u32>,
    pub chunks: i64,
    pub error: Option<String>,
    /// Milliseconds since the epoch.
    pub indexed_at: i64,
    /// Chunks the injection guard flagged (sanitized or left out of prompts).
    pub flagged: i64,
    pub sha256: Option<String>,
    /// Groups whose personas may use it; empty: every persona.
    pub groups: Vec<String>,
}

/// One search result with its citation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchHit {
    pub document: String,
    pub id: i64,
    pub chunk_id: i64,
    pub page: Option<u32>,
    pub section: Option<String>,
    pub snippet: String,
    pub score: f64,
    /// The whole passage.
    pub text: String,
    /// The guard's action on this passage: allow, sanitize or block.
    pub guard: String,
    /// What may be shown to a model: the text, sanitized text, or nothing.
    pub prompt_text: Option<String>,
}

/// All stored vectors, one row per embedded part, int8 with a scale per
/// row and sign bits, for brute-force cosine (see `memory::quant`).
struct VectorTable {
    document_ids: Vec<i64>,
    chunk_ids: Vec<i64>,
    scales: Vec<f32>,
    data: Vec<i8>,
    signs: Vec<u64>,
    dim: usize,
}

/// Stored vectors of the library's model, as [`VectorTable::push_row`]
/// reads them; callers add conditions and the order.
const VECTOR_ROWS: &str = "SELECT c.document_id, p.chunk_id, v.vector FROM chunk_parts p
     JOIN chunks c ON c.id = p.chunk_id JOIN vectors v ON v.hash = p.vector_hash AND v.model = ? WHERE 1";

/// Above this many vectors a search first keeps the [`SHORTLIST`] rows
/// nearest by sign bits, then ranks those by int8 cosine: the scan of
/// 100 000 passages stays in the tens of milliseconds.
const PREFILTER_ABOVE: usize = 20_000;
const SHORTLIST: usize = 2_000;

impl VectorTable {
    fn with_capacity(rows: usize, dim: usize) -> Self {
        Self {
            document_ids: Vec::with_capacity(rows),
            chunk_ids: Vec::with_capacity(rows),
            scales: Vec::with_capacity(rows),
            data: Vec::with_capacity(rows * dim),
            signs: Vec::with_capacity(rows * dim.div_ceil(64)),
            dim,
        }
    }

    /// Adds a stored vector (a row of `chunk_parts` joined to `vectors`:
    /// document id, chunk id, vector blob); one of another width is skipped.
    fn push_row(&mut self, r: &sqlx::sqlite::SqliteRow) {
        let v = unblob(r.get::<&[u8], _>(2));
        if v.len() == self.dim {
            let (scale, q) = memory::quant::quantise(&v);
            self.document_ids.push(r.get(0));
            self.chunk_ids.push(r.get(1));
            self.scales.push(scale);
            self.data.extend(q);
            self.signs.extend(memory::quant::sign_bits(&v));
        }
    }

    /// A copy without `document`'s rows.
    fn without(&self, document: i64, extra: usize) -> Self {
        let words = self.dim.div_ceil(64);
        let mut t = Self::with_capacity(self.chunk_ids.len() + extra, self.dim);
        for (i, &d) in self.document_ids.iter().enumerate().filter(|(_, &d)| d != document) {
            t.document_ids.push(d);
            t.chunk_ids.push(self.chunk_ids[i]);
            t.scales.push(self.scales[i]);
            t.data.extend_from_slice(&self.data[i * self.dim..(i + 1) * self.dim]);
            t.signs.extend_from_slice(&self.signs[i * words..(i + 1) * words]);
        }
        t
    }

    /// (chunk id, cosine of its best part), best first, at most `n`.
    fn search(&self, query: &[f32], n: usize) -> Vec<(i64, f64)> {
        if query.len() != self.dim || self.chunk_ids.is_empty() || n == 0 {
            return vec![];
        }
        let (q_scale, q) = memory::quant::quantise(query);
        let mut rows: Vec<usize> = (0..self.chunk_ids.len()).collect();
        if rows.len() > PREFILTER_ABOVE {
            rows = memory::quant::nearest_by_signs(&self.signs, &memory::quant::sign_bits(query), &rows, SHORTLIST.max(n * 20));
        }
        let mut best: std::collections::HashMap<i64, f32> = std::collections::HashMap::with_capacity(rows.len());
        for i in rows {
            let cos = memory::quant::dot_i8(&self.data[i * self.dim..(i + 1) * self.dim], &q) as f32 * self.scales[i] * q_scale;
            let e = best.entry(self.chunk_ids[i]).or_insert(f32::MIN);
            *e = e.max(cos);
        }
        let mut ranked: Vec<(i64, f64)> = best.into_iter().map(|(id, c)| (id, f64::from(c))).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.truncate(n);
        ranked
    }
}

pub struct Library {
    pub(crate) pool: SqlitePool,
    embedder: Arc<dyn Embedder>,
    counter: Arc<dyn TokenCounter>,
    extractor: Extractor,
    pub chunk_tokens: usize,
    /// Passages may cross a page break (consecutive pages under one
    /// heading); each cites the page its query's words are on. Off (the
    /// default): every passage stays on one page. On third-party PDF
    /// manuals (page_bench, same run) crossing passages cited the right
    /// page slightly less often (tuning 0.768 against 0.780, held-out
    /// 0.759 against 0.777): the wrong pages are wrong passages ranked
    /// first, which crossing does not cure.
    pub cross_pages: bool,
    pub settings: SearchSettings,
    vectors: tokio::sync::RwLock<Option<Arc<VectorTable>>>,
    /// Passage counts of query words (capped at the keyword budget + 1)
    /// and the number of passages, both as of the last change to the index.
    term_counts: std::sync::Mutex<TermCounts>,
    /// One add at a time: two adds of one path must not interleave.
    writer: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct TermCounts {
    passages: Option<usize>,
    words: std::collections::HashMap<String, usize>,
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

fn mtime_ms(meta: &std::fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as i64)
}

fn is_hidden(entry: &walkdir::DirEntry) -> bool {
    entry.depth() > 0 && entry.file_name().to_str().is_some_and(|n| n.starts_with('.'))
}

/// Files under `path` the library reads (a file is returned as is).
pub fn expand(path: &Path) -> Vec<PathBuf> {
    if !path.is_dir() {
        return vec![path.to_path_buf()];
    }
    let mut files: Vec<PathBuf> = walkdir::WalkDir::new(path)
        .follow_links(false)
        .into_iter()
        .filter_entry(|e| !is_hidden(e))
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file() && Format::of(e.path()).is_some())
        .map(|e| e.into_path())
        .collect();
    files.sort();
    files
}

fn blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn unblob(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// A chunk after the guard, with what it is embedded as.
struct Prepared {
    chunk: Chunk,
    guard: &'static str,
    categories: String,
    prompt_text: Option<String>,
    /// (vector hash, text to embed) per part.
    parts: Vec<(String, String)>,
}

/// The label stored with a chunk: allow (passed), sanitize (quoted with
/// the instructions removed) or block (never given to a model).
fn guard_label(t: Treatment) -> &'static str {
    match t {
        Treatment::Pass => "allow",
        Treatment::Quoted => "sanitize",
        Treatment::LeftOut => "block",
    }
}

/// A file an import still has to read.
#[derive(Debug, Clone, PartialEq)]
pub struct Queued {
    pub file: PathBuf,
    /// The watched folder it belongs to, if any.
    pub root: Option<String>,
}

impl Library {
    /// Opens (creating) `dir/library.db`.
    pub async fn open(
        dir: &Path,
        embedder: Arc<dyn Embedder>,
        counter: Arc<dyn TokenCounter>,
        extractor: Extractor,
    ) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| LibraryError::Open(format!("{}: {e}", dir.display())))?;
        let url = format!("sqlite://{}", dir.join(DB_FILE).display());
        let opts = SqliteConnectOptions::from_str(&url)
            .map_err(|e| LibraryError::Open(e.to_string()))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            // Freed pages are zeroed: a removed document's text must not
            // linger in the file.
            .pragma("secure_delete", "ON")
            // FTS5 reads every matching passage's doclist entry and size
            // row: mapped, a page is a memory read instead of a copy
            // through a small per-connection cache (the default 2 MB holds
            // a fraction of a 100 000-passage library, ~500 MB).
            .pragma("mmap_size", "1073741824");
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            // A connection to a local file cannot go stale: the default
            // ping before every acquire doubled each search's round trips
            // to the connection's worker thread (keyword query, fetch).
            .test_before_acquire(false)
            .connect_with(opts)
            .await
            .map_err(|e| LibraryError::Open(e.to_string()))?;
        sqlx::migrate!("./migrations").run(&pool).await.map_err(|e| LibraryError::Open(e.to_string()))?;
        Ok(Self {
            pool,
            embedder,
            counter,
            extractor,
            chunk_tokens: DEFAULT_CHUNK_TOKENS,
            cross_pages: false,
            settings: DEFAULT_SEARCH,
            term_counts: Default::default(),
            vectors: tokio::sync::RwLock::new(None),
            writer: tokio::sync::Mutex::new(()),
        })
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Adds files and folders (folders recursively, hidden entries and
    /// unsupported types skipped); `each` sees every report as it is made.
    /// With `watch`, folders are remembered as watched roots. The files are
    /// queued first, so an add cut short is finished by [`Self::resume`].
    pub async fn add_paths(
        &self,
        paths: &[PathBuf],
        watch: bool,
        mut each: impl FnMut(&AddReport),
    ) -> Result<Vec<AddReport>> {
        let mut reports = Vec::new();
        for queued in self.enqueue(paths, watch).await? {
            let report = self.add_file(&queued.file, queued.root.as_deref()).await?;
            self.dequeue(&queued.file).await?;
            each(&report);
            reports.push(report);
        }
        Ok(reports)
    }

    /// Expands `paths` into the files to read and writes them to the queue
    /// before any is read (with `watch`, folders become watched roots).
    /// Fails, queueing nothing, when a path does not exist.
    pub async fn enqueue(&self, paths: &[PathBuf], watch: bool) -> Result<Vec<Queued>> {
        let mut found = Vec::new();
        for path in paths {
            let abs = std::path::absolute(path)
                .map_err(|e| LibraryError::Read { path: path.display().to_string(), reason: e.to_string() })?;
            if !abs.exists() {
                return Err(LibraryError::Read { path: abs.display().to_string(), reason: "no such file or folder".into() });
            }
            let root = (watch && abs.is_dir()).then(|| abs.display().to_string());
            let files = tokio::task::spawn_blocking({
                let abs = abs.clone();
                move || expand(&abs)
            })
            .await
            .map_err(|e| LibraryError::Task(e.to_string()))?;
            found.push((root, files));
        }
        let mut tx = self.pool.begin().await?;
        let mut queued = Vec::new();
        for (root, files) in found {
            if let Some(root) = &root {
                sqlx::query("INSERT OR IGNORE INTO roots (path, added_at) VALUES (?, ?)")
                    .bind(root)
                    .bind(now_ms())
                    .execute(&mut *tx)
                    .await?;
            }
            for file in files {
                // Added by the person: no longer left out of its watched folder.
                sqlx::query("DELETE FROM ignored WHERE path = ?").bind(file.display().to_string()).execute(&mut *tx).await?;
                sqlx::query("INSERT OR REPLACE INTO queue (path, root, queued_at) VALUES (?, ?, ?)")
                    .bind(file.display().to_string())
                    .bind(&root)
                    .bind(now_ms())
                    .execute(&mut *tx)
                    .await?;
                queued.push(Queued { file, root: root.clone() });
            }
        }
        tx.commit().await?;
        Ok(queued)
    }

    /// Files queued by an import that did not finish, oldest first.
    pub async fn queued(&self) -> Result<Vec<Queued>> {
        let rows = sqlx::query("SELECT path, root FROM queue ORDER BY queued_at, path").fetch_all(&self.pool).await?;
        Ok(rows.iter().map(|r| Queued { file: PathBuf::from(r.get::<String, _>(0)), root: r.get(1) }).collect())
    }

    /// Takes `file` off the queue (read, or the import was cancelled).
    pub async fn dequeue(&self, file: &Path) -> Result<()> {
        sqlx::query("DELETE FROM queue WHERE path = ?").bind(file.display().to_string()).execute(&self.pool).await?;
        Ok(())
    }

    /// Finishes an import cut short: reads every queued file.
    pub async fn resume(&self, mut each: impl FnMut(&AddReport)) -> Result<Vec<AddReport>> {
        let mut reports = Vec::new();
        for queued in self.queued().await? {
            if !queued.file.exists() {
                // Gone since it was queued: nothing to read.
                self.dequeue(&queued.file).await?;
                continue;
            }
            let report = self.add_file(&queued.file, queued.root.as_deref()).await?;
            self.dequeue(&queued.file).await?;
            each(&report);
            reports.push(report);
        }
        Ok(reports)
    }

    /// Folders added as watched.
    pub async fn watched_roots(&self) -> Result<Vec<PathBuf>> {
        let rows = sqlx::query("SELECT path FROM roots ORDER BY path").fetch_all(&self.pool).await?;
        Ok(rows.iter().map(|r| PathBuf::from(r.get::<String, _>(0))).collect())
    }

    /// Indexes one file, or re-indexes it when its bytes changed. Chunks
    /// whose text is unchanged keep their vectors. Nothing of the new
    /// version is searchable until all of it is stored.
    pub async fn add_file(&self, path: &Path, root: Option<&str>) -> Result<AddReport> {
        let _one_writer = self.writer.lock().await;
        let path_str = path.display().to_string();
        let format = Format::of(path).map_or("unknown", Format::name);
        let meta = std::fs::metadata(path);
        let (size, mtime) = meta.as_ref().map_or((0, 0), |m| (m.len() as i64, mtime_ms(m)));
        let existing = sqlx::query("SELECT id, size, mtime_ms, status, pages, chunks, error, sha256 FROM documents WHERE path = ?")
            .bind(&path_str)
            .fetch_optional(&self.pool)
            .await?;
        let unchanged = |row: &sqlx::sqlite::SqliteRow| AddReport {
            document: path_str.clone(),
            id: row.get(0),
            status: Status::Unchanged,
            pages: row.get::<Option<i64>, _>(4).map(|p| p as u32),
            chunks: row.get::<i64, _>(5) as usize,
            error: row.get(6),
            embedded: 0,
            flagged: 0,
            sha256: row.get(7),
            replaced: true,
        };
        if let Some(row) = &existing {
            if row.get::<i64, _>(1) == size && row.get::<i64, _>(2) == mtime && meta.is_ok() {
                return Ok(unchanged(row));
            }
        }
        // Same bytes under a new modification time: nothing to redo.
        let sha = match &meta {
            Ok(m) if m.len() <= MAX_FILE_BYTES => {
                let p = path.to_path_buf();
                tokio::task::spawn_blocking(move || std::fs::read(&p).map(|b| sha256_hex_bytes(&b)))
                    .await
                    .map_err(|e| LibraryError::Task(e.to_string()))?
                    .ok()
            }
            _ => None,
        };
        if let (Some(row), Some(sha)) = (&existing, &sha) {
            if row.get::<Option<String>, _>(7).as_ref() == Some(sha) {
                sqlx::query("UPDATE documents SET size = ?, mtime_ms = ? WHERE id = ?")
                    .bind(size)
                    .bind(mtime)
                    .bind(row.get::<i64, _>(0))
                    .execute(&self.pool)
                    .await?;
                return Ok(unchanged(row));
            }
        }
        let extractor = self.extractor.clone();
        let p = path.to_path_buf();
        let extraction = tokio::task::spawn_blocking(move || extractor.extract(&p))
            .await
            .map_err(|e| LibraryError::Task(e.to_string()))?;
        let (status, pages, blocks, error) = match extraction {
            Extraction::Text { pages, blocks } => (Status::Indexed, pages, blocks, None),
            Extraction::NeedsPassword { pages } => {
                (Status::NeedsPassword, pages, vec![], Some("the PDF is protected by a password".into()))
            }
            Extraction::NoText { pages } => {
                (Status::NoText, pages, vec![], Some("no text layer (a scan?); it needs OCR".into()))
            }
            Extraction::Failed { reason } => (Status::Failed, None, vec![], Some(reason)),
        };
        let prepared = if blocks.is_empty() {
            vec![]
        } else {
            let counter = self.counter.clone();
            let model = self.embedder.model_id();
            let max = self.chunk_tokens;
            let window = self.embed_window();
            let across = self.cross_pages;
            tokio::task::spawn_blocking(move || prepare(&blocks, counter.as_ref(), max, across, window, &model))
                .await
                .map_err(|e| LibraryError::Task(e.to_string()))?
        };
        let embedded = self.embed_missing(&prepared).await?;
        let flagged = prepared.iter().filter(|p| p.guard != "allow").count();
        let id = self
            .store(path_str.clone(), format, sha.clone(), size, mtime, status, pages, error.clone(), root, &prepared, embedded.0)
            .await?;
        self.refresh_vectors(id).await?;
        self.forget_term_counts();
        Ok(AddReport {
            document: path_str,
            id,
            status,
            pages,
            chunks: prepared.len(),
            error,
            embedded: embedded.1,
            flagged,
            sha256: sha,
            replaced: existing.is_some(),
        })
    }

    /// Embeds the parts that have no stored vector for this model; returns
    /// them (hash, vector) and how many chunks needed any.
    async fn embed_missing(&self, prepared: &[Prepared]) -> Result<(Vec<(String, Vec<f32>)>, usize)> {
        let parts: Vec<&[(String, String)]> = prepared.iter().map(|p| p.parts.as_slice()).collect();
        self.embed_parts(&parts).await
    }

    /// Embeds the parts (per chunk) that have no stored vector for this
    /// model; returns them and how many chunks needed any.
    async fn embed_parts(&self, chunks: &[&[(String, String)]]) -> Result<(Vec<(String, Vec<f32>)>, usize)> {
        let model = self.embedder.model_id();
        let mut missing: Vec<(String, String)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut chunks_needing = 0;
        for parts in chunks {
            let mut needs = false;
            for (hash, input) in parts.iter() {
                if !seen.insert(hash.clone()) {
                    continue;
                }
                let stored = sqlx::query("SELECT 1 FROM vectors WHERE hash = ? AND model = ?")
                    .bind(hash)
                    .bind(&model)
                    .fetch_optional(&self.pool)
                    .await?
                    .is_some();
                if !stored {
                    missing.push((hash.clone(), input.clone()));
                    needs = true;
                }
            }
            chunks_needing += usize::from(needs);
        }
        let mut out = Vec::with_capacity(missing.len());
        for batch in missing.chunks(EMBED_BATCH) {
            let embedder = self.embedder.clone();
            let texts: Vec<String> = batch.iter().map(|(_, t)| t.clone()).collect();
            let vectors = tokio::task::spawn_blocking(move || {
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                embedder.embed(&refs)
            })
            .await
            .map_err(|e| LibraryError::Task(e.to_string()))??;
            out.extend(batch.iter().map(|(h, _)| h.clone()).zip(vectors));
        }
        Ok((out, chunks_needing))
    }

    #[allow(clippy::too_many_arguments)]
    async fn store(
        &self,
        path: String,
        format: &str,
        sha: Option<String>,
        size: i64,
        mtime: i64,
        status: Status,
        pages: Option<u32>,
        error: Option<String>,
        root: Option<&str>,
        prepared: &[Prepared],
        vectors: Vec<(String, Vec<f32>)>,
    ) -> Result<i64> {
        let model = self.embedder.model_id();
        let mut tx = self.pool.begin().await?;
        let id: i64 = sqlx::query(
            "INSERT INTO documents (path, format, sha256, size, mtime_ms, status, pages, chunks, error, indexed_at, root)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
             ON CONFLICT(path) DO UPDATE SET format = excluded.format, sha256 = excluded.sha256, size = excluded.size,
               mtime_ms = excluded.mtime_ms, status = excluded.status, pages = excluded.pages, chunks = excluded.chunks,
               error = excluded.error, indexed_at = excluded.indexed_at, root = coalesce(excluded.root, documents.root)
             RETURNING id",
        )
        .bind(&path)
        .bind(format)
        .bind(&sha)
        .bind(size)
        .bind(mtime)
        .bind(status.as_str())
        .bind(pages.map(i64::from))
        .bind(prepared.len() as i64)
        .bind(&error)
        .bind(now_ms())
        .bind(root)
        .fetch_one(&mut *tx)
        .await?
        .get(0);
        delete_chunks(&mut tx, id).await?;
        for (hash, v) in &vectors {
            sqlx::query("INSERT OR IGNORE INTO vectors (hash, model, vector) VALUES (?, ?, ?)")
                .bind(hash)
                .bind(&model)
                .bind(blob(v))
                .execute(&mut *tx)
                .await?;
        }
        for p in prepared {
            let c = &p.chunk;
            let chunk_id: i64 = sqlx::query(
                "INSERT INTO chunks (document_id, ordinal, page, section, text, hash, guard, guard_categories, prompt_text, page_marks)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            )
            .bind(id)
            .bind(c.ordinal as i64)
            .bind(c.page.map(i64::from))
            .bind(&c.section)
            .bind(&c.text)
            .bind(&c.hash)
            .bind(p.guard)
            .bind(&p.categories)
            .bind(&p.prompt_text)
            .bind(format_page_marks(&c.page_marks))
            .fetch_one(&mut *tx)
            .await?
            .get(0);
            insert_parts(&mut tx, chunk_id, p.parts.iter().map(|(hash, _)| hash)).await?;
        }
        delete_orphan_vectors(&mut tx).await?;
        tx.commit().await?;
        Ok(id)
    }

    pub async fn list(&self) -> Result<Vec<DocumentView>> {
        let rows = sqlx::query(
            "SELECT d.id, d.path, d.format, d.status, d.size, d.pages, d.chunks, d.error, d.indexed_at, d.sha256,
                    (SELECT count(*) FROM chunks c WHERE c.document_id = d.id AND c.guard != 'allow'), d.groups
             FROM documents d ORDER BY d.path",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(|r| DocumentView {
                id: r.get(0),
                path: r.get(1),
                format: r.get(2),
                status: Status::parse(r.get::<&str, _>(3)),
                size: r.get(4),
                pages: r.get::<Option<i64>, _>(5).map(|p| p as u32),
                chunks: r.get(6),
                error: r.get(7),
                indexed_at: r.get(8),
                sha256: r.get(9),
                flagged: r.get(10),
                groups: crate::visibility::groups_of(r.get(11)),
            })
            .collect())
    }

    /// The document with this id, or at this path (as given or absolute).
    pub async fn find(&self, path_or_id: &str) -> Result<Option<DocumentView>> {
        let docs = self.list().await?;
        let abs = std::path::absolute(path_or_id).map(|p| p.display().to_string()).unwrap_or_default();
        Ok(docs
            .into_iter()
            .find(|d| d.path == path_or_id || d.path == abs || path_or_id.parse::<i64>().ok() == Some(d.id)))
    }

    /// Removes a document: its row, chunks, BM25 entries and the vectors
    /// no other chunk uses; then merges the index segments and truncates
    /// the write-ahead log so the text is gone from every file.
    pub async fn remove(&self, path_or_id: &str) -> Result<DocumentView> {
        let _one_writer = self.writer.lock().await;
        let doc = self.find(path_or_id).await?.ok_or_else(|| LibraryError::NotFound(path_or_id.to_owned()))?;
        let mut tx = self.pool.begin().await?;
        let watched: Option<String> =
            sqlx::query_scalar("SELECT root FROM documents WHERE id = ?").bind(doc.id).fetch_one(&mut *tx).await?;
        delete_chunks(&mut tx, doc.id).await?;
        delete_orphan_vectors(&mut tx).await?;
        sqlx::query("DELETE FROM citations WHERE document_id = ?").bind(doc.id).execute(&mut *tx).await?;
        sqlx::query("DELETE FROM documents WHERE id = ?").bind(doc.id).execute(&mut *tx).await?;
        if watched.is_some() && Path::new(&doc.path).exists() {
            sqlx::query("INSERT OR REPLACE INTO ignored (path, removed_at) VALUES (?, ?)")
                .bind(&doc.path)
                .bind(now_ms())
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        self.scrub().await?;
        self.refresh_vectors(doc.id).await?;
        self.forget_term_counts();
        Ok(doc)
    }

    /// Whether the person removed `path` from a watched folder (the
    /// watcher and the start-up scan leave it out until it is added again).
    pub async fn is_ignored(&self, path: &Path) -> Result<bool> {
        Ok(sqlx::query("SELECT 1 FROM ignored WHERE path = ?")
            .bind(path.display().to_string())
            .fetch_optional(&self.pool)
            .await?
            .is_some())
    }

    /// Documents under `root` whose files are gone (a watched folder's
    /// deletions while the app was closed).
    pub async fn missing_under(&self, root: &Path) -> Result<Vec<DocumentView>> {
        let prefix = root.display().to_string();
        Ok(self
            .list()
            .await?
            .into_iter()
            .filter(|d| Path::new(&d.path).starts_with(&prefix) && !Path::new(&d.path).exists())
            .collect())
    }

    /// The start-up scan of the watched folders: new and changed files are
    /// (re-)indexed, unchanged ones skipped by size and modification time,
    /// and documents whose files are gone are removed. Events are lost
    /// while the app is closed; this catches up with them.
    pub async fn reconcile(&self, mut each: impl FnMut(&AddReport)) -> Result<Vec<AddReport>> {
        let mut reports = Vec::new();
        for root in self.watched_roots().await? {
            for gone in self.missing_under(&root).await? {
                self.remove(&gone.id.to_string()).await?;
            }
            if root.is_dir() {
                let root_str = root.display().to_string();
                let files = tokio::task::spawn_blocking(move || expand(&root))
                    .await
                    .map_err(|e| LibraryError::Task(e.to_string()))?;
                for file in files {
                    if self.is_ignored(&file).await? {
                        continue;
                    }
                    let report = self.add_file(&file, Some(&root_str)).await?;
                    each(&report);
                    reports.push(report);
                }
            } else {
                tracing::warn!(root = %root.display(), "a watched folder is gone; its documents were removed");
            }
        }
        Ok(reports)
    }

    /// The embedder's window in the splitter's tokens.
    fn embed_window(&self) -> usize {
        self.embedder.max_tokens().saturating_sub(2).max(16)
    }

    /// Chunks with a part that has no vector from the current embedder
    /// (indexed with another model): they are found by keyword only until
    /// [`Self::reembed`] runs.
    pub async fn stale_chunks(&self) -> Result<usize> {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(DISTINCT p.chunk_id) FROM chunk_parts p
             WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.hash = p.vector_hash AND v.model = ?)",
        )
        .bind(self.embedder.model_id())
        .fetch_one(&self.pool)
        .await?;
        Ok(n as usize)
    }

    /// Re-embeds, with the current embedder, every chunk indexed with
    /// another one (vectors are stored per model; a library is searched
    /// with one model's vectors only), a batch per transaction; vectors no
    /// chunk uses any more are deleted. `each` sees (done, total).
    /// Returns how many chunks were re-embedded.
    pub async fn reembed(&self, mut each: impl FnMut(usize, usize)) -> Result<usize> {
        let model = self.embedder.model_id();
        let window = self.embed_window();
        let total = self.stale_chunks().await?;
        let mut done = 0;
        while done < total {
            let _one_writer = self.writer.lock().await;
            let rows: Vec<(i64, Option<String>, String)> = sqlx::query_as(
                "SELECT c.id, c.section, c.text FROM chunks c WHERE EXISTS (
                   SELECT 1 FROM chunk_parts p WHERE p.chunk_id = c.id
                   AND NOT EXISTS (SELECT 1 FROM vectors v WHERE v.hash = p.vector_hash AND v.model = ?))
                 ORDER BY c.id LIMIT ?",
            )
            .bind(&model)
            .bind(EMBED_BATCH as i64)
            .fetch_all(&self.pool)
            .await?;
            if rows.is_empty() {
                break;
            }
            let counter = self.counter.clone();
            let m = model.clone();
            let batch = rows.clone();
            let parts: Vec<Vec<(String, String)>> = tokio::task::spawn_blocking(move || {
                batch.iter().map(|(_, section, text)| parts_of(section.as_deref(), text, counter.as_ref(), window, &m)).collect()
            })
            .await
            .map_err(|e| LibraryError::Task(e.to_string()))?;
            let refs: Vec<&[(String, String)]> = parts.iter().map(Vec::as_slice).collect();
            let (vectors, _) = self.embed_parts(&refs).await?;
            let mut tx = self.pool.begin().await?;
            for (hash, v) in &vectors {
                sqlx::query("INSERT OR IGNORE INTO vectors (hash, model, vector) VALUES (?, ?, ?)")
                    .bind(hash)
                    .bind(&model)
                    .bind(blob(v))
                    .execute(&mut *tx)
                    .await?;
            }
            for ((chunk_id, _, _), parts) in rows.iter().zip(&parts) {
                sqlx::query("DELETE FROM chunk_parts WHERE chunk_id = ?").bind(chunk_id).execute(&mut *tx).await?;
                insert_parts(&mut tx, *chunk_id, parts.iter().map(|(hash, _)| hash)).await?;
            }
            delete_orphan_vectors(&mut tx).await?;
            tx.commit().await?;
            *self.vectors.write().await = None;
            done += rows.len();
            each(done.min(total), total);
        }
        Ok(done)
    }

    async fn scrub(&self) -> Result<()> {
        sqlx::query("INSERT INTO chunks_fts (chunks_fts) VALUES ('optimize')").execute(&self.pool).await?;
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(&self.pool).await?;
        Ok(())
    }

    /// Brings a loaded vector table level with `document`'s rows after it
    /// was added, changed or removed. Reloading the whole table instead
    /// reads every vector again (seconds at 100 000 passages) at the next
    /// search after each change in a watched folder.
    async fn refresh_vectors(&self, document: i64) -> Result<()> {
        let mut slot = self.vectors.write().await;
        let Some(old) = slot.clone() else { return Ok(()) };
        let rows = sqlx::query(&format!("{VECTOR_ROWS} AND c.document_id = ? ORDER BY p.chunk_id, p.part"))
            .bind(self.embedder.model_id())
            .bind(document)
            .fetch_all(&self.pool)
            .await?;
        let mut table = old.without(document, rows.len());
        rows.iter().for_each(|r| table.push_row(r));
        *slot = Some(Arc::new(table));
        Ok(())
    }

    async fn vector_table(&self) -> Result<Arc<VectorTable>> {
        if let Some(t) = self.vectors.read().await.as_ref() {
            return Ok(t.clone());
        }
        let mut slot = self.vectors.write().await;
        if let Some(t) = slot.as_ref() {
            return Ok(t.clone());
        }
        let rows = sqlx::query(&format!("{VECTOR_ROWS} ORDER BY p.chunk_id, p.part"))
            .bind(self.embedder.model_id())
            .fetch_all(&self.pool)
            .await?;
        let mut table = VectorTable::with_capacity(rows.len(), self.embedder.dim());
        rows.iter().for_each(|r| table.push_row(r));
        let table = Arc::new(table);
        *slot = Some(table.clone());
        Ok(table)
    }

    /// Loads every stored vector for searching, as the first search would
    /// (seconds at 100 000 passages): at start, so the first question
    /// does not wait for it.
    pub async fn preload(&self) -> Result<()> {
        self.vector_table().await.map(|_| ())
    }

    /// How many of `document`'s passages cross a page break.
    pub async fn crossing_passages(&self, document: i64) -> Result<i64> {
        Ok(sqlx::query_scalar("SELECT count(*) FROM chunks WHERE document_id = ? AND page_marks IS NOT NULL")
            .bind(document)
            .fetch_one(&self.pool)
            .await?)
    }

    /// The best `k` passages for `query` in every document.
    pub async fn search(&self, query: &str, k: usize, mode: SearchMode) -> Result<Vec<SearchHit>> {
        self.search_visible(query, k, mode, &Visibility::All).await
    }

    /// The best `k` passages for `query` among the documents `visible`
    /// lets a reader use.
    pub async fn search_visible(&self, query: &str, k: usize, mode: SearchMode, visible: &Visibility) -> Result<Vec<SearchHit>> {
        let s = self.settings;
        // Both retrievers at once: FTS5 on SQLite's connection, the query's
        // embedding and the vector scan on a blocking thread.
        let (keyword, vector) = tokio::join!(
            async {
                if mode == SearchMode::Vector {
                    Ok(vec![])
                } else {
                    self.keyword_ranking(query, s.candidates).await
                }
            },
            async {
                if mode == SearchMode::Keyword {
                    Ok(vec![])
                } else {
                    self.vector_ranking(query, s.candidates).await
                }
            }
        );
        let (keyword, vector) = (keyword?, vector?);
        let mut fused: Vec<(i64, f64)> = match mode {
            SearchMode::Keyword => keyword.iter().map(|(id, score)| (*id, *score)).collect(),
            SearchMode::Vector => vector.iter().map(|(id, score)| (*id, *score)).collect(),
            SearchMode::Hybrid => {
                let v: Vec<i64> = vector.iter().map(|(id, _)| *id).collect();
                let kw: Vec<i64> = keyword.iter().map(|(id, _)| *id).collect();
                fuse(&v, &kw, &s).into_iter().filter(|(_, score)| *score >= s.min_score).collect()
            }
        };
        if mode == SearchMode::Hybrid && s.keyword_kept > 0 {
            let kept: std::collections::HashSet<i64> = keyword.iter().take(s.keyword_kept).map(|(id, _)| *id).collect();
            let mut seen = 0;
            fused.retain(|(id, _)| {
                seen += 1;
                seen <= s.candidates || kept.contains(id)
            });
        } else {
            fused.truncate(s.candidates);
        }
        // Every candidate's passage in one query, not one query each.
        let mut fetch = sqlx::QueryBuilder::new(
            "SELECT d.path, d.id, c.page, c.section, c.text, c.guard, c.prompt_text, d.indexed_at, d.groups, c.id, c.page_marks
             FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.id IN (",
        );
        let mut ids = fetch.separated(", ");
        for (chunk_id, _) in &fused {
            ids.push_bind(*chunk_id);
        }
        fetch.push(")");
        let mut rows: std::collections::HashMap<i64, sqlx::sqlite::SqliteRow> = if fused.is_empty() {
            Default::default()
        } else {
            fetch.build().fetch_all(&self.pool).await?.into_iter().map(|r| (r.get::<i64, _>(9), r)).collect()
        };
        let mut hits = Vec::new();
        let now = now_ms();
        for (chunk_id, score) in fused {
            let Some(r) = rows.remove(&chunk_id) else {
                continue;
            };
            if !visible.allows(&crate::visibility::groups_of(r.get(8))) {
                continue;
            }
            let text: String = r.get(4);
            let score = if mode == SearchMode::Hybrid && s.word_match_weight > 0.0 {
                score + s.word_match_weight * word_match(&text, query)
            } else {
                score
            };
            let quoted = if mode == SearchMode::Hybrid && (s.quote_weight > 0.0 || s.quote_lead > 0.0) {
                quote_match(&text, query)
            } else {
                0.0
            };
            let leads = s.quote_lead > 0.0 && quoted >= s.quote_lead;
            let score = score + s.quote_weight * quoted;
            let score = if mode == SearchMode::Hybrid && s.contents_factor != 1.0 && is_contents(&text) {
                score * s.contents_factor
            } else {
                score
            };
            let score = if mode == SearchMode::Hybrid && s.recency_weight > 0.0 {
                let age_days = (now - r.get::<i64, _>(7)) as f64 / 86_400_000.0;
                score * (1.0 - s.recency_weight) + recency_bonus(age_days) * s.recency_weight
            } else {
                score
            };
            hits.push((leads, SearchHit {
                document: r.get(0),
                id: r.get(1),
                chunk_id,
                page: r.get::<Option<i64>, _>(2).map(|p| p as u32),
                section: r.get(3),
                snippet: String::new(),
                score,
                text,
                guard: r.get(5),
                prompt_text: r.get(6),
            }, r.get::<Option<String>, _>(10)));
        }
        hits.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.score.total_cmp(&a.1.score)));
        hits.truncate(k);
        // A passage across a page break cites the page of the words its
        // query matched (only the results returned are looked at, as for
        // the snippets).
        Ok(hits
            .into_iter()
            .map(|(_, mut hit, marks)| {
                hit.snippet = snippet(&hit.text, query, SNIPPET_CHARS);
                if let Some(marks) = marks.filter(|_| s.cite_matched_page) {
                    hit.page = matched_page(&hit.text, &parse_page_marks(&marks), query, hit.page);
                }
                hit
            })
            .collect())
    }

    /// (chunk id, −BM25) best first; FTS5's bm25 is lower-is-better.
    async fn keyword_ranking(&self, query: &str, n: usize) -> Result<Vec<(i64, f64)>> {
        let Some(q) = self.keyword_query(query).await? else { return Ok(vec![]) };
        let rows = sqlx::query(
            "SELECT rowid, bm25(chunks_fts, 1.0, ?) AS s FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY s LIMIT ?",
        )
        .bind(self.settings.section_weight)
        .bind(q)
        .bind(n as i64)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(|r| (r.get::<i64, _>(0), -r.get::<f64, _>(1))).collect())
    }

    /// The FTS5 expression for `query` within the keyword budget
    /// ([`keyword_expression`]). Counts come from FTS5 itself, so they are
    /// of its stemmed terms, and stop at the budget: past it a word is
    /// common whatever its exact count.
    async fn keyword_query(&self, query: &str) -> Result<Option<String>> {
        let terms = memory::fts_terms(query);
        let Some(budget) = self.settings.keyword_postings else { return Ok(memory::fts_or(&terms)) };
        if terms.len() < 2 {
            return Ok(memory::fts_or(&terms));
        }
        let (mut passages, mut known) = {
            let c = self.term_counts.lock().unwrap_or_else(|p| p.into_inner());
            (c.passages, terms.iter().map(|t| c.words.get(t).copied()).collect::<Vec<_>>())
        };
        if passages.is_none() {
            let n: i64 = sqlx::query_scalar("SELECT count(*) FROM chunks").fetch_one(&self.pool).await?;
            passages = Some(n.max(0) as usize);
        }
        for (term, count) in terms.iter().zip(known.iter_mut()) {
            if count.is_none() {
                let n: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM (SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH ? LIMIT ?)",
                )
                .bind(memory::fts_or(std::slice::from_ref(term)))
                .bind(budget as i64 + 1)
                .fetch_one(&self.pool)
                .await?;
                *count = Some(n.max(0) as usize);
            }
        }
        let counted: Vec<(String, usize)> = terms.into_iter().zip(known.into_iter().map(|c| c.unwrap_or(0))).collect();
        {
            let mut c = self.term_counts.lock().unwrap_or_else(|p| p.into_inner());
            c.passages = passages;
            // Words are few per query but unbounded over time.
            if c.words.len() > 50_000 {
                c.words.clear();
            }
            c.words.extend(counted.iter().cloned());
        }
        Ok(keyword_expression(
            counted,
            passages.unwrap_or(0),
            Some(budget),
            self.settings.common_term_share,
            self.settings.budget_pairs,
        ))
    }

    fn forget_term_counts(&self) {
        *self.term_counts.lock().unwrap_or_else(|p| p.into_inner()) = TermCounts::default();
    }

    /// (chunk id, cosine of its best part) best first.
    async fn vector_ranking(&self, query: &str, n: usize) -> Result<Vec<(i64, f64)>> {
        let table = self.vector_table().await?;
        if table.chunk_ids.is_empty() {
            return Ok(vec![]);
        }
        let embedder = self.embedder.clone();
        let q = query.to_owned();
        // The query's embedding and the scan are CPU work: off the async threads.
        let ranked = tokio::task::spawn_blocking(move || {
            let qv = embedder.embed_query(&[q.as_str()])?.pop().unwrap_or_default();
            Ok::<_, memory::MemoryError>(table.search(&qv, n))
        })
        .await
        .map_err(|e| LibraryError::Task(e.to_string()))??;
        Ok(ranked)
    }
}

fn sha256_hex_bytes(b: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(b))
}

async fn delete_chunks(tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>, document_id: i64) -> Result<()> {
    sqlx::query("DELETE FROM chunk_parts WHERE chunk_id IN (SELECT id FROM chunks WHERE document_id = ?)")
        .bind(document_id)
        .execute(&mut **tx)
        .await?;
    sqlx::query("DELETE FROM chunks WHERE document_id = ?").bind(document_id).execute(&mut **tx).await?;
    Ok(())
}

/// A chunk's parts, in order, each by the hash of its vector.
async fn insert_parts<'h>(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    chunk_id: i64,
    hashes: impl Iterator<Item = &'h String>,
) -> Result<()> {
    for (i, hash) in hashes.enumerate() {
        sqlx::query("INSERT INTO chunk_parts (chunk_id, part, vector_hash) VALUES (?, ?, ?)")
            .bind(chunk_id)
            .bind(i as i64)
            .bind(hash)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

async fn delete_orphan_vectors(tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>) -> Result<()> {
    sqlx::query("DELETE FROM vectors WHERE hash NOT IN (SELECT vector_hash FROM chunk_parts)").execute(&mut **tx).await?;
    Ok(())
}

/// Chunks the blocks, screens each chunk with the injection guard and
/// works out what each is embedded as: its heading path and text, in
/// parts when longer than the model's window.
fn prepare(
    blocks: &[crate::extract::Block],
    counter: &dyn TokenCounter,
    max_tokens: usize,
    across_pages: bool,
    window: usize,
    model: &str,
) -> Vec<Prepared> {
    chunk_blocks_with(blocks, counter, max_tokens, across_pages)
        .into_iter()
        .map(|chunk| {
            // The guard's verdict on the passage as a whole: passed,
            // quoted with the instructions it found removed, or left out of
            // every prompt (its text stays searchable for the person).
            let screened = runtime::guard::screen_document(&chunk.text);
            let prompt_text = match screened.treatment {
                Treatment::LeftOut => None,
                Treatment::Pass | Treatment::Quoted => Some(screened.text).filter(|t| !t.trim().is_empty()),
            };
            let mut categories: Vec<String> = screened
                .report
                .findings
                .iter()
                .filter_map(|f| serde_json::to_value(f.category).ok().and_then(|v| v.as_str().map(str::to_owned)))
                .collect();
            categories.sort();
            categories.dedup();
            let parts = parts_of(chunk.section.as_deref(), &chunk.text, counter, window, model);
            Prepared {
                guard: guard_label(screened.treatment),
                categories: categories.join(","),
                prompt_text,
                parts,
                chunk,
            }
        })
        .collect()
}

/// What a chunk is embedded as: its heading path and text, in parts of at
/// most `window` tokens, each keyed by the hash of the model and the text.
fn parts_of(section: Option<&str>, text: &str, counter: &dyn TokenCounter, window: usize, model: &str) -> Vec<(String, String)> {
    let head = section.map(|s| format!("{s}\n")).unwrap_or_default();
    let whole = format!("{head}{text}");
    let inputs = if counter.tokens(&whole) <= window {
        vec![whole]
    } else {
        let room = window.saturating_sub(counter.tokens(&head)).max(window / 2);
        split(text, counter, room).into_iter().map(|t| format!("{head}{t}")).collect()
    };
    inputs.into_iter().map(|t| (sha256_hex(&[model, &t]), t)).collect()
}
