//! Opening a ledger and appending to it. One writer connection behind an
//! async mutex; readers use a pool (WAL lets them run beside the writer).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use ed25519_dalek::SigningKey;
use rand::rngs::OsRng;
use serde::Serialize;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{ConnectOptions, Connection, QueryBuilder, Row, SqliteConnection, SqlitePool};
use time::format_description::well_known::Rfc3339;
use tokio::sync::Mutex;

use crate::body::EventBody;
use crate::clock::{Clock, SystemClock};
use crate::error::LedgerError;
use crate::event::{payload_hash, to_hash, EventHeader, HASH_LEN};
use crate::keys::KeyStore;
use crate::merkle::Frontier;
use crate::project;
use crate::proof::SthCache;
use crate::signing::Signed;
use crate::queue::{NewJob, QueueItem};
use crate::Result;

/// The human's device entity; its key also signs receipts for the ledger.
pub const HUMAN_ENTITY: &str = "human";
/// The built-in system persona.
pub const EI_PERSONA_ID: &str = "ei";
const GENESIS_PREV: [u8; HASH_LEN] = [0; HASH_LEN];
const FORMAT: u32 = 1;

#[derive(Debug, Clone)]
pub struct LedgerOptions {
    pub path: PathBuf,
    /// `synchronous=FULL`: an append is on disk when the call returns.
    pub durable: bool,
    /// Model spec given to Ei at genesis.
    pub default_model: String,
}

impl LedgerOptions {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into(), durable: true, default_model: String::new() }
    }
}

/// Proof that an action was committed: what it was (`action_hash`), the
/// ledger head before and after it, where it sits, and who signed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Receipt {
    pub seq: i64,
    pub event_id: String,
    pub kind: String,
    pub action_hash: String,
    pub state_before: String,
    pub state_after: String,
    pub signer: String,
    pub signature: String,
}

pub(crate) struct Writer {
    pub(crate) conn: SqliteConnection,
    pub(crate) seq: i64,
    pub(crate) head: [u8; HASH_LEN],
    /// Merkle frontier over every committed event (see `merkle`).
    pub(crate) tree: Frontier,
}

pub struct Ledger {
    pool: SqlitePool,
    writer: Mutex<Writer>,
    keys: Arc<dyn KeyStore>,
    signers: RwLock<HashMap<String, SigningKey>>,
    /// Each entity's public key in force (the `entities` projection): a
    /// private key read from the keychain signs only if it matches.
    registered: RwLock<HashMap<String, [u8; 32]>>,
    clock: Arc<dyn Clock>,
    profile_id: String,
    /// This copy of the database (see migration 0006): keys the keychain slot
    /// of the signed tree head, so an imported copy never shares it.
    installation_id: String,
    path: PathBuf,
    durable: bool,
    pub(crate) sth: Arc<std::sync::Mutex<SthCache>>,
    /// Rung whenever queued work may have become ready, whoever queued it,
    /// so a worker can sleep instead of polling the queue.
    pub(crate) queue_changed: tokio::sync::Notify,
}

/// One event to append: who it is about, who signs it, what happened.
#[derive(Debug, Clone)]
pub struct Draft {
    pub entity_id: String,
    pub signer: String,
    pub body: EventBody,
}

impl Draft {
    pub fn by(entity: &str, body: EventBody) -> Self {
        Self { entity_id: entity.to_owned(), signer: entity.to_owned(), body }
    }
}

pub(crate) fn connect_options(path: &Path, durable: bool) -> Result<SqliteConnectOptions> {
    let url = format!("sqlite://{}", path.display());
    let opts = SqliteConnectOptions::from_str(&url)
        .map_err(LedgerError::Load)?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(if durable { SqliteSynchronous::Full } else { SqliteSynchronous::Normal })
        .busy_timeout(Duration::from_secs(10))
        .foreign_keys(true)
        // Deleted content is overwritten in place, not left in free pages.
        .pragma("secure_delete", "ON")
        .disable_statement_logging();
    Ok(opts)
}

