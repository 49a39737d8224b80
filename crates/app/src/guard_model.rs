//! Finds the prompt-injection guard's trained classifier (a model file made
//! at setup from public data) and hands it to the guard. Without it the
//! guard runs on its rules alone, and says so in the log.

use std::path::{Path, PathBuf};

use runtime::guard::{install_classifier, installed_classifier, Classifier, CLASSIFIER_FILE};

/// Where the classifier came from, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardModelStatus {
    /// Loaded from this file (or an earlier call in this process did).
    Loaded(PathBuf),
    /// No file in any of the places searched: rules only.
    Missing(Vec<PathBuf>),
    /// A file exists but cannot be used: rules only.
    Invalid(PathBuf, String),
}

impl GuardModelStatus {
    /// One line for people: what the guard is running on.
    pub fn describe(&self) -> String {
        match self {
            Self::Loaded(p) => format!("guard: rules + classifier ({})", p.display()),
            Self::Missing(searched) => format!(
                "guard: classifier weights not found (looked for {CLASSIFIER_FILE} in {}); rules only. Run scripts/setup.sh to make them",
                searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            ),
            Self::Invalid(p, e) => format!("guard: cannot use {} ({e}); rules only", p.display()),
        }
    }
}

/// The models folders the guard looks in, in order: the data directory's,
/// then the setup cache's (`LEDGERMIND_CACHE`, else `~/.cache/ledgermind`).
pub fn guard_model_dirs(data_models: &Path) -> Vec<PathBuf> {
    let cache = std::env::var_os("LEDGERMIND_CACHE")
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
        .or_else(|| dirs::cache_dir().map(|c| c.join("ledgermind")));
    let mut out = vec![data_models.to_path_buf()];
    out.extend(cache.map(|c| c.join("models")));
    out
}

static LOADED_FROM: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Loads the first classifier file found in `dirs` and installs it for the
/// whole process (once; later calls report what is installed).
pub fn install_guard_model(dirs: &[PathBuf]) -> GuardModelStatus {
    if installed_classifier().is_some() {
        if let Some(p) = LOADED_FROM.get() {
            return GuardModelStatus::Loaded(p.clone());
        }
    }
    for dir in dirs {
        let path = dir.join(CLASSIFIER_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return GuardModelStatus::Invalid(path, e.to_string()),
        };
        return match Classifier::from_bytes(&bytes) {
            Ok(c) => {
                install_classifier(c);
                LOADED_FROM.get_or_init(|| path.clone());
                tracing::debug!(path = %path.display(), "guard classifier loaded");
                GuardModelStatus::Loaded(path)
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "guard classifier unusable; rules only");
                GuardModelStatus::Invalid(path, e.to_string())
            }
        };
    }
    tracing::warn!("guard classifier weights not found; the guard runs on its rules alone");
    GuardModelStatus::Missing(dirs.to_vec())
}
