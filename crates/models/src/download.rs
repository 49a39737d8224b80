//! Downloads people can trust: resumable across crashes and restarts,
//! verified while streaming, installed atomically only once verified.
//!
//! Beside `<file>.part` a journal `<file>.part.json` holds what the bytes
//! are (url, revision, sha256, size) and how many were written. A restart
//! resumes from the end of the part file with `Range: bytes=N-`, resolving
//! the repository URL again each attempt (Hugging Face redirects to a
//! signed CDN URL that expires, so that URL is never kept). The SHA-256 is
//! computed as bytes arrive; on resume the existing prefix is hashed again
//! from disk. Nothing reaches the final name before the hash and the GGUF
//! header check pass; a mismatch discards the file. The part file is
//! written with direct I/O where the file system takes it, so the bytes do
//! not pass through the page cache and the final fsync has little to do.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use reqwest::header::{HeaderMap, ACCEPT_ENCODING, CONTENT_RANGE, LOCATION, RANGE};
use reqwest::StatusCode;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::gguf;

/// What to fetch and where it goes.
#[derive(Debug, Clone)]
pub struct DownloadRequest {
    pub id: String,
    /// The repository URL (`…/resolve/{revision}/{file}`), resolved again
    /// on every attempt.
    pub url: String,
    pub revision: String,
    pub sha256: String,
    pub size: u64,
    /// The installed file's final path.
    pub dest: PathBuf,
}

#[derive(Debug, Clone)]
pub struct DownloadOptions {
    /// No byte for this long: the attempt is dropped and retried.
    pub stall_timeout: Duration,
    pub connect_timeout: Duration,
    /// Attempts in a row that bring no byte before giving up.
    pub max_failed_attempts: u32,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// How often a progress event (and a journal update) is made.
    pub progress_every: Duration,
    /// Check the GGUF header (and that it is a chat model) before install.
    pub check_gguf: bool,
}

impl Default for DownloadOptions {
    fn default() -> Self {
        Self {
            stall_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(20),
            max_failed_attempts: 8,
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
            progress_every: Duration::from_secs(1),
            check_gguf: true,
        }
    }
}

/// Progress and state changes, for the window and the CLI.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum DownloadEvent {
    Started {
        id: String,
        bytes_total: u64,
        resumed_from: u64,
    },
    Progress {
        id: String,
        bytes_done: u64,
        bytes_total: u64,
        rate_bps: u64,
        eta_secs: Option<u64>,
    },
    /// Work thrown away and begun again, with the reason.
    Restarted {
        id: String,
        reason: String,
    },
    Retrying {
        id: String,
        attempt: u32,
        in_millis: u64,
        reason: String,
    },
    Paused {
        id: String,
        bytes_done: u64,
        bytes_needed: u64,
    },
    Verifying {
        id: String,
    },
    Installed {
        id: String,
        path: PathBuf,
        sha256: String,
    },
}

/// How a download that did not fail ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Installed {
        path: PathBuf,
        sha256: String,
    },
    /// The disk is full: free `bytes_needed` and pull again; the
    /// `bytes_done` already written are kept.
    Paused {
        bytes_done: u64,
        bytes_needed: u64,
    },
    Cancelled {
        bytes_done: u64,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    #[error("{id}: the file does not match its pinned hash (expected sha256 {expected}, got {actual}); it was discarded, nothing was installed")]
    HashMismatch {
        id: String,
        expected: String,
        actual: String,
    },
    #[error("{id}: the server says the file is {actual} bytes, the catalog pins {expected}; nothing was downloaded")]
    SizeMismatch {
        id: String,
        expected: u64,
        actual: u64,
    },
    #[error("{id}: the server's X-Linked-Etag is {actual}, the catalog pins sha256 {expected}; nothing was downloaded")]
    EtagMismatch {
        id: String,
        expected: String,
        actual: String,
    },
    #[error("{id}: the downloaded file is not a usable model ({reason}); it was discarded")]
    NotAModel { id: String, reason: gguf::GgufError },
    #[error("{id}: HTTP {status} from {url}")]
    Http {
        id: String,
        status: u16,
        url: String,
    },
    #[error("{id}: gave up after {attempts} attempts without progress: {last}")]
    GaveUp {
        id: String,
        attempts: u32,
        last: RetryReason,
    },
    #[error("{id}: the download URL {url} is not valid: {source}")]
    BadUrl {
        id: String,
        url: String,
        source: url::ParseError,
    },
    #[error("{id}: another download of {path} is running")]
    Busy { id: String, path: PathBuf },
    #[error("{id}: {what}: {source}")]
    Io {
        id: String,
        what: String,
        source: io::Error,
    },
}

/// Why one attempt ended early in a way worth retrying: each is a
/// transient state of the network or the server, so the retry loop backs
/// off and asks again, resuming from what is on disk.
#[derive(Debug, thiserror::Error)]
pub enum RetryReason {
    #[error("cannot reach {host}: {source}")]
    Unreachable {
        host: String,
        source: reqwest::Error,
    },
    #[error("the server did not answer")]
    NoAnswer,
    #[error("HTTP {status} without a usable Location")]
    RedirectWithoutLocation { status: StatusCode },
    #[error("too many redirects")]
    TooManyRedirects,
    #[error("the server refused the Range (416)")]
    RangeRefused,
    #[error("HTTP {status}")]
    Status { status: StatusCode },
    #[error("the server answered Range bytes={asked}- with Content-Range {got:?}")]
    WrongContentRange { asked: u64, got: String },
    #[error("the server sent more bytes than the file has")]
    TooManyBytes,
    #[error("the connection broke: {0}")]
    ConnectionBroke(reqwest::Error),
    #[error("the server closed the connection at byte {at}")]
    ClosedEarly { at: u64 },
    #[error("no byte for {} s", .0.as_secs_f32())]
    Stalled(Duration),
    /// The writer thread stopped; its own error is reported instead.
    #[error("the writer stopped")]
    WriterStopped,
}

