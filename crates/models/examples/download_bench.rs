//! Download benchmark: our downloader beside `curl` on the same file from
//! the same local server in the same run, the bytes fetched twice when a
//! download process is killed (SIGKILL) at 50 % and started again, and the
//! server's faults: a flipped byte, a stall, a server that answers 200 to a
//! Range request.
//!
//! `cargo run -p models --example download_bench [-- FILE [RUNS [KILLS]]]`
//! FILE defaults to a 256 MiB synthetic GGUF; give a real model file (its
//! SHA-256 is computed first) to measure on it. Our figure includes what
//! curl does not do: SHA-256 of every byte, the journal, the GGUF header
//! check, fsync and the rename; curl only writes the file (so "curl+fsync",
//! curl then an fsync of its file, and "curl+sha256sum+sync", what a
//! download checked against its hash costs with curl, are printed too).
//! With `DOWNLOAD_BENCH_BASELINE=<another build's download_bench>` that
//! build's downloader and ours also run as processes of their own, turn
//! about, in the same runs. Exits non-zero when a check fails (more than
//! 1 % fetched twice, a corruption not caught, a fault variant that does
//! not finish verified).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use models::download::{part_path, sha256_file, DownloadEvent, EventSink};
use models::testkit::{write_synthetic_gguf, HfServer};
use models::{
    CancellationToken, DownloadError, DownloadOptions, DownloadRequest, Downloader, Outcome,
};

const REV: &str = "0000000000000000000000000000000000000000";

