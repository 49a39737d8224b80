//! Verification: recompute the chain, the payload hashes and every signature,
//! and name the first event that does not hold.
//!
//! Every event is checked with its signer's key *in force at that event*.
//! The trust rule for keys, replayed from the first event:
//! - Event 1 registers the human's device key, signed by itself (bootstrap).
//! - Any later `entity_key_registered` introduces a *new* entity and must be
//!   signed by the human key in force; an entity that has a key never gets
//!   another one this way.
//! - `entity_key_replaced` starts a new key epoch for one entity. It must
//!   name the key in force as its old key (so it cannot reach back and
//!   re-key an earlier epoch), carry the new key's proof of possession, and
//!   be signed under the human's authority: by the human key in force
//!   (`key_in_force`: the human endorses a persona's new key, or hands its
//!   own epoch on), or, for the human's own key only, by the new key itself
//!   (`new_key`, self-certified: the old private key is gone and nothing
//!   older can vouch). A persona's key is never self-certified.
//! - Events before a boundary verify only with the old key, events after it
//!   only with the new one: re-signing old events with a new key fails.
//!
//! A self-certified epoch is accepted because it is the only way back from
//! a lost human key, so verify always reports it (`key_epochs`). It rests on
//! the database alone: someone able to write the file could cut the history
//! at a boundary of their own and re-sign everything after it. What catches
//! that is outside the database: the signed tree head in the keychain (any
//! human key of the ledger may have signed it), receipts and exports.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use ed25519_dalek::{Signature, VerifyingKey};
use serde::Serialize;
use sqlx::Row;

use crate::body::{EventBody, KeyAuthority};
use crate::error::LedgerError;
use crate::event::{payload_hash, to_hash, EventHeader, HASH_LEN};
use crate::store::{Ledger, HUMAN_ENTITY};
use crate::Result;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifyFailure {
    pub seq: i64,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerifyReport {
    pub events: u64,
    pub failure: Option<VerifyFailure>,
    pub millis: f64,
    /// Size of the signed tree head found in the keychain and checked
    /// against the events (rollback / truncation detection), if any.
    pub sth_size: Option<u64>,
    /// Why the keychain head could not be checked, when it could not.
    pub sth_note: Option<String>,
    /// Every key epoch boundary, oldest first: where a signing key was
    /// replaced, and under whose authority.
    pub key_epochs: Vec<KeyEpoch>,
}

/// One key epoch boundary as verify found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyEpoch {
    pub seq: i64,
    pub ts: String,
    pub entity_id: String,
    pub old_public_key: String,
    pub new_public_key: String,
    pub reason: String,
    /// Signed by the new key itself (the human's old key was lost) rather
    /// than endorsed by the human key in force.
    pub self_certified: bool,
}

impl VerifyReport {
    pub fn ok(&self) -> bool {
        self.failure.is_none()
    }
}

/// One event as stored, bytes untouched.
#[derive(Debug, Clone)]
pub(crate) struct RawEvent {
    pub seq: i64,
    pub id: String,
    pub ts: String,
    pub entity_id: String,
    pub kind: String,
    pub signer: String,
    pub payload_hash: Vec<u8>,
    pub prev_hash: Vec<u8>,
    pub hash: Vec<u8>,
    pub signature: Vec<u8>,
    pub body: Option<Vec<u8>>,
}

