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
}
