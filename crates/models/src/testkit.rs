//! A small HTTP file server that answers like the Hugging Face hub, for
//! tests, the download benchmark and offline mirrors (`HF_ENDPOINT`):
//! `/{repo}/resolve/{revision}/{file}` redirects to `/cdn/{file}?…` with
//! `X-Linked-Etag` (the SHA-256) and `X-Linked-Size`, and `/cdn/{file}`
//! serves the bytes with Range support. Faults can be switched on to test a
//! client: ignore Range (always 200), stall once after N bytes, drop the
//! connection after N bytes, corrupt one byte, throttle.
//!
//! Also a fake Ollama API (`/`, `/api/version`, `/api/tags`, `/v1/models`,
//! `/v1/chat/completions`) and a server that answers 401 like Jan.
//!
//! One request per connection (`Connection: close`): simple, and each
//! attempt of a client is then a new connection, as after a real drop.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Faults to inject; all off by default.
#[derive(Debug, Default)]
pub struct Faults {
    /// Answer every Range request with 200 and the whole file.
    pub ignore_range: AtomicBool,
    /// The next response holds the connection open, silent, after sending
    /// this many body bytes (once; 0 = off).
    pub stall_once_after: AtomicU64,
    /// The next response closes the connection after this many body bytes
    /// (once; 0 = off).
    pub drop_once_after: AtomicU64,
    /// Flip this file offset's byte in every response (u64::MAX = off).
    pub corrupt_at: AtomicU64,
    /// Bytes per second per response (0 = unthrottled).
    pub throttle_bps: AtomicU64,
}

/// Counters a test reads.
#[derive(Debug, Default)]
pub struct Stats {
    pub body_bytes_sent: AtomicU64,
    pub requests: AtomicU64,
    pub range_requests: AtomicU64,
    pub resolve_requests: AtomicU64,
}

struct Served {
    path: PathBuf,
    size: u64,
    sha256: String,
}

pub struct HfServer {
    pub addr: SocketAddr,
    pub faults: Arc<Faults>,
    pub stats: Arc<Stats>,
    files: Arc<Mutex<HashMap<String, Served>>>,
    task: tokio::task::JoinHandle<()>,
}

impl HfServer {
    /// Starts on 127.0.0.1 at `port` (0: any free port).
    pub async fn start(port: u16) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        let addr = listener.local_addr()?;
        let faults = Arc::new(Faults { corrupt_at: AtomicU64::new(u64::MAX), ..Default::default() });
        let stats = Arc::new(Stats::default());
        let files: Arc<Mutex<HashMap<String, Served>>> = Arc::default();
        let task = {
            let (faults, stats, files) = (faults.clone(), stats.clone(), files.clone());
            tokio::spawn(async move {
                while let Ok((sock, _)) = listener.accept().await {
                    let (faults, stats, files) = (faults.clone(), stats.clone(), files.clone());
                    tokio::spawn(async move {
                        let _ = serve_hf(sock, &faults, &stats, &files).await;
                    });
                }
            })
        };
        Ok(Self { addr, faults, stats, files, task })
    }

    /// The value for `HF_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Serves `path` under its file name; `sha256` is what X-Linked-Etag says.
    pub fn add_file(&self, name: &str, path: PathBuf, sha256: &str) -> std::io::Result<()> {
        let size = std::fs::metadata(&path)?.len();
        if let Ok(mut files) = self.files.lock() {
            files.insert(name.to_owned(), Served { path, size, sha256: sha256.to_owned() });
        }
        Ok(())
    }
}

impl Drop for HfServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Request {
    method: String,
    path: String,
    range_from: Option<u64>,
    range_to: Option<u64>,
    authorization: Option<String>,
}

async fn read_request(sock: &mut TcpStream) -> std::io::Result<Option<Request>> {
    let mut buf = Vec::with_capacity(1024);
    let mut tmp = [0u8; 1024];
    loop {
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&tmp[..n]);
        if buf.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
        if buf.len() > 64 * 1024 {
            return Ok(None);
        }
    }
    let text = String::from_utf8_lossy(&buf);
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or("");
    let mut parts = first.split_whitespace();
    let method = parts.next().unwrap_or("").to_owned();
    let path = parts.next().unwrap_or("/").to_owned();
    let mut req = Request { method, path, range_from: None, range_to: None, authorization: None };
    for line in lines {
        let Some((k, v)) = line.split_once(':') else { continue };
        let v = v.trim();
        if k.eq_ignore_ascii_case("range") {
            if let Some(spec) = v.strip_prefix("bytes=") {
                let (a, b) = spec.split_once('-').unwrap_or((spec, ""));
                req.range_from = a.trim().parse().ok();
                req.range_to = b.trim().parse().ok();
            }
        } else if k.eq_ignore_ascii_case("authorization") {
            req.authorization = Some(v.to_owned());
        }
    }
    Ok(Some(req))
}

