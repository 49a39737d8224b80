//! Signed tree heads and inclusion proofs.
//!
//! The ledger keeps an RFC 6962 Merkle tree over its event hashes (see
//! `merkle`). A *signed tree head* (STH) is `(size, root, ts)` signed by the
//! human's device key over
//! `b"ledgermind/sth/v1\0" || size as u64 big-endian || root (32 bytes) || ts (UTF-8)`.
//!
//! The latest STH is also written to the keychain (account
//! `{profile}/sth/{installation}`, one per copy of the database),
//! outside the database: `verify` compares it with the events, so rolling
//! the database back to an older copy, or cutting off its tail, is detected.
//! It is published in the background at most once a second after appends
//! (never on the append's critical path), and synchronously by
//! [`Ledger::publish_sth`] (checkpoints, erasure, export, shutdown).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ed25519_dalek::{Signature, Signer as _, SigningKey, Verifier as _, VerifyingKey};
use serde::{Deserialize, Serialize};

use crate::body::EventBody;
use crate::error::LedgerError;
use crate::event::HASH_LEN;
use crate::keys::KeyStore;
use crate::merkle::{audit_path, leaf_hash, root_from_path, Frontier, Hash};
use crate::store::{format_ts, Ledger, HUMAN_ENTITY};
use crate::verify::{RawEvent, VerifyFailure};
use crate::Result;

const STH_DOMAIN: &[u8] = b"ledgermind/sth/v1\0";
const PUBLISH_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedTreeHead {
    pub size: u64,
    /// Merkle root, hex.
    pub root: String,
    pub ts: String,
    /// Ed25519 signature by the human's device key, hex.
    pub signature: String,
}

#[derive(Debug, Default)]
pub(crate) struct SthCache {
    latest: Option<SignedTreeHead>,
    last_publish: Option<Instant>,
    /// Serialises keychain writes and never lets the stored head go back.
    published: Arc<std::sync::Mutex<u64>>,
    /// The keychain's head does not match this database (rollback, cut
    /// tail, or another copy): never overwrite the evidence.
    blocked: bool,
}

impl SthCache {
    pub(crate) fn blocked(blocked: bool) -> Self {
        Self { blocked, ..Self::default() }
    }
}

/// The signed head stored in the keychain, if it is there and readable.
/// The keychain account holding the latest signed tree head of one copy of a
/// profile: per installation, so two copies on one machine (an import beside
/// the original) never hold each other to the wrong head.
pub(crate) fn sth_account(profile_id: &str, installation_id: &str) -> String {
    format!("{profile_id}/sth/{installation_id}")
}

pub(crate) fn load_sth(keys: &dyn KeyStore, account: &str) -> Option<SignedTreeHead> {
    keys.load(account).ok().flatten().and_then(|b| serde_json::from_slice(&b).ok())
}

/// The bytes an STH signature covers.
pub fn sth_message(size: u64, root: &[u8], ts: &str) -> Vec<u8> {
    let mut m = Vec::with_capacity(STH_DOMAIN.len() + 8 + root.len() + ts.len());
    m.extend_from_slice(STH_DOMAIN);
    m.extend_from_slice(&size.to_be_bytes());
    m.extend_from_slice(root);
    m.extend_from_slice(ts.as_bytes());
    m
}

/// An inclusion proof for one event, self-contained: checking it needs
/// nothing but this JSON (see [`check_proof`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proof {
    pub seq: i64,
    /// `seq - 1`.
    pub leaf_index: u64,
    pub tree_size: u64,
    /// The event's hash (hex): SHA-256 of its canonical header.
    pub event_hash: String,
    /// `SHA-256(0x00 || event_hash)`, hex.
    pub leaf_hash: String,
    /// Sibling hashes from the leaf up, hex.
    pub audit_path: Vec<String>,
    pub root: String,
    pub sth_ts: String,
    pub sth_signature: String,
    /// The human device key that signed the tree head, hex.
    pub public_key: String,
}

fn sign_sth(key: &SigningKey, size: u64, root: &Hash, ts: String) -> SignedTreeHead {
    let sig = key.sign(&sth_message(size, root, &ts));
    SignedTreeHead { size, root: hex::encode(root), ts, signature: hex::encode(sig.to_bytes()) }
}

