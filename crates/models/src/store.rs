//! The models folder: what is installed, which model is the default, and
//! the rows `models list` shows.
//!
//! The default is kept in `<models_dir>/default-model.json`
//! (`{"id", "file", "spec"}`); [`read_default`] is how the app reads it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::catalog::{self, CatalogEntry, FIT_CONTEXT_TOKENS};
use crate::discover::OllamaBlob;
use crate::fit::{self, Fit};

pub const DEFAULT_FILE: &str = "default-model.json";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("unknown model id {id:?}; the ids are: {}", .known.join(", "))]
    UnknownId { id: String, known: Vec<String> },
    #[error("{id} is not installed (run `ledgermind models pull {id}`)")]
    NotInstalled { id: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

/// The chosen default, as written by `models use`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DefaultModel {
    /// Catalog id, or the file stem for a GGUF that is not in the catalog.
    pub id: String,
    /// The GGUF file name in the models folder.
    pub file: String,
    /// The model spec personas use: `local:<file stem>`.
    pub spec: String,
}

/// The default written by `models use`, if any (and if its file is there).
pub fn read_default(models_dir: &Path) -> Option<DefaultModel> {
    let text = std::fs::read_to_string(models_dir.join(DEFAULT_FILE)).ok()?;
    let d: DefaultModel = serde_json::from_str(&text).ok()?;
    models_dir.join(&d.file).is_file().then_some(d)
}

/// The id `models list` marks as default: the one chosen, else the catalog's.
pub fn default_id(models_dir: &Path) -> String {
    read_default(models_dir)
        .map(|d| d.id)
        .unwrap_or_else(|| catalog::DEFAULT_MODEL_ID.to_owned())
}

pub fn write_default(models_dir: &Path, d: &DefaultModel) -> Result<(), StoreError> {
    let io = |what: String| move |source| StoreError::Io { what, source };
    std::fs::create_dir_all(models_dir)
        .map_err(io(format!("cannot create {}", models_dir.display())))?;
    let path = models_dir.join(DEFAULT_FILE);
    let tmp = models_dir.join(format!("{DEFAULT_FILE}.tmp"));
    let text = serde_json::to_vec_pretty(d).map_err(|e| StoreError::Io {
        what: "cannot encode".into(),
        source: std::io::Error::other(e),
    })?;
    std::fs::write(&tmp, text).map_err(io(format!("cannot write {}", tmp.display())))?;
    std::fs::rename(&tmp, &path).map_err(io(format!("cannot write {}", path.display())))
}