/// Where the part file's bytes go. Behind a trait so a full disk can be
/// simulated; the real one is [`DiskStorage`].
pub trait PartSink: Send {
    /// Takes some of `buf`: the count returned is on its way to the file
    /// (a sink may hold a little back until [`PartSink::finish`]).
    fn write(&mut self, buf: &[u8]) -> io::Result<usize>;
    fn sync(&mut self) -> io::Result<()>;
    /// Writes out whatever `write` held back; called when the stream
    /// pauses or ends (writes may follow).
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }
}

pub trait Storage: Send + Sync {
    /// Opens `path` for writing at `offset`, cutting off anything after it.
    fn open_at(&self, path: &Path, offset: u64) -> io::Result<Box<dyn PartSink>>;
    /// Bytes free for this user on the volume holding `dir`.
    fn free_bytes(&self, dir: &Path) -> Option<u64>;
}

/// The real disk.
#[derive(Debug, Default, Clone, Copy)]
pub struct DiskStorage;

/// Block size direct writes are aligned to (memory, file offset, length):
/// a multiple of every logical block size in use (512 and 4096).
const DIRECT_ALIGN: usize = 4096;
/// Bytes gathered before one direct write, and the most held at once. A
/// direct write waits for the device, so each should be large (measured
/// on the test machine's virtio disk: 1.0 GB/s in 256 KiB writes,
/// 1.2-1.5 GB/s from 512 KiB up). What is held is lost by a kill: at most
/// 1 MiB, under 0.1 % of a 1.1 GB model, where the socket buffers can
/// hold up to ~1 %.
const DIRECT_FLUSH_AT: usize = 512 << 10;
const DIRECT_HOLD: usize = 1 << 20;

/// The part file. Written with O_DIRECT where the file system allows it:
/// buffered writes copied every byte into the page cache (~0.8 s of CPU
/// per 1.1 GB here, with dirty-page throttling on top) and left it all for
/// the final fsync, while direct writes go from one aligned buffer to the
/// device. Whatever cannot be aligned (the start of a resume at an odd
/// offset, the file's last bytes) and any file system that refuses direct
/// I/O use plain writes.
struct FileSink {
    file: std::fs::File,
    /// Where the next byte goes.
    pos: u64,
    /// None: plain writes only.
    direct: Option<Staging>,
    /// Whether the descriptor has O_DIRECT set now.
    direct_on: bool,
    /// Direct I/O was refused and the held bytes could not all be written
    /// plainly yet.
    direct_failed: bool,
}

/// An aligned region of `mem`, `start..start + DIRECT_HOLD`, whose first
/// `len` bytes wait for a direct write.
struct Staging {
    mem: Vec<u8>,
    start: usize,
    len: usize,
}

impl Staging {
    fn new() -> Option<Self> {
        let mem = vec![0u8; DIRECT_HOLD + DIRECT_ALIGN];
        let start = mem.as_ptr().align_offset(DIRECT_ALIGN);
        (start < DIRECT_ALIGN).then_some(Self { mem, start, len: 0 })
    }
    fn held(&self) -> &[u8] {
        &self.mem[self.start..self.start + self.len]
    }
}

fn is_einval(e: &io::Error) -> bool {
    e.raw_os_error() == Some(22)
}

impl FileSink {
    fn new(file: std::fs::File, pos: u64) -> Self {
        Self {
            file,
            pos,
            direct: if cfg!(target_os = "linux") {
                Staging::new()
            } else {
                None
            },
            direct_on: false,
            direct_failed: false,
        }
    }

    /// Sets or clears O_DIRECT on the descriptor.
    #[cfg(target_os = "linux")]
    fn set_direct(&mut self, on: bool) -> io::Result<()> {
        if self.direct_on != on {
            use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};
            let flags = fcntl_getfl(&self.file)?;
            let flags = if on {
                flags | OFlags::DIRECT
            } else {
                flags - OFlags::DIRECT
            };
            fcntl_setfl(&self.file, flags)?;
            self.direct_on = on;
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    fn set_direct(&mut self, _on: bool) -> io::Result<()> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }

    /// One plain write(2) of at most [`WRITE_PIECE`].
    fn write_plain(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.set_direct(false)?;
        let n = self.file.write(&buf[..buf.len().min(WRITE_PIECE)])?;
        self.pos += n as u64;
        Ok(n)
    }

