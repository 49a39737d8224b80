//! The in-app file chooser's backend: one folder's listing, with the places
//! a person starts from. A native dialog cannot be driven or seen by the
//! end-to-end tests (and did not open under Xvfb); this one is part of the
//! window, so it works with the keyboard, in both languages, everywhere.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::error::AppError;
use crate::Result;

/// Entries shown per folder; a larger folder says how many were left out.
const MAX_ENTRIES: usize = 2_000;

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct FolderView {
    /// The folder listed, absolute.
    pub path: String,
    pub parent: Option<String>,
    /// Sub-folders first, then the files with a wanted extension, each sorted
    /// by name (case-insensitive). Hidden entries are left out.
    pub entries: Vec<FolderEntryView>,
    /// Entries not shown because the folder holds more than the limit.
    pub left_out: u32,
    /// Where a person usually starts: home, the app's model folder, downloads.
    pub places: Vec<PlaceView>,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct FolderEntryView {
    pub name: String,
    pub path: String,
    pub is_dir: bool,
    #[ts(type = "number | null")]
    pub size: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct PlaceView {
    /// `home`, `models`, `downloads` (the UI names them in its language).
    pub key: String,
    pub path: String,
}

/// Lists `path` (the home folder when `None`), keeping files whose name ends
/// with one of `extensions` (without the dot, any case; all files when empty).
pub fn browse(path: Option<&Path>, extensions: &[String], models_dir: &Path) -> Result<FolderView> {
    let home = dirs::home_dir();
    let start = match (path, &home) {
        (Some(p), _) => p.to_path_buf(),
        (None, Some(h)) => h.clone(),
        (None, None) => PathBuf::from("/"),
    };
    if !start.is_absolute() {
        return Err(AppError::invalid(format!("{} is not an absolute path", start.display())));
    }
    let folder = std::fs::canonicalize(&start).map_err(|e| unreadable(&start, &e))?;
    if !folder.is_dir() {
        return Err(AppError::new("FILE_NOT_A_FOLDER", format!("{} is not a folder", folder.display())));
    }
    let wanted: Vec<String> = extensions.iter().map(|e| format!(".{}", e.trim_start_matches('.').to_lowercase())).collect();
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(&folder).map_err(|e| unreadable(&folder, &e))? {
        // An entry that vanished or cannot be read is skipped, not fatal.
        let Ok(entry) = entry else { continue };
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        // Follows symlinks, so a linked folder opens like a folder.
        let Ok(meta) = std::fs::metadata(entry.path()) else { continue };
        let is_dir = meta.is_dir();
        if !is_dir && !wanted.is_empty() && !wanted.iter().any(|w| name.to_lowercase().ends_with(w.as_str())) {
            continue;
        }
        entries.push(FolderEntryView {
            path: entry.path().to_string_lossy().into_owned(),
            name,
            is_dir,
            size: (!is_dir).then(|| meta.len()),
        });
    }
    entries.sort_by(|a, b| b.is_dir.cmp(&a.is_dir).then_with(|| a.name.to_lowercase().cmp(&b.name.to_lowercase())));
    let left_out = entries.len().saturating_sub(MAX_ENTRIES);
    entries.truncate(MAX_ENTRIES);
    let mut places = Vec::new();
    let mut place = |key: &str, p: Option<PathBuf>| {
        if let Some(p) = p.filter(|p| p.is_dir()) {
            places.push(PlaceView { key: key.to_owned(), path: p.to_string_lossy().into_owned() });
        }
    };
    place("home", home);
    place("models", Some(models_dir.to_path_buf()));
    place("downloads", dirs::download_dir());
    Ok(FolderView {
        path: folder.to_string_lossy().into_owned(),
        parent: folder.parent().map(|p| p.to_string_lossy().into_owned()),
        entries,
        left_out: u32::try_from(left_out).unwrap_or(u32::MAX),
        places,
    })
}

fn unreadable(path: &Path, e: &std::io::Error) -> AppError {
    match e.kind() {
        std::io::ErrorKind::NotFound => AppError::new("FILE_NOT_FOUND", format!("{} does not exist", path.display())),
        std::io::ErrorKind::PermissionDenied => {
            AppError::new("FILE_UNREADABLE", format!("you may not open {}", path.display()))
        }
        _ => AppError::new("FILE_UNREADABLE", format!("{} cannot be read: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &FolderView) -> Vec<(&str, bool)> {
        v.entries.iter().map(|e| (e.name.as_str(), e.is_dir)).collect()
    }

    #[test]
    fn lists_folders_first_then_wanted_files_without_hidden_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        for d in ["zeta", "Alpha", ".hidden-dir"] {
            std::fs::create_dir(dir.path().join(d)).expect("mkdir");
        }
        for f in ["b.gguf", "A.GGUF", "notes.txt", ".secret.gguf"] {
            std::fs::write(dir.path().join(f), b"12345").expect("write");
        }
        let v = browse(Some(dir.path()), &["gguf".into()], dir.path()).expect("listing");
        assert_eq!(names(&v), [("Alpha", true), ("zeta", true), ("A.GGUF", false), ("b.gguf", false)]);
        assert_eq!(v.entries[2].size, Some(5));
        assert_eq!(v.parent.as_deref(), dir.path().canonicalize().expect("canon").parent().and_then(|p| p.to_str()));
        assert!(v.places.iter().any(|p| p.key == "models"), "{:?}", v.places);

        let all = browse(Some(dir.path()), &[], dir.path()).expect("listing");
        assert!(names(&all).contains(&("notes.txt", false)));
    }

    #[test]
    fn bad_paths_say_what_is_wrong() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("model.gguf");
        std::fs::write(&file, b"x").expect("write");
        let code = |p: &Path| browse(Some(p), &[], dir.path()).expect_err("refused").code;
        assert_eq!(code(&dir.path().join("missing")), "FILE_NOT_FOUND");
        assert_eq!(code(&file), "FILE_NOT_A_FOLDER");
        assert_eq!(code(Path::new("relative/path")), "INVALID_INPUT");
    }
}