impl Ledger {
    pub async fn verify(&self) -> Result<VerifyReport> {
        let started = Instant::now();
        let problems: Vec<String> = sqlx::query_scalar("PRAGMA quick_check")
            .fetch_all(self.pool())
            .await
            .map_err(LedgerError::Load)?;
        if problems.iter().any(|p| p != "ok") {
            return Ok(VerifyReport {
                events: 0,
                failure: Some(VerifyFailure { seq: 0, reason: format!("database file damaged: {}", problems.join("; ")) }),
                millis: started.elapsed().as_secs_f64() * 1e3,
                sth_size: None,
                sth_note: None,
                key_epochs: Vec::new(),
            });
        }
        let rows = sqlx::query(&format!("{} ORDER BY e.seq", crate::query::EVENTS_WITH_PAYLOADS))
        .fetch_all(self.pool())
        .await
        .map_err(LedgerError::Load)?;
        let events: Vec<RawEvent> = rows
            .iter()
            .map(|r| RawEvent {
                seq: r.get(0),
                id: r.get(1),
                ts: r.get(2),
                entity_id: r.get(3),
                kind: r.get(4),
                signer: r.get(5),
                payload_hash: r.get(6),
                prev_hash: r.get(7),
                hash: r.get(8),
                signature: r.get(9),
                body: r.get(10),
            })
            .collect();
        let (sth, sth_note) = match self.keychain_sth() {
            Ok(Some(sth)) => (Some(sth), None),
            Ok(None) => (None, Some("no signed tree head in the keychain yet".to_owned())),
            Err(e) => (None, Some(format!("the keychain's signed tree head could not be read: {e}"))),
        };
        let sth_size = sth.as_ref().map(|s| s.size);
        let (failure, key_epochs) = tokio::task::spawn_blocking(move || {
            let (f, epochs) = verify_events_with_epochs(&events);
            let f = match f {
                Ok(None) => Ok(sth.as_ref().and_then(|sth| crate::proof::check_sth(sth, &events))),
                other => other,
            };
            (f.map(|f| (f, events.len())), epochs)
        })
        .await
        .map_err(|e| LedgerError::Invalid(format!("verify task failed: {e}")))?;
        let (failure, n) = match failure {
            Ok((f, n)) => (f, n),
            Err(f) => (Some(f), 0),
        };
        Ok(VerifyReport {
            events: n as u64,
            failure,
            millis: started.elapsed().as_secs_f64() * 1e3,
            sth_size,
            sth_note,
            key_epochs,
        })
    }
}

fn fail(seq: i64, reason: impl Into<String>) -> VerifyFailure {
    VerifyFailure { seq, reason: reason.into() }
}

/// Checks structure, chain and payloads in one pass and signatures in
/// parallel batches; returns the earliest failure.
pub(crate) fn verify_events(events: &[RawEvent]) -> std::result::Result<Option<VerifyFailure>, VerifyFailure> {
    verify_events_with_epochs(events).0
}

/// `verify_events`, also returning every key epoch boundary it crossed.
pub(crate) fn verify_events_with_epochs(
    events: &[RawEvent],
) -> (std::result::Result<Option<VerifyFailure>, VerifyFailure>, Vec<KeyEpoch>) {
    let mut epochs = Vec::new();
    let failure = verify_chain(events, &mut epochs);
    (failure, epochs)
}