/// An event time as the ledger writes it: RFC 3339 in UTC with milliseconds.
pub fn format_ts(t: time::OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    let ms = t.millisecond();
    let base = t.replace_nanosecond(0).ok().and_then(|t| t.format(&Rfc3339).ok()).unwrap_or_default();
    // 2026-01-01T00:00:00Z -> 2026-01-01T00:00:00.123Z
    match base.strip_suffix('Z') {
        Some(stem) => format!("{stem}.{ms:03}Z"),
        None => base,
    }
}

impl Ledger {
    /// Opens (or creates, with its genesis events) the ledger at `opts.path`.
    pub async fn open(opts: LedgerOptions, keys: Arc<dyn KeyStore>) -> Result<Self> {
        Self::open_with_clock(opts, keys, Arc::new(SystemClock)).await
    }

    pub async fn open_with_clock(
        opts: LedgerOptions,
        keys: Arc<dyn KeyStore>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self> {
        let dir = opts.path.parent().map(Path::to_path_buf);
        match Self::open_inner(opts, keys, clock).await {
            // SQLite reports a full disk at open as an I/O error (it cannot
            // size its shared-memory file): say what it is.
            Err(e @ (LedgerError::Load(_) | LedgerError::Save(_) | LedgerError::Migrate(_) | LedgerError::DataDir(_)))
                if dir.as_deref().is_some_and(crate::error::no_room_in) =>
            {
                tracing::error!(error = %e, "opening the ledger failed on a full disk");
                Err(LedgerError::DiskFull(dir.map(|d| d.display().to_string()).unwrap_or_default()))
            }
            other => other,
        }
    }

    async fn open_inner(opts: LedgerOptions, keys: Arc<dyn KeyStore>, clock: Arc<dyn Clock>) -> Result<Self> {
        if let Some(dir) = opts.path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| LedgerError::DataDir(format!("{}: {e}", dir.display())))?;
        }
        let co = connect_options(&opts.path, opts.durable)?;
        let mut conn = co.connect().await.map_err(LedgerError::Load)?;
        let schema_before = schema_version(&mut conn).await?;
        sqlx::migrate!("./migrations").run(&mut conn).await?;
        let upgraded = schema_version(&mut conn).await? > schema_before;
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            // A connection to a local file cannot go stale: the default ping
            // before every acquire only doubled each read's round trips to
            // the connection's worker thread (about 25 reads per reply).
            .test_before_acquire(false)
            .connect_with(co.clone().read_only(true))
            .await
            .map_err(LedgerError::Load)?;

