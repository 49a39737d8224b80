//! `bench ledger`: the ledger's figures against same-run baselines.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ed25519_dalek::{Signer as _, SigningKey, Verifier as _};
use serde::Serialize;

use crate::body::{EventBody, MessageRole};
use crate::keys::{KeyStore, KeyStoreError};
use crate::store::{Draft, Ledger, LedgerOptions, EI_PERSONA_ID, HUMAN_ENTITY};
use crate::Result;

#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub events: usize,
    /// Baselines, single thread, same run.
    pub raw_sign_per_s: f64,
    pub raw_verify_per_s: f64,
    /// One durable commit (synchronous=FULL) per event.
    pub single_appends: usize,
    pub single_append_per_s: f64,
    pub single_p50_ms: f64,
    pub single_p99_ms: f64,
    /// 1000 events per transaction.
    pub batched_append_per_s: f64,
    pub batched_ratio_to_raw_sign: f64,
    /// Raw signing measured in runs alternating with the batches.
    pub raw_sign_beside_batches_per_s: f64,
    /// The batched rate against that interleaved baseline (the figure to quote
    /// on a busy machine).
    pub batched_ratio_to_raw_sign_beside: f64,
    pub verify_per_s: f64,
    pub verify_ratio_to_raw_verify: f64,
    pub checkpoint_save_ms: f64,
    pub checkpoint_restore_ms: f64,
    pub export_ms: f64,
    pub import_ms: f64,
    pub export_bytes: u64,
}

/// Throwaway keys of a bench profile that is deleted afterwards.
#[derive(Default)]
struct BenchKeys(Mutex<std::collections::HashMap<String, Vec<u8>>>);

impl KeyStore for BenchKeys {
    fn load(&self, account: &str) -> Result<Option<Vec<u8>>, KeyStoreError> {
        Ok(self.0.lock().map_err(|e| KeyStoreError::Other(e.to_string()))?.get(account).cloned())
    }
    fn store(&self, account: &str, secret: &[u8]) -> Result<(), KeyStoreError> {
        self.0.lock().map_err(|e| KeyStoreError::Other(e.to_string()))?.insert(account.into(), secret.to_vec());
        Ok(())
    }
    fn delete(&self, account: &str) -> Result<(), KeyStoreError> {
        self.0.lock().map_err(|e| KeyStoreError::Other(e.to_string()))?.remove(account);
        Ok(())
    }
}

fn message(i: usize) -> EventBody {
    EventBody::MessageAdded {
        message_id: format!("bench-{i}"),
        persona_id: EI_PERSONA_ID.into(),
        role: MessageRole::Human,
        content: format!("benchmark message number {i}, a sentence of ordinary length."),
        external_id: None,
        said_at: None,
    }
}

