//! Save slots, export/import, persona archive/delete, proofs and the ledger
//! benchmark.
//!
//! WIRING (for the lead; this file is not yet referenced by main.rs):
//!
//! 1. `main.rs`: add `mod vault_cmds;` and these variants to `enum Command`:
//! ```ignore
//!     /// Save slots: list | save SLOT NAME | restore SLOT | delete SLOT | undo.
//!     #[command(subcommand)]
//!     Checkpoint(vault_cmds::CheckpointCmd),
//!     /// Write the whole profile, encrypted, to FILE.
//!     Export { file: std::path::PathBuf, #[arg(long)] passphrase_file: std::path::PathBuf },
//!     /// Import an export FILE into an empty home.
//!     Import { file: std::path::PathBuf, #[arg(long)] passphrase_file: std::path::PathBuf },
//!     /// Print the inclusion proof of event SEQ (JSON).
//!     Prove { seq: i64 },
//!     /// Check an inclusion proof FILE offline; exit 0 only if it holds.
//!     CheckProof { file: std::path::PathBuf },
//!     /// Benchmarks.
//!     #[command(subcommand)]
//!     Bench(vault_cmds::BenchCmd),
//! ```
//! 2. `main.rs`, in the "commands that need no data directory" match, before
//!    the engine opens (import must not create a profile first):
//! ```ignore
//!         Command::CheckProof { file } => return vault_cmds::check_proof(file),
//!         Command::Import { .. } | Command::Bench(_) => {}
//! ```
//!    and inside `rt.block_on(async move {`, before `Ctx::open`:
//! ```ignore
//!         if let Command::Import { file, passphrase_file } = &cli.command {
//!             return vault_cmds::import(cli.home.clone(), file, passphrase_file).await;
//!         }
//!         if let Command::Bench(cmd) = &cli.command {
//!             return vault_cmds::bench(cmd).await;
//!         }
//! ```
//!    and in the dispatch `match cli.command`:
//! ```ignore
//!             Command::Checkpoint(cmd) => vault_cmds::checkpoint(&ctx, cmd).await,
//!             Command::Export { file, passphrase_file } => vault_cmds::export(&ctx, &file, &passphrase_file).await,
//!             Command::Prove { seq } => vault_cmds::prove(&ctx, seq).await,
//!             Command::Import { .. } | Command::Bench(_) | Command::CheckProof { .. } => ExitCode::SUCCESS,
//! ```
//! 3. `persona_cmds.rs`, `enum PersonaCmd`:
//! ```ignore
//!     /// Archive (or with --undo, unarchive) a persona.
//!     Archive { name: String, #[arg(long)] undo: bool },
//!     /// Delete an archived persona and erase its conversation.
//!     Delete { name: String, #[arg(long)] with_human_data: bool },
//! ```
//!    and in `persona_cmds::run`:
//! ```ignore
//!         PersonaCmd::Archive { name, undo } => crate::vault_cmds::persona_archive(ctx, &name, !undo).await,
//!         PersonaCmd::Delete { name, with_human_data } => crate::vault_cmds::persona_delete(ctx, &name, with_human_data).await,
//! ```
//! 4. `crates/app/src/lib.rs`: `mod vault;` (the engine wrappers used here).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use app::{AppError, DataDir};
use clap::Subcommand;
use ledger::{KeyringStore, LedgerOptions};

use crate::common::{fail, print_json, Ctx};

#[derive(Debug, Subcommand)]
pub enum CheckpointCmd {
    /// List the used slots (0-9 auto-saves, 10-14 manual).
    List {
        #[arg(long)]
        json: bool,
    },
    /// Save the current state into manual slot SLOT (10-14) as NAME.
    Save { slot: i64, name: String },
    /// Restore SLOT (appends a checkpoint_restored event; undoable).
    Restore { slot: i64 },
    /// Delete manual slot SLOT.
    Delete { slot: i64 },
    /// Undo the latest restore.
    Undo,
}

#[derive(Debug, Subcommand)]
pub enum BenchCmd {
    /// Append N signed events to a scratch profile and print the figures.
    Ledger {
        #[arg(long, default_value_t = 100_000)]
        events: usize,
        /// Scratch directory (default: a new temporary directory).
        #[arg(long)]
        dir: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
}

pub async fn checkpoint(ctx: &Ctx, cmd: CheckpointCmd) -> ExitCode {
    let engine = &ctx.engine;
    match cmd {
        CheckpointCmd::List { json } => match engine.vault().list_checkpoints().await {
            Ok(list) if json => print_json(&list),
            Ok(list) => {
                for c in list {
                    let kind = if c.slot < 10 { "auto" } else { "manual" };
                    println!("{:>2}  {:<6} seq={:<8} {}  {}", c.slot, kind, c.seq, c.created_at, c.name);
                }
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e),
        },
        CheckpointCmd::Save { slot, name } => match engine.vault().save_checkpoint(slot, &name).await {
            Ok(c) => print_json(&c),
            Err(e) => fail(&e),
        },
        CheckpointCmd::Restore { slot } => match engine.vault().restore_checkpoint(slot).await {
            Ok(r) => print_json(&r),
            Err(e) => fail(&e),
        },
        CheckpointCmd::Delete { slot } => match engine.vault().delete_checkpoint(slot).await {
            Ok(()) => {
                println!("deleted slot {slot}");
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e),
        },
        CheckpointCmd::Undo => match engine.vault().undo_restore().await {
            Ok(r) => print_json(&r),
            Err(e) => fail(&e),
        },
    }
}

fn read_passphrase(file: &Path) -> Result<String, AppError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| AppError::invalid(format!("cannot read the passphrase file {}: {e}", file.display())))?;
    let pass = text.trim_end_matches(['\r', '\n']).to_owned();
    if pass.is_empty() {
        return Err(AppError::invalid("the passphrase file is empty"));
    }
    Ok(pass)
}