fn store_sth(keys: &dyn KeyStore, account: &str, published: &std::sync::Mutex<u64>, sth: &SignedTreeHead) -> Result<()> {
    let mut done = published.lock().unwrap_or_else(|e| e.into_inner());
    if *done > sth.size {
        return Ok(());
    }
    // Never replace a larger head (another process, or a rolled-back file).
    if load_sth(keys, account).is_some_and(|k| k.size > sth.size) {
        return Err(LedgerError::Corrupt {
            seq: sth.size as i64 + 1,
            reason: "the keychain holds a larger signed tree head than this ledger; run verify".into(),
        });
    }
    let bytes = serde_json::to_vec(sth).map_err(|e| LedgerError::Invalid(e.to_string()))?;
    keys.store(account, &bytes)?;
    *done = sth.size;
    Ok(())
}

fn unhex32(s: &str, what: &str) -> Result<Hash> {
    hex::decode(s)
        .ok()
        .and_then(|v| <[u8; HASH_LEN]>::try_from(v.as_slice()).ok())
        .ok_or_else(|| LedgerError::ProofInvalid(format!("{what} is not 32 bytes of hex")))
}

/// Checks an inclusion proof with nothing but the proof itself.
///
/// The algorithm, in a few lines of any language (SHA-256 and Ed25519):
/// 1. `leaf = SHA256(0x00 || event_hash)`; it must equal `leaf_hash`.
/// 2. `fn = leaf_index, sn = tree_size - 1, r = leaf` (and `leaf_index < tree_size`).
///    For each `p` in `audit_path`: fail if `sn == 0`; if `fn` is odd or
///    `fn == sn`: `r = SHA256(0x01 || p || r)`, then while `fn` is even and
///    not 0, shift `fn` and `sn` right by one; else `r = SHA256(0x01 || r || p)`.
///    Then shift `fn` and `sn` right by one.
///    At the end `sn` must be 0 and `r` must equal `root` (RFC 9162 §2.1.3.2).
/// 3. The Ed25519 signature `sth_signature` by `public_key` must verify over
///    `b"ledgermind/sth/v1\0" || u64_be(tree_size) || root || utf8(sth_ts)`.
///
/// `public_key` should be compared with the human key registered in event 1
/// of the ledger (or one you trust); the proof says "this event is the
/// `seq`-th of a ledger of `tree_size` events whose head that key signed".
pub fn check_proof(p: &Proof) -> Result<()> {
    let event_hash = unhex32(&p.event_hash, "event_hash")?;
    let leaf = leaf_hash(&event_hash);
    if hex::encode(leaf) != p.leaf_hash.to_lowercase() {
        return Err(LedgerError::ProofInvalid("leaf_hash is not SHA-256(0x00 || event_hash)".into()));
    }
    if p.seq < 1 || p.leaf_index != (p.seq - 1) as u64 {
        return Err(LedgerError::ProofInvalid("leaf_index must be seq - 1".into()));
    }
    let path = p.audit_path.iter().map(|h| unhex32(h, "an audit path entry")).collect::<Result<Vec<_>>>()?;
    let root = unhex32(&p.root, "root")?;
    match root_from_path(leaf, p.leaf_index, p.tree_size, &path) {
        Some(r) if r == root => {}
        _ => return Err(LedgerError::ProofInvalid("the audit path does not lead to the root".into())),
    }
    let key: [u8; 32] = hex::decode(&p.public_key)
        .ok()
        .and_then(|v| v.try_into().ok())
        .ok_or_else(|| LedgerError::ProofInvalid("public_key is not 32 bytes of hex".into()))?;
    let key = VerifyingKey::from_bytes(&key).map_err(|_| LedgerError::ProofInvalid("public_key is invalid".into()))?;
    let sig: [u8; 64] = hex::decode(&p.sth_signature)
        .ok()
        .and_then(|v| v.try_into().ok())
        .ok_or_else(|| LedgerError::ProofInvalid("sth_signature is not 64 bytes of hex".into()))?;
    key.verify(&sth_message(p.tree_size, &root, &p.sth_ts), &Signature::from_bytes(&sig))
        .map_err(|_| LedgerError::ProofInvalid("the tree head signature does not verify".into()))
}

