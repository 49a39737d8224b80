//! Test helper for the crash test: appends events in a loop and prints each
//! acknowledged seq (flushed) until killed. Keys live in a file-backed
//! keystore (test support only) so they outlive the process.
//!
//! Usage: crash_writer DB_PATH KEYS_DIR

use std::io::Write;
use std::sync::Arc;

use ledger::{Draft, EventBody, FileKeyStore, Ledger, LedgerOptions, MessageRole, EI_PERSONA_ID, HUMAN_ENTITY};

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(db), Some(keys)) = (args.next(), args.next()) else {
        eprintln!("usage: crash_writer DB_PATH KEYS_DIR");
        return std::process::ExitCode::from(2);
    };
    let ledger = match Ledger::open(LedgerOptions::new(db), Arc::new(FileKeyStore::new(keys))).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("open: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    let mut out = std::io::stdout().lock();
    for i in 0u64.. {
        let body = |k: u64| EventBody::MessageAdded {
            message_id: format!("crash-{}-{k}", std::process::id()),
            persona_id: EI_PERSONA_ID.into(),
            role: MessageRole::Human,
            content: format!("crash test line {k}"),
            external_id: None,
            said_at: None,
        };
        // Mix single appends and small batches.
        let result = if i % 5 == 0 {
            ledger.append_drafts((0..7).map(|k| Draft::by(HUMAN_ENTITY, body(i * 100 + k))).collect()).await
        } else {
            ledger.append(HUMAN_ENTITY, body(i * 100)).await.map(|r| vec![r])
        };
        match result {
            Ok(receipts) => {
                if let Some(last) = receipts.last() {
                    if writeln!(out, "{}", last.seq).and_then(|()| out.flush()).is_err() {
                        break;
                    }
                }
            }
            Err(e) => {
                eprintln!("append: {e}");
                return std::process::ExitCode::from(1);
            }
        }
    }
    std::process::ExitCode::SUCCESS
}