fn rate(n: usize, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Appends `events` signed events to a fresh profile under `dir` (which is
/// used as scratch space) and measures everything in one run.
/// Events per batched append.
const BATCH: usize = 1000;

pub async fn bench_ledger(dir: &Path, events: usize) -> Result<BenchReport> {
    let events = events.max(1000);
    // Baselines: raw Ed25519 on one thread.
    let key = SigningKey::generate(&mut rand::rngs::OsRng);
    let msgs: Vec<[u8; 32]> = (0..5000u32).map(|i| crate::event::payload_hash(&i.to_be_bytes())).collect();
    let t = Instant::now();
    let sigs: Vec<_> = msgs.iter().map(|m| key.sign(m)).collect();
    let raw_sign_per_s = rate(msgs.len(), t.elapsed().as_secs_f64());
    let vk = key.verifying_key();
    let t = Instant::now();
    let ok = msgs.iter().zip(&sigs).filter(|(m, s)| vk.verify(&m[..], s).is_ok()).count();
    let raw_verify_per_s = rate(ok, t.elapsed().as_secs_f64());

    let db = dir.join("bench-ledger.db");
    let import_db = dir.join("bench-import.db");
    for p in [&db, &import_db] {
        for s in ["", "-wal", "-shm"] {
            let mut f = p.as_os_str().to_owned();
            f.push(s);
            let _ = std::fs::remove_file(std::path::PathBuf::from(f));
        }
    }
    let keys: Arc<dyn KeyStore> = Arc::new(BenchKeys::default());
    let ledger = Ledger::open(LedgerOptions::new(&db), keys.clone()).await?;

    // Single durable appends.
    let single = (events / 10).clamp(200, 2000);
    let mut lat = Vec::with_capacity(single);
    let t = Instant::now();
    for i in 0..single {
        let s = Instant::now();
        ledger.append(HUMAN_ENTITY, message(i)).await?;
        lat.push(s.elapsed().as_secs_f64() * 1e3);
    }
    let single_append_per_s = rate(single, t.elapsed().as_secs_f64());
    lat.sort_by(|a, b| a.total_cmp(b));

    // Batched: the rest, 1000 per transaction.
    // Batches alternate with equal-sized runs of raw signing, so both see the
    // same machine load (these machines are shared): the ratio compares the
    // summed times of the batches with those of the raw runs beside them.
    let rest = events.saturating_sub(single);
    let mut i = single;
    let (mut batch_secs, mut raw_secs, mut raw_n) = (0.0, 0.0, 0usize);
    while i < single + rest {
        let n = BATCH.min(single + rest - i);
        let t = Instant::now();
        for m in msgs.iter().cycle().take(n) {
            std::hint::black_box(key.sign(m));
        }
        raw_secs += t.elapsed().as_secs_f64();
        raw_n += n;
        let drafts = (i..i + n).map(|k| Draft::by(HUMAN_ENTITY, message(k))).collect();
        let t = Instant::now();
        ledger.append_drafts(drafts).await?;
        batch_secs += t.elapsed().as_secs_f64();
        i += n;
    }
    let batched_append_per_s = rate(rest, batch_secs);
    let raw_sign_beside_batches = rate(raw_n, raw_secs);

    let t = Instant::now();
    let report = ledger.verify().await?;
    let verify_per_s = rate(report.events as usize, t.elapsed().as_secs_f64());

    let t = Instant::now();
    ledger.save_checkpoint(10, "bench").await?;
    let checkpoint_save_ms = t.elapsed().as_secs_f64() * 1e3;
    ledger.append(HUMAN_ENTITY, message(events + 1)).await?;
    let t = Instant::now();
    ledger.restore_checkpoint(10).await?;
    let checkpoint_restore_ms = t.elapsed().as_secs_f64() * 1e3;

    let file = dir.join("bench-export.lmx");
    let t = Instant::now();
    let summary = ledger.export_profile(&file, "bench passphrase").await?;
    let export_ms = t.elapsed().as_secs_f64() * 1e3;
    let import_keys: Arc<dyn KeyStore> = Arc::new(BenchKeys::default());
    let t = Instant::now();
    let imported = crate::export::import_profile(LedgerOptions::new(&import_db), import_keys, &file, "bench passphrase").await?;
    let import_ms = t.elapsed().as_secs_f64() * 1e3;
    drop(imported);
    drop(ledger);
    let _ = std::fs::remove_file(&file);

    Ok(BenchReport {
        events,
        raw_sign_per_s,
        raw_verify_per_s,
        single_appends: single,
        single_append_per_s,
        single_p50_ms: percentile(&lat, 0.50),
        single_p99_ms: percentile(&lat, 0.99),
        batched_append_per_s,
        batched_ratio_to_raw_sign_beside: batched_append_per_s / raw_sign_beside_batches,
        raw_sign_beside_batches_per_s: raw_sign_beside_batches,
        batched_ratio_to_raw_sign: batched_append_per_s / raw_sign_per_s.max(1.0),
        verify_per_s,
        verify_ratio_to_raw_verify: verify_per_s / raw_verify_per_s.max(1.0),
        checkpoint_save_ms,
        checkpoint_restore_ms,
        export_ms,
        import_ms,
        export_bytes: summary.bytes,
    })
}