impl Ledger {
    fn sth_account(&self) -> String {
        sth_account(self.profile_id(), self.installation_id())
    }

    /// Called after every commit with the new tree: publishes the STH to the
    /// keychain in the background, at most once a second.
    pub(crate) fn after_commit(&self, size: u64, root: Hash) {
        let published = {
            let mut cache = self.sth.lock().unwrap_or_else(|e| e.into_inner());
            if cache.blocked || cache.last_publish.is_some_and(|t| t.elapsed() < PUBLISH_EVERY) {
                return;
            }
            cache.last_publish = Some(Instant::now());
            cache.published.clone()
        };
        let Ok(key) = self.signing_key(HUMAN_ENTITY) else { return };
        let sth = sign_sth(&key, size, &root, format_ts(self.now()));
        let keys = self.keystore().clone();
        let account = self.sth_account();
        let Ok(handle) = tokio::runtime::Handle::try_current() else { return };
        drop(handle.spawn_blocking(move || {
            if let Err(e) = store_sth(keys.as_ref(), &account, &published, &sth) {
                tracing::warn!(error = %e, "could not publish the signed tree head to the keychain");
            }
        }));
    }

    /// The signed head of the tree as it is now (cached while nothing changes).
    pub async fn signed_tree_head(&self) -> Result<SignedTreeHead> {
        let (size, root) = {
            let w = self.writer().await;
            (w.tree.size(), w.tree.root())
        };
        if let Some(sth) = self.sth.lock().unwrap_or_else(|e| e.into_inner()).latest.clone() {
            if sth.size == size {
                return Ok(sth);
            }
        }
        let key = self.signing_key(HUMAN_ENTITY)?;
        let sth = sign_sth(&key, size, &root, format_ts(self.now()));
        self.sth.lock().unwrap_or_else(|e| e.into_inner()).latest = Some(sth.clone());
        Ok(sth)
    }

    /// Signs the current head and writes it to the keychain now.
    pub async fn publish_sth(&self) -> Result<SignedTreeHead> {
        let sth = self.signed_tree_head().await?;
        let (published, blocked) = {
            let c = self.sth.lock().unwrap_or_else(|e| e.into_inner());
            (c.published.clone(), c.blocked)
        };
        if blocked {
            return Err(LedgerError::Corrupt {
                seq: sth.size as i64,
                reason: "this database does not match the signed tree head in the keychain; run verify".into(),
            });
        }
        let keys = self.keystore().clone();
        let account = self.sth_account();
        let out = sth.clone();
        tokio::task::spawn_blocking(move || store_sth(keys.as_ref(), &account, &published, &sth))
            .await
            .map_err(|e| LedgerError::Invalid(format!("publishing task failed: {e}")))??;
        Ok(out)
    }

    /// Replaces the keychain's head unconditionally (import of a profile).
    pub(crate) fn force_store_sth(&self, sth: &SignedTreeHead) -> Result<()> {
        let bytes = serde_json::to_vec(sth).map_err(|e| LedgerError::Invalid(e.to_string()))?;
        self.keystore().store(&self.sth_account(), &bytes)?;
        let mut c = self.sth.lock().unwrap_or_else(|e| e.into_inner());
        c.blocked = false;
        if let Ok(mut p) = c.published.lock() {
            *p = sth.size;
        }
        Ok(())
    }

