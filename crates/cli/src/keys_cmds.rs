//! `ledgermind keys`: which private signing keys this keychain holds, and a
//! new key epoch for the lost ones.

use std::process::ExitCode;

use clap::Subcommand;

use crate::common::{fail, print_json, Ctx};

#[derive(Debug, Subcommand)]
pub enum KeysCmd {
    /// One line per signing entity: its public key in force and whether this
    /// keychain holds its private key (present, missing or locked).
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Start a new key epoch: new keys replace the lost ones, recorded in a
    /// signed event (old key, new key, reason). Events before it keep
    /// verifying with the old public keys.
    Rotate {
        /// Replace every key whose private key is missing from the keychain.
        #[arg(long, required = true)]
        all_missing: bool,
    },
}

pub async fn run(ctx: &Ctx, cmd: KeysCmd) -> ExitCode {
    match cmd {
        KeysCmd::Status { json } => status(ctx, json).await,
        KeysCmd::Rotate { all_missing: _ } => rotate(ctx).await,
    }
}

fn short(key: &str) -> &str {
    &key[..key.len().min(16)]
}

async fn status(ctx: &Ctx, json: bool) -> ExitCode {
    let keys = match ctx.engine.ledger().key_status().await {
        Ok(k) => k,
        Err(e) => return fail(&e.into()),
    };
    if json {
        return print_json(&keys);
    }
    for k in &keys {
        let state = serde_json::to_value(k.private_key).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
        println!("{:<38} {:<24} {}…  {}", k.entity, k.name, short(&k.public_key), state);
    }
    let missing = keys.iter().filter(|k| k.private_key == ledger::PrivateKeyState::Missing).count();
    let locked = keys.iter().filter(|k| k.private_key == ledger::PrivateKeyState::Locked).count();
    if locked > 0 {
        println!("the keychain did not answer for {locked} key(s): unlock it (or start one) and try again");
    } else if missing > 0 {
        println!(
            "{missing} private key(s) missing: restore the keychain or an export that holds them, or start a new key epoch with `ledgermind keys rotate --all-missing`"
        );
    }
    ExitCode::SUCCESS
}

async fn rotate(ctx: &Ctx) -> ExitCode {
    let replaced = match ctx.engine.keys().rotate_missing_keys().await {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    if replaced.is_empty() {
        println!("nothing to replace: this keychain holds every private key in force");
        return ExitCode::SUCCESS;
    }
    println!("new key epoch: replaced {} key(s)", replaced.len());
    for r in &replaced {
        let how = if r.self_certified {
            "self-certified by the new key (the old human key was lost)"
        } else {
            "endorsed by the human key"
        };
        println!(
            "  event {}: {} ({}) {}… -> {}…, {how}",
            r.seq,
            r.name,
            r.entity,
            short(&r.old_public_key),
            short(&r.new_public_key)
        );
    }
    ExitCode::SUCCESS
}