async fn respond(sock: &mut TcpStream, status: &str, headers: &[(&str, String)], body: &[u8]) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {status}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    sock.write_all(head.as_bytes()).await?;
    sock.write_all(body).await?;
    sock.shutdown().await
}

async fn serve_hf(mut sock: TcpStream, faults: &Faults, stats: &Stats, files: &Mutex<HashMap<String, Served>>) -> std::io::Result<()> {
    let _ = sock.set_nodelay(true);
    let Some(req) = read_request(&mut sock).await? else { return Ok(()) };
    stats.requests.fetch_add(1, Ordering::Relaxed);
    let path = req.path.split('?').next().unwrap_or("").to_owned();
    let name = path.rsplit('/').next().unwrap_or("").to_owned();
    let found = files.lock().ok().and_then(|f| f.get(&name).map(|s| (s.path.clone(), s.size, s.sha256.clone())));
    let Some((file, size, sha)) = found else {
        return respond(&mut sock, "404 Not Found", &[], b"Entry not found").await;
    };
    if path.contains("/resolve/") {
        stats.resolve_requests.fetch_add(1, Ordering::Relaxed);
        // A fresh "signature" each time, as the CDN's expiring URLs.
        let sig = stats.resolve_requests.load(Ordering::Relaxed);
        let rev = path.split("/resolve/").nth(1).and_then(|r| r.split('/').next()).unwrap_or("main").to_owned();
        return respond(
            &mut sock,
            "302 Found",
            &[
                ("Location", format!("/cdn/{name}?Expires=9999999999&Signature={sig}")),
                ("X-Linked-Etag", format!("\"{sha}\"")),
                ("X-Linked-Size", size.to_string()),
                ("X-Repo-Commit", rev),
            ],
            b"",
        )
        .await;
    }
    if !path.starts_with("/cdn/") {
        return respond(&mut sock, "404 Not Found", &[], b"").await;
    }
    let ranged = req.range_from.is_some() && !faults.ignore_range.load(Ordering::Relaxed);
    if req.range_from.is_some() {
        stats.range_requests.fetch_add(1, Ordering::Relaxed);
    }
    let (from, to) = if ranged {
        let from = req.range_from.unwrap_or(0);
        let to = req.range_to.unwrap_or(size.saturating_sub(1)).min(size.saturating_sub(1));
        if from >= size {
            return respond(&mut sock, "416 Range Not Satisfiable", &[("Content-Range", format!("bytes */{size}"))], b"").await;
        }
        (from, to)
    } else {
        (0, size.saturating_sub(1))
    };
    let len = to + 1 - from;
    let mut head = if ranged {
        format!("HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {from}-{to}/{size}\r\n")
    } else {
        "HTTP/1.1 200 OK\r\n".to_owned()
    };
    head.push_str(&format!("Content-Length: {len}\r\nAccept-Ranges: bytes\r\nConnection: close\r\nContent-Type: application/octet-stream\r\n\r\n"));
    sock.write_all(head.as_bytes()).await?;
    if req.method == "HEAD" {
        return Ok(());
    }
    let stall_after = faults.stall_once_after.swap(0, Ordering::AcqRel);
    let drop_after = faults.drop_once_after.swap(0, Ordering::AcqRel);
    let corrupt = faults.corrupt_at.load(Ordering::Relaxed);
    let mut f = tokio::fs::File::open(&file).await?;
    f.seek(std::io::SeekFrom::Start(from)).await?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut sent = 0u64;
    let started = std::time::Instant::now();
    while sent < len {
        let mut want = (len - sent).min(buf.len() as u64) as usize;
        for limit in [stall_after, drop_after] {
            if limit > 0 && sent < limit {
                want = want.min((limit - sent) as usize);
            }
        }
        let throttle = faults.throttle_bps.load(Ordering::Relaxed);
        if throttle > 0 {
            want = want.min((throttle / 20).max(1) as usize);
        }
        let n = f.read(&mut buf[..want]).await?;
        if n == 0 {
            break;
        }
        let at = from + sent;
        if corrupt >= at && corrupt < at + n as u64 {
            let i = (corrupt - at) as usize;
            buf[i] ^= 0xFF;
        }
        sock.write_all(&buf[..n]).await?;
        sent += n as u64;
        stats.body_bytes_sent.fetch_add(n as u64, Ordering::Relaxed);
        if stall_after > 0 && sent == stall_after {
            // Silent until the client gives up on this connection.
            let mut one = [0u8; 1];
            let _ = tokio::time::timeout(Duration::from_secs(600), sock.read(&mut one)).await;
            return Ok(());
        }
        if drop_after > 0 && sent == drop_after {
            return Ok(());
        }
        if throttle > 0 {
            let due = Duration::from_secs_f64(sent as f64 / throttle as f64);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                tokio::time::sleep(wait).await;
            }
        }
    }
    let _ = sock.shutdown().await;
    Ok(())
}

