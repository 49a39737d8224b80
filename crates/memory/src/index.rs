//! The search index: `<home>/index.db`, a projection of the ledger.
//!
//! Rows are messages (and, later, extracted memories) with their text in an
//! FTS5 table and their embedding as a little-endian f32 blob. Everything
//! here can be rebuilt from the ledger: delete `index.db` and the next
//! [`MemoryIndex::sync_from_ledger`] re-creates it (only the original
//! timestamps of imported messages fall back to the ledger's event time).
//! For speed, embeddings are also held in memory, int8-quantised, and
//! searched by brute force.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures_util::TryStreamExt;
use ledger::{EventBody, Ledger, MessageRole};
use serde::Serialize;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{ConnectOptions, QueryBuilder, Row};
use tokio::sync::Notify;

use crate::embed::Embedder;
use crate::search::{
    asks_a_question, fts_query, group_key, is_persona_name, is_persons_name, query_dates, query_names, rank, Candidates, RecallSettings, Scope, CONTEXT_GAP_MS,
    DENSITY_NEIGHBOURS, DENSITY_POOL, NAME_SAMPLE,
};
use crate::quant::{dot_i8, nearest_by_signs, quantise, sign_bits};
use crate::MemoryError;

type Result<T, E = MemoryError> = std::result::Result<T, E>;

/// Rows per INSERT statement (8 bound values each; SQLite allows 32 766).
const INSERT_CHUNK: usize = 500;
/// Rows embedded per step of the background embedder.
const EMBED_STEP: usize = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ItemKind {
    Message,
    Memory,
}

impl ItemKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Message => "message",
            Self::Memory => "memory",
        }
    }
}

/// One thing to make searchable.
#[derive(Debug, Clone)]
pub struct NewItem {
    /// Ledger message id, or the memory's id.
    pub item_id: String,
    pub kind: ItemKind,
    /// The visibility key: the conversation's persona id for a message,
    /// `memory::group_key(group)` for a memory (see `Scope`).
    pub persona_id: String,
    pub external_id: Option<String>,
    /// For a memory: the messages it was learned from.
    pub source_ids: Vec<String>,
    pub text: String,
    /// Original time, unix milliseconds.
    pub ts_ms: i64,
    /// Ledger event seq, when the item comes from one event.
    pub seq: Option<i64>,
    /// Who said a message (`None` for a memory).
    pub role: Option<MessageRole>,
}

/// The `by_human` column of a role: who said it, when it is one of the two.
fn by_human(role: Option<MessageRole>) -> Option<bool> {
    match role? {
        MessageRole::Human => Some(true),
        MessageRole::Persona => Some(false),
        MessageRole::System => None,
    }
}

/// One retrieved item.
#[derive(Debug, Clone, Serialize)]
pub struct Hit {
    pub item_id: String,
    pub kind: ItemKind,
    pub persona_id: String,
    pub external_id: Option<String>,
    pub source_ids: Vec<String>,
    pub text: String,
    pub ts_ms: i64,
    pub score: f32,
}

impl Hit {
    /// The id shown to users and scripts: the external id when there is one.
    pub fn public_id(&self) -> &str {
        self.external_id.as_deref().unwrap_or(&self.item_id)
    }
}

/// The result of a recall, with how it was made.
#[derive(Debug, Clone, Serialize)]
pub struct Recall {
    pub hits: Vec<Hit>,
    /// "hybrid" or "keyword" (no embedding model available).
    pub mode: &'static str,
}

/// Progress of the background embedder.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct EmbedProgress {
    pub embedded: u64,
    pub total: u64,
    pub model_loaded: bool,
}

#[derive(Default)]
struct VectorCache {
    dim: usize,
    rows: Vec<i64>,
    owners: Vec<u32>,
    scales: Vec<f32>,
    data: Vec<i8>,
    /// One bit per dimension (its sign), `dim.div_ceil(64)` words per row.
    signs: Vec<u64>,
    owner_ids: HashMap<String, u32>,
    position: HashMap<i64, usize>,
}

const GONE: u32 = u32::MAX;
/// Above this many vectors in scope, a search first keeps the
/// [`SHORTLIST`] rows nearest by sign bits (Hamming distance, a few
/// instructions per row), then ranks those by the int8 cosine.
const PREFILTER_ABOVE: usize = 20_000;
const SHORTLIST: usize = 2_000;

impl VectorCache {
    fn owner(&mut self, persona: &str) -> u32 {
        let n = self.owner_ids.len() as u32;
        *self.owner_ids.entry(persona.to_owned()).or_insert(n)
    }

    fn insert(&mut self, row: i64, persona: &str, v: &[f32]) {
        if self.dim == 0 {
            self.dim = v.len();
        }
        if v.len() != self.dim {
            return;
        }
        let owner = self.owner(persona);
        let (scale, q) = quantise(v);
        let bits = sign_bits(v);
        let words = bits.len();
        match self.position.get(&row) {
            Some(&at) => {
                self.owners[at] = owner;
                self.scales[at] = scale;
                self.data[at * self.dim..(at + 1) * self.dim].copy_from_slice(&q);
                self.signs[at * words..(at + 1) * words].copy_from_slice(&bits);
            }
            None => {
                self.position.insert(row, self.rows.len());
                self.rows.push(row);
                self.owners.push(owner);
                self.scales.push(scale);
                self.data.extend_from_slice(&q);
                self.signs.extend_from_slice(&bits);
            }
        }
    }

    fn remove(&mut self, row: i64) {
        if let Some(&at) = self.position.get(&row) {
            self.owners[at] = GONE;
        }
    }