#[derive(Debug, thiserror::Error)]
enum BenchError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Download(#[from] DownloadError),
    #[error("the download ended without installing: {0:?}")]
    NotInstalled(Outcome),
    #[error("curl exited {0}")]
    Curl(ExitStatus),
    #[error("the resumed download process failed: {0}")]
    Resume(ExitStatus),
    #[error("the first download never reached half the file")]
    NeverHalf,
    #[error("{0}")]
    Check(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BenchError {
    let what = what.into();
    move |source| BenchError::Io { what, source }
}

fn request(url: &str, sha: &str, size: u64, dest: &Path) -> DownloadRequest {
    DownloadRequest {
        id: "bench".into(),
        url: url.into(),
        revision: REV.into(),
        sha256: sha.into(),
        size,
        dest: dest.into(),
    }
}

#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<DownloadEvent>>>);

impl Events {
    fn sink(&self) -> EventSink {
        let v = self.0.clone();
        Arc::new(move |e: &DownloadEvent| {
            // Progress is once a second; only state changes are kept.
            if !matches!(e, DownloadEvent::Progress { .. }) {
                if let Ok(mut v) = v.lock() {
                    v.push(e.clone());
                }
            }
        })
    }
    fn all(&self) -> Vec<DownloadEvent> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

async fn download(
    req: &DownloadRequest,
    opts: DownloadOptions,
    ev: &Events,
) -> Result<Outcome, DownloadError> {
    let d = Downloader::new(opts).map_err(|e| DownloadError::Io {
        id: req.id.clone(),
        what: "cannot start the HTTP client".into(),
        source: std::io::Error::other(e),
    })?;
    d.run(req, ev.sink(), CancellationToken::new()).await
}

/// Seconds to download, verify and install.
async fn ours(req: &DownloadRequest) -> Result<f64, BenchError> {
    let t0 = Instant::now();
    match download(req, DownloadOptions::default(), &Events::default()).await? {
        Outcome::Installed { .. } => Ok(t0.elapsed().as_secs_f64()),
        other => Err(BenchError::NotInstalled(other)),
    }
}

/// Seconds for curl to write the file, and with an fsync of it after.
fn curl(url: &str, out: &Path) -> Result<(f64, f64), BenchError> {
    let t0 = Instant::now();
    curl_fetch(url, out)?;
    let plain = t0.elapsed().as_secs_f64();
    std::fs::File::open(out)
        .and_then(|f| f.sync_all())
        .map_err(io(format!("cannot sync {}", out.display())))?;
    Ok((plain, t0.elapsed().as_secs_f64()))
}

fn curl_fetch(url: &str, out: &Path) -> Result<(), BenchError> {
    let st = Command::new("curl")
        .args(["-sS", "-L", "-o"])
        .arg(out)
        .arg(url)
        .status()
        .map_err(io("cannot run curl"))?;
    if !st.success() {
        return Err(BenchError::Curl(st));
    }
    Ok(())
}

/// Seconds for curl, then `sha256sum` of its file, then `sync` of it: what
/// a download checked against its hash and made durable costs with curl.
fn curl_verified(url: &str, out: &Path, sha: &str) -> Result<f64, BenchError> {
    let t0 = Instant::now();
    curl_fetch(url, out)?;
    let sum = Command::new("sha256sum")
        .arg(out)
        .output()
        .map_err(io("cannot run sha256sum"))?;
    let said = String::from_utf8_lossy(&sum.stdout);
    if !said.starts_with(sha) {
        return Err(BenchError::Check(format!("sha256sum said {said}")));
    }
    let st = Command::new("sync")
        .arg(out)
        .status()
        .map_err(io("cannot run sync"))?;
    if !st.success() {
        return Err(BenchError::Check(format!("sync exited {st}")));
    }
    Ok(t0.elapsed().as_secs_f64())
}

/// Seconds for a download_bench binary's child mode (a process of its own)
/// to download, verify and install: another build's downloader as an arm.
fn child_process(exe: &Path, req: &DownloadRequest) -> Result<f64, BenchError> {
    let t0 = Instant::now();
    let st = Command::new(exe)
        .args(["--child", &req.url, &req.sha256, &req.size.to_string()])
        .arg(&req.dest)
        .status()
        .map_err(io(format!("cannot run {}", exe.display())))?;
    if !st.success() {
        return Err(BenchError::Resume(st));
    }
    Ok(t0.elapsed().as_secs_f64())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Child mode: download and exit (the parent kills it half way).
async fn child(args: &[String]) -> i32 {
    let [url, sha, size, dest] = args else {
        return 2;
    };
    let Ok(size) = size.parse() else { return 2 };
    match ours(&request(url, sha, size, Path::new(dest))).await {
        Ok(_) => 0,
        Err(e) => {
            eprintln!("child: {e}");
            1
        }
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        std::process::exit(child(&args[1..]).await);
    }
    match run(&args).await {
        Ok(true) => {}
        Ok(false) => {
            eprintln!("download_bench: a check failed (see above)");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("download_bench: {e}");
            std::process::exit(1);
        }
    }
}

struct Bench {
    server: HfServer,
    url: String,
    sha: String,
    size: u64,
    name: String,
    work: PathBuf,
}

impl Bench {
    fn sent(&self) -> u64 {
        self.server.stats.body_bytes_sent.load(Ordering::SeqCst)
    }
    fn dest(&self, sub: &str) -> PathBuf {
        self.work.join(sub).join(&self.name)
    }
    fn req(&self, dest: &Path) -> DownloadRequest {
        request(&self.url, &self.sha, self.size, dest)
    }
}

/// Returns whether every check passed.
async fn run(args: &[String]) -> Result<bool, BenchError> {
    let tmp = tempfile::tempdir().map_err(io("cannot make a temporary folder"))?;
    let runs: usize = args.get(1).and_then(|r| r.parse().ok()).unwrap_or(3).max(1);
    let (file, sha, what) = match args.first() {
        Some(f) => {
            let p = PathBuf::from(f);
            let sha = sha256_file(&p).map_err(io(f.clone()))?;
            (p, sha, "given file")
        }
        None => {
            let p = tmp.path().join("synthetic.gguf");
            let sha = write_synthetic_gguf(&p, 256 << 20, 42)
                .map_err(io("cannot write the synthetic file"))?;
            (p, sha, "synthetic GGUF")
        }
    };
    let size = std::fs::metadata(&file)
        .map_err(io(file.display().to_string()))?
        .len();
    let name = file
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| BenchError::Check("the file has no name".into()))?
        .to_owned();
    let server = HfServer::start(0)
        .await
        .map_err(io("cannot start the server"))?;
    server
        .add_file(&name, file.clone(), &sha)
        .map_err(io("cannot serve the file"))?;
    let url = format!("{}/bench/repo-GGUF/resolve/{REV}/{name}", server.endpoint());
    let b = Bench {
        server,
        url,
        sha,
        size,
        name,
        work: tmp.path().to_path_buf(),
    };
    println!(
        "file: {} ({what}), {size} bytes, sha256 {}",
        file.display(),
        b.sha
    );
    println!("server: local Hugging Face-shaped server (302 to /cdn/, Range), {runs} runs each, alternating curl / ours");
    let mut ok = true;

    let mb = |secs: f64| size as f64 / secs / 1e6;
    // Another build's download_bench (say main's), run in child mode as
    // one more arm; ours then also runs as a process of its own, so the two
    // downloaders are compared the same way.
    let baseline = std::env::var_os("DOWNLOAD_BENCH_BASELINE").map(PathBuf::from);
    let exe = std::env::current_exe().map_err(io("cannot find this program"))?;
    if let Some(base) = &baseline {
        println!(
            "baseline: {} (child mode, a process of its own)",
            base.display()
        );
    }
    let mut arms: Vec<(&str, Vec<f64>)> = vec![
        ("curl", Vec::new()),
        ("curl+fsync", Vec::new()),
        ("curl+sha256sum+sync", Vec::new()),
        ("ours", Vec::new()),
    ];
    if baseline.is_some() {
        arms.push(("ours (process)", Vec::new()));
        arms.push(("baseline (process)", Vec::new()));
    }
    for i in 0..runs {
        let out = b.work.join("curl.out");
        let (c, cs) = curl(&b.url, &out)?;
        let _ = std::fs::remove_file(&out);
        let cv = curl_verified(&b.url, &out, &b.sha)?;
        let _ = std::fs::remove_file(&out);
        let dest = b.dest("models");
        let o = ours(&b.req(&dest)).await?;
        let _ = std::fs::remove_file(&dest);
        let mut got = vec![c, cs, cv, o];
        if let Some(base) = &baseline {
            // Alternate which of the two goes first.
            let pair = [exe.as_path(), base.as_path()];
            let mut t = [0.0; 2];
            for k in 0..2 {
                let which = (k + i) % 2;
                let dest = b.dest(&format!("arm{which}"));
                t[which] = child_process(pair[which], &b.req(&dest))?;
                let _ = std::fs::remove_file(&dest);
            }
            got.extend(t);
        }
        let line: Vec<String> = arms
            .iter()
            .zip(&got)
            .map(|((name, _), secs)| format!("{name} {:.0} MB/s", mb(*secs)))
            .collect();
        println!("  run {}: {}", i + 1, line.join(", "));
        for ((_, v), secs) in arms.iter_mut().zip(got) {
            v.push(secs);
        }
    }
    let med: Vec<(&str, f64)> = arms
        .into_iter()
        .map(|(name, v)| (name, median(v)))
        .collect();
    let line: Vec<String> = med
        .iter()
        .map(|(name, secs)| format!("{name} {:.0} MB/s", mb(*secs)))
        .collect();
    println!("throughput (median of {runs}): {}", line.join(", "));
    let c = med[0].1;
    let ratios: Vec<String> = med[1..]
        .iter()
        .map(|(name, secs)| format!("{name}/curl = {:.2}", c / secs))
        .collect();
    println!(
        "  {} (ours is hashed, verified, fsynced, installed; target ours/curl >= 0.90)",
        ratios.join(", ")
    );

    let kills: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(1).max(1);
    for _ in 0..kills {
        ok &= kill_at_half(&b).await?;
    }
    ok &= corrupted(&b).await?;
    ok &= stalled(&b).await?;
    ok &= no_range(&b).await?;
    Ok(ok)
}

/// Killed at 50 %: a real process, SIGKILL, then a second process resumes.
async fn kill_at_half(b: &Bench) -> Result<bool, BenchError> {
    let dest = b.dest("kill");
    let part = part_path(&dest);
    let before = b.sent();
    let exe = std::env::current_exe().map_err(io("cannot find this program"))?;
    let child_args = || {
        let mut c = Command::new(&exe);
        c.args(["--child", &b.url, &b.sha, &b.size.to_string()])
            .arg(&dest);
        c
    };
    let mut first = child_args()
        .spawn()
        .map_err(io("cannot start the first download"))?;
    let t0 = Instant::now();
    let killed_at = loop {
        let len = std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
        if len >= b.size / 2 {
            first.kill().map_err(io("cannot kill the first download"))?;
            let _ = first.wait();
            break std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
        }
        if t0.elapsed() > Duration::from_secs(300) {
            let _ = first.kill();
            return Err(BenchError::NeverHalf);
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    };
    let st = child_args()
        .status()
        .map_err(io("cannot start the second download"))?;
    if !st.success() {
        return Err(BenchError::Resume(st));
    }
    let verified = sha256_file(&dest).map_err(io(dest.display().to_string()))? == b.sha;
    let _ = std::fs::remove_file(&dest);
    let sent = b.sent() - before;
    let twice = sent.saturating_sub(b.size);
    let pct = twice as f64 * 100.0 / b.size as f64;
    let pass = verified && pct <= 1.0;
    println!(
        "kill at 50%: SIGKILL with {killed_at} bytes on disk ({:.1}%), resumed by a new process; fetched {sent} bytes for a {}-byte file: {twice} bytes twice ({pct:.3}% of the file; target <= 1%); installed file verified: {verified} -> {}",
        killed_at as f64 * 100.0 / b.size as f64,
        b.size,
        if pass { "ok" } else { "FAIL" }
    );
    Ok(pass)
}

/// One flipped byte anywhere: the hash fails, nothing is installed, the
/// part file is discarded.
async fn corrupted(b: &Bench) -> Result<bool, BenchError> {
    let mut all = true;
    for at in [12_345, b.size / 2, b.size - 1] {
        b.server.faults.corrupt_at.store(at, Ordering::SeqCst);
        let dest = b.dest("corrupt");
        let got = download(
            &b.req(&dest),
            DownloadOptions::default(),
            &Events::default(),
        )
        .await;
        b.server.faults.corrupt_at.store(u64::MAX, Ordering::SeqCst);
        let caught = matches!(&got, Err(DownloadError::HashMismatch { .. }));
        let clean = !dest.exists() && !part_path(&dest).exists();
        let pass = caught && clean;
        let said = match &got {
            Err(e) => e.to_string(),
            Ok(o) => format!("{o:?}"),
        };
        println!(
            "corrupt byte at offset {at}: {} -> {}",
            if pass {
                format!("caught, nothing installed, part discarded ({said})")
            } else {
                format!("NOT caught or not cleaned up: {said}")
            },
            if pass { "ok" } else { "FAIL" }
        );
        let _ = std::fs::remove_file(&dest);
        all &= pass;
    }
    Ok(all)
}

/// The server goes silent after a third of the file: the watchdog drops
/// the connection and the download resumes with Range.
async fn stalled(b: &Bench) -> Result<bool, BenchError> {
    let stall = Duration::from_secs(3);
    b.server
        .faults
        .stall_once_after
        .store(b.size / 3, Ordering::SeqCst);
    let dest = b.dest("stall");
    let ev = Events::default();
    let before = b.sent();
    let t0 = Instant::now();
    let opts = DownloadOptions {
        stall_timeout: stall,
        backoff_initial: Duration::from_millis(200),
        ..Default::default()
    };
    let got = download(&b.req(&dest), opts, &ev).await;
    let secs = t0.elapsed().as_secs_f64();
    let sent = b.sent() - before;
    let reason = ev.all().into_iter().find_map(|e| match e {
        DownloadEvent::Retrying { reason, .. } => Some(reason),
        _ => None,
    });
    let installed = matches!(got, Ok(Outcome::Installed { .. }));
    let pass = installed && reason.is_some() && sent == b.size;
    println!(
        "stall after {} bytes (watchdog {} s): retried ({}), installed verified: {installed}, {sent} bytes fetched for {} ({} twice), {secs:.1} s -> {}",
        b.size / 3,
        stall.as_secs(),
        reason.as_deref().unwrap_or("no retry"),
        b.size,
        sent.saturating_sub(b.size),
        if pass { "ok" } else { "FAIL" }
    );
    let _ = std::fs::remove_file(&dest);
    Ok(pass)
}

/// The connection drops at half and the server then answers the Range
/// request with 200: the download says so and starts again from zero.
async fn no_range(b: &Bench) -> Result<bool, BenchError> {
    b.server.faults.ignore_range.store(true, Ordering::SeqCst);
    b.server
        .faults
        .drop_once_after
        .store(b.size / 2, Ordering::SeqCst);
    let dest = b.dest("norange");
    let ev = Events::default();
    let before = b.sent();
    let opts = DownloadOptions {
        backoff_initial: Duration::from_millis(200),
        ..Default::default()
    };
    let got = download(&b.req(&dest), opts, &ev).await;
    b.server.faults.ignore_range.store(false, Ordering::SeqCst);
    let sent = b.sent() - before;
    let said = ev.all().into_iter().find_map(|e| match e {
        DownloadEvent::Restarted { reason, .. } => Some(reason),
        _ => None,
    });
    let installed = matches!(got, Ok(Outcome::Installed { .. }));
    let pass = installed
        && said
            .as_deref()
            .is_some_and(|r| r.contains("200") && r.contains("zero"));
    println!(
        "no Range (200 to a Range request) after a drop at 50%: said {:?}; installed verified: {installed}; {sent} bytes fetched for {} -> {}",
        said.as_deref().unwrap_or("nothing"),
        b.size,
        if pass { "ok" } else { "FAIL" }
    );
    let _ = std::fs::remove_file(&dest);
    Ok(pass)
}