/// A catalog id or the stem of a GGUF in the models folder.
#[derive(Debug, Clone)]
pub enum Resolved {
    Catalog(&'static CatalogEntry),
    Local { stem: String, path: PathBuf },
}

impl Resolved {
    pub fn id(&self) -> String {
        match self {
            Resolved::Catalog(e) => e.id.to_owned(),
            Resolved::Local { stem, .. } => stem.clone(),
        }
    }
    pub fn file(&self) -> String {
        match self {
            Resolved::Catalog(e) => e.file.to_owned(),
            Resolved::Local { stem, .. } => format!("{stem}.gguf"),
        }
    }
    pub fn spec(&self) -> String {
        let file = self.file();
        format!("local:{}", file.strip_suffix(".gguf").unwrap_or(&file))
    }
}

/// Finds `id` in the catalog, else among the GGUF files already in the
/// models folder (an `ollama:NAME` id as the link [`link_ollama_blob`]
/// made); an unknown id is an error listing every id.
pub fn resolve(models_dir: &Path, id: &str) -> Result<Resolved, StoreError> {
    if let Some(e) = catalog::find(id) {
        return Ok(Resolved::Catalog(e));
    }
    if let Some(name) = id.strip_prefix(OLLAMA_PREFIX) {
        let stem = ollama_stem(name);
        let path = models_dir.join(format!("{stem}.gguf"));
        if path.is_file() {
            return Ok(Resolved::Local { stem, path });
        }
    }
    let path = models_dir.join(format!("{id}.gguf"));
    if !id.contains('/') && path.is_file() {
        return Ok(Resolved::Local {
            stem: id.to_owned(),
            path,
        });
    }
    let mut known: Vec<String> = catalog::ids().into_iter().map(str::to_owned).collect();
    for stem in local_stems(models_dir) {
        if !catalog::CATALOG.iter().any(|e| e.stem() == stem) {
            known.push(stem);
        }
    }
    Err(StoreError::UnknownId {
        id: id.to_owned(),
        known,
    })
}

/// GGUF files in the models folder, by stem, sorted.
pub fn local_stems(models_dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(models_dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.strip_suffix(".gguf")
                        .filter(|_| e.path().is_file())
                        .map(str::to_owned)
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// How `models list`, `models pull` and the window name an Ollama model.
pub const OLLAMA_PREFIX: &str = "ollama:";

/// The stem an Ollama model is used under in the models folder:
/// `ollama-` and its `name:tag`, each character a file name should not
/// hold made `-` ("llama3.2:1b" → "ollama-llama3.2-1b").
pub fn ollama_stem(name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '-' })
        .collect();
    format!("ollama-{}", clean.trim_matches(['-', '.']))
}

/// The name an Ollama blob is shown and addressed by: its first
/// `name:tag`, else the start of its hash.
pub fn ollama_name(blob: &OllamaBlob) -> String {
    blob.names
        .first()
        .cloned()
        .unwrap_or_else(|| format!("sha256-{}", &blob.sha256[..blob.sha256.len().min(12)]))
}

/// Lets the local engine read a model where Ollama keeps it: a link in the
/// models folder to Ollama's blob, so its gigabytes are neither downloaded
/// nor copied again. A hard link where both folders share a file system
/// (`ollama rm` then leaves our model working), else a symbolic link. The
/// blob is only ever read, and removing the model here removes the link,
/// never Ollama's file. The blob must be a chat model's GGUF whose header
/// reads. Answers the stem.
pub fn link_ollama_blob(models_dir: &Path, blob: &OllamaBlob) -> Result<String, StoreError> {
    let io = |what: String| move |source| StoreError::Io { what, source };
    let info = crate::gguf::read_file(&blob.path).map_err(|e| StoreError::Io {
        what: format!("{} is not a usable GGUF file", blob.path.display()),
        source: std::io::Error::other(e.to_string()),
    })?;
    info.require_chat().map_err(|e| StoreError::Io {
        what: format!("{} cannot chat", ollama_name(blob)),
        source: std::io::Error::other(e.to_string()),
    })?;
    std::fs::create_dir_all(models_dir).map_err(io(format!("cannot create {}", models_dir.display())))?;
    let stem = ollama_stem(&ollama_name(blob));
    let link = models_dir.join(format!("{stem}.gguf"));
    if same_file(&link, &blob.path) {
        return Ok(stem);
    }
    // Made beside and renamed over: a stale link is replaced whole.
    let tmp = models_dir.join(format!(".{stem}.gguf.link"));
    let _ = std::fs::remove_file(&tmp);
    let linked = std::fs::hard_link(&blob.path, &tmp);
    #[cfg(unix)]
    let linked = linked.or_else(|_| std::os::unix::fs::symlink(&blob.path, &tmp));
    linked.map_err(io(format!("cannot link {}", blob.path.display())))?;
    std::fs::rename(&tmp, &link).map_err(io(format!("cannot put {} in place", link.display())))?;
    Ok(stem)
}

/// Whether two paths name the same file (through links).
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        std::fs::canonicalize(a).ok().is_some_and(|x| std::fs::canonicalize(b).ok() == Some(x))
    }
}

/// Installed means the file is in place at the pinned size (downloads
/// only reach that name after the hash and header checks).
pub fn is_installed(models_dir: &Path, e: &CatalogEntry) -> bool {
    std::fs::metadata(models_dir.join(e.file))
        .map(|m| m.is_file() && m.len() == e.size_bytes)
        .unwrap_or(false)
}

/// One line of `models list`.
#[derive(Debug, Clone, Serialize)]
pub struct ListRow {
    pub id: String,
    pub name: String,
    pub installed: bool,
    pub default: bool,
    pub size_bytes: u64,
    pub sha256: Option<String>,
    pub licence: Option<String>,
    pub commercial_use: Option<bool>,
    pub languages: Vec<String>,
    pub fit: Fit,
    pub source: String,
}

