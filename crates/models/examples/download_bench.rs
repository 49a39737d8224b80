//! Download benchmark: our downloader beside `curl` on the same file from
//! the same local server in the same run, and the bytes fetched twice when
//! a download process is killed (SIGKILL) at 50 % and started again.
//!
//! `cargo run -p models --example download_bench [-- FILE [RUNS]]`
//! FILE defaults to a 256 MiB synthetic GGUF; give a real model file (its
//! SHA-256 is computed first) to measure on it. Our figure includes what
//! curl does not do: SHA-256 of every byte, the journal, the GGUF header
//! check, fsync and the rename; curl only writes the file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use models::download::{part_path, sha256_file, DownloadEvent, EventSink};
use models::testkit::{write_synthetic_gguf, HfServer};
use models::{CancellationToken, DownloadOptions, DownloadRequest, Downloader, Outcome};

const REV: &str = "0000000000000000000000000000000000000000";

fn request(url: &str, sha: &str, size: u64, dest: &Path) -> DownloadRequest {
    DownloadRequest { id: "bench".into(), url: url.into(), revision: REV.into(), sha256: sha.into(), size, dest: dest.into() }
}

async fn ours(req: &DownloadRequest) -> Result<f64, String> {
    let d = Downloader::new(DownloadOptions::default()).map_err(|e| e.to_string())?;
    let sink: EventSink = Arc::new(|_e: &DownloadEvent| {});
    let t0 = Instant::now();
    match d.run(req, sink, CancellationToken::new()).await.map_err(|e| e.to_string())? {
        Outcome::Installed { .. } => Ok(t0.elapsed().as_secs_f64()),
        other => Err(format!("{other:?}")),
    }
}

fn curl(url: &str, out: &Path) -> Result<f64, String> {
    let t0 = Instant::now();
    let st = Command::new("curl").args(["-sS", "-L", "-o"]).arg(out).arg(url).status().map_err(|e| format!("curl: {e}"))?;
    if !st.success() {
        return Err(format!("curl exited {st}"));
    }
    Ok(t0.elapsed().as_secs_f64())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Child mode: download and exit (the parent kills it half way).
async fn child(args: &[String]) -> i32 {
    let [url, sha, size, dest] = args else { return 2 };
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
    if let Err(e) = run(&args).await {
        eprintln!("download_bench: {e}");
        std::process::exit(1);
    }
}

async fn run(args: &[String]) -> Result<(), String> {
    let work = tempfile::tempdir().map_err(|e| e.to_string())?;
    let runs: usize = args.get(1).and_then(|r| r.parse().ok()).unwrap_or(3);
    let (file, sha, what) = match args.first() {
        Some(f) => {
            let p = PathBuf::from(f);
            let sha = sha256_file(&p).map_err(|e| format!("{f}: {e}"))?;
            (p, sha, "given file")
        }
        None => {
            let p = work.path().join("synthetic.gguf");
            let sha = write_synthetic_gguf(&p, 256 << 20, 42).map_err(|e| e.to_string())?;
            (p, sha, "synthetic GGUF")
        }
    };
    let size = std::fs::metadata(&file).map_err(|e| e.to_string())?.len();
    let name = file.file_name().and_then(|n| n.to_str()).ok_or("file name")?.to_owned();
    let server = HfServer::start(0).await.map_err(|e| e.to_string())?;
    server.add_file(&name, file.clone(), &sha).map_err(|e| e.to_string())?;
    let url = format!("{}/bench/repo-GGUF/resolve/{REV}/{name}", server.endpoint());
    println!("file: {} ({what}), {size} bytes, sha256 {sha}", file.display());
    println!("server: local Hugging Face-shaped server (302 to /cdn/, Range), {runs} runs each, alternating");

    let mut t_curl = Vec::new();
    let mut t_ours = Vec::new();
    for i in 0..runs {
        let out = work.path().join("curl.out");
        let c = curl(&url, &out)?;
        let _ = std::fs::remove_file(&out);
        let dest = work.path().join("models").join(&name);
        let o = ours(&request(&url, &sha, size, &dest)).await?;
        let _ = std::fs::remove_file(&dest);
        println!("  run {}: curl {:.0} MB/s, ours {:.0} MB/s", i + 1, size as f64 / c / 1e6, size as f64 / o / 1e6);
        t_curl.push(c);
        t_ours.push(o);
    }
    let (c, o) = (median(t_curl), median(t_ours));
    println!(
        "throughput (median): curl {:.0} MB/s, ours {:.0} MB/s (verified, installed) -> ours/curl = {:.2}",
        size as f64 / c / 1e6,
        size as f64 / o / 1e6,
        c / o
    );

    // Killed at 50 %: a real process, SIGKILL, then a second process resumes.
    let dest = work.path().join("kill").join(&name);
    let part = part_path(&dest);
    let before = server.stats.body_bytes_sent.load(Ordering::SeqCst);
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let child_args = |exe: &Path| {
        let mut c = Command::new(exe);
        c.args(["--child", &url, &sha, &size.to_string()]).arg(&dest);
        c
    };
    let mut first = child_args(&exe).spawn().map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let killed_at = loop {
        let len = std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
        if len >= size / 2 {
            first.kill().map_err(|e| e.to_string())?;
            let _ = first.wait();
            break std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
        }
        if t0.elapsed() > Duration::from_secs(300) {
            let _ = first.kill();
            return Err("the first download never reached half".into());
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    };
    let st = child_args(&exe).status().map_err(|e| e.to_string())?;
    if !st.success() {
        return Err(format!("the resumed download failed: {st}"));
    }
    let verified = sha256_file(&dest).map_err(|e| e.to_string())? == sha;
    let sent = server.stats.body_bytes_sent.load(Ordering::SeqCst) - before;
    let twice = sent.saturating_sub(size);
    println!(
        "kill at 50%: SIGKILL with {killed_at} bytes on disk ({:.1}%), resumed by a new process; fetched {sent} bytes for a {size}-byte file: {twice} bytes twice ({:.3}% of the file; target <= 1%); installed file verified: {verified}",
        killed_at as f64 * 100.0 / size as f64,
        twice as f64 * 100.0 / size as f64
    );
    Ok(())
}
