//! The downloader against a local Hugging Face–shaped server with faults
//! switched on: kill and resume, stalls, a server that ignores Range,
//! corruption, a full disk, cancel.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use models::download::{journal_path, part_path, DiskStorage, Journal, PartSink, Storage};
use models::testkit::{write_synthetic_gguf, HfServer};
use models::{DownloadError, DownloadEvent, DownloadOptions, DownloadRequest, Downloader, Outcome};
use tokio_util::sync::CancellationToken;

const SIZE: u64 = 8 * 1024 * 1024 + 12_345;

struct Fixture {
    _dir: tempfile::TempDir,
    server: HfServer,
    req: DownloadRequest,
}

async fn fixture(name: &str) -> Fixture {
    let dir = tempfile::tempdir().expect("tmp");
    let src = dir.path().join("src").join(name);
    std::fs::create_dir_all(src.parent().expect("parent")).expect("mkdir");
    let sha = write_synthetic_gguf(&src, SIZE, 7).expect("synthetic");
    let server = HfServer::start(0).await.expect("server");
    server.add_file(name, src, &sha).expect("add");
    let rev = "0123456789abcdef0123456789abcdef01234567";
    let req = DownloadRequest {
        id: "test-model".into(),
        url: format!("{}/org/repo-GGUF/resolve/{rev}/{name}", server.endpoint()),
        revision: rev.into(),
        sha256: sha,
        size: SIZE,
        dest: dir.path().join("models").join(name),
    };
    Fixture { _dir: dir, server, req }
}

fn quick() -> DownloadOptions {
    DownloadOptions {
        stall_timeout: Duration::from_millis(400),
        connect_timeout: Duration::from_secs(2),
        max_failed_attempts: 5,
        backoff_initial: Duration::from_millis(20),
        backoff_max: Duration::from_millis(100),
        progress_every: Duration::from_millis(25),
        check_gguf: true,
    }
}

#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<DownloadEvent>>>);

