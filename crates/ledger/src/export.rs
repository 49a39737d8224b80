//! Export and import of a whole profile in one encrypted file.
//!
//! The file holds every event (headers, signatures, and the payloads that
//! were not erased), the checkpoints, and the **private signing keys** of
//! the ledger's entities, so the imported profile can keep appending under
//! the same keys. Because it holds private keys, it is always encrypted:
//! Argon2id derives a 256-bit key from the passphrase, XChaCha20-Poly1305
//! seals the content with the whole header as associated data.
//!
//! Layout, version 1 (all integers big-endian):
//! ```text
//!  0  magic "LMEXPORT"            8
//!  8  version u16                 2
//! 10  argon2 m_cost (KiB) u32     4
//! 14  argon2 t_cost u32           4
//! 18  argon2 p_cost u32           4
//! 22  salt                       16
//! 38  nonce (XChaCha20)          24
//! 62  key check                  16   SHA-256("ledgermind/export/check\0" || key)[..16]
//! 78  header checksum            16   SHA-256(bytes 0..78)[..16]
//! 94  ciphertext || 16-byte tag       AAD = bytes 0..94
//! ```
//! The key check tells a wrong passphrase (`EXPORT_BAD_PASSPHRASE`) from a
//! damaged file (`EXPORT_DAMAGED`); it reveals nothing the tag does not.
//! The keys are optional (`ExportOptions::include_keys`): an export without
//! them needs a new key epoch where it is imported.
//! Documents are not part of the profile yet; provider API keys are not
//! exported (re-enter them on the new machine).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use argon2::{Algorithm, Argon2, Params, Version};
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use ed25519_dalek::SigningKey;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sqlx::{ConnectOptions, Connection, QueryBuilder, Row};
use zeroize::{Zeroize, Zeroizing};

use crate::body::EventBody;
use crate::error::LedgerError;
use crate::keys::KeyStore;
use crate::project;
use crate::store::{connect_options, format_ts, Ledger, LedgerOptions};
use crate::verify::{verify_events, RawEvent};
use crate::Result;

const MAGIC: &[u8; 8] = b"LMEXPORT";
/// The newest export format this build writes and reads.
pub const EXPORT_VERSION: u16 = 1;
const HEADER_LEN: usize = 94;
const M_COST: u32 = 19 * 1024;
const T_COST: u32 = 2;
const P_COST: u32 = 1;

/// What goes into an export besides the events and checkpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportOptions {
    /// The private signing keys in force, so the profile keeps signing on
    /// the new machine under the same keys (no new key epoch there).
    /// Without them the importing machine starts a new epoch.
    pub include_keys: bool,
}