/// Catalog entries (installed or not), then GGUF files in the models folder
/// that are not catalog entries, then Ollama's GGUF blobs whose hash no
/// catalog entry has (catalog entries found there say so in `source`).
pub fn list(
    models_dir: &Path,
    hf_endpoint: &str,
    blobs: &[OllamaBlob],
    mem_available: Option<u64>,
) -> Vec<ListRow> {
    let default = default_id(models_dir);
    let judge = |size: u64, kv: u64| match mem_available {
        Some(avail) => fit::judge(fit::need_bytes(size, kv, FIT_CONTEXT_TOKENS), avail).fit,
        // Without /proc/meminfo the honest answer is "not known to fit".
        None => Fit::Tight,
    };
    let mut rows = Vec::new();
    for e in catalog::CATALOG {
        let blob = blobs
            .iter()
            .find(|b| b.sha256.eq_ignore_ascii_case(e.sha256));
        let source = match (e.hf, e.registry, blob) {
            (_, _, Some(b)) if !is_installed(models_dir, e) => {
                format!("ollama:{}", b.path.display())
            }
            (Some(hf), _, _) => hf.resolve_url(hf_endpoint),
            (None, Some(r), _) => {
                let p = r
                    .parts
                    .first()
                    .map(|p| format!("{}=={}", p.package, p.version))
                    .unwrap_or_default();
                format!("{}:{p}", r.registry)
            }
            (None, None, _) => String::new(),
        };
        rows.push(ListRow {
            id: e.id.to_owned(),
            name: e.name.to_owned(),
            installed: is_installed(models_dir, e),
            default: e.id == default,
            size_bytes: e.size_bytes,
            sha256: Some(e.sha256.to_owned()),
            licence: Some(e.licence.to_owned()),
            commercial_use: Some(e.commercial_use),
            languages: e.languages.iter().map(|l| (*l).to_owned()).collect(),
            fit: judge(e.size_bytes, e.kv_bytes_per_token),
            source,
        });
    }
    let linked: Vec<String> = blobs.iter().map(|b| ollama_stem(&ollama_name(b))).collect();
    for stem in local_stems(models_dir) {
        if catalog::CATALOG.iter().any(|e| e.stem() == stem) || linked.contains(&stem) {
            continue;
        }
        let path = models_dir.join(format!("{stem}.gguf"));
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let kv = crate::gguf::read_file(&path)
            .ok()
            .and_then(|i| i.kv_bytes_per_token())
            .unwrap_or(0);
        rows.push(ListRow {
            id: stem.clone(),
            name: stem.clone(),
            installed: true,
            default: stem == default,
            size_bytes: size,
            sha256: None,
            licence: None,
            commercial_use: None,
            languages: Vec::new(),
            fit: judge(size, kv),
            source: format!("file:{}", path.display()),
        });
    }
    for b in blobs {
        if catalog::CATALOG
            .iter()
            .any(|e| e.sha256.eq_ignore_ascii_case(&b.sha256))
        {
            continue;
        }
        let kv = crate::gguf::read_file(&b.path)
            .ok()
            .and_then(|i| i.kv_bytes_per_token())
            .unwrap_or(0);
        let name = ollama_name(b);
        let stem = ollama_stem(&name);
        rows.push(ListRow {
            id: format!("{OLLAMA_PREFIX}{name}"),
            name,
            installed: models_dir.join(format!("{stem}.gguf")).is_file(),
            default: stem == default,
            size_bytes: b.size_bytes,
            sha256: Some(b.sha256.clone()),
            licence: None,
            commercial_use: None,
            languages: Vec::new(),
            fit: judge(b.size_bytes, kv),
            source: format!("ollama:{}", b.path.display()),
        });
    }
    rows
}

/// Removes an installed model and any partial download of it; clears the
/// default if it was this model. Returns the files removed.
pub fn remove(models_dir: &Path, r: &Resolved) -> Result<Vec<PathBuf>, StoreError> {
    let dest = models_dir.join(r.file());
    let mut removed = Vec::new();
    for p in [
        dest.clone(),
        crate::download::part_path(&dest),
        crate::download::journal_path(&dest),
        PathBuf::from(format!("{}.part.lock", dest.display())),
    ] {
        // A link to an Ollama blob counts even when the blob is gone.
        if p.symlink_metadata().is_ok() {
            std::fs::remove_file(&p).map_err(|source| StoreError::Io {
                what: format!("cannot remove {}", p.display()),
                source,
            })?;
            removed.push(p);
        }
    }
    if removed.is_empty() {
        return Err(StoreError::NotInstalled { id: r.id() });
    }
    if read_default_raw(models_dir).is_some_and(|d| d.file == r.file()) {
        let _ = std::fs::remove_file(models_dir.join(DEFAULT_FILE));
    }
    Ok(removed)
}

