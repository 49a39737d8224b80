use std::path::{Path, PathBuf};

/// The layout of a profile's data directory, shared by the app and the CLI.
#[derive(Debug, Clone)]
pub struct DataDir {
    root: PathBuf,
}

impl DataDir {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// `LEDGERMIND_HOME`, else the OS data directory (`~/.local/share/ledgermind`).
    pub fn from_env() -> Self {
        if let Some(home) = std::env::var_os("LEDGERMIND_HOME").filter(|h| !h.is_empty()) {
            return Self::new(PathBuf::from(home));
        }
        let base = dirs::data_dir().unwrap_or_else(|| PathBuf::from("."));
        Self::new(base.join("ledgermind"))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn ledger(&self) -> PathBuf {
        self.root.join("ledger.db")
    }
    pub fn models(&self) -> PathBuf {
        self.root.join("models")
    }
    /// Evaluated prompts of the local model, kept between processes.
    pub fn prompt_cache(&self) -> PathBuf {
        self.root.join("cache").join("prompts")
    }
    /// Where an imported profile waits, verified, for the next start.
    pub fn staged_import(&self) -> PathBuf {
        self.root.join("import-staged")
    }
    /// Marker written (and synced) once the staged import is complete.
    pub fn staged_import_ready(&self) -> PathBuf {
        self.staged_import().join("READY")
    }

    /// Puts a staged import in place, before anything opens the profile:
    /// the current database and search index move to `replaced-<time>/`
    /// (nothing is deleted), the staged database takes their place, and the
    /// search index is rebuilt from it on open. Safe to re-run after a crash
    /// at any step: the marker goes last, and a missing staged database means
    /// the swap already happened.
    pub fn apply_staged_import(&self) -> std::io::Result<Option<PathBuf>> {
        if !self.staged_import_ready().exists() {
            if self.staged_import().exists() {
                // An import that never finished staging: nothing of it is used.
                std::fs::remove_dir_all(self.staged_import())?;
            }
            return Ok(None);
        }
        let staged = self.staged_import().join("ledger.db");
        let mut kept = None;
        if staged.exists() {
            let stamp = time::OffsetDateTime::now_utc().unix_timestamp();
            let aside = self.root.join(format!("replaced-{stamp}"));
            std::fs::create_dir_all(&aside)?;
            for name in ["ledger.db", "ledger.db-wal", "ledger.db-shm", "index.db", "index.db-wal", "index.db-shm"] {
                let from = self.root.join(name);
                if from.exists() {
                    std::fs::rename(&from, aside.join(name))?;
                }
            }
            // The WAL (if the staging connection left one) travels with its database.
            for suffix in ["-wal", "-shm"] {
                let from = self.staged_import().join(format!("ledger.db{suffix}"));
                if from.exists() {
                    std::fs::rename(&from, self.root.join(format!("ledger.db{suffix}")))?;
                }
            }
            std::fs::rename(&staged, self.ledger())?;
            kept = Some(aside);
        }
        std::fs::remove_dir_all(self.staged_import())?;
        Ok(kept)
    }
}
