//! `models`: the model manager from the command line (list, pull, use,
//! remove, servers). Only `use --persona` opens the engine (a persona's
//! model is a ledger event); the rest works on the models folder and the
//! network, so it needs no keychain.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use app::DataDir;
use clap::Subcommand;
use models::discover::{default_probes, discover, ollama_blobs, ollama_models_dir};
use models::download::{install_copy, sha256_file, EventSink};
use models::store::{self, Resolved};
use models::{DownloadEvent, DownloadOptions, Downloader, Outcome};

use crate::common::{fail, Ctx};

#[derive(Debug, Clone, Subcommand)]
pub enum ModelsCmd {
    /// Installed and catalog models, with licence, size and whether each fits in memory here.
    List {
        /// One JSON object per line: {id, name, installed, default, size_bytes, sha256, licence, commercial_use, languages, fit, source}.
        #[arg(long)]
        json: bool,
    },
    /// Download, verify and install a catalog model (resumes a partial download).
    Pull {
        id: String,
        /// Progress as {"id","bytes_done","bytes_total","rate_bps"} once a second, then {"id","installed":true,"sha256"}.
        #[arg(long)]
        json: bool,
    },
    /// Replies use an installed model: the default, Ei's and that of the personas on Ei's model; or only PERSONA's with --persona.
    Use {
        id: String,
        #[arg(long)]
        persona: Option<String>,
    },
    /// Delete an installed model (and any partial download of it).
    Remove { id: String },
    /// Model servers running on this machine (Ollama, LM Studio, Jan, llama.cpp, vLLM).
    Servers {
        /// One JSON object per server: {kind, url, models, needs_key}.
        #[arg(long)]
        json: bool,
    },
}

impl ModelsCmd {
    /// Personas' models are kept in the ledger.
    pub fn needs_engine(&self) -> bool {
        matches!(self, ModelsCmd::Use { .. })
    }
}

/// Exit code when the disk is full: the download is paused, not failed.
const EXIT_PAUSED: u8 = 75;
const EXIT_CANCELLED: u8 = 130;

fn models_dir(home: Option<PathBuf>) -> PathBuf {
    home.map(DataDir::new).unwrap_or_else(DataDir::from_env).models()
}

fn error(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(1)
}

fn line<T: serde::Serialize>(v: &T) -> bool {
    match serde_json::to_string(v) {
        Ok(s) => writeln!(std::io::stdout().lock(), "{s}").is_ok(),
        Err(_) => false,
    }
}

pub async fn run(home: Option<PathBuf>, cmd: ModelsCmd) -> ExitCode {
    let dir = models_dir(home);
    match cmd {
        ModelsCmd::List { json } => list(&dir, json),
        ModelsCmd::Pull { id, json } => pull(&dir, &id, json).await,
        ModelsCmd::Use { .. } => error("choosing a model needs the engine"),
        ModelsCmd::Remove { id } => remove(&dir, &id),
        ModelsCmd::Servers { json } => servers(json).await,
    }
}

