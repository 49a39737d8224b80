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
    /// The person's models folder. Models installed system-wide (the
    /// `ledgermind-models` package: `/usr/share/ledgermind/models`, and
    /// `/usr/lib/ledgermind/models` for the native libraries they run on;
    /// `LEDGERMIND_SYSTEM_MODELS`, `:`-separated, replaces both) appear in
    /// it as symbolic links: read-only and memory-mapped where they are,
    /// never copied. A file of the person's own with the same name wins;
    /// links whose package was removed are taken away.
    pub fn models(&self) -> PathBuf {
        let dir = self.root.join("models");
        let system = std::env::var_os("LEDGERMIND_SYSTEM_MODELS")
            .unwrap_or_else(|| "/usr/share/ledgermind/models:/usr/lib/ledgermind/models".into());
        offer_installed_models(&dir, &std::env::split_paths(&system).collect::<Vec<_>>());
        dir
    }
    /// Evaluated prompts of the local model, kept between processes.
    pub fn prompt_cache(&self) -> PathBuf {
        self.root.join("cache").join("prompts")
    }

    /// How each conversation's last prompt was laid out (see
    /// `prompt::compact::Layout`), one file per persona.
    pub fn prompt_layouts(&self) -> PathBuf {
        self.root.join("cache").join("prompt-layouts")
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

/// Links each entry of the `system` folders into `dir` unless `dir` has one
/// of that name, and removes links into those folders whose target is gone.
/// Writes `bytes` to `path` through a temporary file renamed over it, so a
/// crash leaves either the old file or the new one, never half of one.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    let tmp = path.with_file_name(name);
    let written = std::fs::File::create(&tmp).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()
    });
    match written.and_then(|()| std::fs::rename(&tmp, path)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

fn offer_installed_models(dir: &Path, system: &[PathBuf]) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let dangling = e.file_type().is_ok_and(|t| t.is_symlink()) && !e.path().exists();
            if dangling && std::fs::read_link(e.path()).is_ok_and(|t| system.iter().any(|s| t.starts_with(s))) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    for sys in system {
        let Ok(entries) = std::fs::read_dir(sys) else { continue };
        if std::fs::create_dir_all(dir).is_err() {
            return;
        }
        for e in entries.flatten() {
            let link = dir.join(e.file_name());
            if std::fs::symlink_metadata(&link).is_err() {
                #[cfg(unix)]
                if let Err(err) = std::os::unix::fs::symlink(e.path(), &link) {
                    tracing::warn!(model = %e.path().display(), error = %err, "cannot offer an installed model");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn installed_models_are_linked_read_in_place_and_the_persons_own_win() {
        let sys = tempfile::tempdir().expect("tmp");
        let home = tempfile::tempdir().expect("tmp");
        std::fs::write(sys.path().join("a.gguf"), b"system a").expect("write");
        std::fs::write(sys.path().join("b.gguf"), b"system b").expect("write");
        std::fs::create_dir(sys.path().join("all-MiniLM-L6-v2")).expect("dir");
        let dir = home.path().join("models");
        std::fs::create_dir(&dir).expect("dir");
        std::fs::write(dir.join("b.gguf"), b"mine").expect("write");
        offer_installed_models(&dir, &[sys.path().to_path_buf(), home.path().join("absent")]);
        assert_eq!(std::fs::read_link(dir.join("a.gguf")).expect("a link"), sys.path().join("a.gguf"));
        assert_eq!(std::fs::read(dir.join("a.gguf")).expect("read"), b"system a");
        assert_eq!(std::fs::read(dir.join("b.gguf")).expect("read"), b"mine", "the person's own file wins");
        assert!(dir.join("all-MiniLM-L6-v2").is_dir());
        // The package removed: its links go, the person's file stays.
        std::fs::remove_file(sys.path().join("a.gguf")).expect("rm");
        offer_installed_models(&dir, &[sys.path().to_path_buf()]);
        assert!(std::fs::symlink_metadata(dir.join("a.gguf")).is_err(), "a dangling link into the package is removed");
        assert!(dir.join("b.gguf").is_file());
    }
}