        let head = sqlx::query("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1")
            .fetch_optional(&mut conn)
            .await
            .map_err(LedgerError::Load)?;
        let (seq, head_hash) = match head {
            Some(row) => {
                let seq: i64 = row.get(0);
                let h: Vec<u8> = row.get(1);
                let h = to_hash(&h).ok_or(LedgerError::Corrupt { seq, reason: "hash has the wrong length".into() })?;
                (seq, h)
            }
            None => (0, GENESIS_PREV),
        };
        // A new version's migrations can add projections (tables empty until
        // their events are replayed) or change how one is derived: an
        // upgraded database rebuilds them all from its events, once.
        if upgraded && seq > 0 {
            let started = std::time::Instant::now();
            let mut tx = conn.begin().await.map_err(LedgerError::Save)?;
            project::rebuild_all(&mut tx).await?;
            tx.commit().await.map_err(LedgerError::Save)?;
            tracing::info!(events = seq, ms = started.elapsed().as_millis() as u64, "upgraded database: projections rebuilt from the events");
        }
        let profile_id = if seq == 0 {
            uuid::Uuid::now_v7().to_string()
        } else {
            read_profile_id(&mut conn).await?
        };
        // The Merkle frontier, and whether the keychain's signed head still
        // matches this database (if not, publishing stops: keep the evidence).
        let installation_id = installation_id(&mut conn, keys.as_ref(), &profile_id, seq, clock.as_ref()).await?;
        let keychain_sth = crate::proof::load_sth(keys.as_ref(), &crate::proof::sth_account(&profile_id, &installation_id));
        let mut tree = Frontier::default();
        let hashes: Vec<Vec<u8>> = sqlx::query_scalar("SELECT hash FROM events ORDER BY seq")
            .fetch_all(&mut conn)
            .await
            .map_err(LedgerError::Load)?;
        let mut sth_mismatch = keychain_sth.as_ref().is_some_and(|k| k.size > hashes.len() as u64);
        for h in &hashes {
            tree.push_event(h);
            if let Some(k) = &keychain_sth {
                if k.size == tree.size() && hex::encode(tree.root()) != k.root {
                    sth_mismatch = true;
                }
            }
        }
        drop(hashes);
        let registered: HashMap<String, [u8; 32]> = sqlx::query("SELECT id, public_key FROM entities")
            .fetch_all(&mut conn)
            .await
            .map_err(LedgerError::Load)?
            .iter()
            .filter_map(|r| Some((r.get::<String, _>(0), <[u8; 32]>::try_from(r.get::<Vec<u8>, _>(1).as_slice()).ok()?)))
            .collect();
        if sth_mismatch {
            tracing::error!("the database does not match the signed tree head in the keychain; run verify");
        }
        let ledger = Self {
            pool,
            writer: Mutex::new(Writer { conn, seq, head: head_hash, tree }),
            keys,
            signers: RwLock::new(HashMap::new()),
            registered: RwLock::new(registered),
            clock,
            profile_id,
            installation_id,
            path: opts.path.clone(),
            durable: opts.durable,
            sth: Arc::new(std::sync::Mutex::new(SthCache::blocked(sth_mismatch))),
            queue_changed: tokio::sync::Notify::new(),
        };
        if seq == 0 {
            ledger.genesis(&opts.default_model).await?;
        }
        Ok(ledger)
    }

    async fn genesis(&self, default_model: &str) -> Result<()> {
        let human = self.create_key(HUMAN_ENTITY)?;
        let ei = self.create_key(EI_PERSONA_ID)?;
        let drafts = vec![
            Draft::by(
                HUMAN_ENTITY,
                EventBody::EntityKeyRegistered {
                    entity_id: HUMAN_ENTITY.into(),
                    entity_kind: "human".into(),
                    public_key: human,
                },
            ),
            Draft::by(HUMAN_ENTITY, EventBody::LedgerCreated { profile_id: self.profile_id.clone(), format: FORMAT }),
            Draft {
                entity_id: EI_PERSONA_ID.into(),
                signer: HUMAN_ENTITY.into(),
                body: EventBody::EntityKeyRegistered {
                    entity_id: EI_PERSONA_ID.into(),
                    entity_kind: "persona".into(),
                    public_key: ei,
                },
            },
            Draft {
                entity_id: EI_PERSONA_ID.into(),
                signer: HUMAN_ENTITY.into(),
                body: EventBody::PersonaCreated {
                    persona_id: EI_PERSONA_ID.into(),
                    name: "Ei".into(),
                    short_description: "Your built-in companion, who sees everything you share.".into(),
                    long_description: "Ei is the system persona of Ledgermind: warm, curious and attentive. Ei helps you get to know the other personas and keeps track of what matters to you.".into(),
                    model: default_model.into(),
                    is_system: true,
                },
            },
        ];
        self.append_drafts(drafts).await?;
        Ok(())
    }

    pub fn profile_id(&self) -> &str {
        &self.profile_id
    }

    /// The id of this copy of the database (not of the profile).
    pub fn installation_id(&self) -> &str {
        &self.installation_id
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    pub fn keystore(&self) -> &Arc<dyn KeyStore> {
        &self.keys
    }

    /// Keychain account name for a secret of this profile.
    pub fn key_account(&self, name: &str) -> String {
        format!("{}/{}", self.profile_id, name)
    }

    /// Generates a signing key for `entity`, stores it in the keychain and
    /// returns its public key (hex).
    pub fn create_key(&self, entity: &str) -> Result<String> {
        let key = SigningKey::generate(&mut OsRng);
        self.keys.store(&self.key_account(entity), &key.to_bytes())?;
        let public = hex::encode(key.verifying_key().to_bytes());
        if let Ok(mut cache) = self.signers.write() {
            cache.insert(entity.to_owned(), key);
        }
        Ok(public)
    }

    pub(crate) fn signing_key(&self, entity: &str) -> Result<SigningKey> {
        if let Some(k) = self.signers.read().ok().and_then(|c| c.get(entity).cloned()) {
            return Ok(k);
        }
        let secret = zeroize::Zeroizing::new(
            self.keys
                .load_within(&self.key_account(entity), crate::keys::KEY_READ_TIMEOUT)?
                .ok_or_else(|| LedgerError::MissingKey(entity.to_owned()))?,
        );
        let bytes: [u8; 32] =
            secret.as_slice().try_into().map_err(|_| LedgerError::MissingKey(entity.to_owned()))?;
        let key = SigningKey::from_bytes(&bytes);
        // A key from another profile or an earlier epoch would sign events
        // that never verify: it counts as missing.
        if let Some(public) = self.registered_key(entity) {
            if public != key.verifying_key().to_bytes() {
                tracing::warn!(entity, "the keychain holds a key that is not the one this ledger has in force");
                return Err(LedgerError::MissingKey(entity.to_owned()));
            }
        }
        if let Ok(mut cache) = self.signers.write() {
            cache.insert(entity.to_owned(), key.clone());
        }
        Ok(key)
    }

    /// The public key in force for `entity`, if it has one.
    pub(crate) fn registered_key(&self, entity: &str) -> Option<[u8; 32]> {
        self.registered.read().ok().and_then(|r| r.get(entity).copied())
    }

    /// Appends `drafts` signed with `keys` for the signers they name (the
    /// keychain for the others), then caches those keys: a key epoch's new
    /// keys sign only the commit that puts them in force.
    pub(crate) async fn append_signed_with(
        &self,
        drafts: Vec<Draft>,
        keys: HashMap<String, SigningKey>,
    ) -> Result<Vec<Receipt>> {
        let receipts = self.commit_inner(drafts, &[], false, &[], &[], &keys).await?.0;
        if let Ok(mut cache) = self.signers.write() {
            cache.extend(keys);
        }
        Ok(receipts)
    }

    /// Appends one event signed by its own entity.
    pub async fn append(&self, entity: &str, body: EventBody) -> Result<Receipt> {
        let mut receipts = self.append_drafts(vec![Draft::by(entity, body)]).await?;
        receipts.pop().ok_or_else(|| LedgerError::Invalid("empty append".into()))
    }

    /// Appends events atomically: all of them, with their projections, or none.
    pub async fn append_drafts(&self, drafts: Vec<Draft>) -> Result<Vec<Receipt>> {
        self.commit(drafts, &[], false).await
    }

    /// Appends one event and queues the work it calls for in the same
    /// transaction (one flush to disk): never a message without its reply job.
    pub async fn append_and_enqueue(&self, entity: &str, body: EventBody, job: NewJob) -> Result<(Receipt, QueueItem)> {
        let (mut receipts, mut items) =
            self.commit_with(vec![Draft::by(entity, body)], &[], false, &[job], &[]).await?;
        match (receipts.pop(), items.pop()) {
            (Some(r), Some(i)) => Ok((r, i)),
            _ => Err(LedgerError::Invalid("empty append".into())),
        }
    }

    pub(crate) fn durable(&self) -> bool {
        self.durable
    }

    /// The one write path. `erase` lists payload rows deleted in the same
    /// transaction; `rebuild` replays every projection from the events after
    /// the inserts (forced when a draft is a `checkpoint_restored`).
    pub(crate) async fn commit(&self, drafts: Vec<Draft>, erase: &[i64], rebuild: bool) -> Result<Vec<Receipt>> {
        Ok(self.commit_with(drafts, erase, rebuild, &[], &[]).await?.0)
    }

    /// Appends `drafts` only if every message in `sources` still exists,
    /// checked under the writer lock that erasure also takes: what was
    /// derived from a message deleted meanwhile is never written (`None`).
    pub async fn append_drafts_citing(&self, drafts: Vec<Draft>, sources: &[String]) -> Result<Option<Vec<Receipt>>> {
        match self.commit_with(drafts, &[], false, &[], sources).await {
            Ok((receipts, _)) => Ok(Some(receipts)),
            Err(LedgerError::SourceGone(id)) => {
                tracing::info!(message = %id, "a source message was deleted meanwhile; nothing derived from it is written");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// `commit`, also queueing `jobs` in the same transaction.
    async fn commit_with(
        &self,
        drafts: Vec<Draft>,
        erase: &[i64],
        rebuild: bool,
        jobs: &[NewJob],
        sources: &[String],
    ) -> Result<(Vec<Receipt>, Vec<QueueItem>)> {
        self.commit_inner(drafts, erase, rebuild, jobs, sources, &HashMap::new()).await
    }

    async fn commit_inner(
        &self,
        drafts: Vec<Draft>,
        erase: &[i64],
        rebuild: bool,
        jobs: &[NewJob],
        sources: &[String],
        given_keys: &HashMap<String, SigningKey>,
    ) -> Result<(Vec<Receipt>, Vec<QueueItem>)> {
        let rebuild = rebuild || drafts.iter().any(|d| matches!(d.body, EventBody::CheckpointRestored { .. }));
        if drafts.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        // Keys first: a keychain failure must not leave a half-written batch.
        let mut keys: HashMap<String, SigningKey> = HashMap::new();
        for d in &drafts {
            if !keys.contains_key(&d.signer) {
                let key = match given_keys.get(&d.signer) {
                    Some(k) => k.clone(),
                    None => self.signing_key(&d.signer)?,
                };
                keys.insert(d.signer.clone(), key);
            }
        }
        let bodies: Vec<Vec<u8>> = drafts
            .iter()
            .map(|d| serde_json::to_vec(&d.body))
            .collect::<Result<_, _>>()
            .map_err(|e| LedgerError::Invalid(e.to_string()))?;
        let ts = format_ts(self.clock.now());

        let mut guard = self.lock_writer().await;
        let writer = &mut *guard;
        // Under the writer lock, so no key epoch can begin in between: a key
        // gathered above that is no longer in force (a replacement committed
        // meanwhile) would sign events that never verify. (Keys given by a
        // key epoch come into force with this very commit.)
        for (signer, key) in keys.iter().filter(|(s, _)| !given_keys.contains_key(*s)) {
            if self.registered_key(signer).is_some_and(|k| k != key.verifying_key().to_bytes()) {
                if let Ok(mut cache) = self.signers.write() {
                    cache.remove(signer);
                }
                return Err(LedgerError::MissingKey(signer.clone()));
            }
        }
        for id in sources {
            let present: Option<i64> = sqlx::query_scalar("SELECT 1 FROM messages WHERE id = ?")
                .bind(id)
                .fetch_optional(&mut writer.conn)
                .await
                .map_err(LedgerError::Load)?;
            if present.is_none() {
                return Err(LedgerError::SourceGone(id.clone()));
            }
        }
        let mut seq = writer.seq;
        let mut prev = writer.head;
        let mut headers = Vec::with_capacity(drafts.len());
        let mut hashes = Vec::with_capacity(drafts.len());
        for (d, body) in drafts.iter().zip(&bodies) {
            seq += 1;
            if let EventBody::CheckpointRestored { target_seq, .. } = d.body {
                if target_seq < 1 || target_seq >= seq {
                    return Err(LedgerError::Invalid(format!(
                        "a restore at event {seq} cannot target event {target_seq}"
                    )));
                }
            }
            let header = EventHeader {
                seq,
                id: uuid::Uuid::now_v7().to_string(),
                ts: ts.clone(),
                entity_id: d.entity_id.clone(),
                kind: d.body.kind().to_owned(),
                signer: d.signer.clone(),
                payload_hash: payload_hash(body),
                prev_hash: prev,
            };
            prev = header.hash();
            hashes.push(prev);
            headers.push(header);
        }
        // Signing is the costliest step and needs nothing from the database:
        // a large batch is signed on the signing threads while this one writes
        // the payloads and projections, then each chunk's event rows as soon as
        // its signatures arrive (see `signing`).
        let chunks: Vec<std::ops::Range<usize>> =
            (0..headers.len()).step_by(project::INSERT_CHUNK).map(|a| a..(a + project::INSERT_CHUNK).min(headers.len())).collect();
        let mut signed = Signed::start(drafts.iter().map(|d| d.signer.clone()).collect(), &hashes, keys)?;

        // Everything between BEGIN and COMMIT, so a failure anywhere (a full
        // disk fails the COMMIT itself) can reset the connection below.
        let conn = &mut writer.conn;
        let written: Result<(Vec<[u8; 64]>, Vec<QueueItem>)> = async {
            let mut tx = conn.begin().await.map_err(LedgerError::Save)?;
            for r in &chunks {
                let mut q = QueryBuilder::new("INSERT INTO payloads (seq, body) ");
                q.push_values(r.clone(), |mut b, i| {
                    b.push_bind(headers[i].seq).push_bind(&bodies[i][..]);
                });
                q.build().execute(&mut *tx).await.map_err(LedgerError::Save)?;
            }
            if !rebuild {
                let events: Vec<(&EventHeader, &EventBody)> = headers.iter().zip(&drafts).map(|(h, d)| (h, &d.body)).collect();
                project::apply_in_order(&mut tx, &events, false).await?;
            }
            let mut signatures: Vec<[u8; 64]> = Vec::with_capacity(headers.len());
            for r in &chunks {
                signatures.extend(signed.take(r.len()).await?);
                let mut q = QueryBuilder::new(
                    "INSERT INTO events (seq, id, ts, entity_id, kind, signer, payload_hash, prev_hash, hash, signature) ",
                );
                q.push_values(r.clone(), |mut b, i| {
                    let h = &headers[i];
                    b.push_bind(h.seq)
                        .push_bind(&h.id)
                        .push_bind(&h.ts)
                        .push_bind(&h.entity_id)
                        .push_bind(&h.kind)
                        .push_bind(&h.signer)
                        .push_bind(&h.payload_hash[..])
                        .push_bind(&h.prev_hash[..])
                        .push_bind(&hashes[i][..])
                        .push_bind(&signatures[i][..]);
                });
                q.build().execute(&mut *tx).await.map_err(LedgerError::Save)?;
            }
            for target in erase {
                sqlx::query("DELETE FROM payloads WHERE seq = ?")
                    .bind(target)
                    .execute(&mut *tx)
                    .await
                    .map_err(LedgerError::Save)?;
            }
            if rebuild {
                project::rebuild_all(&mut tx).await?;
            }
            let mut items = Vec::with_capacity(jobs.len());
            for job in jobs {
                items.push(crate::queue::insert_job(&mut tx, job, self.clock.now()).await?);
            }
            tx.commit().await.map_err(LedgerError::Save)?;
            if !items.is_empty() {
                self.queue_changed.notify_one();
            }
            Ok((signatures, items))
        }
        .await;
        let (signatures, items) = match written {
            Ok(w) => w,
            Err(e) => {
                self.reset_writer(writer).await;
                return Err(e);
            }
        };
        for h in &hashes {
            writer.tree.push_event(h);
        }
        self.note_keys_in_force(&drafts);

        let mut receipts = Vec::with_capacity(headers.len());
        for (i, h) in headers.iter().enumerate() {
            receipts.push(Receipt {
                seq: h.seq,
                event_id: h.id.clone(),
                kind: h.kind.clone(),
                action_hash: hex::encode(h.payload_hash),
                state_before: hex::encode(h.prev_hash),
                state_after: hex::encode(hashes[i]),
                signer: h.signer.clone(),
                signature: hex::encode(signatures[i]),
            });
        }
        writer.seq = seq;
        writer.head = prev;
        let size = writer.tree.size();
        let root = writer.tree.root();
        drop(guard);
        self.after_commit(size, root);
        Ok((receipts, items))
    }

    /// Keeps `registered` in step with the key events just committed.
    fn note_keys_in_force(&self, drafts: &[Draft]) {
        let Ok(mut registered) = self.registered.write() else { return };
        for d in drafts {
            let (entity, public) = match &d.body {
                EventBody::EntityKeyRegistered { entity_id, public_key, .. } => (entity_id, public_key),
                EventBody::EntityKeyReplaced { entity_id, new_public_key, .. } => (entity_id, new_public_key),
                _ => continue,
            };
            if let Some(k) = hex::decode(public).ok().and_then(|b| <[u8; 32]>::try_from(b.as_slice()).ok()) {
                registered.insert(entity.clone(), k);
            }
        }
    }

    /// Replaces the writer connection after a failed write. When SQLite rolls
    /// a transaction back on its own (a full disk fails the COMMIT), sqlx
    /// still counts it as open and would turn the next BEGIN into a savepoint
    /// that never commits; a fresh connection has no such state.
    pub(crate) async fn reset_writer(&self, writer: &mut Writer) {
        match connect_options(&self.path, self.durable) {
            Ok(co) => match co.connect().await {
                Ok(conn) => {
                    let old = std::mem::replace(&mut writer.conn, conn);
                    drop(old.close());
                }
                Err(e) => tracing::error!(error = %e, "could not reopen the ledger's writer connection"),
            },
            Err(e) => tracing::error!(error = %e, "could not reopen the ledger's writer connection"),
        }
    }

    /// Closes the database cleanly (the WAL is checkpointed into the file),
    /// for callers that move the file afterwards.
    pub async fn close(self) {
        close_pool(&self.pool).await;
        let writer = self.writer.into_inner();
        if let Err(e) = writer.conn.close().await {
            tracing::warn!(error = %e, "closing the ledger's writer connection");
        }
    }

    /// Current head: number of events and hash of the last one.
    pub async fn head(&self) -> (i64, String) {
        let w = self.writer.lock().await;
        (w.seq, hex::encode(w.head))
    }

    /// Rebuilds every projection table from the events alone.
    pub async fn rebuild_projections(&self) -> Result<()> {
        let mut guard = self.lock_writer().await;
        let mut tx = guard.conn.begin().await.map_err(LedgerError::Save)?;
        project::rebuild_all(&mut tx).await?;
        tx.commit().await.map_err(LedgerError::Save)?;
        Ok(())
    }

    pub(crate) async fn writer(&self) -> tokio::sync::MutexGuard<'_, Writer> {
        self.lock_writer().await
    }

    /// The writer, never left inside a transaction: no transaction spans two
    /// holders of the lock, so one still open here was rolled back by SQLite
    /// behind sqlx's back (see `reset_writer`) and the connection is replaced.
    async fn lock_writer(&self) -> tokio::sync::MutexGuard<'_, Writer> {
        let mut guard = self.writer.lock().await;
        if guard.conn.is_in_transaction() {
            tracing::warn!("the ledger's writer connection was left inside a transaction; reopening it");
            self.reset_writer(&mut guard).await;
        }
        guard
    }

    /// Exclusive access to the writer connection for non-event bookkeeping
    /// (the queue), so every write goes through one connection.
    pub(crate) async fn writer_conn(&self) -> tokio::sync::MappedMutexGuard<'_, SqliteConnection> {
        tokio::sync::MutexGuard::map(self.lock_writer().await, |w| &mut w.conn)
    }

    pub fn now(&self) -> time::OffsetDateTime {
        self.clock.now()
    }
}

