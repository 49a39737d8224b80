//! Extraction in a child process with a deadline: PDF libraries panic,
//! loop or abort on some files, and none of that can be caught inside the
//! app's own process. The child reads one file, extracts it and writes one
//! JSON [`Extraction`] on stdout; a crash, a hang or garbage becomes a
//! `Failed` status with the reason.
//!
//! The host binary becomes the child when its arguments start with
//! [`WORKER_ARG`] (the CLI and the desktop shell check this first thing in
//! `main`), so no second executable has to be shipped.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::extract::{extract_bytes, Extraction};

/// First argument that turns a host binary into the extraction child.
pub const WORKER_ARG: &str = "__library-extract";
/// Files larger than this are not read (a clear status instead).
pub const MAX_FILE_BYTES: u64 = 256 << 20;
/// Time one file may take by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How documents are extracted.
#[derive(Debug, Clone)]
pub enum Extractor {
    /// A child process: `program args… PATH`, killed at the deadline.
    Child { program: PathBuf, args: Vec<OsString>, timeout: Duration },
    /// In this process behind `catch_unwind` (tests, and hosts that cannot
    /// spawn): panics are caught, hangs and aborts are not.
    InProcess,
}

impl Extractor {
    /// This executable re-run as the worker (see the module docs).
    pub fn current_exe() -> Self {
        match std::env::current_exe() {
            Ok(program) => Self::Child { program, args: vec![WORKER_ARG.into()], timeout: DEFAULT_TIMEOUT },
            Err(e) => {
                tracing::warn!("cannot find this executable ({e}); extracting in process");
                Self::InProcess
            }
        }
    }

    pub fn extract(&self, path: &Path) -> Extraction {
        match std::fs::metadata(path) {
            Ok(m) if m.len() > MAX_FILE_BYTES => {
                return Extraction::Failed {
                    reason: format!("the file is {} MB; the limit is {} MB", m.len() >> 20, MAX_FILE_BYTES >> 20),
                }
            }
            Ok(_) => {}
            Err(e) => return Extraction::Failed { reason: format!("cannot read the file: {e}") },
        }
        match self {
            Self::InProcess => extract_file_caught(path),
            Self::Child { program, args, timeout } => in_child(program, args, path, *timeout),
        }
    }
}

fn extract_file_caught(path: &Path) -> Extraction {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => return Extraction::Failed { reason: format!("cannot read the file: {e}") },
    };
    match std::panic::catch_unwind(|| extract_bytes(path, &bytes)) {
        Ok(x) => x,
        Err(p) => {
            let msg = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned());
            Extraction::Failed { reason: format!("the parser crashed: {}", msg.unwrap_or_else(|| "panic".into())) }
        }
    }
}

fn in_child(program: &Path, args: &[OsString], path: &Path, timeout: Duration) -> Extraction {
    let mut child = match Command::new(program)
        .args(args)
        .arg(path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return Extraction::Failed { reason: format!("cannot start the extractor: {e}") },
    };
    // Drain stdout on a thread so a large result cannot block the child.
    let Some(mut stdout) = child.stdout.take() else {
        return Extraction::Failed { reason: "the extractor has no output pipe".into() };
    };
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = stdout.read_to_end(&mut out).map_err(|e| tracing::debug!("extractor pipe: {e}"));
        out
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if start.elapsed() >= timeout => {
                if let Err(e) = child.kill() {
                    tracing::warn!("cannot stop the extractor: {e}");
                }
                let _ = child.wait().map_err(|e| tracing::warn!("extractor wait: {e}"));
                break Err(format!("extraction took longer than {} s and was stopped", timeout.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => break Err(format!("lost the extractor: {e}")),
        }
    };
    match status {
        // A stopped child's own children may still hold the pipe open, so
        // its reader is left to finish on its own rather than waited for.
        Err(reason) => Extraction::Failed { reason },
        Ok(status) => match serde_json::from_slice::<Extraction>(&reader.join().unwrap_or_default()) {
            Ok(x) => x,
            Err(_) if !status.success() => {
                Extraction::Failed { reason: format!("the parser crashed on this file ({status})") }
            }
            Err(e) => Extraction::Failed { reason: format!("the extractor's answer is unreadable: {e}") },
        },
    }
}

/// The child's whole life: extract `args[0]` and print the JSON. Returns
/// the exit code. Panics are caught here too, so a panic is reported with
/// its message rather than as a bare crash.
pub fn worker_main(args: &[OsString]) -> i32 {
    let Some(path) = args.first() else {
        return 2;
    };
    let extraction = extract_file_caught(Path::new(path));
    let mut out = std::io::stdout().lock();
    match serde_json::to_writer(&mut out, &extraction) {
        Ok(()) if out.flush().is_ok() => 0,
        _ => 1,
    }
}

/// If this process was started as the worker, runs it and returns the
/// exit code; hosts call this first in `main`.
pub fn run_if_worker() -> Option<i32> {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.first().map(|a| a == WORKER_ARG) == Some(true) {
        // The parsers' panic messages must not reach the terminal.
        std::panic::set_hook(Box::new(|_| {}));
        Some(worker_main(&args[1..]))
    } else {
        None
    }
}
