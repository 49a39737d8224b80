//! Verification: recompute the chain, the payload hashes and every signature,
//! and name the first event that does not hold.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use ed25519_dalek::{Signature, VerifyingKey};
use serde::Serialize;
use sqlx::Row;

use crate::body::EventBody;
use crate::error::LedgerError;
use crate::event::{payload_hash, to_hash, EventHeader, HASH_LEN};
use crate::store::Ledger;
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
        let failure = tokio::task::spawn_blocking(move || {
            let f = verify_events(&events);
            let f = match f {
                Ok(None) => Ok(sth.as_ref().and_then(|sth| crate::proof::check_sth(sth, &events))),
                other => other,
            };
            f.map(|f| (f, events.len()))
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
        })
    }
}

fn fail(seq: i64, reason: impl Into<String>) -> VerifyFailure {
    VerifyFailure { seq, reason: reason.into() }
}

/// Checks structure, chain and payloads in one pass and signatures in
/// parallel batches; returns the earliest failure.
pub(crate) fn verify_events(events: &[RawEvent]) -> std::result::Result<Option<VerifyFailure>, VerifyFailure> {
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
        // Resolve the signer's key. Only the very first event may carry its
        // own key (the human's device key bootstraps the ledger).
        let key = match (keys.get(&e.signer), &body) {
            (Some(k), _) => *k,
            (None, Some(EventBody::EntityKeyRegistered { entity_id, public_key, .. }))
                if e.seq == 1 && *entity_id == e.signer =>
            {
                match parse_key(public_key) {
                    Some(k) => k,
                    None => {
                        structural = Some(fail(e.seq, "registered public key is invalid"));
                        break;
                    }
                }
            }
            _ => {
                structural = Some(fail(e.seq, format!("signer {} has no registered key", e.signer)));
                break;
            }
        };
        if let Some(EventBody::EntityKeyRegistered { entity_id, public_key, .. }) = &body {
            match parse_key(public_key) {
                Some(k) => {
                    keys.insert(entity_id.clone(), k);
                }
                None => {
                    structural = Some(fail(e.seq, "registered public key is invalid"));
                    break;
                }
            }
        }
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