fn read_default_raw(models_dir: &Path) -> Option<DefaultModel> {
    serde_json::from_str(&std::fs::read_to_string(models_dir.join(DEFAULT_FILE)).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_id_lists_ids() {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::write(dir.path().join("mine.gguf"), b"GGUF").expect("write");
        let err = resolve(dir.path(), "gpt-5").expect_err("unknown");
        let msg = err.to_string();
        assert!(
            msg.contains("qwen2.5-coder-1.5b")
                && msg.contains("qwen2.5-coder-0.5b")
                && msg.contains("mine"),
            "{msg}"
        );
        assert!(matches!(
            resolve(dir.path(), "mine"),
            Ok(Resolved::Local { .. })
        ));
    }

    #[test]
    fn an_ollama_blob_is_used_through_a_link_and_removing_it_keeps_the_blob() {
        let ollama = tempfile::tempdir().expect("tmp");
        let models = tempfile::tempdir().expect("tmp");
        let path = ollama.path().join("sha256-ab");
        let sha = crate::testkit::write_synthetic_gguf(&path, 4096, 7).expect("blob");
        let blob = OllamaBlob { sha256: sha, path: path.clone(), size_bytes: 4096, names: vec!["llama3.2:1b".into()] };
        let stem = link_ollama_blob(models.path(), &blob).expect("link");
        assert_eq!(stem, "ollama-llama3.2-1b");
        assert_eq!(link_ollama_blob(models.path(), &blob).expect("again"), stem, "linking twice is fine");
        assert!(same_file(&models.path().join("ollama-llama3.2-1b.gguf"), &path), "the blob itself, not a copy");
        let r = resolve(models.path(), "ollama:llama3.2:1b").expect("resolves");
        assert_eq!(r.spec(), "local:ollama-llama3.2-1b");
        let rows = list(models.path(), "http://hf", std::slice::from_ref(&blob), Some(1 << 34));
        let row: Vec<&ListRow> = rows.iter().filter(|r| r.name == "llama3.2:1b" || r.id.contains("ollama-")).collect();
        assert_eq!(row.len(), 1, "one row for the blob, not one more for its link: {rows:?}");
        assert!(row[0].installed && row[0].id == "ollama:llama3.2:1b");
        remove(models.path(), &r).expect("remove");
        assert!(path.is_file(), "Ollama's file stays");
        assert!(resolve(models.path(), "ollama:llama3.2:1b").is_err());
        // Not a GGUF: refused, nothing linked.
        let junk = ollama.path().join("sha256-cd");
        std::fs::write(&junk, b"not a model").expect("write");
        let bad = OllamaBlob { sha256: "cd".repeat(32), path: junk, size_bytes: 11, names: vec!["junk:latest".into()] };
        assert!(link_ollama_blob(models.path(), &bad).is_err());
        assert!(local_stems(models.path()).is_empty());
    }

    #[test]
    fn default_round_trip_and_remove_clears_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let e = catalog::find("qwen2.5-coder-0.5b").expect("entry");
        assert_eq!(default_id(dir.path()), catalog::DEFAULT_MODEL_ID);
        let r = Resolved::Catalog(e);
        let d = DefaultModel {
            id: r.id(),
            file: r.file(),
            spec: r.spec(),
        };
        write_default(dir.path(), &d).expect("write");
        // Not there yet: the default is not taken from a missing file.
        assert_eq!(read_default(dir.path()), None);
        std::fs::write(dir.path().join(e.file), b"x").expect("write");
        assert_eq!(
            read_default(dir.path()).map(|d| d.spec),
            Some("local:qwen2.5-coder-0.5b-instruct-q4_k_m".into())
        );
        let removed = remove(dir.path(), &r).expect("remove");
        assert_eq!(removed.len(), 1);
        assert!(!dir.path().join(DEFAULT_FILE).exists());
        assert!(matches!(
            remove(dir.path(), &r),
            Err(StoreError::NotInstalled { .. })
        ));
    }

    #[test]
    fn list_marks_installed_only_at_pinned_size() {
        let dir = tempfile::tempdir().expect("tmp");
        let e = catalog::find("smollm2-135m").expect("entry");
        std::fs::write(dir.path().join(e.file), b"short").expect("write");
        let rows = list(dir.path(), "https://huggingface.co", &[], Some(16 << 30));
        let row = rows.iter().find(|r| r.id == "smollm2-135m").expect("row");
        assert!(!row.installed);
        assert_eq!(rows.iter().filter(|r| r.default).count(), 1);
        assert!(rows
            .iter()
            .any(|r| r.id == "qwen2.5-coder-1.5b" && r.default && r.fit == Fit::Fits));
    }
}