    /// Writes what `st` holds with plain writes, keeping in it whatever
    /// a failed write left.
    fn write_held_plain(&mut self, st: &mut Staging) -> io::Result<()> {
        let mut at = 0;
        let res = loop {
            if at == st.len {
                break Ok(());
            }
            match self.write_plain(&st.held()[at..]) {
                Ok(0) => break Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => at += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        st.mem
            .copy_within(st.start + at..st.start + st.len, st.start);
        st.len -= at;
        res
    }

    /// Direct I/O refused: from here on everything is written plainly,
    /// starting with what is held.
    fn give_up_direct(&mut self) -> io::Result<()> {
        let Some(mut st) = self.direct.take() else {
            return Ok(());
        };
        let res = self.write_held_plain(&mut st);
        if res.is_err() {
            // Kept for another try (or the drop); still plain writes only.
            self.direct = Some(st);
            self.direct_failed = true;
        }
        res
    }

    /// Writes the held bytes: the aligned part directly, and with `all`
    /// the rest plainly.
    fn flush_held(&mut self, all: bool) -> io::Result<()> {
        if self.direct_failed {
            return self.give_up_direct();
        }
        loop {
            let Some(st) = &self.direct else {
                return Ok(());
            };
            let aligned = st.len & !(DIRECT_ALIGN - 1);
            if aligned == 0 || !self.pos.is_multiple_of(DIRECT_ALIGN as u64) {
                break;
            }
            if self.set_direct(true).is_err() {
                return self.give_up_direct();
            }
            let Some(st) = &self.direct else {
                return Ok(());
            };
            match self.file.write(&st.held()[..aligned]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.pos += n as u64;
                    if let Some(st) = &mut self.direct {
                        st.mem
                            .copy_within(st.start + n..st.start + st.len, st.start);
                        st.len -= n;
                    }
                }
                // Some file systems take the flag but not the write.
                Err(e) if is_einval(&e) => return self.give_up_direct(),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let unaligned = !self.pos.is_multiple_of(DIRECT_ALIGN as u64);
        let held = self.direct.as_ref().map_or(0, |st| st.len);
        if held > 0 && (all || unaligned) {
            // The end of the stream, or a short direct write left the
            // position unaligned: plain writes, and direct ones again (from
            // `write`) once the position is aligned.
            if let Some(mut st) = self.direct.take() {
                let res = self.write_held_plain(&mut st);
                self.direct = Some(st);
                return res;
            }
        }
        Ok(())
    }
}

impl PartSink for FileSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let held = match &self.direct {
            None => return self.write_plain(buf),
            Some(st) => st.len,
        };
        if self.direct_failed {
            self.give_up_direct()?;
            return self.write_plain(buf);
        }
        if held >= DIRECT_FLUSH_AT {
            self.flush_held(false)?;
        }
        let misaligned = self.pos % DIRECT_ALIGN as u64;
        let held = self.direct.as_ref().map_or(0, |st| st.len);
        if held == 0 && misaligned != 0 {
            // A resume from an odd offset: plain writes up to the next block.
            let head = (DIRECT_ALIGN as u64 - misaligned) as usize;
            return self.write_plain(&buf[..buf.len().min(head)]);
        }
        match &mut self.direct {
            None => self.write_plain(buf),
            Some(st) => {
                let n = buf.len().min(DIRECT_HOLD - st.len);
                let at = st.start + st.len;
                st.mem[at..at + n].copy_from_slice(&buf[..n]);
                st.len += n;
                Ok(n)
            }
        }
    }
    fn finish(&mut self) -> io::Result<()> {
        self.flush_held(true)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.finish()?;
        self.file.sync_all()
    }
}

impl Drop for FileSink {
    /// A sink dropped after an error still leaves what it was given on disk
    /// if it can: the part file's length is what a resume starts from.
    fn drop(&mut self) {
        let _ = self.flush_held(true);
    }
}

impl Storage for DiskStorage {
    fn open_at(&self, path: &Path, offset: u64) -> io::Result<Box<dyn PartSink>> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(path)?;
        file.set_len(offset)?;
        let mut file = file;
        io::Seek::seek(&mut file, io::SeekFrom::Start(offset))?;
        Ok(Box::new(FileSink::new(file, offset)))
    }
    fn free_bytes(&self, dir: &Path) -> Option<u64> {
        let s = rustix::fs::statvfs(dir).ok()?;
        Some(s.f_bavail.saturating_mul(s.f_frsize))
    }
}

/// The journal beside the part file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Journal {
    pub url: String,
    pub revision: String,
    pub sha256: String,
    pub size: u64,
    pub bytes_done: u64,
}

impl Journal {
    fn for_request(req: &DownloadRequest) -> Self {
        Self {
            url: req.url.clone(),
            revision: req.revision.clone(),
            sha256: req.sha256.clone(),
            size: req.size,
            bytes_done: 0,
        }
    }
    fn same_file(&self, other: &Journal) -> bool {
        self.url == other.url
            && self.revision == other.revision
            && self.sha256 == other.sha256
            && self.size == other.size
    }
    pub fn load(path: &Path) -> Option<Self> {
        let text = std::fs::read_to_string(path).ok()?;
        serde_json::from_str(&text).ok()
    }
    /// Written to a temporary name and renamed: a crash leaves the old
    /// journal or the new one, never half of one.
    fn save(&self, path: &Path) -> io::Result<()> {
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_vec(self).map_err(io::Error::other)?;
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, path)
    }
}

pub fn part_path(dest: &Path) -> PathBuf {
    with_suffix(dest, ".part")
}
pub fn journal_path(dest: &Path) -> PathBuf {
    with_suffix(dest, ".part.json")
}
fn lock_path(dest: &Path) -> PathBuf {
    with_suffix(dest, ".part.lock")
}
fn with_suffix(p: &Path, suffix: &str) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

pub type EventSink = Arc<dyn Fn(&DownloadEvent) + Send + Sync>;