/// `models use ID [--persona NAME]`: the personas' model specs in the ledger.
pub async fn run_with_engine(ctx: &Ctx, cmd: ModelsCmd) -> ExitCode {
    let ModelsCmd::Use { id, persona } = cmd else {
        return error("only `models use` needs the engine");
    };
    let Some(persona) = persona else {
        return match ctx.engine.personas().use_model(ctx.engine.models(), &id).await {
            Ok(changed) => {
                println!("default model: {id}");
                for p in changed {
                    println!("{}: {}", p.name, p.model);
                }
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e),
        };
    };
    let dir = ctx.engine.data_dir().models();
    let r = match installed(&dir, &id) {
        Ok(r) => r,
        Err(code) => return code,
    };
    match ctx.engine.personas().set_persona_model(&persona, &r.spec()).await {
        Ok(p) => {
            println!("{}: {}", p.name, p.model);
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

fn installed(dir: &Path, id: &str) -> Result<Resolved, ExitCode> {
    let r = store::resolve(dir, id).map_err(error)?;
    let ok = match &r {
        Resolved::Catalog(e) => store::is_installed(dir, e),
        Resolved::Local { path, .. } => path.is_file(),
    };
    if !ok {
        return Err(error(store::StoreError::NotInstalled { id: r.id() }));
    }
    Ok(r)
}

fn blobs() -> Vec<models::discover::OllamaBlob> {
    ollama_models_dir().map(|d| ollama_blobs(&d)).unwrap_or_default()
}

fn list(dir: &Path, json: bool) -> ExitCode {
    let rows = store::list(dir, &models::catalog::hf_endpoint(), &blobs(), models::fit::mem_available());
    for r in &rows {
        let ok = if json {
            line(r)
        } else {
            let mark = match (r.installed, r.default) {
                (true, true) => "* installed",
                (true, false) => "  installed",
                (false, true) => "* ",
                (false, false) => "  ",
            };
            let commercial = match r.commercial_use {
                Some(true) => "commercial use ok",
                Some(false) => "NON-COMMERCIAL",
                None => "licence unknown",
            };
            writeln!(
                std::io::stdout().lock(),
                "{:<22} {:>8.2} GB  {:<8} {:<12} {:<28} {} [{}]",
                r.id,
                r.size_bytes as f64 / 1e9,
                r.fit.as_str(),
                mark,
                r.licence.as_deref().unwrap_or("-"),
                commercial,
                r.languages.join(",")
            )
            .is_ok()
        };
        if !ok {
            return ExitCode::from(1);
        }
    }
    if !json {
        println!("(* = default; fit = weights + KV cache at {} tokens against available memory)", models::catalog::FIT_CONTEXT_TOKENS);
    }
    ExitCode::SUCCESS
}

fn remove(dir: &Path, id: &str) -> ExitCode {
    let r = match store::resolve(dir, id) {
        Ok(r) => r,
        Err(e) => return error(e),
    };
    match store::remove(dir, &r) {
        Ok(files) => {
            for f in files {
                println!("removed {}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => error(e),
    }
}

async fn servers(json: bool) -> ExitCode {
    let found = discover(&default_probes(), Duration::from_millis(800)).await;
    for s in &found {
        let ok = if json {
            line(&serde_json::json!({"kind": s.kind, "url": s.url, "models": s.models, "needs_key": s.needs_key}))
        } else {
            let kind = serde_json::to_value(s.kind).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
            let what = if s.needs_key { "needs its API key".to_owned() } else { format!("{} model(s): {}", s.models.len(), s.models.join(", ")) };
            writeln!(std::io::stdout().lock(), "{kind:<9} {:<32} {what}", s.url).is_ok()
        };
        if !ok {
            return ExitCode::from(1);
        }
    }
    if !json {
        if found.is_empty() {
            println!("no model server found on the default ports");
        }
        let b = blobs();
        if !b.is_empty() {
            println!("Ollama's downloaded GGUF files (usable read-only): {}", b.len());
            for blob in b {
                println!("  {} {} ({:.2} GB)", blob.names.join(", "), blob.path.display(), blob.size_bytes as f64 / 1e9);
            }
        }
    }
    ExitCode::SUCCESS
}

/// An Ollama model is not downloaded: the models folder links to
/// Ollama's own file (its name is its SHA-256, which Ollama checked).
fn pull_from_ollama(dir: &Path, id: &str, name: &str, json: bool) -> ExitCode {
    let found = blobs().into_iter().find(|b| b.names.iter().any(|n| n == name) || store::ollama_name(b) == name);
    let Some(blob) = found else {
        return error(format!("Ollama has no model named {name:?} (`ledgermind models list` shows the ones it has)"));
    };
    match store::link_ollama_blob(dir, &blob) {
        Ok(stem) => {
            if json {
                line(&installed_line(id, &blob.sha256));
            } else {
                println!("{id} is used from Ollama's copy {} as {stem}, nothing downloaded", blob.path.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => error(e),
    }
}

fn installed_line(id: &str, sha256: &str) -> serde_json::Value {
    serde_json::json!({"id": id, "installed": true, "sha256": sha256})
}

async fn pull(dir: &Path, id: &str, json: bool) -> ExitCode {
    if let Some(name) = id.strip_prefix(store::OLLAMA_PREFIX) {
        return pull_from_ollama(dir, id, name, json);
    }
    let entry = match store::resolve(dir, id) {
        Ok(Resolved::Catalog(e)) => e,
        Ok(Resolved::Local { path, .. }) => {
            return error(format!("{id} is a file in the models folder ({}), not a catalog model: nothing to pull", path.display()))
        }
        Err(e) => return error(e),
    };
    let done = |sha: &str| {
        if json {
            line(&installed_line(entry.id, sha));
        } else {
            println!("installed {} ({}), sha256 {sha}", entry.id, dir.join(entry.file).display());
        }
        ExitCode::SUCCESS
    };
    let dest = dir.join(entry.file);
    if dest.exists() {
        // Already there: installed only if it is the pinned file.
        return match sha256_file(&dest) {
            Ok(sha) if sha == entry.sha256 => done(&sha),
            Ok(sha) => error(format!(
                "{} is already in the models folder but is another file (sha256 {sha}, expected {}); remove it first",
                dest.display(),
                entry.sha256
            )),
            Err(e) => error(format!("cannot read {}: {e}", dest.display())),
        };
    }
    if let Some(avail) = models::fit::mem_available() {
        let need = models::fit::need_bytes(entry.size_bytes, entry.kv_bytes_per_token, models::catalog::FIT_CONTEXT_TOKENS);
        let report = models::fit::judge(need, avail);
        if report.fit == models::Fit::TooBig {
            eprintln!(
                "warning: {} needs about {:.1} GB and {:.1} GB of memory is available: it will not run well here",
                entry.id,
                need as f64 / 1e9,
                avail as f64 / 1e9
            );
        }
    }
    // Ollama already has these exact bytes: copy them, checked the same way.
    if let Some(blob) = blobs().into_iter().find(|b| b.sha256 == entry.sha256) {
        eprintln!("using Ollama's copy {} (same sha256), nothing to download", blob.path.display());
        let (id, src, sha, dest2) = (entry.id, blob.path.clone(), entry.sha256, dest.clone());
        let copied = tokio::task::spawn_blocking(move || install_copy(id, &src, sha, &dest2, true)).await;
        match copied {
            Ok(Ok(_)) => return done(entry.sha256),
            Ok(Err(e)) => eprintln!("warning: {e}; downloading instead"),
            Err(e) => eprintln!("warning: the copy failed ({e}); downloading instead"),
        }
    }
    let endpoint = models::catalog::hf_endpoint();
    let Some(req) = models::hf_request(entry, dir, &endpoint) else {
        let pkgs = entry.registry.map(|r| r.parts.iter().map(|p| format!("{}=={}", p.package, p.version)).collect::<Vec<_>>().join(", "));
        return error(format!("{id} has no Hugging Face source; it ships in the registry package {}", pkgs.unwrap_or_default()));
    };
    let downloader = match Downloader::new(DownloadOptions::default()) {
        Ok(d) => d,
        Err(e) => return error(format!("cannot start the HTTP client: {e}")),
    };
    let cancel = models::CancellationToken::new();
    {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                cancel.cancel();
            }
        });
    }
    let last_line = Arc::new(Mutex::new(Instant::now().checked_sub(Duration::from_secs(2)).unwrap_or_else(Instant::now)));
    let sink: EventSink = Arc::new(move |e: &DownloadEvent| report(e, json, &last_line));
    let outcome = downloader.run(&req, sink, cancel).await;
    match outcome {
        Ok(Outcome::Installed { sha256, .. }) => {
            if !json {
                eprintln!();
            }
            done(&sha256)
        }
        Ok(Outcome::Paused { bytes_done, bytes_needed }) => {
            eprintln!(
                "\npaused: the disk is full. Free {:.2} GB ({bytes_needed} bytes) and run `ledgermind models pull {}` again; the {bytes_done} bytes already downloaded are kept",
                bytes_needed as f64 / 1e9,
                entry.id
            );
            ExitCode::from(EXIT_PAUSED)
        }
        Ok(Outcome::Cancelled { bytes_done }) => {
            eprintln!("\ncancelled; {bytes_done} bytes kept, `ledgermind models pull {}` resumes", entry.id);
            ExitCode::from(EXIT_CANCELLED)
        }
        Err(e) => {
            eprintln!();
            error(e)
        }
    }
}

/// Progress once a second (a JSON line, or one rewritten stderr line);
/// state changes always.
fn report(e: &DownloadEvent, json: bool, last: &Mutex<Instant>) {
    match e {
        DownloadEvent::Progress { id, bytes_done, bytes_total, rate_bps, eta_secs } => {
            let Ok(mut last) = last.lock() else { return };
            if last.elapsed() < Duration::from_millis(950) {
                return;
            }
            *last = Instant::now();
            if json {
                line(&serde_json::json!({"id": id, "bytes_done": bytes_done, "bytes_total": bytes_total, "rate_bps": rate_bps}));
            } else {
                let eta = eta_secs.map(|s| format!("{}:{:02} left", s / 60, s % 60)).unwrap_or_else(|| "waiting for data".into());
                eprint!(
                    "\r{id}: {:.1}/{:.1} MB ({:.0}%), {:.1} MB/s, {eta}    ",
                    *bytes_done as f64 / 1e6,
                    *bytes_total as f64 / 1e6,
                    *bytes_done as f64 * 100.0 / (*bytes_total).max(1) as f64,
                    *rate_bps as f64 / 1e6
                );
            }
        }
        DownloadEvent::Started { resumed_from, bytes_total, .. } if *resumed_from > 0 => {
            eprintln!("resuming at byte {resumed_from} of {bytes_total}");
        }
        DownloadEvent::Restarted { reason, .. } => eprintln!("\n{reason}"),
        DownloadEvent::Retrying { attempt, in_millis, reason, .. } => {
            eprintln!("\n{reason}; retry {attempt} in {:.1} s", *in_millis as f64 / 1000.0)
        }
        DownloadEvent::Verifying { .. } if !json => eprint!("\nverifying the GGUF header… "),
        _ => {}
    }
}