/// The latest migration applied to this database (0 for a new file).
async fn schema_version(conn: &mut SqliteConnection) -> Result<i64> {
    let tracked: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations')")
            .fetch_one(&mut *conn)
            .await
            .map_err(LedgerError::Load)?;
    if !tracked {
        return Ok(0);
    }
    sqlx::query_scalar("SELECT COALESCE(MAX(version), 0) FROM _sqlx_migrations WHERE success")
        .fetch_one(&mut *conn)
        .await
        .map_err(LedgerError::Load)
}

/// Reads this database's installation id, creating it on first open. A
/// database from before installation ids (events but no id yet) adopts the
/// old per-profile keychain slot of the signed tree head, so an upgrade keeps
/// its rollback protection.
async fn installation_id(
    conn: &mut SqliteConnection,
    keys: &dyn KeyStore,
    profile_id: &str,
    seq: i64,
    clock: &dyn Clock,
) -> Result<String> {
    let existing: Option<String> = sqlx::query_scalar("SELECT id FROM installation LIMIT 1")
        .fetch_optional(&mut *conn)
        .await
        .map_err(LedgerError::Load)?;
    if let Some(id) = existing {
        return Ok(id);
    }
    let id = uuid::Uuid::now_v7().to_string();
    if seq > 0 {
        let legacy = format!("{profile_id}/sth");
        if let Some(bytes) = keys.load(&legacy)? {
            keys.store(&crate::proof::sth_account(profile_id, &id), &bytes)?;
        }
    }
    sqlx::query("INSERT INTO installation (id, created_at) VALUES (?, ?)")
        .bind(&id)
        .bind(format_ts(clock.now()))
        .execute(&mut *conn)
        .await
        .map_err(LedgerError::Save)?;
    Ok(id)
}