/// Downloads, verifies and installs one file.
pub struct Downloader {
    client: reqwest::Client,
    opts: DownloadOptions,
    storage: Arc<dyn Storage>,
}

/// What the writer thread is sent.
enum ToWriter {
    Bytes(bytes::Bytes),
    /// The stream paused: write out what the sink holds back.
    Pause,
}

/// Why one attempt ended.
enum AttemptEnd {
    Complete,
    /// Retry: the stream broke, stalled, or the server failed.
    Retry(RetryReason),
    /// The disk is full.
    DiskFull,
    Cancelled,
}

const MAX_REDIRECTS: usize = 8;
/// The most one plain write(2) is given. The kernel sizes page-cache folios by
/// the length of the write: a whole 256-512 KiB chunk in one call gets
/// large folios, and the copy into them measured ~0.5 GB/s on the test
/// machine (perf: copy_folio_from_iter_atomic, about 2 s of CPU for a
/// 1.1 GB model, whatever the source buffer), against ~0.15-0.45 s in
/// 16 KiB writes, the size curl writes in. The extra calls cost far less.
const WRITE_PIECE: usize = 16 << 10;

impl Downloader {
    pub fn new(opts: DownloadOptions) -> Result<Self, reqwest::Error> {
        Self::with_storage(opts, Arc::new(DiskStorage))
    }

    pub fn with_storage(
        opts: DownloadOptions,
        storage: Arc<dyn Storage>,
    ) -> Result<Self, reqwest::Error> {
        // Redirects are followed by hand: the repository's response carries
        // the X-Linked-* headers, and the CDN URL must not outlive an attempt.
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(opts.connect_timeout)
            .user_agent(concat!("ledgermind-models/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self {
            client,
            opts,
            storage,
        })
    }

