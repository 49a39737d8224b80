//! Signing the events of a commit. Hashes chain one after another, but
//! signatures do not: a large commit hands its events to long-lived signing
//! threads (one per core) in small chunks, and the writer inserts each chunk's
//! event rows as soon as its signatures are back, while later chunks are
//! still being signed.

use std::collections::{HashMap, VecDeque};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};

use ed25519_dalek::{Signer as _, SigningKey};

use crate::event::HASH_LEN;
use crate::{LedgerError, Result};

/// Commits this large are signed on the signing threads.
pub(crate) const PARALLEL_SIGN_MIN: usize = 64;
/// Events per signing job: small enough that both threads stay busy to the
/// end and that the first rows can be written early, large enough that the
/// hand-offs cost nothing next to the signatures (about 2 ms of work).
const SIGN_CHUNK: usize = 100;

type Signature = [u8; 64];
type Job = Box<dyn FnOnce() + Send>;

/// The process's signing threads, started on first use and kept for its
/// lifetime (spawning threads per commit cost more than it saved).
struct Pool {
    jobs: Mutex<mpsc::Sender<Job>>,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let (send, recv) = mpsc::channel::<Job>();
        let recv = Arc::new(Mutex::new(recv));
        let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).max(1);
        for i in 0..threads {
            let recv = recv.clone();
            let spawned = std::thread::Builder::new().name(format!("ledger-sign-{i}")).spawn(move || loop {
                let job = match recv.lock() {
                    Ok(r) => r.recv(),
                    Err(poisoned) => poisoned.into_inner().recv(),
                };
                match job {
                    // A panicking job drops its result sender: the commit
                    // waiting for it fails cleanly, and the thread lives on.
                    Ok(job) => drop(std::panic::catch_unwind(std::panic::AssertUnwindSafe(job))),
                    Err(_) => return,
                }
            });
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "could not start a signing thread");
            }
        }
        Pool { jobs: Mutex::new(send) }
    })
}

/// The signatures of one commit, in event order.
pub(crate) enum Signed {
    Ready(VecDeque<Signature>),
    Streaming {
        parts: VecDeque<tokio::sync::oneshot::Receiver<Result<Vec<Signature>>>>,
        ready: VecDeque<Signature>,
    },
}

impl Signed {
    /// Signs `hashes[i]` with `keys[signers[i]]`: at once for a small commit,
    /// otherwise in chunks on the signing threads.
    pub(crate) fn start(
        signers: Vec<String>,
        hashes: &[[u8; HASH_LEN]],
        keys: HashMap<String, SigningKey>,
    ) -> Result<Self> {
        if signers.len() < PARALLEL_SIGN_MIN {
            return Ok(Self::Ready(sign_all(&signers, hashes, &keys)?.into()));
        }
        let (signers, hashes, keys) = (Arc::new(signers), Arc::new(hashes.to_vec()), Arc::new(keys));
        let jobs = match pool().jobs.lock() {
            Ok(j) => j,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut parts = VecDeque::new();
        for start in (0..signers.len()).step_by(SIGN_CHUNK) {
            let end = (start + SIGN_CHUNK).min(signers.len());
            let (tx, rx) = tokio::sync::oneshot::channel();
            let (signers, hashes, keys) = (signers.clone(), hashes.clone(), keys.clone());
            let job: Job = Box::new(move || {
                let _ = tx.send(sign_all(&signers[start..end], &hashes[start..end], &keys));
            });
            if jobs.send(job).is_err() {
                return Err(LedgerError::Invalid("the signing threads are gone".into()));
            }
            parts.push_back(rx);
        }
        Ok(Self::Streaming { parts, ready: VecDeque::new() })
    }

    /// The next `n` signatures, waiting for the signing threads if needed.
    pub(crate) async fn take(&mut self, n: usize) -> Result<Vec<Signature>> {
        match self {
            Self::Ready(all) => Ok(all.drain(..n.min(all.len())).collect()),
            Self::Streaming { parts, ready } => {
                while ready.len() < n {
                    let Some(part) = parts.pop_front() else { break };
                    let sigs = part
                        .await
                        .unwrap_or_else(|_| Err(LedgerError::Invalid("a signing thread stopped early".into())))?;
                    ready.extend(sigs);
                }
                if ready.len() < n {
                    return Err(LedgerError::Invalid("fewer signatures than events".into()));
                }
                Ok(ready.drain(..n).collect())
            }
        }
    }
}

fn sign_all(signers: &[String], hashes: &[[u8; HASH_LEN]], keys: &HashMap<String, SigningKey>) -> Result<Vec<Signature>> {
    signers
        .iter()
        .zip(hashes)
        .map(|(signer, hash)| {
            let key = keys.get(signer).ok_or_else(|| LedgerError::MissingKey(signer.clone()))?;
            Ok(key.sign(hash).to_bytes())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::Verifier as _;

    fn keys() -> HashMap<String, SigningKey> {
        ["a", "b"].iter().map(|n| ((*n).to_owned(), SigningKey::generate(&mut rand::rngs::OsRng))).collect()
    }

    #[tokio::test]
    async fn streamed_signatures_come_back_in_event_order_in_any_slices() {
        let keys = keys();
        let n = 1234;
        let signers: Vec<String> = (0..n).map(|i| if i % 3 == 0 { "a" } else { "b" }.to_owned()).collect();
        let hashes: Vec<[u8; HASH_LEN]> = (0..n as u32).map(|i| crate::event::payload_hash(&i.to_be_bytes())).collect();
        let mut signed = Signed::start(signers.clone(), &hashes, keys.clone()).expect("start");
        let mut all = Vec::new();
        for take in [1, 399, 400, 7, 427] {
            all.extend(signed.take(take).await.expect("signatures"));
        }
        assert_eq!(all.len(), n);
        for ((signer, hash), sig) in signers.iter().zip(&hashes).zip(&all) {
            let sig = ed25519_dalek::Signature::from_bytes(sig);
            keys[signer].verifying_key().verify(hash, &sig).expect("each signature is the event's own");
        }
        assert!(signed.take(1).await.is_err(), "no signature beyond the events");
    }

    #[tokio::test]
    async fn a_missing_key_fails_the_commit() {
        let signers: Vec<String> = (0..200).map(|i| if i == 150 { "nobody" } else { "a" }.to_owned()).collect();
        let hashes = vec![[0u8; HASH_LEN]; 200];
        let mut signed = Signed::start(signers, &hashes, keys()).expect("start");
        assert!(signed.take(100).await.is_ok(), "the first chunk is signed");
        assert!(matches!(signed.take(100).await, Err(LedgerError::MissingKey(k)) if k == "nobody"));
    }
}