impl Default for ExportOptions {
    fn default() -> Self {
        Self { include_keys: true }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExportSummary {
    pub events: u64,
    pub erased_payloads: u64,
    pub keys: u64,
    pub bytes: u64,
}

#[derive(Serialize, Deserialize)]
struct ExportEvent {
    seq: i64,
    id: String,
    ts: String,
    entity_id: String,
    kind: String,
    signer: String,
    payload_hash: String,
    prev_hash: String,
    hash: String,
    signature: String,
    /// The exact payload bytes (UTF-8 JSON), None when erased.
    body: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct ExportCheckpoint {
    slot: i64,
    seq: i64,
    name: String,
    created_at: String,
    state_digest: String,
}

#[derive(Serialize, Deserialize)]
struct Plain {
    format: u16,
    profile_id: String,
    exported_at: String,
    events: Vec<ExportEvent>,
    checkpoints: Vec<ExportCheckpoint>,
    /// entity id -> Ed25519 secret key (hex).
    keys: HashMap<String, String>,
}

impl Drop for Plain {
    fn drop(&mut self) {
        for v in self.keys.values_mut() {
            v.zeroize();
        }
    }
}

fn derive(passphrase: &str, salt: &[u8], m: u32, t: u32, p: u32) -> Result<Zeroizing<[u8; 32]>> {
    let params = Params::new(m, t, p, Some(32)).map_err(|e| LedgerError::ExportDamaged(format!("bad key parameters: {e}")))?;
    let mut key = Zeroizing::new([0u8; 32]);
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
        .hash_password_into(passphrase.as_bytes(), salt, &mut key[..])
        .map_err(|e| LedgerError::ExportDamaged(format!("key derivation failed: {e}")))?;
    Ok(key)
}

fn key_check(key: &[u8; 32]) -> [u8; 16] {
    let d = Sha256::new().chain_update(b"ledgermind/export/check\0").chain_update(key).finalize();
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}

fn checksum(bytes: &[u8]) -> [u8; 16] {
    let d = Sha256::digest(bytes);
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}

fn seal(plain: &[u8], passphrase: &str) -> Result<Vec<u8>> {
    let mut salt = [0u8; 16];
    let mut nonce = [0u8; 24];
    rand::rngs::OsRng.fill_bytes(&mut salt);
    rand::rngs::OsRng.fill_bytes(&mut nonce);
    let key = derive(passphrase, &salt, M_COST, T_COST, P_COST)?;
    let mut out = Vec::with_capacity(HEADER_LEN + plain.len() + 16);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&EXPORT_VERSION.to_be_bytes());
    for v in [M_COST, T_COST, P_COST] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    out.extend_from_slice(&salt);
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&key_check(&key));
    let sum = checksum(&out);
    out.extend_from_slice(&sum);
    let cipher = XChaCha20Poly1305::new(key.as_ref().into());
    let ct = cipher
        .encrypt(XNonce::from_slice(&nonce), Payload { msg: plain, aad: &out })
        .map_err(|_| LedgerError::Invalid("encryption failed".into()))?;
    out.extend_from_slice(&ct);
    Ok(out)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(x)
}

/// Checks the header and decrypts. Errors name what is wrong.
fn open_sealed(file: &[u8], passphrase: &str) -> Result<Zeroizing<Vec<u8>>> {
    if file.len() < 10 || &file[..8] != MAGIC {
        return Err(LedgerError::ExportDamaged("this is not a Ledgermind export file".into()));
    }
    let version = u16::from_be_bytes([file[8], file[9]]);
    if version > EXPORT_VERSION {
        return Err(LedgerError::ExportNewerVersion(version));
    }
    if version == 0 || file.len() < HEADER_LEN + 16 {
        return Err(LedgerError::ExportDamaged("the header is truncated or invalid".into()));
    }
    let header = &file[..HEADER_LEN];
    if checksum(&header[..78]) != header[78..94] {
        return Err(LedgerError::ExportDamaged("the header checksum does not match".into()));
    }
    let (m, t, p) = (u32_at(header, 10), u32_at(header, 14), u32_at(header, 18));
    if m > 4 * 1024 * 1024 || t > 64 || p > 64 {
        return Err(LedgerError::ExportDamaged("key parameters out of range".into()));
    }
    let key = derive(passphrase, &header[22..38], m, t, p)?;
    if key_check(&key) != header[62..78] {
        return Err(LedgerError::ExportBadPassphrase);
    }
    let cipher = XChaCha20Poly1305::new(key.as_ref().into());
    let plain = cipher
        .decrypt(XNonce::from_slice(&header[38..62]), Payload { msg: &file[HEADER_LEN..], aad: header })
        .map_err(|_| LedgerError::ExportDamaged("the content fails its integrity check".into()))?;
    Ok(Zeroizing::new(plain))
}

fn unhex(s: &str, seq: i64) -> Result<Vec<u8>> {
    hex::decode(s).map_err(|_| LedgerError::ExportDamaged(format!("event {seq} has a field that is not hex")))
}

impl Ledger {
    /// Writes the whole profile, encrypted with `passphrase`, to `path`
    /// (via a temporary file and a rename: never half a file).
    pub async fn export_profile(&self, path: &Path, passphrase: &str) -> Result<ExportSummary> {
        self.export_profile_with(path, passphrase, ExportOptions::default()).await
    }