    pub async fn run(
        &self,
        req: &DownloadRequest,
        on_event: EventSink,
        cancel: CancellationToken,
    ) -> Result<Outcome, DownloadError> {
        let id = req.id.clone();
        let io_err = |what: String| {
            let id = id.clone();
            move |source: io::Error| DownloadError::Io { id, what, source }
        };
        let dir = req
            .dest
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        std::fs::create_dir_all(&dir)
            .map_err(io_err(format!("cannot create {}", dir.display())))?;
        // Shared with the writer thread: if this future is dropped (the
        // task aborted), the lock lasts until the last queued bytes are on disk.
        let held = lock(&lock_path(&req.dest))
            .map_err(io_err("cannot lock the download".into()))?
            .ok_or_else(|| DownloadError::Busy {
                id: id.clone(),
                path: req.dest.clone(),
            })?;
        let held = Arc::new(held);
        let part = part_path(&req.dest);
        let jpath = journal_path(&req.dest);
        let fresh = Journal::for_request(req);
        let mut journal = match Journal::load(&jpath) {
            Some(j) if j.same_file(&fresh) => j,
            Some(_) => {
                on_event(&DownloadEvent::Restarted {
                    id: id.clone(),
                    reason: "the partial file was for another revision or hash: starting from zero"
                        .into(),
                });
                let _ = std::fs::remove_file(&part);
                fresh.clone()
            }
            None => {
                let _ = std::fs::remove_file(&part);
                fresh.clone()
            }
        };
        // The part file's length is what is on disk (a killed process loses
        // nothing it wrote); the journal's count may lag by one interval.
        let mut done = std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
        if done > req.size {
            on_event(&DownloadEvent::Restarted {
                id: id.clone(),
                reason: "the partial file is longer than the model: starting from zero".into(),
            });
            done = 0;
        }
        let mut hasher = Sha256::new();
        if done > 0 {
            let (h, n) = rehash_prefix(&part, done)
                .map_err(io_err(format!("cannot read {}", part.display())))?;
            hasher = h;
            done = n;
        }
        journal.bytes_done = done;
        journal
            .save(&jpath)
            .map_err(io_err(format!("cannot write {}", jpath.display())))?;
        on_event(&DownloadEvent::Started {
            id: id.clone(),
            bytes_total: req.size,
            resumed_from: done,
        });

        let mut failed = 0u32;
        while done < req.size {
            if cancel.is_cancelled() {
                return Ok(Outcome::Cancelled { bytes_done: done });
            }
            let remaining = req.size - done;
            if let Some(free) = self.storage.free_bytes(&dir) {
                if free < remaining {
                    let bytes_needed = remaining - free;
                    on_event(&DownloadEvent::Paused {
                        id: id.clone(),
                        bytes_done: done,
                        bytes_needed,
                    });
                    return Ok(Outcome::Paused {
                        bytes_done: done,
                        bytes_needed,
                    });
                }
            }
            let before = done;
            let end = self
                .attempt(
                    req,
                    &part,
                    &jpath,
                    &mut journal,
                    &mut done,
                    &mut hasher,
                    &on_event,
                    &cancel,
                    held.clone(),
                )
                .await?;
            match end {
                AttemptEnd::Complete => {}
                AttemptEnd::Cancelled => {
                    let _ = journal.save(&jpath);
                    return Ok(Outcome::Cancelled { bytes_done: done });
                }
                AttemptEnd::DiskFull => {
                    let _ = journal.save(&jpath);
                    // The disk just refused a write: all that is still to
                    // come needs room (what statvfs calls free was not).
                    let bytes_needed = req.size - done;
                    on_event(&DownloadEvent::Paused {
                        id: id.clone(),
                        bytes_done: done,
                        bytes_needed,
                    });
                    return Ok(Outcome::Paused {
                        bytes_done: done,
                        bytes_needed,
                    });
                }
                AttemptEnd::Retry(reason) => {
                    let _ = journal.save(&jpath);
                    if done > before {
                        failed = 0;
                    }
                    failed += 1;
                    if failed >= self.opts.max_failed_attempts {
                        return Err(DownloadError::GaveUp {
                            id,
                            attempts: failed,
                            last: reason,
                        });
                    }
                    let wait = backoff(&self.opts, failed);
                    on_event(&DownloadEvent::Retrying {
                        id: id.clone(),
                        attempt: failed,
                        in_millis: wait.as_millis() as u64,
                        reason: reason.to_string(),
                    });
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = cancel.cancelled() => {
                            return Ok(Outcome::Cancelled { bytes_done: done });
                        }
                    }
                }
            }
        }
        on_event(&DownloadEvent::Verifying { id: id.clone() });
        let actual = hex::encode(hasher.finalize());
        if !actual.eq_ignore_ascii_case(&req.sha256) {
            discard(&part, &jpath);
            return Err(DownloadError::HashMismatch {
                id,
                expected: req.sha256.clone(),
                actual,
            });
        }
        install(&id, &part, &req.dest, self.opts.check_gguf)?;
        let _ = std::fs::remove_file(&jpath);
        on_event(&DownloadEvent::Installed {
            id: id.clone(),
            path: req.dest.clone(),
            sha256: actual.clone(),
        });
        Ok(Outcome::Installed {
            path: req.dest.clone(),
            sha256: actual,
        })
    }

    /// One request (and its redirects) and the stream of its body.
    #[allow(clippy::too_many_arguments)]
    async fn attempt(
        &self,
        req: &DownloadRequest,
        part: &Path,
        jpath: &Path,
        journal: &mut Journal,
        done: &mut u64,
        hasher: &mut Sha256,
        on_event: &EventSink,
        cancel: &CancellationToken,
        held: Arc<std::fs::File>,
    ) -> Result<AttemptEnd, DownloadError> {
        let id = &req.id;
        let resp = tokio::select! {
            r = tokio::time::timeout(self.opts.stall_timeout, self.resolve(req, *done)) => match r {
                Ok(r) => r?,
                Err(_) => return Ok(AttemptEnd::Retry(RetryReason::NoAnswer)),
            },
            _ = cancel.cancelled() => return Ok(AttemptEnd::Cancelled),
        };
        let resp = match resp {
            Ok(resp) => resp,
            Err(reason) => return Ok(AttemptEnd::Retry(reason)),
        };
        let status = resp.status();
        let mut offset = *done;
        if status == StatusCode::PARTIAL_CONTENT {
            let range = resp
                .headers()
                .get(CONTENT_RANGE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            let start = parse_content_range_start(range);
            let total = gguf::content_range_total(resp.headers());
            if start != Some(offset) {
                return Ok(AttemptEnd::Retry(RetryReason::WrongContentRange {
                    asked: offset,
                    got: range.to_owned(),
                }));
            }
            if let Some(t) = total {
                if t != req.size {
                    return Err(DownloadError::SizeMismatch {
                        id: id.clone(),
                        expected: req.size,
                        actual: t,
                    });
                }
            }
        } else if status == StatusCode::OK {
            if let Some(len) = resp.content_length() {
                if len != req.size {
                    return Err(DownloadError::SizeMismatch {
                        id: id.clone(),
                        expected: req.size,
                        actual: len,
                    });
                }
            }
            if offset > 0 {
                on_event(&DownloadEvent::Restarted {
                    id: id.clone(),
                    reason: format!(
                        "the server answered the Range request with 200 (the whole file): starting again from zero, {offset} bytes thrown away"
                    ),
                });
                offset = 0;
                *done = 0;
                *hasher = Sha256::new();
            }
        } else {
            return Ok(AttemptEnd::Retry(RetryReason::Status { status }));
        }
        let sink = self
            .storage
            .open_at(part, offset)
            .map_err(|source| DownloadError::Io {
                id: id.clone(),
                what: format!("cannot open {}", part.display()),
                source,
            })?;

        // Hashing and writing run on their own thread so they overlap with
        // receiving the next chunk. The queue is short: what waits in it is
        // lost (fetched again) when the process is killed.
        let written = Arc::new(AtomicU64::new(0));
        let (tx, mut rx) = tokio::sync::mpsc::channel::<ToWriter>(2);
        // SHA-256 was most of the writer's time: it runs on a thread of its
        // own, fed each chunk once the sink has taken it. A sink may hold
        // the last bytes back until `finish`, so the hash covers exactly the
        // bytes on disk when the writer ends without an error; after one,
        // the attempt ends the download (pause or failure) and a later run
        // hashes the part file again from disk.
        let (htx, hrx) = std::sync::mpsc::sync_channel::<bytes::Bytes>(8);
        let hashing = {
            let mut h = std::mem::take(hasher);
            std::thread::Builder::new()
                .name("dl-sha256".into())
                .spawn(move || {
                    while let Ok(piece) = hrx.recv() {
                        h.update(&piece);
                    }
                    h
                })
                .map_err(|source| DownloadError::Io {
                    id: id.clone(),
                    what: "cannot start the hashing thread".into(),
                    source,
                })?
        };
        let writer = {
            let written = written.clone();
            std::thread::Builder::new()
                .name("dl-writer".into())
                .spawn(move || {
                    let _held = held;
                    let mut sink = sink;
                    let mut err: Option<io::Error> = None;
                    while let Some(msg) = rx.blocking_recv() {
                        let buf = match msg {
                            ToWriter::Bytes(buf) => buf,
                            ToWriter::Pause => match sink.finish() {
                                Ok(()) => continue,
                                Err(e) => {
                                    err = Some(e);
                                    break;
                                }
                            },
                        };
                        let (n, e) = write_all(&mut *sink, &buf);
                        if n > 0 {
                            // One piece per chunk, not per write: the
                            // hashing thread is woken once per chunk.
                            let _ = htx.send(buf.slice(..n));
                            written.fetch_add(n as u64, Ordering::Release);
                        }
                        if e.is_some() {
                            err = e;
                            break;
                        }
                    }
                    if err.is_none() {
                        err = sink.finish().err();
                    }
                    drop(sink);
                    drop(htx);
                    let h = hashing
                        .join()
                        .unwrap_or_else(|p| std::panic::resume_unwind(p));
                    (h, err)
                })
                .map_err(|source| DownloadError::Io {
                    id: id.clone(),
                    what: "cannot start the writer thread".into(),
                    source,
                })?
        };

        // A first progress line as the body starts: a fast download (or the
        // rest of a resumed one) can end before the first tick, and whoever
        // watches should still see where it starts from.
        on_event(&DownloadEvent::Progress {
            id: id.clone(),
            bytes_done: offset,
            bytes_total: req.size,
            rate_bps: 0,
            eta_secs: None,
        });
        let mut stream = resp.bytes_stream();
        let base = offset;
        let mut tick = tokio::time::interval(self.opts.progress_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        let mut last_byte = Instant::now();
        let mut last_tick = (Instant::now(), base);
        let mut rate = RateMeter::default();
        let mut received: u64 = 0;
        let mut received_at_tick: u64 = 0;
        let end = loop {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => break AttemptEnd::Cancelled,
                chunk = stream.next() => match chunk {
                    Some(Ok(bytes)) => {
                        last_byte = Instant::now();
                        received += bytes.len() as u64;
                        if base + received > req.size {
                            break AttemptEnd::Retry(RetryReason::TooManyBytes);
                        }
                        if tx.send(ToWriter::Bytes(bytes)).await.is_err() {
                            // The writer stopped: its error says why.
                            break AttemptEnd::Retry(RetryReason::WriterStopped);
                        }
                    }
                    Some(Err(e)) => break AttemptEnd::Retry(RetryReason::ConnectionBroke(e)),
                    None => {
                        break if base + received == req.size {
                            AttemptEnd::Complete
                        } else {
                            AttemptEnd::Retry(RetryReason::ClosedEarly { at: base + received })
                        };
                    }
                },
                _ = tick.tick() => {
                    if received == received_at_tick {
                        // Nothing came for a tick: what the sink holds back
                        // goes to disk now, not at the end of a stall.
                        let _ = tx.try_send(ToWriter::Pause);
                    }
                    received_at_tick = received;
                    let now_done = base + written.load(Ordering::Acquire);
                    let dt = last_tick.0.elapsed().as_secs_f64();
                    rate.add(now_done.saturating_sub(last_tick.1), dt);
                    last_tick = (Instant::now(), now_done);
                    let rate_bps = rate.bps();
                    on_event(&DownloadEvent::Progress {
                        id: id.clone(),
                        bytes_done: now_done,
                        bytes_total: req.size,
                        rate_bps,
                        eta_secs: (rate_bps > 0).then(|| (req.size - now_done) / rate_bps.max(1)),
                    });
                    journal.bytes_done = now_done;
                    let _ = journal.save(jpath);
                    if last_byte.elapsed() >= self.opts.stall_timeout {
                        break AttemptEnd::Retry(RetryReason::Stalled(self.opts.stall_timeout));
                    }
                }
            }
        };
        drop(stream);
        drop(tx);
        let (h, err) = tokio::task::spawn_blocking(move || writer.join())
            .await
            .ok()
            .and_then(|r| r.ok())
            .ok_or_else(|| DownloadError::Io {
                id: id.clone(),
                what: "the writer thread failed".into(),
                source: io::Error::other("writer panicked"),
            })?;
        *hasher = h;
        *done = base + written.load(Ordering::Acquire);
        if err.is_some() {
            // A sink may hold bytes back that a failing disk then refused:
            // only what the part file has is done.
            if let Ok(m) = std::fs::metadata(part) {
                *done = (*done).min(m.len());
            }
        }
        journal.bytes_done = *done;
        if let Some(e) = err {
            if is_disk_full(&e) {
                return Ok(AttemptEnd::DiskFull);
            }
            return Err(DownloadError::Io {
                id: id.clone(),
                what: format!("cannot write {}", part.display()),
                source: e,
            });
        }
        Ok(match end {
            AttemptEnd::Complete if *done == req.size => AttemptEnd::Complete,
            AttemptEnd::Complete => AttemptEnd::Retry(RetryReason::ClosedEarly { at: *done }),
            other => other,
        })
    }

    /// Requests `url` from byte `from`, following redirects by hand; checks
    /// the X-Linked-* headers wherever they appear. `Err(reason)` inside
    /// `Ok` is a failure worth retrying; the outer error ends the download.
    async fn resolve(
        &self,
        req: &DownloadRequest,
        from: u64,
    ) -> Result<Result<reqwest::Response, RetryReason>, DownloadError> {
        // A URL that does not parse will not parse on the next attempt either.
        let mut url = reqwest::Url::parse(&req.url).map_err(|source| DownloadError::BadUrl {
            id: req.id.clone(),
            url: req.url.clone(),
            source,
        })?;
        for _ in 0..MAX_REDIRECTS {
            let mut rb = self
                .client
                .get(url.clone())
                .header(ACCEPT_ENCODING, "identity");
            if from > 0 {
                rb = rb.header(RANGE, format!("bytes={from}-"));
            }
            let resp = match rb.send().await {
                Ok(r) => r,
                Err(source) => {
                    let host = url.host_str().unwrap_or("the server").to_owned();
                    return Ok(Err(RetryReason::Unreachable { host, source }));
                }
            };
            self.check_linked(req, resp.headers())?;
            let status = resp.status();
            if status.is_redirection() {
                let loc = resp
                    .headers()
                    .get(LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                match loc.and_then(|l| url.join(&l).ok()) {
                    Some(next) => {
                        url = next;
                        continue;
                    }
                    None => return Ok(Err(RetryReason::RedirectWithoutLocation { status })),
                }
            }
            if status.is_client_error()
                && status != StatusCode::REQUEST_TIMEOUT
                && status != StatusCode::TOO_MANY_REQUESTS
            {
                if status == StatusCode::RANGE_NOT_SATISFIABLE {
                    return Ok(Err(RetryReason::RangeRefused));
                }
                return Err(DownloadError::Http {
                    id: req.id.clone(),
                    status: status.as_u16(),
                    url: redact(&url),
                });
            }
            return Ok(Ok(resp));
        }
        Ok(Err(RetryReason::TooManyRedirects))
    }

    fn check_linked(
        &self,
        req: &DownloadRequest,
        headers: &HeaderMap,
    ) -> Result<(), DownloadError> {
        if let Some(size) = headers
            .get("x-linked-size")
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.trim().parse::<u64>().ok())
        {
            if size != req.size {
                return Err(DownloadError::SizeMismatch {
                    id: req.id.clone(),
                    expected: req.size,
                    actual: size,
                });
            }
        }
        if let Some(etag) = headers.get("x-linked-etag").and_then(|v| v.to_str().ok()) {
            let etag = etag.trim().trim_start_matches("W/").trim_matches('"');
            // Only a 64-hex etag is a SHA-256 (small files carry a git sha1).
            if etag.len() == 64
                && etag.bytes().all(|b| b.is_ascii_hexdigit())
                && !etag.eq_ignore_ascii_case(&req.sha256)
            {
                return Err(DownloadError::EtagMismatch {
                    id: req.id.clone(),
                    expected: req.sha256.clone(),
                    actual: etag.to_owned(),
                });
            }
        }
        Ok(())
    }
}