    /// Top `n` rows by cosine (vectors are normalised) within `scope`,
    /// with their cosine.
    fn search(&self, scope: &Scope, query: &[f32], n: usize) -> Vec<(i64, f32)> {
        if self.dim == 0 || query.len() != self.dim || n == 0 {
            return Vec::new();
        }
        let allowed: Vec<bool> = {
            let mut a = vec![false; self.owner_ids.len()];
            for (p, &id) in &self.owner_ids {
                if scope.allows(p) {
                    a[id as usize] = true;
                }
            }
            a
        };
        let (q_scale, q) = quantise(query);
        let visible = |i: usize| self.owners[i] != GONE && allowed[self.owners[i] as usize];
        let mut in_scope: Vec<usize> = (0..self.rows.len()).filter(|&i| visible(i)).collect();
        if in_scope.len() > PREFILTER_ABOVE {
            in_scope = self.shortlist(&in_scope, query, SHORTLIST.max(n * 20));
        }
        let mut scored: Vec<(f32, usize)> = Vec::with_capacity(in_scope.len());
        for i in in_scope {
            // Per-row scales differ: compare on the dequantised value.
            scored.push((dot_i8(&self.data[i * self.dim..(i + 1) * self.dim], &q) as f32 * self.scales[i], i));
        }
        let n = n.min(scored.len());
        if n == 0 {
            return Vec::new();
        }
        scored.select_nth_unstable_by(n - 1, |a, b| b.0.total_cmp(&a.0));
        scored.truncate(n);
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(self.rows[b.1].cmp(&self.rows[a.1])));
        scored.into_iter().map(|(score, i)| (self.rows[i], score * q_scale)).collect()
    }

    /// The `keep` rows of `rows` nearest to `query` by sign bits, in row order.
    fn shortlist(&self, rows: &[usize], query: &[f32], keep: usize) -> Vec<usize> {
        nearest_by_signs(&self.signs, &sign_bits(query), rows, keep)
    }

    /// Each pool row's density (see [`Candidates::density`]): the mean
    /// cosine of its [`DENSITY_NEIGHBOURS`] nearest other pool rows. `pool`
    /// is the query's vector hits, all in scope, so no row outside the
    /// viewer's scope counts.
    fn densities(&self, pool: &[i64]) -> Vec<(i64, f32)> {
        let at = |r: &i64| self.position.get(r).copied().filter(|&i| self.owners[i] != GONE);
        let pool: Vec<(i64, usize)> = pool.iter().filter_map(|r| Some((*r, at(r)?))).collect();
        let slice = |i: usize| &self.data[i * self.dim..(i + 1) * self.dim];
        let mut nearest = Vec::with_capacity(pool.len());
        pool.iter()
            .map(|&(r, i)| {
                nearest.clear();
                nearest.extend(
                    pool.iter()
                        .filter(|&&(p, _)| p != r)
                        .map(|&(_, j)| dot_i8(slice(i), slice(j)) as f32 * self.scales[i] * self.scales[j]),
                );
                let k = DENSITY_NEIGHBOURS.min(nearest.len());
                if k == 0 {
                    return (r, 0.0);
                }
                nearest.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a));
                (r, nearest[..k].iter().sum::<f32>() / k as f32)
            })
            .collect()
    }

    /// The cosine of each given row that has a vector (rows already in scope).
    fn cosines(&self, rows: &[i64], query: &[f32]) -> Vec<(i64, f32)> {
        if self.dim == 0 || query.len() != self.dim {
            return Vec::new();
        }
        let (q_scale, q) = quantise(query);
        rows.iter()
            .filter_map(|r| {
                let &at = self.position.get(r)?;
                if self.owners[at] == GONE {
                    return None;
                }
                let v = &self.data[at * self.dim..(at + 1) * self.dim];
                Some((*r, dot_i8(v, &q) as f32 * self.scales[at] * q_scale))
            })
            .collect()
    }
}

/// How many items of a scope hold each proper name a query asked about
/// (see `RecallSettings::common_name_share`). A share barely moves as a
/// conversation grows, so counts are reused until the index has grown or
/// shrunk by a twentieth since they were taken (a small index recounts on
/// every new item); removing or editing an item drops them all.
#[derive(Default)]
struct NameCounts {
    scopes: HashMap<String, ScopeNames>,
}

struct ScopeNames {
    /// `MemoryIndex::total` when counted.
    at_total: u64,
    /// Items in the scope.
    items: i64,
    /// Items holding each name, written as asked (capitalised), counted
    /// up to the second number: a count that reached it says only "at
    /// least" (see [`usable_count`]).
    names: HashMap<String, (i64, i64)>,
}

/// The count a recall can use out of a cached (count, limit), if any:
/// exact below the limit, or enough to be common at `needed`. Counting
/// stops once a name is common: a conversation's two people are in most
/// of its turns, and counting all of them (tens of thousands of matches,
/// each a row read and a case-sensitive search of its text) was most of
/// a recall at 100 000 messages.
fn usable_count((count, limit): (i64, i64), needed: i64) -> Option<i64> {
    (count < limit || count >= needed).then_some(count)
}

/// Bounds on the cache: past them it starts over (recounting is a few
/// milliseconds, and unbounded it would grow with every name ever asked).
const NAME_COUNT_SCOPES: usize = 64;
const NAME_COUNT_NAMES: usize = 4_096;

impl NameCounts {
    fn fresh(at_total: u64, total: u64) -> bool {
        total.abs_diff(at_total) <= at_total / 20
    }
}

/// One key per scope, whatever the order of its visibility keys.
fn scope_key(scope: &Scope) -> String {
    match scope {
        Scope::All => "*".into(),
        Scope::Keys(keys) => {
            let mut keys = keys.clone();
            keys.sort();
            keys.join("\u{1f}")
        }
    }
}