    /// `export_profile`, choosing whether the private keys go along.
    pub async fn export_profile_with(&self, path: &Path, passphrase: &str, options: ExportOptions) -> Result<ExportSummary> {
        if passphrase.chars().count() < 8 {
            return Err(LedgerError::Invalid("the export passphrase must have at least 8 characters".into()));
        }
        let rows = sqlx::query(&format!("{} ORDER BY e.seq", crate::query::EVENTS_WITH_PAYLOADS))
        .fetch_all(self.pool())
        .await
        .map_err(LedgerError::Load)?;
        let mut events = Vec::with_capacity(rows.len());
        let mut keys = HashMap::new();
        let mut erased = 0u64;
        for r in &rows {
            let seq: i64 = r.get(0);
            let body: Option<Vec<u8>> = r.get(10);
            if body.is_none() {
                erased += 1;
            }
            let body = body
                .map(String::from_utf8)
                .transpose()
                .map_err(|_| LedgerError::Corrupt { seq, reason: "payload is not UTF-8".into() })?;
            if options.include_keys && r.get::<String, _>(4) == "entity_key_registered" {
                if let Some(Ok(EventBody::EntityKeyRegistered { entity_id, .. })) =
                    body.as_deref().map(serde_json::from_str::<EventBody>)
                {
                    // The key in force only (a key epoch keeps the account).
                    match self.signing_key(&entity_id) {
                        Ok(secret) => {
                            keys.insert(entity_id, hex::encode(secret.to_bytes()));
                        }
                        Err(LedgerError::MissingKey(_)) => {
                            tracing::warn!(entity = %entity_id, "no private key in the keychain; not exported")
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
            events.push(ExportEvent {
                seq,
                id: r.get(1),
                ts: r.get(2),
                entity_id: r.get(3),
                kind: r.get(4),
                signer: r.get(5),
                payload_hash: hex::encode(r.get::<Vec<u8>, _>(6)),
                prev_hash: hex::encode(r.get::<Vec<u8>, _>(7)),
                hash: hex::encode(r.get::<Vec<u8>, _>(8)),
                signature: hex::encode(r.get::<Vec<u8>, _>(9)),
                body,
            });
        }
        drop(rows);
        if options.include_keys && !keys.contains_key(crate::store::HUMAN_ENTITY) {
            return Err(LedgerError::MissingKey(crate::store::HUMAN_ENTITY.into()));
        }
        let checkpoints = self
            .checkpoints()
            .await?
            .into_iter()
            .map(|c| ExportCheckpoint {
                slot: i64::from(c.slot),
                seq: c.seq,
                name: c.name,
                created_at: c.created_at,
                state_digest: c.state_digest,
            })
            .collect();
        let n = events.len() as u64;
        let nkeys = keys.len() as u64;
        let plain = Plain {
            format: EXPORT_VERSION,
            profile_id: self.profile_id().to_owned(),
            exported_at: format_ts(self.now()),
            events,
            checkpoints,
            keys,
        };
        let passphrase = passphrase.to_owned();
        let path = path.to_path_buf();
        let bytes = tokio::task::spawn_blocking(move || -> Result<u64> {
            let json = Zeroizing::new(serde_json::to_vec(&plain).map_err(|e| LedgerError::Invalid(e.to_string()))?);
            drop(plain);
            let sealed = seal(&json, &passphrase)?;
            let tmp = path.with_extension("partial");
            let write = || -> std::io::Result<()> {
                use std::io::Write;
                let mut f = std::fs::File::create(&tmp)?;
                f.write_all(&sealed)?;
                f.sync_all()?;
                std::fs::rename(&tmp, &path)
            };
            write().map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                LedgerError::DataDir(format!("cannot write {}: {e}", path.display()))
            })?;
            Ok(sealed.len() as u64)
        })
        .await
        .map_err(|e| LedgerError::Invalid(format!("export task failed: {e}")))??;
        Ok(ExportSummary { events: n, erased_payloads: erased, keys: nkeys, bytes })
    }
}

/// Imports an export file into an empty home (`opts.path` must not exist).
/// Everything is checked first — passphrase, integrity, the whole chain and
/// its signatures, the keys against their registrations — then the database
/// is written to a temporary file and renamed into place, the keys stored
/// in the keychain, and the ledger opened. On any error nothing changes.
pub async fn import_profile(
    opts: LedgerOptions,
    keys: Arc<dyn KeyStore>,
    file: &Path,
    passphrase: &str,
) -> Result<Ledger> {
    let target = opts.path.clone();
    for p in [target.clone(), with_suffix(&target, "-wal")] {
        if p.exists() {
            return Err(LedgerError::ImportTargetNotEmpty(p.display().to_string()));
        }
    }
    let bytes = std::fs::read(file).map_err(|e| LedgerError::DataDir(format!("cannot read {}: {e}", file.display())))?;
    let passphrase = passphrase.to_owned();
    // Decrypt and verify off the async threads (Argon2 and signatures).
    let (plain, raw) = tokio::task::spawn_blocking(move || -> Result<(Plain, Vec<RawEvent>)> {
        let json = open_sealed(&bytes, &passphrase)?;
        let plain: Plain = serde_json::from_slice(&json)
            .map_err(|e| LedgerError::ExportDamaged(format!("the content is unreadable: {e}")))?;
        if plain.format > EXPORT_VERSION {
            return Err(LedgerError::ExportNewerVersion(plain.format));
        }
        let mut raw = Vec::with_capacity(plain.events.len());
        for e in &plain.events {
            raw.push(RawEvent {
                seq: e.seq,
                id: e.id.clone(),
                ts: e.ts.clone(),
                entity_id: e.entity_id.clone(),
                kind: e.kind.clone(),
                signer: e.signer.clone(),
                payload_hash: unhex(&e.payload_hash, e.seq)?,
                prev_hash: unhex(&e.prev_hash, e.seq)?,
                hash: unhex(&e.hash, e.seq)?,
                signature: unhex(&e.signature, e.seq)?,
                body: e.body.as_ref().map(|b| b.as_bytes().to_vec()),
            });
        }
        if raw.is_empty() {
            return Err(LedgerError::ExportDamaged("the export holds no events".into()));
        }
        match verify_events(&raw) {
            Ok(None) => {}
            Ok(Some(f)) | Err(f) => {
                return Err(LedgerError::ExportDamaged(format!("event {} does not verify: {}", f.seq, f.reason)))
            }
        }
        // Every exported key must be the one its entity registered.
        let mut registered = HashMap::new();
        for e in &raw {
            match e.body.as_deref().map(serde_json::from_slice::<EventBody>) {
                Some(Ok(EventBody::EntityKeyRegistered { entity_id, public_key, .. })) => {
                    registered.insert(entity_id, public_key);
                }
                Some(Ok(EventBody::EntityKeyReplaced { entity_id, new_public_key, .. })) => {
                    registered.insert(entity_id, new_public_key);
                }
                _ => {}
            }
        }
        for (entity, secret) in &plain.keys {
            let bytes: [u8; 32] = Zeroizing::new(hex::decode(secret).unwrap_or_default())
                .as_slice()
                .try_into()
                .map_err(|_| LedgerError::ExportDamaged(format!("the key of {entity} is malformed")))?;
            let public = hex::encode(SigningKey::from_bytes(&bytes).verifying_key().to_bytes());
            if registered.get(entity) != Some(&public) {
                return Err(LedgerError::ExportDamaged(format!("the key of {entity} is not the one its ledger registered")));
            }
        }
        Ok((plain, raw))
    })
    .await
    .map_err(|e| LedgerError::Invalid(format!("import task failed: {e}")))??;

    if let Some(dir) = target.parent() {
        std::fs::create_dir_all(dir).map_err(|e| LedgerError::DataDir(format!("{}: {e}", dir.display())))?;
    }
    let tmp = with_suffix(&target, ".importing");
    remove_db_files(&tmp);
    if let Err(e) = write_db(&tmp, &raw, &plain.checkpoints).await {
        remove_db_files(&tmp);
        return Err(e);
    }
    drop(raw);
    for (entity, secret) in &plain.keys {
        let secret = Zeroizing::new(hex::decode(secret).unwrap_or_default());
        if let Err(e) = keys.store(&format!("{}/{}", plain.profile_id, entity), &secret) {
            remove_db_files(&tmp);
            return Err(e.into());
        }
    }
    if let Err(e) = std::fs::rename(&tmp, &target) {
        remove_db_files(&tmp);
        return Err(LedgerError::DataDir(format!("cannot move the imported database into place: {e}")));
    }
    remove_db_files(&tmp);
    let ledger = Ledger::open(opts, keys).await?;
    // This copy's head is now the one to hold the database to.
    let sth = ledger.signed_tree_head().await?;
    ledger.force_store_sth(&sth)?;
    Ok(ledger)
}

fn with_suffix(p: &Path, suffix: &str) -> std::path::PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(suffix);
    s.into()
}

fn remove_db_files(p: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let _ = std::fs::remove_file(with_suffix(p, suffix));
    }
}

async fn write_db(path: &Path, raw: &[RawEvent], checkpoints: &[ExportCheckpoint]) -> Result<()> {
    let mut conn = connect_options(path, true)?.connect().await.map_err(LedgerError::Save)?;
    sqlx::migrate!("./migrations").run(&mut conn).await?;
    let mut tx = conn.begin().await.map_err(LedgerError::Save)?;
    for chunk in raw.chunks(400) {
        let mut q = QueryBuilder::new(
            "INSERT INTO events (seq, id, ts, entity_id, kind, signer, payload_hash, prev_hash, hash, signature) ",
        );
        q.push_values(chunk, |mut b, e| {
            b.push_bind(e.seq)
                .push_bind(&e.id)
                .push_bind(&e.ts)
                .push_bind(&e.entity_id)
                .push_bind(&e.kind)
                .push_bind(&e.signer)
                .push_bind(&e.payload_hash[..])
                .push_bind(&e.prev_hash[..])
                .push_bind(&e.hash[..])
                .push_bind(&e.signature[..]);
        });
        q.build().execute(&mut *tx).await.map_err(LedgerError::Save)?;
        let with_body: Vec<&RawEvent> = chunk.iter().filter(|e| e.body.is_some()).collect();
        if with_body.is_empty() {
            continue;
        }
        let mut q = QueryBuilder::new("INSERT INTO payloads (seq, body) ");
        q.push_values(with_body, |mut b, e| {
            b.push_bind(e.seq).push_bind(e.body.as_deref().unwrap_or_default());
        });
        q.build().execute(&mut *tx).await.map_err(LedgerError::Save)?;
    }
    project::rebuild_all(&mut tx).await?;
    for c in checkpoints {
        sqlx::query("INSERT INTO checkpoints (slot, seq, name, created_at, state_digest) VALUES (?, ?, ?, ?, ?)")
            .bind(c.slot)
            .bind(c.seq)
            .bind(&c.name)
            .bind(&c.created_at)
            .bind(&c.state_digest)
            .execute(&mut *tx)
            .await
            .map_err(|_| LedgerError::ExportDamaged(format!("checkpoint slot {} is invalid", c.slot)))?;
    }
    tx.commit().await.map_err(LedgerError::Save)?;
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(&mut conn).await.map_err(LedgerError::Save)?;
    conn.close().await.map_err(LedgerError::Save)?;
    Ok(())
}
