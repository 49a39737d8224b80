//! Integration tests of the ledger: one module per feature.

mod chain;
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