/// A CDN URL's query is a signature: not for logs or error messages.
fn redact(url: &reqwest::Url) -> String {
    let mut u = url.clone();
    u.set_query(None);
    u.to_string()
}

fn backoff(opts: &DownloadOptions, failed: u32) -> Duration {
    let factor = 1u32
        .checked_shl(failed.saturating_sub(1).min(16))
        .unwrap_or(u32::MAX);
    opts.backoff_initial
        .saturating_mul(factor)
        .min(opts.backoff_max)
}

fn parse_content_range_start(v: &str) -> Option<u64> {
    let rest = v.trim().strip_prefix("bytes")?.trim_start();
    rest.split('-').next()?.trim().parse().ok()
}

/// Writes all of `buf` unless the disk refuses: the bytes written (those
/// the hash is fed) and what stopped it.
fn write_all(sink: &mut dyn PartSink, buf: &[u8]) -> (usize, Option<io::Error>) {
    let mut at = 0;
    while at < buf.len() {
        match sink.write(&buf[at..]) {
            Ok(0) => {
                let e = io::Error::new(io::ErrorKind::WriteZero, "the disk accepted no bytes");
                return (at, Some(e));
            }
            Ok(n) => at += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (at, Some(e)),
        }
    }
    (at, None)
}

fn is_disk_full(e: &io::Error) -> bool {
    // ENOSPC and EDQUOT: both mean "free some space and go on".
    e.kind() == io::ErrorKind::StorageFull || matches!(e.raw_os_error(), Some(28) | Some(122))
}