async fn read_profile_id(conn: &mut SqliteConnection) -> Result<String> {
    let row = sqlx::query(
        "SELECT p.body FROM events e JOIN payloads p ON p.seq = e.seq WHERE e.kind = 'ledger_created' ORDER BY e.seq LIMIT 1",
    )
    .fetch_optional(&mut *conn)
    .await
    .map_err(LedgerError::Load)?
    .ok_or(LedgerError::Corrupt { seq: 1, reason: "the ledger has no ledger_created event".into() })?;
    let body: Vec<u8> = row.get(0);
    match serde_json::from_slice::<EventBody>(&body) {
        Ok(EventBody::LedgerCreated { profile_id, .. }) => Ok(profile_id),
        _ => Err(LedgerError::Corrupt { seq: 1, reason: "unreadable ledger_created payload".into() }),
    }
}

/// Closes a pool so that every connection is really closed on return.
/// sqlx hands a dropped connection back from a spawned task; `Pool::close`
/// called before those tasks ran returns with a connection still open (sqlx
/// issue 3217): the `-wal` and `-shm` files outlive it, and a file moved
/// afterwards would leave its last writes behind. So wait (at most 5 s) until
/// every connection is back in the pool, then close it.
pub async fn close_pool(pool: &sqlx::SqlitePool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while pool.num_idle() < pool.size() as usize && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    pool.close().await;
}