    /// The signed head last written to the keychain, if any.
    pub fn keychain_sth(&self) -> Result<Option<SignedTreeHead>> {
        let Some(bytes) = self.keystore().load(&self.sth_account())? else { return Ok(None) };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| LedgerError::Invalid(format!("the signed tree head in the keychain is unreadable: {e}")))
    }

    /// Inclusion proof of event `seq` in the current tree, with a fresh STH.
    pub async fn inclusion_proof(&self, seq: i64) -> Result<Proof> {
        let sth = self.signed_tree_head().await?;
        if seq < 1 || seq as u64 > sth.size {
            return Err(LedgerError::EventNotFound(seq));
        }
        let hashes: Vec<Vec<u8>> = sqlx::query_scalar("SELECT hash FROM events WHERE seq <= ? ORDER BY seq")
            .bind(sth.size as i64)
            .fetch_all(self.pool())
            .await
            .map_err(LedgerError::Load)?;
        let leaves: Vec<Hash> = hashes.iter().map(|h| leaf_hash(h)).collect();
        let m = (seq - 1) as usize;
        let path = audit_path(&leaves, m);
        let root = root_from_path(leaves[m], m as u64, leaves.len() as u64, &path);
        if root.map(hex::encode).as_deref() != Some(sth.root.as_str()) || leaves.len() as u64 != sth.size {
            return Err(LedgerError::Corrupt { seq, reason: "the stored events do not match the tree head".into() });
        }
        let public_key = hex::encode(self.signing_key(HUMAN_ENTITY)?.verifying_key().to_bytes());
        Ok(Proof {
            seq,
            leaf_index: m as u64,
            tree_size: sth.size,
            event_hash: hex::encode(&hashes[m]),
            leaf_hash: hex::encode(leaves[m]),
            audit_path: path.iter().map(hex::encode).collect(),
            root: sth.root,
            sth_ts: sth.ts,
            sth_signature: sth.signature,
            public_key,
        })
    }
}

/// Compares the keychain's signed head with the events: a head larger than
/// the ledger, or a different root at its size, means the database was
/// rolled back, cut, or replaced.
pub(crate) fn check_sth(sth: &SignedTreeHead, events: &[RawEvent]) -> Option<VerifyFailure> {
    let n = events.len() as u64;
    // Any human key in force over the events the head covers may have
    // signed it: a new key epoch re-signs the head with the new key.
    let covered = &events[..(sth.size.min(n) as usize)];
    let human_keys: Vec<[u8; 32]> = covered
        .iter()
        .filter(|e| e.kind == "entity_key_registered" || e.kind == "entity_key_replaced")
        .filter_map(|e| match e.body.as_deref().map(serde_json::from_slice::<EventBody>) {
            Some(Ok(EventBody::EntityKeyRegistered { entity_id, public_key, .. })) if entity_id == HUMAN_ENTITY => {
                Some(public_key)
            }
            Some(Ok(EventBody::EntityKeyReplaced { entity_id, new_public_key, .. })) if entity_id == HUMAN_ENTITY => {
                Some(new_public_key)
            }
            _ => None,
        })
        .filter_map(|k| hex::decode(k).ok().and_then(|b| <[u8; 32]>::try_from(b.as_slice()).ok()))
        .collect();
    let sig_ok = (|| {
        let root = hex::decode(&sth.root).ok()?;
        let sig: [u8; 64] = hex::decode(&sth.signature).ok()?.try_into().ok()?;
        let message = sth_message(sth.size, &root, &sth.ts);
        human_keys
            .iter()
            .filter_map(|k| VerifyingKey::from_bytes(k).ok())
            .any(|key| key.verify(&message, &Signature::from_bytes(&sig)).is_ok())
            .then_some(())
    })()
    .is_some();
    if !sig_ok {
        return Some(VerifyFailure {
            seq: sth.size.min(n.max(1)) as i64,
            reason: "the signed tree head in the keychain does not verify with this ledger's human key (another profile's ledger, or a forged head)".into(),
        });
    }
    if sth.size > n {
        return Some(VerifyFailure {
            seq: n as i64 + 1,
            reason: format!(
                "the ledger ends at event {n} but the signed tree head in the keychain covers {} events: the database was rolled back to an older copy or its tail was cut off (events {}..{} are missing)",
                sth.size,
                n + 1,
                sth.size
            ),
        });
    }
    let mut tree = Frontier::default();
    for e in events.iter().take(sth.size as usize) {
        tree.push_event(&e.hash);
    }
    if hex::encode(tree.root()) != sth.root {
        return Some(VerifyFailure {
            seq: sth.size as i64,
            reason: format!(
                "events 1..{} differ from those covered by the signed tree head in the keychain: the database was replaced by another copy",
                sth.size
            ),
        });
    }
    None
}