/// SHA-256 of the first `len` bytes of `path` (fewer if the file is shorter).
fn rehash_prefix(path: &Path, len: u64) -> io::Result<(Sha256, u64)> {
    let mut f = std::fs::File::open(path)?.take(len);
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let r = f.read(&mut buf)?;
        if r == 0 {
            break;
        }
        h.update(&buf[..r]);
        n += r as u64;
    }
    Ok((h, n))
}

fn discard(part: &Path, journal: &Path) {
    let _ = std::fs::remove_file(part);
    let _ = std::fs::remove_file(journal);
}

/// Header check, fsync, rename to the final name, fsync the folder.
fn install(id: &str, part: &Path, dest: &Path, check_gguf: bool) -> Result<(), DownloadError> {
    if check_gguf {
        if let Err(reason) = gguf::read_file(part).and_then(|info| info.require_chat()) {
            discard(part, &journal_path(dest));
            return Err(DownloadError::NotAModel {
                id: id.to_owned(),
                reason,
            });
        }
    }
    let io_err = |what: String| {
        move |source| DownloadError::Io {
            id: id.to_owned(),
            what,
            source,
        }
    };
    std::fs::File::open(part)
        .and_then(|f| f.sync_all())
        .map_err(io_err(format!("cannot sync {}", part.display())))?;
    std::fs::rename(part, dest).map_err(io_err(format!("cannot rename to {}", dest.display())))?;
    if let Some(dir) = dest.parent() {
        // The rename is durable once the folder is.
        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(())
}

/// Copies a local file (an Ollama blob with the same hash) into place with
/// the same checks as a download: hash while copying, header, atomic rename.
pub fn install_copy(
    id: &str,
    src: &Path,
    sha256: &str,
    dest: &Path,
    check_gguf: bool,
) -> Result<PathBuf, DownloadError> {
    let io_err = |what: String| {
        move |source| DownloadError::Io {
            id: id.to_owned(),
            what,
            source,
        }
    };
    if let Some(dir) = dest.parent() {
        std::fs::create_dir_all(dir).map_err(io_err(format!("cannot create {}", dir.display())))?;
    }
    let part = with_suffix(dest, ".copy");
    let mut input =
        std::fs::File::open(src).map_err(io_err(format!("cannot open {}", src.display())))?;
    let mut out = std::fs::File::create(&part)
        .map_err(io_err(format!("cannot create {}", part.display())))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = input
            .read(&mut buf)
            .map_err(io_err(format!("cannot read {}", src.display())))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        out.write_all(&buf[..n])
            .map_err(io_err(format!("cannot write {}", part.display())))?;
    }
    drop(out);
    let actual = hex::encode(h.finalize());
    if !actual.eq_ignore_ascii_case(sha256) {
        let _ = std::fs::remove_file(&part);
        return Err(DownloadError::HashMismatch {
            id: id.to_owned(),
            expected: sha256.to_owned(),
            actual,
        });
    }
    install(id, &part, dest, check_gguf)?;
    Ok(dest.to_path_buf())
}

