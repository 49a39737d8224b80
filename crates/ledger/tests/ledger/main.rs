//! Integration tests of the ledger: one module per feature.

mod bench;
mod chain;
mod checkpoints;
mod crash;
mod damage;
mod epochs;
mod erasure;
mod export;
mod office;
mod proofs;
mod queue;
mod replay;

use std::sync::Arc;

use ledger::{Ledger, LedgerOptions, MemoryKeyStore};

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub keys: Arc<MemoryKeyStore>,
    pub ledger: Ledger,
}

impl Fixture {
    pub async fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let keys = Arc::new(MemoryKeyStore::default());
        let ledger = Ledger::open(LedgerOptions::new(dir.path().join("ledger.db")), keys.clone())
            .await
            .expect("open ledger");
        Self { dir, keys, ledger }
    }

    pub async fn reopen(self) -> Self {
        let Fixture { dir, keys, ledger } = self;
        drop(ledger);
        let ledger = Ledger::open(LedgerOptions::new(dir.path().join("ledger.db")), keys.clone())
            .await
            .expect("reopen ledger");
        Self { dir, keys, ledger }
    }

    pub fn db_path(&self) -> std::path::PathBuf {
        self.dir.path().join("ledger.db")
    }
}

/// A raw connection that bypasses the ledger, as an outside tool would.
pub async fn raw(path: &std::path::Path) -> sqlx::SqliteConnection {
    use sqlx::ConnectOptions;
    sqlx::sqlite::SqliteConnectOptions::new().filename(path).connect().await.expect("raw connect")
}

pub fn say(persona: &str, id: &str, content: &str) -> ledger::EventBody {
    ledger::EventBody::MessageAdded {
        message_id: id.into(),
        persona_id: persona.into(),
        role: ledger::MessageRole::Human,
        content: content.into(),
        external_id: None,
        said_at: None,
    }
}

/// Every file under `dir`, recursively, with its bytes.
pub fn files_containing(dir: &std::path::Path, needle: &[u8]) -> Vec<std::path::PathBuf> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                if bytes.windows(needle.len()).any(|w| w == needle) {
                    hits.push(path);
                }
            }
        }
    }
    hits
}