pub async fn export(ctx: &Ctx, file: &Path, passphrase_file: &Path, include_keys: bool) -> ExitCode {
    let pass = match read_passphrase(passphrase_file) {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    let options = ledger::ExportOptions { include_keys };
    match ctx.engine.ledger().export_profile_with(file, &pass, options).await {
        Ok(s) => print_json(&s),
        Err(e) => fail(&e.into()),
    }
}

/// Runs without an open engine: the home must be empty.
pub async fn import(home: Option<PathBuf>, file: &Path, passphrase_file: &Path) -> ExitCode {
    let pass = match read_passphrase(passphrase_file) {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    let data_dir = home.map(DataDir::new).unwrap_or_else(DataDir::from_env);
    let keys = Arc::new(KeyringStore::new("ledgermind"));
    match ledger::import_profile(LedgerOptions::new(data_dir.ledger()), keys, file, &pass).await {
        Ok(l) => {
            let (seq, head) = l.head().await;
            let report = match l.verify().await {
                Ok(r) => r,
                Err(e) => return fail(&e.into()),
            };
            println!(
                "imported profile {} into {}: {} events, head {}, verify {}",
                l.profile_id(),
                data_dir.root().display(),
                seq,
                &head[..16.min(head.len())],
                if report.ok() { "ok" } else { "FAILED" }
            );
            if report.ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(3)
            }
        }
        Err(e) => fail(&e.into()),
    }
}

pub async fn persona_archive(ctx: &Ctx, name: &str, archived: bool) -> ExitCode {
    match ctx.engine.vault().archive_persona(name, archived).await {
        Ok(()) => {
            println!("{} {name}", if archived { "archived" } else { "unarchived" });
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

pub async fn persona_delete(ctx: &Ctx, name: &str, with_human_data: bool) -> ExitCode {
    match ctx.engine.vault().delete_persona(name, with_human_data).await {
        Ok(e) => {
            println!("deleted {name}: erased {} payloads", e.erased.len());
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

pub async fn prove(ctx: &Ctx, seq: i64) -> ExitCode {
    match ctx.engine.vault().prove(seq).await {
        Ok(p) => print_json(&p),
        Err(e) => fail(&e),
    }
}

/// Needs nothing but the proof file.
pub fn check_proof(file: &Path) -> ExitCode {
    let proof: ledger::Proof = match std::fs::read(file).map_err(|e| e.to_string()).and_then(|b| {
        serde_json::from_slice(&b).map_err(|e| format!("not a proof: {e}"))
    }) {
        Ok(p) => p,
        Err(e) => return fail(&AppError::invalid(format!("{}: {e}", file.display()))),
    };
    match ledger::check_proof(&proof) {
        Ok(()) => {
            println!("ok: event {} is in the signed tree of {} events (root {})", proof.seq, proof.tree_size, proof.root);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error [{}]: {e}", e.code());
            ExitCode::from(3)
        }
    }
}

pub async fn bench(cmd: &BenchCmd) -> ExitCode {
    let BenchCmd::Ledger { events, dir, json } = cmd;
    let scratch = match dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("ledgermind-bench-{}", std::process::id())),
    };
    if let Err(e) = std::fs::create_dir_all(&scratch) {
        return fail(&AppError::invalid(format!("cannot create {}: {e}", scratch.display())));
    }
    let result = ledger::bench_ledger(&scratch, *events).await;
    if dir.is_none() {
        let _ = std::fs::remove_dir_all(&scratch);
    }
    let r = match result {
        Ok(r) => r,
        Err(e) => return fail(&e.into()),
    };
    if *json {
        return print_json(&r);
    }
    println!("ledger bench, {} events (same run)", r.events);
    println!("  raw Ed25519 sign   {:>10.0} /s (1 thread, baseline)", r.raw_sign_per_s);
    println!("  raw Ed25519 verify {:>10.0} /s (1 thread, baseline)", r.raw_verify_per_s);
    println!(
        "  single durable append {:>7.0} /s  p50 {:.2} ms  p99 {:.2} ms  (goal p99 <= 5 ms) [{} appends]",
        r.single_append_per_s, r.single_p50_ms, r.single_p99_ms, r.single_appends
    );
    println!(
        "  batched append (1000/tx) {:>7.0} /s = {:.2} x raw sign (goal >= 0.80); {:.2} x raw sign interleaved with the batches ({:.0} /s)",
        r.batched_append_per_s, r.batched_ratio_to_raw_sign, r.batched_ratio_to_raw_sign_beside, r.raw_sign_beside_batches_per_s
    );
    println!("  verify {:>10.0} events/s = {:.2} x raw verify (goal >= 0.80)", r.verify_per_s, r.verify_ratio_to_raw_verify);
    println!("  checkpoint save {:.1} ms, restore {:.1} ms", r.checkpoint_save_ms, r.checkpoint_restore_ms);
    println!("  export {:.1} ms ({} bytes), import {:.1} ms", r.export_ms, r.export_bytes, r.import_ms);
    ExitCode::SUCCESS
}