/// SHA-256 of a whole file, hex.
pub fn sha256_file(path: &Path) -> io::Result<String> {
    let len = std::fs::metadata(path)?.len();
    let (h, _) = rehash_prefix(path, len)?;
    Ok(hex::encode(h.finalize()))
}

/// Takes an exclusive lock (`None`: someone else holds it). The lock file
/// stays; the lock goes with the process.
fn lock(path: &Path) -> io::Result<Option<std::fs::File>> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    match rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(f)),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Bytes per second, smoothed over the last few seconds so a stall shows
/// as the rate falling to zero rather than a frozen figure.
#[derive(Default)]
struct RateMeter {
    bps: Option<f64>,
}

impl RateMeter {
    fn add(&mut self, bytes: u64, secs: f64) {
        if secs <= 0.0 {
            return;
        }
        let now = bytes as f64 / secs;
        self.bps = Some(match self.bps {
            None => now,
            Some(prev) => prev * 0.6 + now * 0.4,
        });
    }
    fn bps(&self) -> u64 {
        self.bps.unwrap_or(0.0).max(0.0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_range_and_backoff() {
        assert_eq!(parse_content_range_start("bytes 100-199/200"), Some(100));
        assert_eq!(parse_content_range_start("bytes */200"), None);
        let o = DownloadOptions {
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(10),
            ..Default::default()
        };
        assert_eq!(backoff(&o, 1), Duration::from_secs(1));
        assert_eq!(backoff(&o, 3), Duration::from_secs(4));
        assert_eq!(backoff(&o, 9), Duration::from_secs(10));
    }

    #[test]
    fn rate_decays_in_a_stall() {
        let mut r = RateMeter::default();
        r.add(1000, 1.0);
        assert_eq!(r.bps(), 1000);
        for _ in 0..20 {
            r.add(0, 1.0);
        }
        assert_eq!(r.bps(), 0);
    }

    /// Direct writes gathered, resumed from odd offsets, paused mid-way:
    /// the file holds exactly the bytes given, in order.
    #[test]
    fn part_file_gets_every_byte_in_place() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join("x.part");
        let data: Vec<u8> = (0..5_000_000u32)
            .map(|i| (i * 7 + i / 4099) as u8)
            .collect();
        let mut at = 0usize;
        // Each round opens at the previous end (aligned or not), writes
        // uneven pieces with a pause among them, and ends.
        for (round, end) in [1_234_567usize, 3_000_000, 5_000_000]
            .into_iter()
            .enumerate()
        {
            let mut sink = DiskStorage.open_at(&p, at as u64).expect("open");
            let mut step = 1 + round * 4093;
            while at < end {
                let to = (at + step).min(end);
                let (n, e) = write_all(&mut *sink, &data[at..to]);
                assert!(e.is_none(), "{e:?}");
                assert_eq!(n, to - at);
                at = to;
                step = step * 3 % 700_001 + 1;
                if at > end / 2 && at < end / 2 + 300_000 {
                    sink.finish().expect("pause");
                }
            }
            if round == 1 {
                // Dropped without finish (as after an error): still written.
                drop(sink);
            } else {
                sink.finish().expect("finish");
            }
            assert_eq!(std::fs::read(&p).expect("read"), data[..at]);
        }
    }

    #[test]
    fn lock_is_exclusive() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join("x.lock");
        let a = lock(&p).expect("lock");
        assert!(a.is_some());
        assert!(lock(&p).expect("lock").is_none());
        drop(a);
        assert!(lock(&p).expect("lock").is_some());
    }
}
