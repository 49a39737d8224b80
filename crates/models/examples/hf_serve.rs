//! Serves GGUF files the way the Hugging Face hub does, for `HF_ENDPOINT`
//! (an offline mirror, or an end-to-end `ledgermind models pull`):
//!
//! `cargo run -p models --example hf_serve -- [--port N] [--throttle-mbps M] FILE...`
//!
//! Each FILE is served at `/{any repo}/resolve/{any revision}/{its name}`;
//! its SHA-256 is computed at start and sent as `X-Linked-Etag`. Prints the
//! bytes sent on Ctrl-C.

use std::path::PathBuf;
use std::sync::atomic::Ordering;

#[tokio::main]
async fn main() {
    let mut port = 8765u16;
    let mut throttle = 0u64;
    let mut files = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--port" => port = args.next().and_then(|p| p.parse().ok()).unwrap_or(port),
            "--throttle-mbps" => throttle = args.next().and_then(|p| p.parse::<u64>().ok()).unwrap_or(0) * 1_000_000,
            f => files.push(PathBuf::from(f)),
        }
    }
    let server = match models::testkit::HfServer::start(port).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("hf_serve: cannot listen on {port}: {e}");
            std::process::exit(1);
        }
    };
    server.faults.throttle_bps.store(throttle, Ordering::SeqCst);
    for f in files {
        let Some(name) = f.file_name().and_then(|n| n.to_str()).map(str::to_owned) else { continue };
        match models::download::sha256_file(&f).and_then(|sha| server.add_file(&name, f.clone(), &sha).map(|_| sha)) {
            Ok(sha) => println!("serving {name} sha256 {sha}"),
            Err(e) => eprintln!("hf_serve: {}: {e}", f.display()),
        }
    }
    println!("HF_ENDPOINT={}", server.endpoint());
    let _ = tokio::signal::ctrl_c().await;
    println!("body bytes sent: {}", server.stats.body_bytes_sent.load(Ordering::SeqCst));
}