impl Events {
    fn sink(&self) -> models::download::EventSink {
        let v = self.0.clone();
        Arc::new(move |e: &DownloadEvent| {
            if let Ok(mut v) = v.lock() {
                v.push(e.clone());
            }
        })
    }
    fn all(&self) -> Vec<DownloadEvent> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

fn sha_of(p: &Path) -> String {
    models::download::sha256_file(p).expect("hash")
}

async fn run(d: &Downloader, req: &DownloadRequest, ev: &Events) -> Result<Outcome, DownloadError> {
    d.run(req, ev.sink(), CancellationToken::new()).await
}

#[tokio::test]
async fn plain_download_follows_redirect_and_installs_verified() {
    let f = fixture("plain.gguf").await;
    let d = Downloader::new(quick()).expect("client");
    let ev = Events::default();
    let out = run(&d, &f.req, &ev).await.expect("download");
    assert_eq!(out, Outcome::Installed { path: f.req.dest.clone(), sha256: f.req.sha256.clone() });
    assert_eq!(sha_of(&f.req.dest), f.req.sha256);
    assert!(!part_path(&f.req.dest).exists() && !journal_path(&f.req.dest).exists());
    assert_eq!(f.server.stats.resolve_requests.load(Ordering::Relaxed), 1);
    assert_eq!(f.server.stats.body_bytes_sent.load(Ordering::Relaxed), SIZE);
    let all = ev.all();
    assert!(matches!(all.first(), Some(DownloadEvent::Started { resumed_from: 0, .. })));
    assert!(matches!(all.last(), Some(DownloadEvent::Installed { .. })));
}

/// Killed (the task dropped mid-stream, as a process dies) at half, then
/// started again: it resumes with Range, re-resolving the URL, and fetches
/// at most 1 % of the bytes twice.
#[tokio::test]
async fn killed_at_half_resumes_with_range() {
    let f = fixture("kill.gguf").await;
    let half = SIZE / 2;
    f.server.faults.stall_once_after.store(half, Ordering::SeqCst);
    let ev = Events::default();
    let first = {
        let req = f.req.clone();
        let sink = ev.sink();
        let opts = DownloadOptions { stall_timeout: Duration::from_secs(60), ..quick() };
        tokio::spawn(async move {
            let d = Downloader::new(opts).expect("client");
            d.run(&req, sink, CancellationToken::new()).await
        })
    };
    let part = part_path(&f.req.dest);
    let t0 = std::time::Instant::now();
    while std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0) < half {
        assert!(t0.elapsed() < Duration::from_secs(20), "never reached half");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    first.abort();
    let _ = first.await;
    let journal = Journal::load(&journal_path(&f.req.dest)).expect("journal survives");
    assert_eq!(journal.sha256, f.req.sha256);
    assert_eq!(journal.url, f.req.url);

    let d = Downloader::new(quick()).expect("client");
    let ev2 = Events::default();
    let out = loop {
        // The killed attempt's writer may hold the lock for a moment.
        match run(&d, &f.req, &ev2).await {
            Err(DownloadError::Busy { .. }) if t0.elapsed() < Duration::from_secs(20) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => break other.expect("resume"),
        }
    };
    assert!(matches!(out, Outcome::Installed { .. }));
    assert_eq!(sha_of(&f.req.dest), f.req.sha256);
    let resumed = ev2.all().iter().find_map(|e| match e {
        DownloadEvent::Started { resumed_from, .. } => Some(*resumed_from),
        _ => None,
    });
    assert_eq!(resumed, Some(half));
    let sent = f.server.stats.body_bytes_sent.load(Ordering::Relaxed);
    let twice = sent - SIZE;
    assert!(twice * 100 <= SIZE, "{twice} bytes fetched twice");
    assert_eq!(f.server.stats.resolve_requests.load(Ordering::Relaxed), 2, "resolved again on resume");
    assert!(f.server.stats.range_requests.load(Ordering::Relaxed) >= 1);
}

#[tokio::test]
async fn stall_is_retried_automatically() {
    let f = fixture("stall.gguf").await;
    f.server.faults.stall_once_after.store(SIZE / 3, Ordering::SeqCst);
    let d = Downloader::new(quick()).expect("client");
    let ev = Events::default();
    let out = run(&d, &f.req, &ev).await.expect("download");
    assert!(matches!(out, Outcome::Installed { .. }));
    assert_eq!(sha_of(&f.req.dest), f.req.sha256);
    let retry = ev.all().into_iter().find_map(|e| match e {
        DownloadEvent::Retrying { reason, .. } => Some(reason),
        _ => None,
    });
    assert!(retry.as_deref().is_some_and(|r| r.contains("no byte")), "{retry:?}");
    // Progress events kept coming while stalled, the rate falling.
    assert_eq!(f.server.stats.body_bytes_sent.load(Ordering::Relaxed), SIZE);
}

#[tokio::test]
async fn dropped_connection_is_resumed() {
    let f = fixture("drop.gguf").await;
    f.server.faults.drop_once_after.store(SIZE / 4, Ordering::SeqCst);
    let d = Downloader::new(quick()).expect("client");
    let ev = Events::default();
    let out = run(&d, &f.req, &ev).await.expect("download");
    assert!(matches!(out, Outcome::Installed { .. }));
    assert_eq!(f.server.stats.body_bytes_sent.load(Ordering::Relaxed), SIZE);
}

/// A server that answers 200 to a Range request: restart from zero, said.
#[tokio::test]
async fn ok_200_to_range_restarts_from_zero() {
    let f = fixture("norange.gguf").await;
    f.server.faults.drop_once_after.store(SIZE / 2, Ordering::SeqCst);
    f.server.faults.ignore_range.store(true, Ordering::SeqCst);
    let d = Downloader::new(quick()).expect("client");
    let ev = Events::default();
    let out = run(&d, &f.req, &ev).await.expect("download");
    assert!(matches!(out, Outcome::Installed { .. }));
    assert_eq!(sha_of(&f.req.dest), f.req.sha256);
    let restarted = ev.all().into_iter().find_map(|e| match e {
        DownloadEvent::Restarted { reason, .. } => Some(reason),
        _ => None,
    });
    assert!(restarted.as_deref().is_some_and(|r| r.contains("200") && r.contains("zero")), "{restarted:?}");
    assert_eq!(f.server.stats.body_bytes_sent.load(Ordering::Relaxed), SIZE + SIZE / 2);
}

/// Every corrupted byte is caught: one flipped byte anywhere fails the
/// hash, the file is discarded, the error names both hashes.
#[tokio::test]
async fn corruption_caught_and_discarded() {
    let f = fixture("corrupt.gguf").await;
    let d = Downloader::new(quick()).expect("client");
    for at in [0u64, 4097, SIZE / 2, SIZE - 1] {
        f.server.faults.corrupt_at.store(at, Ordering::SeqCst);
        let ev = Events::default();
        let err = run(&d, &f.req, &ev).await.expect_err("corrupt");
        match &err {
            DownloadError::HashMismatch { expected, actual, .. } => {
                assert_eq!(expected, &f.req.sha256);
                assert_ne!(actual, expected);
                assert_eq!(actual.len(), 64);
                let msg = err.to_string();
                assert!(msg.contains(expected.as_str()) && msg.contains(actual.as_str()), "{msg}");
            }
            other => panic!("byte {at}: {other}"),
        }
        assert!(!f.req.dest.exists(), "nothing installed");
        assert!(!part_path(&f.req.dest).exists(), "discarded");
        assert!(!journal_path(&f.req.dest).exists());
    }
}

/// Corruption in the part file left on disk (a bad resume) is caught too.
#[tokio::test]
async fn corrupt_prefix_on_disk_is_caught() {
    let f = fixture("prefix.gguf").await;
    f.server.faults.drop_once_after.store(SIZE / 2, Ordering::SeqCst);
    let d = Downloader::new(DownloadOptions { max_failed_attempts: 1, ..quick() }).expect("client");
    let err = run(&d, &f.req, &Events::default()).await.expect_err("gives up after the drop");
    assert!(matches!(err, DownloadError::GaveUp { .. }), "{err}");
    let part = part_path(&f.req.dest);
    let mut bytes = std::fs::read(&part).expect("part");
    bytes[1000] ^= 1;
    std::fs::write(&part, bytes).expect("write");
    let err = run(&Downloader::new(quick()).expect("client"), &f.req, &Events::default()).await.expect_err("mismatch");
    assert!(matches!(err, DownloadError::HashMismatch { .. }), "{err}");
    assert!(!f.req.dest.exists());
}

#[tokio::test]
async fn linked_etag_or_size_that_disagree_stop_before_download() {
    let f = fixture("etag.gguf").await;
    let d = Downloader::new(quick()).expect("client");
    let mut req = f.req.clone();
    req.sha256 = "ab".repeat(32);
    let err = run(&d, &req, &Events::default()).await.expect_err("etag");
    assert!(matches!(err, DownloadError::EtagMismatch { .. }), "{err}");
    let mut req = f.req.clone();
    req.size += 1;
    let err = run(&d, &req, &Events::default()).await.expect_err("size");
    assert!(matches!(err, DownloadError::SizeMismatch { .. }), "{err}");
    assert_eq!(f.server.stats.body_bytes_sent.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn not_found_is_an_http_error_not_a_retry_loop() {
    let f = fixture("real.gguf").await;
    let mut req = f.req.clone();
    req.url = req.url.replace("real.gguf", "missing.gguf");
    let err = run(&Downloader::new(quick()).expect("client"), &req, &Events::default()).await.expect_err("404");
    assert!(matches!(err, DownloadError::Http { status: 404, .. }), "{err}");
}

/// A file that hashes right but is not a chat model is refused.
#[tokio::test]
async fn non_chat_gguf_refused_after_hash() {
    let dir = tempfile::tempdir().expect("tmp");
    let src = dir.path().join("embed.gguf");
    let mut bytes = models::gguf::write_header(&[("general.architecture", "bert")], &[("bert.block_count", 6)], 1);
    bytes.extend(std::iter::repeat_n(7u8, 4096));
    std::fs::write(&src, &bytes).expect("write");
    let sha = sha_of(&src);
    let server = HfServer::start(0).await.expect("server");
    server.add_file("embed.gguf", src, &sha).expect("add");
    let req = DownloadRequest {
        id: "embed".into(),
        url: format!("{}/o/r/resolve/main/embed.gguf", server.endpoint()),
        revision: "main".into(),
        sha256: sha,
        size: bytes.len() as u64,
        dest: dir.path().join("models/embed.gguf"),
    };
    let err = run(&Downloader::new(quick()).expect("client"), &req, &Events::default()).await.expect_err("refused");
    assert!(matches!(err, DownloadError::NotAModel { .. }), "{err}");
    assert!(err.to_string().contains("embedding"), "{err}");
    assert!(!req.dest.exists());
}

/// Disk storage that reports ENOSPC once `limit` bytes are on disk.
struct FullSink {
    inner: Box<dyn PartSink>,
    at: u64,
    limit: Arc<FullDiskShared>,
}

struct FullDiskShared(AtomicU64);

impl PartSink for FullSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let limit = self.limit.0.load(Ordering::SeqCst);
        if self.at >= limit {
            return Err(io::Error::from_raw_os_error(28));
        }
        let n = (buf.len() as u64).min(limit - self.at) as usize;
        let n = self.inner.write(&buf[..n])?;
        self.at += n as u64;
        Ok(n)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.inner.sync()
    }
}

struct FullDiskStorage {
    shared: Arc<FullDiskShared>,
}

impl Storage for FullDiskStorage {
    fn open_at(&self, path: &Path, offset: u64) -> io::Result<Box<dyn PartSink>> {
        Ok(Box::new(FullSink { inner: DiskStorage.open_at(path, offset)?, at: offset, limit: self.shared.clone() }))
    }
    fn free_bytes(&self, _dir: &Path) -> Option<u64> {
        // The disk claims room (as a sparse or shared volume can) until the
        // write fails, so the pause comes from ENOSPC mid-stream.
        Some(u64::MAX / 2)
    }
}

#[tokio::test]
async fn disk_full_pauses_keeps_progress_and_resumes() {
    let f = fixture("full.gguf").await;
    let limit = 3 * 1024 * 1024;
    let shared = Arc::new(FullDiskShared(AtomicU64::new(limit)));
    let storage = Arc::new(FullDiskStorage { shared: shared.clone() });
    let d = Downloader::with_storage(quick(), storage).expect("client");
    let ev = Events::default();
    let out = run(&d, &f.req, &ev).await.expect("paused, not failed");
    assert_eq!(out, Outcome::Paused { bytes_done: limit, bytes_needed: SIZE - limit });
    assert!(ev.all().iter().any(|e| matches!(e, DownloadEvent::Paused { bytes_needed, .. } if *bytes_needed == SIZE - limit)));
    assert_eq!(std::fs::metadata(part_path(&f.req.dest)).map(|m| m.len()).ok(), Some(limit), "progress kept");
    assert!(!f.req.dest.exists());
    // Space freed: the next pull resumes from the kept bytes.
    shared.0.store(u64::MAX, Ordering::SeqCst);
    let ev2 = Events::default();
    let out = run(&d, &f.req, &ev2).await.expect("resumed");
    assert!(matches!(out, Outcome::Installed { .. }));
    assert!(ev2.all().iter().any(|e| matches!(e, DownloadEvent::Started { resumed_from, .. } if *resumed_from == limit)));
    assert_eq!(sha_of(&f.req.dest), f.req.sha256);
}

/// Before the first byte: not enough free space is a pause naming how much
/// to free.
#[tokio::test]
async fn too_little_space_pauses_before_downloading() {
    struct Tiny;
    impl Storage for Tiny {
        fn open_at(&self, path: &Path, offset: u64) -> io::Result<Box<dyn PartSink>> {
            DiskStorage.open_at(path, offset)
        }
        fn free_bytes(&self, _dir: &Path) -> Option<u64> {
            Some(1000)
        }
    }
    let f = fixture("tiny.gguf").await;
    let d = Downloader::with_storage(quick(), Arc::new(Tiny)).expect("client");
    let out = run(&d, &f.req, &Events::default()).await.expect("paused");
    assert_eq!(out, Outcome::Paused { bytes_done: 0, bytes_needed: SIZE - 1000 });
    assert_eq!(f.server.stats.requests.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn cancel_keeps_the_part_for_later() {
    let f = fixture("cancel.gguf").await;
    f.server.faults.stall_once_after.store(SIZE / 2, Ordering::SeqCst);
    let d = Downloader::new(DownloadOptions { stall_timeout: Duration::from_secs(60), ..quick() }).expect("client");
    let cancel = CancellationToken::new();
    let part = part_path(&f.req.dest);
    let c2 = cancel.clone();
    let p2: PathBuf = part.clone();
    tokio::spawn(async move {
        while std::fs::metadata(&p2).map(|m| m.len()).unwrap_or(0) < SIZE / 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        c2.cancel();
    });
    let out = tokio::time::timeout(Duration::from_secs(20), d.run(&f.req, Events::default().sink(), cancel))
        .await
        .expect("cancel is prompt")
        .expect("cancelled");
    assert_eq!(out, Outcome::Cancelled { bytes_done: SIZE / 2 });
    assert!(!f.req.dest.exists());
    assert_eq!(std::fs::metadata(&part).map(|m| m.len()).ok(), Some(SIZE / 2));
    let out = run(&d, &f.req, &Events::default()).await.expect("resumes");
    assert!(matches!(out, Outcome::Installed { .. }));
}

#[tokio::test]
async fn journal_for_another_file_restarts() {
    let f = fixture("other.gguf").await;
    std::fs::create_dir_all(f.req.dest.parent().expect("parent")).expect("mkdir");
    std::fs::write(part_path(&f.req.dest), vec![1u8; 4096]).expect("part");
    let j = Journal { url: f.req.url.clone(), revision: "old".into(), sha256: f.req.sha256.clone(), size: SIZE, bytes_done: 4096 };
    std::fs::write(journal_path(&f.req.dest), serde_json::to_vec(&j).expect("json")).expect("journal");
    let ev = Events::default();
    let out = run(&Downloader::new(quick()).expect("client"), &f.req, &ev).await.expect("download");
    assert!(matches!(out, Outcome::Installed { .. }));
    assert!(ev.all().iter().any(|e| matches!(e, DownloadEvent::Restarted { .. })));
    assert!(ev.all().iter().any(|e| matches!(e, DownloadEvent::Started { resumed_from: 0, .. })));
}

#[tokio::test]
async fn remote_header_read_with_range() {
    let f = fixture("head.gguf").await;
    let client = reqwest::Client::new();
    let info = models::gguf::read_remote(&client, &f.req.url).await.expect("header");
    assert_eq!(info.architecture, "qwen2");
    assert_eq!(info.kv_bytes_per_token(), Some(12_288));
    assert!(f.server.stats.body_bytes_sent.load(Ordering::Relaxed) < SIZE / 2 + 1, "only the start was fetched");
}