fn to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn from_blob(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Parses the ledger's RFC 3339 timestamps to unix milliseconds.
pub fn parse_rfc3339_ms(ts: &str) -> Option<i64> {
    let t = time::OffsetDateTime::parse(ts, &time::format_description::well_known::Rfc3339).ok()?;
    Some((t.unix_timestamp_nanos() / 1_000_000) as i64)
}

pub fn now_ms() -> i64 {
    (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

pub struct MemoryIndex {
    pool: SqlitePool,
    vectors: RwLock<VectorCache>,
    embedder: RwLock<Option<Arc<dyn Embedder>>>,
    embedder_status: RwLock<String>,
    settings: RwLock<RecallSettings>,
    name_counts: Mutex<NameCounts>,
    pending: Notify,
    embedded: AtomicU64,
    total: AtomicU64,
    stop: AtomicBool,
    /// One embedding step at a time (background worker and explicit waits).
    embed_lock: tokio::sync::Mutex<()>,
}

impl MemoryIndex {
    /// Opens (or creates) the index at `path` and loads stored embeddings.
    pub async fn open(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| MemoryError::Invalid(format!("cannot create {}: {e}", dir.display())))?;
        }
        // A `-wal` or `-shm` left beside a deleted index belongs to that old
        // file: SQLite would replay it into the new one (or fail to read it).
        if !path.exists() {
            for suffix in ["-wal", "-shm"] {
                let mut side = path.as_os_str().to_owned();
                side.push(suffix);
                match std::fs::remove_file(&side) {
                    Ok(()) => tracing::info!(file = ?side, "removed a stale file of a deleted search index"),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(MemoryError::Invalid(format!("cannot remove {side:?}: {e}"))),
                }
            }
        }
        let url = format!("sqlite://{}", path.display());
        let opts = SqliteConnectOptions::from_str(&url)
            .map_err(MemoryError::Load)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // A projection: losing the last writes on power loss only means
            // re-deriving them from the ledger.
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            // Freed pages are zeroed: erased text must not linger in the file.
            .pragma("secure_delete", "ON")
            // Recall looks up every keyword match's row: map the file
            // instead of copying each page through a small per-connection
            // cache (the default 2 MB held a tenth of a 100 000-message index).
            .pragma("mmap_size", "268435456")
            .disable_statement_logging();
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            // A connection to a local file cannot go stale: the default
            // ping before every acquire doubled each recall's round trips
            // to the connection's worker thread (keyword hits, rows,
            // neighbours).
            .test_before_acquire(false)
            .connect_with(opts)
            .await
            .map_err(MemoryError::Load)?;
        sqlx::migrate!("./migrations").run(&pool).await?;
        let index = Self {
            pool,
            vectors: RwLock::new(VectorCache::default()),
            embedder: RwLock::new(None),
            embedder_status: RwLock::new("no embedding model loaded: keyword search only".into()),
            settings: RwLock::new(RecallSettings::default()),
            name_counts: Mutex::new(NameCounts::default()),
            pending: Notify::new(),
            embedded: AtomicU64::new(0),
            total: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            embed_lock: tokio::sync::Mutex::new(()),
        };
        index.load_vectors().await?;
        Ok(index)
    }

    async fn load_vectors(&self) -> Result<()> {
        let mut cache = VectorCache::default();
        {
            let mut rows =
                sqlx::query("SELECT v.rowid, i.persona_id, v.embedding FROM vectors v JOIN items i ON i.rowid = v.rowid")
                    .fetch(&self.pool);
            while let Some(r) = rows.try_next().await.map_err(MemoryError::Load)? {
                let blob: Vec<u8> = r.get(2);
                cache.insert(r.get(0), r.get::<&str, _>(1), &from_blob(&blob));
            }
        }
        let total: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM items").fetch_one(&self.pool).await.map_err(MemoryError::Load)?;
        self.embedded.store(cache.rows.len() as u64, Ordering::Relaxed);
        self.total.store(total.max(0) as u64, Ordering::Relaxed);
        if let Ok(mut v) = self.vectors.write() {
            *v = cache;
        }
        Ok(())
    }

    /// Installs the embedder. Vectors made by another model are dropped and
    /// re-made in the background.
    pub async fn set_embedder(&self, embedder: Arc<dyn Embedder>) -> Result<()> {
        let id = embedder.model_id();
        let stored: Option<String> = sqlx::query_scalar("SELECT value FROM meta WHERE key = 'embed_model'")
            .fetch_optional(&self.pool)
            .await
            .map_err(MemoryError::Load)?;
        if stored.as_deref() != Some(id.as_str()) {
            if stored.is_some() {
                tracing::info!(old = ?stored, new = %id, "embedding model changed; re-embedding the index");
                let mut tx = self.pool.begin().await.map_err(MemoryError::Save)?;
                for sql in ["DELETE FROM vectors", "UPDATE items SET embedded = 0 WHERE embedded = 1"] {
                    sqlx::query(sql).execute(&mut *tx).await.map_err(MemoryError::Save)?;
                }
                tx.commit().await.map_err(MemoryError::Save)?;
                self.load_vectors().await?;
            }
            sqlx::query("INSERT OR REPLACE INTO meta (key, value) VALUES ('embed_model', ?)")
                .bind(&id)
                .execute(&self.pool)
                .await
                .map_err(MemoryError::Save)?;
        }
        if let Ok(mut e) = self.embedder.write() {
            *e = Some(embedder);
        }
        if let Ok(mut s) = self.embedder_status.write() {
            *s = format!("embedding model {id} loaded: hybrid search");
        }
        self.pending.notify_one();
        Ok(())
    }

    /// Records why there is no embedder (shown by status; search goes on keyword-only).
    pub fn set_embedder_unavailable(&self, why: &str) {
        tracing::warn!(reason = why, "no embedding model: recall uses keyword search only");
        if let Ok(mut s) = self.embedder_status.write() {
            *s = format!("keyword search only: {why}");
        }
    }

    pub fn embedder_status(&self) -> String {
        self.embedder_status.read().map(|s| s.clone()).unwrap_or_default()
    }

    /// The embedder in use, once loaded.
    pub fn embedder(&self) -> Option<Arc<dyn Embedder>> {
        self.embedder.read().ok().and_then(|e| e.clone())
    }

    pub fn settings(&self) -> RecallSettings {
        self.settings.read().map(|s| *s).unwrap_or_default()
    }

    pub fn set_settings(&self, s: RecallSettings) {
        if let Ok(mut cur) = self.settings.write() {
            *cur = s;
        }
    }

    pub fn progress(&self) -> EmbedProgress {
        EmbedProgress {
            embedded: self.embedded.load(Ordering::Relaxed),
            total: self.total.load(Ordering::Relaxed),
            model_loaded: self.embedder().is_some(),
        }
    }

    // ----- writing -----

    /// Adds items (keyword-searchable at once; embedded in the background).
    /// Items already indexed (same `item_id`) are left as they are.
    pub async fn index_items(&self, items: &[NewItem]) -> Result<u64> {
        self.insert_items(items, false).await
    }

    /// [`Self::index_items`]; with `fill_speakers`, an item already indexed
    /// without its speaker (indexed before the index stored who said each
    /// message) gets it, and nothing else of it changes (its vector stays).
    async fn insert_items(&self, items: &[NewItem], fill_speakers: bool) -> Result<u64> {
        if items.is_empty() {
            return Ok(0);
        }
        let mut tx = self.pool.begin().await.map_err(MemoryError::Save)?;
        // An update counts as a changed row too: new rows are told apart by
        // their row ids, which SQLite gives above the largest one.
        let last: i64 = if fill_speakers {
            sqlx::query_scalar("SELECT coalesce(max(rowid), 0) FROM items")
                .fetch_one(&mut *tx)
                .await
                .map_err(MemoryError::Save)?
        } else {
            0
        };
        let mut added = 0;
        for chunk in items.chunks(INSERT_CHUNK) {
            let mut q = QueryBuilder::new(if fill_speakers {
                "INSERT INTO items (item_id, kind, persona_id, external_id, source_ids, text, ts_ms, seq, by_human) "
            } else {
                "INSERT OR IGNORE INTO items (item_id, kind, persona_id, external_id, source_ids, text, ts_ms, seq, by_human) "
            });
            q.push_values(chunk, |mut b, it| {
                b.push_bind(&it.item_id)
                    .push_bind(it.kind.as_str())
                    .push_bind(&it.persona_id)
                    .push_bind(&it.external_id)
                    .push_bind(serde_json::to_string(&it.source_ids).unwrap_or_else(|_| "[]".into()))
                    .push_bind(&it.text)
                    .push_bind(it.ts_ms)
                    .push_bind(it.seq)
                    .push_bind(by_human(it.role));
            });
            if fill_speakers {
                q.push(
                    " ON CONFLICT(item_id) DO UPDATE SET by_human = excluded.by_human \
                     WHERE items.by_human IS NULL AND excluded.by_human IS NOT NULL",
                );
            }
            added += q.build().execute(&mut *tx).await.map_err(MemoryError::Save)?.rows_affected();
        }
        if fill_speakers {
            added = sqlx::query_scalar::<_, i64>("SELECT count(*) FROM items WHERE rowid > ?")
                .bind(last)
                .fetch_one(&mut *tx)
                .await
                .map_err(MemoryError::Save)?
                .max(0) as u64;
        }
        tx.commit().await.map_err(MemoryError::Save)?;
        self.total.fetch_add(added, Ordering::Relaxed);
        self.pending.notify_one();
        Ok(added)
    }

    fn forget_vectors(&self, rows: &[i64]) {
        if let Ok(mut v) = self.vectors.write() {
            for r in rows {
                v.remove(*r);
            }
        }
        self.forget_name_counts();
    }

    /// Drops the cached name counts (an item was removed or edited: its
    /// names must stop counting, and erased text must leave no trace).
    fn forget_name_counts(&self) {
        if let Ok(mut n) = self.name_counts.lock() {
            n.scopes.clear();
        }
    }

    /// Removes the item stored from ledger event `seq` (payload erased).
    pub async fn remove_by_seq(&self, seq: i64) -> Result<()> {
        let rows: Vec<i64> = sqlx::query_scalar("DELETE FROM items WHERE seq = ? RETURNING rowid")
            .bind(seq)
            .fetch_all(&self.pool)
            .await
            .map_err(MemoryError::Save)?;
        self.forget_vectors(&rows);
        Ok(())
    }

    /// Makes removed text unrecoverable from the index files: FTS5 keeps a
    /// deleted row's terms in its segments until they are merged, and the
    /// WAL keeps old page images until a checkpoint. Call after erasures.
    pub async fn scrub(&self) -> Result<()> {
        sqlx::query("INSERT INTO items_fts (items_fts) VALUES ('optimize')")
            .execute(&self.pool)
            .await
            .map_err(MemoryError::Save)?;
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(&self.pool).await.map_err(MemoryError::Save)?;
        Ok(())
    }

    /// Removes one item (a superseded memory leaves retrieval; the ledger keeps it).
    pub async fn remove_item(&self, item_id: &str) -> Result<()> {
        let rows: Vec<i64> = sqlx::query_scalar("DELETE FROM items WHERE item_id = ? RETURNING rowid")
            .bind(item_id)
            .fetch_all(&self.pool)
            .await
            .map_err(MemoryError::Save)?;
        self.forget_vectors(&rows);
        Ok(())
    }

    /// Replaces an item's text (an edited memory); its vector is re-made.
    /// The same text again changes nothing (a catch-up that reads an edit
    /// it already applied).
    pub async fn update_text(&self, item_id: &str, text: &str) -> Result<()> {
        let rows: Vec<i64> =
            sqlx::query_scalar("UPDATE items SET text = ?, embedded = 0 WHERE item_id = ? AND text <> ? RETURNING rowid")
                .bind(text)
                .bind(item_id)
                .bind(text)
            .fetch_all(&self.pool)
            .await
            .map_err(MemoryError::Save)?;
        if let Ok(mut v) = self.vectors.write() {
            for r in &rows {
                v.remove(*r);
            }
        }
        self.forget_name_counts();
        self.pending.notify_one();
        Ok(())
    }

    /// External ids already indexed for a conversation.
    pub async fn external_ids(&self, persona_id: &str) -> Result<HashSet<String>> {
        let ids: Vec<String> =
            sqlx::query_scalar("SELECT external_id FROM items WHERE persona_id = ? AND external_id IS NOT NULL")
                .bind(persona_id)
                .fetch_all(&self.pool)
                .await
                .map_err(MemoryError::Load)?;
        Ok(ids.into_iter().collect())
    }

    /// Applies the ledger's events that the index has not seen yet (newest
    /// first back to the stored watermark). Idempotent: a message already
    /// indexed keeps its row and vector, and only gets its speaker when it
    /// had none (a migration that adds what every message needs resets the
    /// watermark, so the next catch-up reads the whole ledger once).
    pub async fn sync_from_ledger(&self, ledger: &Ledger) -> Result<u64> {
        let mark: i64 = sqlx::query_scalar("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'ledger_seq'")
            .fetch_optional(&self.pool)
            .await
            .map_err(MemoryError::Load)?
            .unwrap_or(0);
        let (head, _) = ledger.head().await;
        if head <= mark {
            return Ok(0);
        }
        let mut items = Vec::new();
        let mut erased = Vec::new();
        // Memory changes, newest first like the pages (applied oldest first).
        let mut changes: Vec<(String, Option<String>, bool)> = Vec::new();
        let mut before = Some(head + 1);
        'pages: loop {
            let page = ledger.events(before, 1_000).await?;
            if page.is_empty() {
                break;
            }
            for e in &page {
                if e.seq <= mark {
                    break 'pages;
                }
                before = Some(e.seq);
                let Some(payload) = &e.payload else { continue };
                match serde_json::from_value::<EventBody>(payload.clone()) {
                    Ok(EventBody::MessageAdded { message_id, persona_id, role, content, external_id, said_at }) => {
                        // An imported message keeps the time it was said, as
                        // the import indexed it: its neighbours are the turns
                        // of its own session.
                        let said = said_at.as_deref().and_then(parse_rfc3339_ms);
                        items.push(NewItem {
                            item_id: message_id,
                            kind: ItemKind::Message,
                            persona_id,
                            external_id,
                            source_ids: Vec::new(),
                            text: content,
                            ts_ms: said.or_else(|| parse_rfc3339_ms(&e.ts)).unwrap_or(0),
                            seq: Some(e.seq),
                            role: Some(role),
                        });
                    }
                    Ok(EventBody::MemoryLearned { memory_id, text, group, source_ids, .. }) => {
                        items.push(NewItem {
                            item_id: memory_id,
                            kind: ItemKind::Memory,
                            persona_id: group_key(&group),
                            external_id: None,
                            source_ids,
                            text,
                            ts_ms: parse_rfc3339_ms(&e.ts).unwrap_or(0),
                            seq: Some(e.seq),
                            role: None,
                        });
                    }
                    Ok(EventBody::MemoryUpdated { memory_id, text, superseded_by, .. }) => {
                        if text.is_some() || superseded_by.is_some() {
                            changes.push((memory_id, text, superseded_by.is_some()));
                        }
                    }
                    Ok(EventBody::PayloadErased { target_seq, .. }) => erased.push(target_seq),
                    _ => {}
                }
            }
        }
        items.reverse();
        // A memory superseded since is never indexed: inserting it only to
        // delete it would leave its words in the keyword index's segments.
        let superseded: HashSet<&str> = changes.iter().filter(|c| c.2).map(|c| c.0.as_str()).collect();
        items.retain(|it| it.kind != ItemKind::Memory || !superseded.contains(it.item_id.as_str()));
        let added = self.insert_items(&items, true).await?;
        for (memory_id, text, superseded) in changes.into_iter().rev() {
            if superseded {
                self.remove_item(&memory_id).await?;
            } else if let Some(text) = text {
                self.update_text(&memory_id, &text).await?;
            }
        }
        for seq in erased {
            self.remove_by_seq(seq).await?;
        }
        sqlx::query("INSERT OR REPLACE INTO meta (key, value) VALUES ('ledger_seq', ?)")
            .bind(head.to_string())
            .execute(&self.pool)
            .await
            .map_err(MemoryError::Save)?;
        Ok(added)
    }

    // ----- embedding -----

    /// Embeds up to one step of not-yet-embedded items. Returns how many.
    pub async fn embed_pending_step(&self) -> Result<usize> {
        let Some(embedder) = self.embedder() else { return Ok(0) };
        let _one_at_a_time = self.embed_lock.lock().await;
        let rows = sqlx::query("SELECT rowid, persona_id, text FROM items WHERE embedded = 0 ORDER BY rowid LIMIT ?")
            .bind(EMBED_STEP as i64)
            .fetch_all(&self.pool)
            .await
            .map_err(MemoryError::Load)?;
        if rows.is_empty() {
            return Ok(0);
        }
        let ids: Vec<(i64, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        let texts: Vec<String> = rows.iter().map(|r| r.get(2)).collect();
        let vectors = tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            embedder.embed(&refs)
        })
        .await
        .map_err(|e| MemoryError::Embed(e.to_string()))??;
        self.store_vectors(&ids, &vectors).await?;
        Ok(ids.len())
    }

    /// Stores vectors for rows (row id, persona id). A row deleted or
    /// given new text since it was read keeps no vector (it is embedded
    /// again if it is still there).
    pub async fn store_vectors(&self, ids: &[(i64, String)], vectors: &[Vec<f32>]) -> Result<()> {
        let mut tx = self.pool.begin().await.map_err(MemoryError::Save)?;
        let mut stored = Vec::with_capacity(ids.len());
        for ((row, persona), v) in ids.iter().zip(vectors) {
            let marked = sqlx::query("UPDATE items SET embedded = 1 WHERE rowid = ? AND embedded = 0")
                .bind(row)
                .execute(&mut *tx)
                .await
                .map_err(MemoryError::Save)?;
            if marked.rows_affected() == 0 {
                continue;
            }
            sqlx::query("INSERT OR REPLACE INTO vectors (rowid, embedding) VALUES (?, ?)")
                .bind(row)
                .bind(to_blob(v))
                .execute(&mut *tx)
                .await
                .map_err(MemoryError::Save)?;
            stored.push((*row, persona.as_str(), v));
        }
        tx.commit().await.map_err(MemoryError::Save)?;
        if let Ok(mut cache) = self.vectors.write() {
            for (row, persona, v) in &stored {
                cache.insert(*row, persona, v);
            }
        }
        self.embedded.fetch_add(stored.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Embeds everything pending now (tests, benchmarks, small imports).
    pub async fn embed_all_pending(&self) -> Result<u64> {
        let mut n = 0;
        loop {
            let step = self.embed_pending_step().await?;
            if step == 0 {
                return Ok(n);
            }
            n += step as u64;
        }
    }

    /// The background embedder: embeds new items as they arrive until
    /// [`MemoryIndex::stop`]. Errors are logged and retried later.
    pub async fn run_embedder(self: Arc<Self>) {
        while !self.stop.load(Ordering::Relaxed) {
            match self.embed_pending_step().await {
                Ok(0) => {
                    // New items and `stop` notify; the timeout is only a
                    // backstop, long so an idle app does not poll its index.
                    tokio::select! {
                        _ = self.pending.notified() => {}
                        _ = tokio::time::sleep(Duration::from_secs(60)) => {}
                    }
                }
                Ok(n) => tracing::debug!(n, progress = ?self.progress(), "embedded"),
                Err(e) => {
                    tracing::warn!(error = %e, "embedding failed; will retry");
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
            }
        }
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.pending.notify_one();
    }

    // ----- retrieval -----

    /// The proper names of `query` that are common in `scope` (see
    /// `RecallSettings::common_name_share`). Each name's item count is one
    /// FTS5 query (its matches whose text holds it capitalised, up to the
    /// count that makes it common) the first time it is asked in a scope,
    /// then cached ([`NameCounts`]).
    async fn common_names(&self, scope: &Scope, query: &str, settings: &RecallSettings) -> Result<HashSet<String>> {
        let names = query_names(query);
        if names.is_empty() || !settings.uses_name_counts() {
            return Ok(HashSet::new());
        }
        let key = scope_key(scope);
        let total = self.total.load(Ordering::Relaxed);
        let (mut items, mut counts): (Option<i64>, HashMap<String, i64>) = match self.name_counts.lock() {
            Ok(n) => match n.scopes.get(&key) {
                Some(e) if NameCounts::fresh(e.at_total, total) => {
                    let needed = settings.common_name_items(e.items);
                    (
                        Some(e.items),
                        names
                            .iter()
                            .filter_map(|&w| Some((w.to_owned(), usable_count(*e.names.get(w)?, needed)?)))
                            .collect(),
                    )
                }
                _ => (None, HashMap::new()),
            },
            Err(_) => (None, HashMap::new()),
        };
        let recounted = items.is_none();
        if items.is_none() {
            let mut q = QueryBuilder::new("SELECT count(*) FROM items i WHERE 1");
            push_scope(&mut q, scope);
            items = Some(q.build_query_scalar::<i64>().fetch_one(&self.pool).await.map_err(MemoryError::Load)?);
        }
        let items = items.unwrap_or(0);
        let mut counted = Vec::new();
        let missing: Vec<&str> = names.iter().copied().filter(|w| !counts.contains_key(*w)).collect();
        let limit = settings.common_name_items(items);
        for name in missing {
            let mut q = QueryBuilder::new("");
            push_name_count(&mut q, name, scope, limit);
            let n = q.build_query_scalar::<i64>().fetch_one(&self.pool).await.map_err(MemoryError::Load)?;
            counts.insert(name.to_owned(), n);
            counted.push((name.to_owned(), (n, limit)));
        }
        if let Ok(mut cache) = self.name_counts.lock() {
            if cache.scopes.len() >= NAME_COUNT_SCOPES && !cache.scopes.contains_key(&key) {
                cache.scopes.clear();
            }
            let e = cache.scopes.entry(key).or_insert_with(|| ScopeNames { at_total: total, items, names: HashMap::new() });
            if recounted || !NameCounts::fresh(e.at_total, total) {
                *e = ScopeNames { at_total: total, items, names: HashMap::new() };
            }
            if e.names.len() + counted.len() > NAME_COUNT_NAMES {
                e.names.clear();
            }
            e.names.extend(counted);
        }
        Ok(names
            .into_iter()
            .filter(|w| counts.get(*w).is_some_and(|&n| settings.is_common_name(n, items)))
            .map(str::to_owned)
            .collect())
    }

    /// The side of the conversation `query` names, if any (see
    /// `RecallSettings::speaker_weight`): the persona by a word of
    /// `persona_name`; the person by a name the persona says in the first
    /// [`NAME_SAMPLE`] items of `scope` holding it capitalised (one query
    /// per other name, at most that many rows read). Names that point to
    /// both sides cancel out.
    async fn named_side(
        &self,
        scope: &Scope,
        persona_name: Option<&str>,
        query: &str,
        settings: &RecallSettings,
    ) -> Result<Option<bool>> {
        if settings.speaker_weight <= 0.0 {
            return Ok(None);
        }
        let mut side = None;
        for name in query_names(query) {
            let named = if persona_name.is_some_and(|p| is_persona_name(name, p)) {
                false
            } else {
                let mut q = QueryBuilder::new(
                    "SELECT count(h), coalesce(sum(h), 0) FROM (SELECT i.by_human AS h FROM items_fts \
                     CROSS JOIN items i ON i.rowid = items_fts.rowid WHERE items_fts MATCH ",
                );
                q.push_bind(format!("\"{}\"", name.replace('"', "\"\"")));
                // Rows of unknown speaker (memories, messages indexed before the
                // column) are read but not counted: filtering them out would
                // walk every match of a name in an index made before it.
                q.push(" AND instr(i.text, ").push_bind(name.to_owned()).push(") > 0");
                push_scope(&mut q, scope);
                q.push(" LIMIT ").push_bind(NAME_SAMPLE).push(")");
                let (items, by_human): (i64, i64) =
                    q.build_query_as().fetch_one(&self.pool).await.map_err(MemoryError::Load)?;
                if !is_persons_name(items, by_human) {
                    continue;
                }
                true
            };
            match side {
                None => side = Some(named),
                Some(s) if s != named => return Ok(None),
                _ => {}
            }
        }
        Ok(side)
    }

    /// Both retrievers' candidate lists for `query` within `scope`, and both
    /// scores of every candidate (a keyword hit's cosine, a vector hit's
    /// BM25), under the index's settings. The keyword query and the query
    /// embedding run at the same time. The vector list holds
    /// `max(n, DENSITY_POOL)` rows by cosine; rank with
    /// [`RecallSettings::vector_hits`] to take the first `n`.
    pub async fn candidates(&self, scope: &Scope, persona_name: Option<&str>, query: &str, n: usize) -> Result<Candidates> {
        Ok(self.candidate_rows(scope, persona_name, query, n, &self.settings(), false).await?.0)
    }

    /// [`MemoryIndex::candidates`], with every candidate's row read on the
    /// way: two SQL round trips per recall (keyword hits; the vector hits'
    /// rows and BM25), and one or two more for the turns around them when
    /// `settings` score turns with their neighbours. With `only_ranked`,
    /// only the vector hits `settings` rank (their first `n`) are read.
    async fn candidate_rows(
        &self,
        scope: &Scope,
        persona_name: Option<&str>,
        query: &str,
        n: usize,
        settings: &RecallSettings,
        only_ranked: bool,
    ) -> Result<(Candidates, HashMap<i64, Hit>)> {
        let mut c = Candidates::default();
        let mut rows: HashMap<i64, Hit> = HashMap::new();
        let fts = fts_query(query);
        let keyword = async {
            let Some(fts) = &fts else { return Ok(Vec::new()) };
            let mut q = QueryBuilder::new(format!(
                "SELECT {HIT_COLUMNS}, -bm25(items_fts) FROM items_fts JOIN items i ON i.rowid = items_fts.rowid \
                 WHERE items_fts MATCH "
            ));
            q.push_bind(fts.clone());
            push_scope(&mut q, scope);
            q.push(" ORDER BY bm25(items_fts), i.rowid DESC LIMIT ").push_bind(n as i64);
            q.build().fetch_all(&self.pool).await.map_err(MemoryError::Load)
        };
        let vector = async {
            let Some(embedder) = self.embedder() else { return Ok(None) };
            let common = self.common_names(scope, query, settings).await?;
            let text = settings.meaning_text(query, |name| common.contains(name));
            let qv = tokio::task::spawn_blocking(move || embedder.embed(&[text.as_str()]))
                .await
                .map_err(|e| MemoryError::Embed(e.to_string()))??;
            Ok::<_, MemoryError>(qv.into_iter().next())
        };
        let (keyword, vector, named) = tokio::join!(keyword, vector, self.named_side(scope, persona_name, query, settings));
        c.named = named?;
        c.dates = query_dates(query);
        for r in keyword? {
            let (row, hit) = hit_from_row(&r);
            if let Some(h) = said_by_human(&r) {
                c.by_human.insert(row, h);
            }
            if asks_a_question(&hit.text) {
                c.asks.insert(row);
            }
            c.keyword.push(row);
            c.ts_ms.insert(row, hit.ts_ms);
            c.keyword_score.insert(row, r.get::<f64, _>(HIT_COLUMN_COUNT) as f32);
            rows.insert(row, hit);
        }
        let vector = vector?;
        let mut median_density = None;
        if let Some(qv) = &vector {
            c.vector_available = true;
            if let Ok(v) = self.vectors.read() {
                for (row, cos) in v.search(scope, qv, n.max(DENSITY_POOL)) {
                    c.vector.push(row);
                    c.cosine.insert(row, cos);
                }
                c.cosine.extend(v.cosines(&c.keyword, qv));
                c.density.extend(v.densities(&c.vector));
                // A keyword hit outside the pool is not near the query's
                // neighbourhood, so the pool cannot say how crowded its own
                // is: it gets the pool's median, neither lifted nor pushed.
                let mut pool_density: Vec<f32> = c.density.values().copied().collect();
                if !pool_density.is_empty() {
                    let mid = pool_density.len() / 2;
                    let (_, &mut median, _) = pool_density.select_nth_unstable_by(mid, f32::total_cmp);
                    median_density = Some(median);
                    for r in &c.keyword {
                        if c.cosine.contains_key(r) {
                            c.density.entry(*r).or_insert(median);
                        }
                    }
                }
            }
        }
        if only_ranked {
            let keep: HashSet<i64> = settings.vector_hits(&c).into_iter().collect();
            c.vector.retain(|r| keep.contains(r));
        }
        if settings.uses_context() {
            // The turns around the first hits of each list become candidates;
            // the turns around those are read for their scores only.
            let mut seeds: Vec<i64> = c.keyword.iter().take(n).copied().collect();
            seeds.extend(settings.vector_hits(&c).into_iter().take(n));
            seeds.sort_unstable();
            seeds.dedup();
            let first = self.neighbours(&seeds).await?;
            let known: HashSet<i64> = seeds.iter().copied().collect();
            let mut added: Vec<i64> =
                first.values().flatten().flatten().copied().filter(|r| !known.contains(r)).collect();
            added.sort_unstable();
            added.dedup();
            let second = self.neighbours(&added).await?;
            c.neighbours.extend(first);
            c.neighbours.extend(second);
            c.context = added;
            let around: Vec<i64> = c
                .neighbours
                .values()
                .flatten()
                .flatten()
                .copied()
                .filter(|r| !c.cosine.contains_key(r))
                .collect::<HashSet<_>>()
                .into_iter()
                .collect();
            if let (Some(qv), Ok(v)) = (&vector, self.vectors.read()) {
                for (row, cos) in v.cosines(&around, qv) {
                    c.cosine.insert(row, cos);
                    if let Some(m) = median_density {
                        c.density.entry(row).or_insert(m);
                    }
                }
            }
        }
        // The vector hits' and context turns' rows and BM25 scores (none
        // when no query word is in them).
        let mut missing: Vec<i64> =
            c.vector.iter().chain(&c.context).copied().filter(|r| !rows.contains_key(r)).collect();
        missing.sort_unstable();
        missing.dedup();
        for chunk in missing.chunks(INSERT_CHUNK) {
            let mut q = QueryBuilder::new(format!("SELECT {HIT_COLUMNS}, "));
            match &fts {
                // `+rowid`: the row filter is applied to one pass over the
                // matches. Handed to FTS5 it would run the query (and
                // BM25's term statistics, a scan of every match) once per row.
                Some(fts) => {
                    q.push("f.score FROM items i LEFT JOIN (SELECT rowid AS r, -bm25(items_fts) AS score FROM items_fts \
                            WHERE items_fts MATCH ");
                    q.push_bind(fts.clone()).push(" AND +rowid IN (");
                    push_rows(&mut q, chunk);
                    q.push(") f ON f.r = i.rowid");
                }
                None => {
                    q.push("NULL FROM items i");
                }
            }
            q.push(" WHERE i.rowid IN (");
            push_rows(&mut q, chunk);
            for r in q.build().fetch_all(&self.pool).await.map_err(MemoryError::Load)? {
                let (row, hit) = hit_from_row(&r);
                if let Some(h) = said_by_human(&r) {
                    c.by_human.insert(row, h);
                }
                if asks_a_question(&hit.text) {
                    c.asks.insert(row);
                }
                c.ts_ms.insert(row, hit.ts_ms);
                if let Some(score) = r.get::<Option<f64>, _>(HIT_COLUMN_COUNT) {
                    c.keyword_score.insert(row, score as f32);
                }
                rows.insert(row, hit);
            }
        }
        Ok((c, rows))
    }

    /// Each given message's turn before and after in its conversation (by
    /// time, then row), when within [`CONTEXT_GAP_MS`]. Memories have none.
    /// Two lookups in the `(persona_id, ts_ms)` index per row.
    async fn neighbours(&self, of: &[i64]) -> Result<HashMap<i64, [Option<i64>; 2]>> {
        let mut out = HashMap::with_capacity(of.len());
        for chunk in of.chunks(INSERT_CHUNK) {
            let mut q = QueryBuilder::new(
                "SELECT i.rowid, \
                 (SELECT p.rowid FROM items p WHERE p.persona_id = i.persona_id AND p.ts_ms <= i.ts_ms \
                  AND p.ts_ms >= i.ts_ms - ",
            );
            q.push_bind(CONTEXT_GAP_MS);
            q.push(
                " AND (p.ts_ms < i.ts_ms OR p.rowid < i.rowid) ORDER BY p.ts_ms DESC, p.rowid DESC LIMIT 1), \
                 (SELECT x.rowid FROM items x WHERE x.persona_id = i.persona_id AND x.ts_ms >= i.ts_ms \
                  AND x.ts_ms <= i.ts_ms + ",
            );
            q.push_bind(CONTEXT_GAP_MS);
            q.push(
                " AND (x.ts_ms > i.ts_ms OR x.rowid > i.rowid) ORDER BY x.ts_ms, x.rowid LIMIT 1) \
                 FROM items i WHERE i.kind = 'message' AND i.rowid IN (",
            );
            push_rows(&mut q, chunk);
            for r in q.build().fetch_all(&self.pool).await.map_err(MemoryError::Load)? {
                let row: i64 = r.try_get(0).map_err(MemoryError::Load)?;
                let before: Option<i64> = r.try_get(1).map_err(MemoryError::Load)?;
                let after: Option<i64> = r.try_get(2).map_err(MemoryError::Load)?;
                out.insert(row, [before, after]);
            }
        }
        Ok(out)
    }

    /// The one retrieval function: hybrid candidates, score fusion with
    /// the turns around each, recency re-rank, top `k`. The reply pipeline
    /// and the CLI both call it. `persona_name` is the name of the persona
    /// whose conversation this is, when one asks: a question naming it is
    /// about the persona's own turns (see `RecallSettings::speaker_weight`).
    pub async fn recall(&self, scope: &Scope, persona_name: Option<&str>, query: &str, k: usize, now_ms: i64) -> Result<Recall> {
        let settings = self.settings();
        // More results than candidates per retriever: widen both lists.
        let settings = RecallSettings { candidates: settings.candidates.max(k), ..settings };
        let (c, mut rows) = self.candidate_rows(scope, persona_name, query, settings.candidates, &settings, true).await?;
        let hits = rank(&c, &settings, now_ms)
            .into_iter()
            .filter_map(|(row, score)| rows.remove(&row).map(|h| Hit { score, ..h }))
            .take(k)
            .collect();
        Ok(Recall { hits, mode: if c.vector_available { "hybrid" } else { "keyword" } })
    }

    /// Row id → public id (external id, else item id), for benchmarks.
    pub async fn public_ids(&self) -> Result<HashMap<i64, String>> {
        let rows = sqlx::query("SELECT rowid, COALESCE(external_id, item_id) FROM items")
            .fetch_all(&self.pool)
            .await
            .map_err(MemoryError::Load)?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect::<std::result::Result<_, sqlx::Error>>()
            .map_err(MemoryError::Load)
    }

    pub async fn close(&self) {
        self.stop();
        ledger::close_pool(&self.pool).await;
    }
}

/// The columns [`hit_from_row`] reads, first in a query (items aliased `i`).
const HIT_COLUMNS: &str =
    "i.rowid, i.item_id, i.kind, i.persona_id, i.external_id, i.source_ids, i.text, i.ts_ms, i.by_human";
const HIT_COLUMN_COUNT: usize = 9;

/// Who said a row that starts with [`HIT_COLUMNS`] (see `items.by_human`).
fn said_by_human(r: &sqlx::sqlite::SqliteRow) -> Option<bool> {
    r.get::<Option<bool>, _>(HIT_COLUMN_COUNT - 1)
}

/// A row that starts with [`HIT_COLUMNS`], as (row id, hit with score 0).
fn hit_from_row(r: &sqlx::sqlite::SqliteRow) -> (i64, Hit) {
    let kind: &str = r.get(2);
    let sources: &str = r.get(5);
    (
        r.get(0),
        Hit {
            item_id: r.get(1),
            kind: if kind == "memory" { ItemKind::Memory } else { ItemKind::Message },
            persona_id: r.get(3),
            external_id: r.get(4),
            source_ids: serde_json::from_str(sources).unwrap_or_default(),
            text: r.get(6),
            ts_ms: r.get(7),
            score: 0.0,
        },
    )
}

/// A query for how many items of `scope` hold `name` capitalised, counted
/// up to `limit`. CROSS JOIN keeps FTS5 first: given the choice, SQLite
/// walked the scope's every item by the persona index and asked FTS5 about
/// each (60–70 ms at 100 000 messages, however rare the name).
fn push_name_count(q: &mut QueryBuilder<'_, sqlx::Sqlite>, name: &str, scope: &Scope, limit: i64) {
    q.push(
        "SELECT count(*) FROM (SELECT 1 FROM items_fts CROSS JOIN items i ON i.rowid = items_fts.rowid \
         WHERE items_fts MATCH ",
    );
    // One quoted FTS5 string (a phrase if the tokenizer splits it):
    // no operator can survive inside it.
    q.push_bind(format!("\"{}\"", name.replace('"', "\"\"")));
    // Case matters: "May" the month is not "may" the verb.
    q.push(" AND instr(i.text, ").push_bind(name.to_owned()).push(") > 0");
    push_scope(q, scope);
    q.push(" LIMIT ").push_bind(limit).push(")");
}

/// `rowid, rowid, …)` for an `IN (` list.
fn push_rows(q: &mut QueryBuilder<'_, sqlx::Sqlite>, rows: &[i64]) {
    let mut sep = q.separated(", ");
    for r in rows {
        sep.push_bind(*r);
    }
    sep.push_unseparated(")");
}

/// The visibility filter in SQL; the same [`Scope`] filters vectors.
fn push_scope(q: &mut QueryBuilder<'_, sqlx::Sqlite>, scope: &Scope) {
    match scope {
        Scope::All => {}
        Scope::Keys(ids) if ids.is_empty() => {
            q.push(" AND 0");
        }
        Scope::Keys(ids) => {
            q.push(" AND i.persona_id IN (");
            let mut sep = q.separated(", ");
            for id in ids {
                sep.push_bind(id.clone());
            }
            q.push(")");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn above_the_prefilter_size_the_sign_bits_shortlist_keeps_the_nearest() {
        // Deterministic pseudo-random unit vectors (SplitMix64).
        let mut state = 7u64;
        let mut next = || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) % 2001) as f32 / 1000.0 - 1.0
        };
        let dim = 64;
        let mut cache = VectorCache::default();
        let mut all = Vec::new();
        for row in 0..(PREFILTER_ABOVE as i64 + 5_000) {
            let v = crate::embed::normalise((0..dim).map(|_| next()).collect());
            cache.insert(row, "p", &v);
            all.push(v);
        }
        for _ in 0..5 {
            let q = crate::embed::normalise((0..dim).map(|_| next()).collect());
            let mut exact: Vec<(f32, i64)> =
                all.iter().enumerate().map(|(r, v)| (v.iter().zip(&q).map(|(a, b)| a * b).sum(), r as i64)).collect();
            exact.sort_by(|a, b| b.0.total_cmp(&a.0));
            let found: Vec<i64> = cache.search(&Scope::All, &q, 10).into_iter().map(|h| h.0).collect();
            let kept = exact.iter().take(10).filter(|(_, r)| found.contains(r)).count();
            assert!(kept >= 9, "{kept} of the exact top 10 found");
        }
    }

    #[test]
    fn a_capped_name_count_is_used_only_when_it_answers_the_question() {
        // Counted to the end below the limit: exact, good for any threshold.
        assert_eq!(usable_count((4, 10), 30), Some(4));
        // Stopped at the limit: "at least 10" says common at 10 or less...
        assert_eq!(usable_count((10, 10), 8), Some(10));
        // ...and nothing about a higher threshold: counted again.
        assert_eq!(usable_count((10, 10), 27), None);
    }

    #[tokio::test]
    async fn a_name_count_walks_the_names_matches_not_the_scopes_items() {
        let dir = tempfile::tempdir().expect("test step");
        let index = MemoryIndex::open(&dir.path().join("index.db")).await.expect("test step");
        let items: Vec<NewItem> = (0..50)
            .map(|n| NewItem {
                item_id: format!("m{n}"),
                kind: ItemKind::Message,
                persona_id: "p".into(),
                external_id: None,
                source_ids: Vec::new(),
                text: if n % 5 == 0 { format!("Clara called, {n}") } else { format!("lunch again, {n}") },
                ts_ms: 1_700_000_000_000 + n,
                seq: None,
                role: Some(MessageRole::Human),
            })
            .collect();
        index.index_items(&items).await.expect("test step");
        let scope = Scope::Keys(vec!["p".into()]);
        let mut plan = QueryBuilder::new("EXPLAIN QUERY PLAN ");
        push_name_count(&mut plan, "Clara", &scope, 100);
        let steps: Vec<String> =
            plan.build().fetch_all(&index.pool).await.expect("test step").iter().map(|r| r.get::<String, _>(3)).collect();
        let first = steps.iter().find(|d| d.starts_with("SCAN") || d.starts_with("SEARCH"));
        assert!(first.is_some_and(|d| d.contains("items_fts")), "{steps:?}");
        for (limit, expected) in [(100, 10), (4, 4)] {
            let mut q = QueryBuilder::new("");
            push_name_count(&mut q, "Clara", &scope, limit);
            assert_eq!(q.build_query_scalar::<i64>().fetch_one(&index.pool).await.expect("test step"), expected);
        }
    }

    #[test]
    fn the_shortlist_keeps_exactly_the_nearest_rows_by_sign_bits() {
        let mut cache = VectorCache::default();
        // Row r differs from the query's signs in its first r % 50 dimensions.
        let query: Vec<f32> = (0..128).map(|_| 1.0).collect();
        for row in 0..1_000usize {
            let v: Vec<f32> = (0..128).map(|d| if d < row % 50 { -1.0 } else { 1.0 }).collect();
            cache.insert(row as i64, "p", &v);
        }
        let all: Vec<usize> = (0..1_000).collect();
        let distance = |i: usize| i % 50;
        for keep in [1, 20, 35, 999, 1_000, 5_000] {
            let kept = cache.shortlist(&all, &query, keep);
            assert_eq!(kept.len(), keep.min(1_000));
            let worst_kept = kept.iter().map(|&i| distance(i)).max().unwrap_or(0);
            let best_dropped = all.iter().filter(|i| !kept.contains(i)).map(|&i| distance(i)).min().unwrap_or(usize::MAX);
            assert!(worst_kept <= best_dropped, "keep {keep}: kept up to {worst_kept}, dropped {best_dropped}");
            assert!(kept.windows(2).all(|w| w[0] < w[1]), "row order");
        }
    }

    #[test]
    fn quantised_dot_ranks_like_float_cosine() {
        let a = crate::embed::normalise(vec![0.9, 0.1, 0.0, 0.3]);
        let b = crate::embed::normalise(vec![0.8, 0.2, 0.1, 0.3]);
        let c = crate::embed::normalise(vec![-0.5, 0.9, 0.2, 0.0]);
        let mut cache = VectorCache::default();
        cache.insert(1, "p", &b);
        cache.insert(2, "p", &c);
        cache.insert(3, "q", &a);
        let rows = |hits: Vec<(i64, f32)>| hits.into_iter().map(|h| h.0).collect::<Vec<_>>();
        assert_eq!(rows(cache.search(&Scope::Keys(vec!["p".into()]), &a, 5)), vec![1, 2]);
        assert_eq!(rows(cache.search(&Scope::All, &a, 1)), vec![3]);
        // Scores are cosines (within int8 error), the same for a looked-up row.
        let cos = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(p, q)| p * q).sum::<f32>();
        let found = cache.search(&Scope::All, &a, 3);
        assert!((found[0].1 - 1.0).abs() < 0.02, "{found:?}");
        assert!((found[1].1 - cos(&a, &b)).abs() < 0.02, "{found:?}");
        assert_eq!(cache.cosines(&[2, 99], &a), vec![(2, found[2].1)]);
        cache.remove(3);
        assert_eq!(rows(cache.search(&Scope::All, &a, 1)), vec![1]);
        assert!(cache.cosines(&[3], &a).is_empty());
        let v: Vec<i8> = (0..100).map(|i| (i % 7) as i8 - 3).collect();
        assert_eq!(dot_i8(&v, &v), v.iter().map(|&x| x as i32 * x as i32).sum::<i32>());
    }

    #[test]
    fn density_is_the_mean_cosine_of_the_nearest_rows_of_the_pool() {
        let mut cache = VectorCache::default();
        // Rows 1..=12 say the same thing; row 20 is alone; row 30 is removed.
        let crowd = crate::embed::normalise(vec![1.0, 0.1, 0.0, 0.0]);
        for r in 1..=12 {
            cache.insert(r, "p", &crowd);
        }
        cache.insert(20, "p", &crate::embed::normalise(vec![0.0, 0.0, 1.0, 0.0]));
        cache.insert(30, "p", &crowd);
        cache.remove(30);
        let pool: Vec<i64> = (1..=12).chain([20, 30, 99]).collect();
        let d: HashMap<i64, f32> = cache.densities(&pool).into_iter().collect();
        // Its 10 nearest (itself excluded) are all identical: density 1.
        assert!((d[&1] - 1.0).abs() < 0.02, "{d:?}");
        // The lone row's nearest are orthogonal to it.
        assert!(d[&20].abs() < 0.02, "{d:?}");
        // Removed and unknown rows neither get a density nor count as neighbours.
        assert_eq!(d.len(), 13, "{d:?}");
        // A pool of one has no neighbours.
        assert_eq!(cache.densities(&[20]), vec![(20, 0.0)]);
    }
}