fn verify_chain(
    events: &[RawEvent],
    epochs: &mut Vec<KeyEpoch>,
) -> std::result::Result<Option<VerifyFailure>, VerifyFailure> {
    // Erasure records are never erasable themselves; collect them first.
    let mut erased: HashMap<i64, i64> = HashMap::new();
    for e in events.iter().filter(|e| e.kind == "payload_erased") {
        if let Some(Ok(EventBody::PayloadErased { target_seq, .. })) =
            e.body.as_deref().map(serde_json::from_slice::<EventBody>)
        {
            erased.insert(target_seq, e.seq);
        }
    }

    let mut keys: HashMap<String, VerifyingKey> = HashMap::new();
    let mut prev = [0u8; HASH_LEN];
    let mut structural: Option<VerifyFailure> = None;
    let mut to_check: Vec<(i64, [u8; HASH_LEN], Signature, VerifyingKey)> = Vec::with_capacity(events.len());
    let mut seen_ids: HashSet<&str> = HashSet::new();

    for (i, e) in events.iter().enumerate() {
        let expected_seq = i as i64 + 1;
        if e.seq != expected_seq {
            structural = Some(fail(expected_seq, format!("event {expected_seq} is missing (found {})", e.seq)));
            break;
        }
        if !seen_ids.insert(&e.id) {
            structural = Some(fail(e.seq, "duplicate event id"));
            break;
        }
        let (Some(ph), Some(pv), Some(h)) = (to_hash(&e.payload_hash), to_hash(&e.prev_hash), to_hash(&e.hash)) else {
            structural = Some(fail(e.seq, "a hash field has the wrong length"));
            break;
        };
        if pv != prev {
            structural = Some(fail(e.seq, "previous-hash link does not match the event before it"));
            break;
        }
        let header = EventHeader {
            seq: e.seq,
            id: e.id.clone(),
            ts: e.ts.clone(),
            entity_id: e.entity_id.clone(),
            kind: e.kind.clone(),
            signer: e.signer.clone(),
            payload_hash: ph,
            prev_hash: pv,
        };
        if header.hash() != h {
            structural = Some(fail(e.seq, "header does not match its hash (the event was altered)"));
            break;
        }
        prev = h;
        let body = match &e.body {
            Some(bytes) => {
                if payload_hash(bytes) != ph {
                    structural = Some(fail(e.seq, "payload does not match its hash (the content was altered)"));
                    break;
                }
                match serde_json::from_slice::<EventBody>(bytes) {
                    Ok(b) if b.kind() == e.kind => Some(b),
                    Ok(_) => {
                        structural = Some(fail(e.seq, "payload kind differs from the header kind"));
                        break;
                    }
                    Err(err) => {
                        structural = Some(fail(e.seq, format!("payload is not a known event: {err}")));
                        break;
                    }
                }
            }
            None => match erased.get(&e.seq) {
                Some(by) if *by > e.seq => None,
                _ => {
                    structural = Some(fail(e.seq, "payload is missing and no payload_erased event accounts for it"));
                    break;
                }
            },
        };
        let key = match resolve_key(e, body.as_ref(), &mut keys, epochs) {
            Ok(k) => k,
            Err(f) => {
                structural = Some(f);
                break;
            }
        };
        let Ok(sig) = <[u8; 64]>::try_from(e.signature.as_slice()) else {
            structural = Some(fail(e.seq, "signature has the wrong length"));
            break;
        };
        to_check.push((e.seq, h, Signature::from_bytes(&sig), key));
    }

    let bad_sig = first_bad_signature(&to_check);
    Ok(match (structural, bad_sig) {
        (Some(a), Some(b)) => Some(if b.seq < a.seq { b } else { a }),
        (a, b) => a.or(b),
    })
}

/// The key that must have signed event `e`, applying the trust rule of key
/// registration and replacement (see the module docs), and updating `keys`
/// (each entity's key in force) and `epochs`.
fn resolve_key(
    e: &RawEvent,
    body: Option<&EventBody>,
    keys: &mut HashMap<String, VerifyingKey>,
    epochs: &mut Vec<KeyEpoch>,
) -> std::result::Result<VerifyingKey, VerifyFailure> {
    let in_force = |keys: &HashMap<String, VerifyingKey>, who: &str| {
        keys.get(who).copied().ok_or_else(|| fail(e.seq, format!("signer {who} has no registered key")))
    };
    match body {
        Some(EventBody::EntityKeyRegistered { entity_id, public_key, .. }) => {
            let new = parse_key(public_key).ok_or_else(|| fail(e.seq, "registered public key is invalid"))?;
            // Only the very first event carries its own key: the human's
            // device key bootstraps the ledger.
            if e.seq == 1 {
                if *entity_id != e.signer {
                    return Err(fail(e.seq, "the first event must be an entity registering its own key"));
                }
                keys.insert(entity_id.clone(), new);
                return Ok(new);
            }
            if keys.contains_key(entity_id) {
                return Err(fail(
                    e.seq,
                    format!("{entity_id} already has a key: a key changes only through a key replacement event"),
                ));
            }
            if e.signer != HUMAN_ENTITY {
                return Err(fail(e.seq, format!("only the human's key registers new entities (signed by {})", e.signer)));
            }
            let signer = in_force(&*keys, &e.signer)?;
            keys.insert(entity_id.clone(), new);
            Ok(signer)
        }
        Some(EventBody::EntityKeyReplaced { entity_id, old_public_key, new_public_key, reason, authority, new_key_proof }) => {
            let old = keys
                .get(entity_id)
                .copied()
                .ok_or_else(|| fail(e.seq, format!("key replacement for {entity_id}, which has no key")))?;
            if hex::encode(old.to_bytes()) != old_public_key.to_lowercase() {
                return Err(fail(
                    e.seq,
                    format!("key replacement for {entity_id} names an old key that is not the one in force: an epoch can only follow the one before it"),
                ));
            }
            let new = parse_key(new_public_key).ok_or_else(|| fail(e.seq, "the new public key is invalid"))?;
            if new == old {
                return Err(fail(e.seq, "a key replacement must change the key"));
            }
            if e.signer != HUMAN_ENTITY || e.entity_id != *entity_id {
                return Err(fail(e.seq, "a key replacement is signed under the human's authority, about the entity it replaces"));
            }
            let proof = hex::decode(new_key_proof)
                .ok()
                .and_then(|b| <[u8; 64]>::try_from(b.as_slice()).ok())
                .map(|b| Signature::from_bytes(&b));
            let message = key_proof_message(entity_id, old_public_key, new_public_key);
            if !proof.is_some_and(|p| new.verify_strict(&message, &p).is_ok()) {
                return Err(fail(e.seq, "the new key's proof of possession does not verify"));
            }
            let signer = match (authority, entity_id.as_str()) {
                (KeyAuthority::KeyInForce, _) => in_force(&*keys, HUMAN_ENTITY)?,
                (KeyAuthority::NewKey, HUMAN_ENTITY) => new,
                (KeyAuthority::NewKey, _) => {
                    return Err(fail(e.seq, "a persona's key can only be replaced with the human key's endorsement"))
                }
            };
            keys.insert(entity_id.clone(), new);
            epochs.push(KeyEpoch {
                seq: e.seq,
                ts: e.ts.clone(),
                entity_id: entity_id.clone(),
                old_public_key: old_public_key.to_lowercase(),
                new_public_key: new_public_key.to_lowercase(),
                reason: reason.clone(),
                self_certified: *authority == KeyAuthority::NewKey,
            });
            Ok(signer)
        }
        _ => in_force(&*keys, &e.signer),
    }
}