/// An OpenAI-style local server that only says which product it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FakeKind {
    /// `GET /` "Ollama is running", `/api/tags`, `/api/version`, `/v1/…`.
    Ollama,
    /// `/api/v0/models` with LM Studio's fields.
    LmStudio,
    /// 401 to anything without `Authorization: Bearer <key>`.
    Jan,
    /// `/health`, `/props`, `/v1/models`.
    LlamaCpp,
    /// `/v1/models` owned by vllm.
    Vllm,
}

pub struct FakeServer {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl FakeServer {
    pub async fn start(kind: FakeKind, models: Vec<String>) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let models = Arc::new(models);
        let task = tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let models = models.clone();
                tokio::spawn(async move {
                    if let Ok(Some(req)) = read_request(&mut sock).await {
                        let (status, body) = fake_answer(kind, &models, &req);
                        let _ = respond(&mut sock, status, &[("Content-Type", "application/json".into())], body.as_bytes()).await;
                    }
                });
            }
        });
        Ok(Self { addr, task })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn fake_answer(kind: FakeKind, models: &[String], req: &Request) -> (&'static str, String) {
    let openai = || {
        let data: Vec<_> = models
            .iter()
            .map(|m| serde_json::json!({"id": m, "object": "model", "owned_by": if kind == FakeKind::Vllm { "vllm" } else { "library" }}))
            .collect();
        serde_json::json!({"object": "list", "data": data}).to_string()
    };
    let path = req.path.split('?').next().unwrap_or("");
    match (kind, path) {
        (FakeKind::Ollama, "/") => ("200 OK", "Ollama is running".into()),
        (FakeKind::Ollama, "/api/version") => ("200 OK", r#"{"version":"0.0.0-fake"}"#.into()),
        (FakeKind::Ollama, "/api/tags") => {
            let list: Vec<_> = models
                .iter()
                .map(|m| {
                    serde_json::json!({"name": m, "model": m, "size": 491400064u64,
                        "digest": "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                        "details": {"format": "gguf", "family": "qwen2", "parameter_size": "494M", "quantization_level": "Q4_K_M"}})
                })
                .collect();
            ("200 OK", serde_json::json!({"models": list}).to_string())
        }
        (FakeKind::Ollama, "/v1/chat/completions") => (
            "200 OK",
            serde_json::json!({"id": "chatcmpl-fake", "object": "chat.completion", "model": models.first(),
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hello from the fake Ollama."}}]})
            .to_string(),
        ),
        (FakeKind::LmStudio, "/api/v0/models") => {
            let data: Vec<_> = models
                .iter()
                .map(|m| serde_json::json!({"id": m, "object": "model", "type": "llm", "state": "not-loaded", "compatibility_type": "gguf", "quantization": "Q4_K_M", "max_context_length": 32768}))
                .collect();
            ("200 OK", serde_json::json!({"object": "list", "data": data}).to_string())
        }
        (FakeKind::Jan, _) if req.authorization.is_none() => {
            ("401 Unauthorized", r#"{"error":{"message":"Invalid or missing API key","type":"invalid_request_error"}}"#.into())
        }
        (FakeKind::LlamaCpp, "/health") => ("200 OK", r#"{"status":"ok"}"#.into()),
        (FakeKind::LlamaCpp, "/props") => (
            "200 OK",
            serde_json::json!({"model_path": models.first().map(|m| format!("/models/{m}.gguf")), "default_generation_settings": {"n_ctx": 4096}, "chat_template": "{{ x }}"}).to_string(),
        ),
        (FakeKind::Vllm, "/health") => ("200 OK", String::new()),
        (_, "/v1/models") => ("200 OK", openai()),
        _ => ("404 Not Found", r#"{"error":"not found"}"#.into()),
    }
}

/// Writes a GGUF-shaped file of `size` bytes: a chat model's header, then
/// bytes from a fixed-seed generator. Returns its SHA-256.
pub fn write_synthetic_gguf(path: &std::path::Path, size: u64, seed: u64) -> std::io::Result<String> {
    use sha2::Digest;
    use std::io::Write;
    let header = crate::gguf::chat_header();
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut h = sha2::Sha256::new();
    let head_len = (header.len() as u64).min(size) as usize;
    f.write_all(&header[..head_len])?;
    h.update(&header[..head_len]);
    let mut left = size - head_len as u64;
    let mut x = seed | 1;
    let mut buf = vec![0u8; 1 << 16];
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        for chunk in buf[..n].chunks_mut(8) {
            // xorshift64: cheap, deterministic, not compressible.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let b = x.to_le_bytes();
            chunk.copy_from_slice(&b[..chunk.len()]);
        }
        f.write_all(&buf[..n])?;
        h.update(&buf[..n]);
        left -= n as u64;
    }
    f.flush()?;
    Ok(hex::encode(h.finalize()))
}