/// What the new key signs in a key replacement (its proof of possession).
pub fn key_proof_message(entity_id: &str, old_public_key: &str, new_public_key: &str) -> Vec<u8> {
    let mut m = b"ledgermind/key-replaced/v1\0".to_vec();
    for part in [entity_id, &old_public_key.to_lowercase(), &new_public_key.to_lowercase()] {
        m.extend_from_slice(&(part.len() as u32).to_be_bytes());
        m.extend_from_slice(part.as_bytes());
    }
    m
}

fn parse_key(hex_key: &str) -> Option<VerifyingKey> {
    let bytes: [u8; 32] = hex::decode(hex_key).ok()?.try_into().ok()?;
    VerifyingKey::from_bytes(&bytes).ok()
}

const BATCH: usize = 1024;

fn check_chunk(chunk: &[(i64, [u8; HASH_LEN], Signature, VerifyingKey)]) -> Option<VerifyFailure> {
    let msgs: Vec<&[u8]> = chunk.iter().map(|c| &c.1[..]).collect();
    let sigs: Vec<Signature> = chunk.iter().map(|c| c.2).collect();
    let keys: Vec<VerifyingKey> = chunk.iter().map(|c| c.3).collect();
    if ed25519_dalek::verify_batch(&msgs, &sigs, &keys).is_ok() {
        return None;
    }
    // Some signature in the batch is bad: find the first one.
    chunk
        .iter()
        .find(|(_, h, sig, key)| key.verify_strict(h, sig).is_err())
        .map(|(seq, ..)| fail(*seq, "signature does not verify with the signer's key"))
}

fn first_bad_signature(items: &[(i64, [u8; HASH_LEN], Signature, VerifyingKey)]) -> Option<VerifyFailure> {
    if items.len() <= BATCH {
        return items.chunks(BATCH).find_map(check_chunk);
    }
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).max(1);
    let chunks: Vec<_> = items.chunks(BATCH).collect();
    let per = chunks.len().div_ceil(threads);
    let results: Vec<Option<VerifyFailure>> = std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .chunks(per)
            .map(|group| s.spawn(move || group.iter().find_map(|c| check_chunk(c))))
            .collect();
        handles.into_iter().map(|h| h.join().ok().flatten()).collect()
    });
    results.into_iter().flatten().min_by_key(|f| f.seq)
}
