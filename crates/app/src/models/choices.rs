//! Choosing a chat model in the window: the catalog with what fits on this
//! machine, one recommendation for what the person said matters (the
//! language they speak, how much memory they can spare), and downloads that
//! run beside everything else, reported as `ModelPull` events.
//!
//! The catalog, the fit check and the verified downloader live in the
//! `models` crate; this file only turns them into views, events and a
//! cancellable task per download.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::models::catalog::{self, CatalogEntry, FIT_CONTEXT_TOKENS};
use ::models::download::{sha256_file, EventSink};
use ::models::store::{self, Resolved};
use ::models::{fit, CancellationToken, DownloadEvent, DownloadOptions, Downloader, Fit, Outcome};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use super::views::ModelPullState;
use super::Models;
use crate::error::AppError;
use crate::events::AppEvent;
use crate::Result;

/// What the person said matters when choosing.
#[derive(Debug, Clone, Default, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct ModelNeeds {
    /// A language code the model must speak well ("en", "pt"); none: any.
    pub language: Option<String>,
    /// Memory the person can give the model, in bytes; none: what is free.
    #[ts(type = "number | null")]
    pub spare_bytes: Option<u64>,
}

/// One catalog model as the picker shows it.
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct ModelChoiceView {
    pub id: String,
    pub name: String,
    pub family: String,
    #[ts(type = "number")]
    pub size_bytes: u64,
    /// Weights plus the KV cache at the context replies use.
    #[ts(type = "number")]
    pub need_bytes: u64,
    /// "fits", "tight" or "too_big" against the memory available now.
    pub fit: String,
    pub licence: String,
    pub commercial_use: bool,
    pub languages: Vec<String>,
    pub installed: bool,
    /// Replies use it: Ei's model (the personas that follow Ei use it too).
    pub default: bool,
    /// The one model recommended for the needs asked with.
    pub recommended: bool,
    /// A download of it is running now.
    pub downloading: bool,
    /// It can be downloaded from here (not only from a registry package).
    pub downloadable: bool,
    pub caveat: Option<String>,
    /// How fast it ran on this computer, once measured (installed models).
    pub speed: Option<super::speed::SpeedView>,
    /// Ollama already has these bytes on this computer: installing uses
    /// Ollama's file and downloads nothing.
    pub in_ollama: bool,
}

/// The memory a model needs at the context replies use.
fn need_of(e: &CatalogEntry) -> u64 {
    fit::need_bytes(e.size_bytes, e.kv_bytes_per_token, FIT_CONTEXT_TOKENS)
}

fn speaks(e: &CatalogEntry, language: &str) -> bool {
    let want = language.split(['-', '_']).next().unwrap_or(language).to_ascii_lowercase();
    e.languages.iter().any(|l| l.eq_ignore_ascii_case(&want))
}

/// The catalog model to recommend: among those that speak the language,
/// fit in the memory the person spares (and the machine has), and can be
/// installed from here or already are, the largest (larger models of these
/// families answer better); commercial-use licences first, then files whose
/// hash the publisher gave (no caveat). None fitting: the smallest that
/// speaks the language.
pub(crate) fn recommend(entries: &[&'static CatalogEntry], needs: &ModelNeeds, available: Option<u64>, models_dir: &Path) -> Option<&'static str> {
    let usable = |e: &&&CatalogEntry| {
        needs.language.as_deref().is_none_or(|l| speaks(e, l)) && (e.hf.is_some() || store::is_installed(models_dir, e))
    };
    // What the person spares is the model's whole allowance; the machine's
    // free memory must also leave room for everything else (fit's share).
    let fitting = entries
        .iter()
        .filter(usable)
        .filter(|e| needs.spare_bytes.is_none_or(|s| need_of(e) <= s))
        .filter(|e| available.is_none_or(|a| fit::judge(need_of(e), a).fit == Fit::Fits))
        .max_by_key(|e| (e.commercial_use, e.caveat.is_none(), e.size_bytes));
    fitting.or_else(|| entries.iter().filter(usable).min_by_key(|e| e.size_bytes)).map(|e| e.id)
}

impl Models {
    /// The model Ei replies with, as a local file stem (none when Ei is on
    /// an account's model).
    async fn in_use(&self) -> Option<String> {
        let ei = self.ctx.ledger.persona(ledger::EI_PERSONA_ID).await.ok()?;
        ei.model.strip_prefix("local:").map(str::to_owned)
    }

    /// The catalog with fit, install state and one recommendation.
    pub async fn model_choices(&self, needs: &ModelNeeds) -> Vec<ModelChoiceView> {
        let dir = self.ctx.data_dir().models();
        let available = fit::mem_available();
        let in_use = self.in_use().await;
        let entries: Vec<&'static CatalogEntry> = catalog::CATALOG.iter().collect();
        let recommended = recommend(&entries, needs, available, &dir);
        let running = self.pulls.lock().map(|p| p.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
        let blobs = self.ollama_blobs();
        let in_ollama = |sha: &str| blobs.iter().any(|b| b.sha256.eq_ignore_ascii_case(sha));
        let mut choices: Vec<ModelChoiceView> = entries
            .into_iter()
            .map(|e| ModelChoiceView {
                id: e.id.to_owned(),
                name: e.name.to_owned(),
                family: e.family.to_owned(),
                size_bytes: e.size_bytes,
                need_bytes: need_of(e),
                // Without /proc/meminfo the honest answer is "not known to fit".
                fit: available.map_or(Fit::Tight, |a| fit::judge(need_of(e), a).fit).as_str().to_owned(),
                licence: e.licence.to_owned(),
                commercial_use: e.commercial_use,
                languages: e.languages.iter().map(|l| (*l).to_owned()).collect(),
                installed: store::is_installed(&dir, e),
                default: in_use.as_deref() == Some(e.stem()),
                recommended: recommended == Some(e.id),
                downloading: running.iter().any(|r| r == e.id),
                downloadable: e.hf.is_some(),
                caveat: e.caveat.map(str::to_owned),
                speed: super::speed::read(&dir, e.stem()),
                in_ollama: in_ollama(e.sha256),
            })
            .collect();
        // Ollama's other models, after the catalog: used where Ollama keeps
        // them. What they are licensed under is whatever their publisher
        // said; Ollama's files do not say, so neither do we.
        for b in blobs.iter().filter(|b| !catalog::CATALOG.iter().any(|e| e.sha256.eq_ignore_ascii_case(&b.sha256))) {
            let name = store::ollama_name(b);
            let stem = store::ollama_stem(&name);
            let kv = ::models::gguf::read_file(&b.path).ok().and_then(|i| i.kv_bytes_per_token()).unwrap_or(0);
            let need = fit::need_bytes(b.size_bytes, kv, FIT_CONTEXT_TOKENS);
            choices.push(ModelChoiceView {
                id: format!("{}{name}", store::OLLAMA_PREFIX),
                family: "Ollama".to_owned(),
                size_bytes: b.size_bytes,
                need_bytes: need,
                fit: available.map_or(Fit::Tight, |a| fit::judge(need, a).fit).as_str().to_owned(),
                licence: String::new(),
                commercial_use: false,
                languages: Vec::new(),
                installed: dir.join(format!("{stem}.gguf")).is_file(),
                default: in_use.as_deref() == Some(stem.as_str()),
                recommended: false,
                downloading: false,
                downloadable: false,
                caveat: None,
                speed: super::speed::read(&dir, &stem),
                in_ollama: true,
                name,
            });
        }
        choices
    }

    /// Measures how fast an installed model reads and writes on this
    /// computer, keeps the figures and answers them.
    pub async fn measure_model_speed(&self, id: &str) -> Result<super::speed::SpeedView> {
        let dir = self.ctx.data_dir().models();
        let r = store::resolve(&dir, id).map_err(|e| AppError::new("MODEL_NOT_FOUND", e.to_string()))?;
        if let Resolved::Catalog(e) = &r {
            if !store::is_installed(&dir, e) {
                return Err(AppError::new("MODEL_NOT_FOUND", format!("{} is not installed: download it first", e.name)));
            }
        }
        let file = r.file();
        let stem = file.strip_suffix(".gguf").unwrap_or(&file);
        let speed = super::speed::measure(&self.ctx, stem).await?;
        super::speed::write(&dir, stem, speed).map_err(|e| AppError::new("STORAGE_SAVE_FAILED", e.to_string()))?;
        Ok(speed)
    }

    /// Starts downloading a catalog model in the background; progress,
    /// the end and any failure arrive as `ModelPull` events. Returns at once.
    pub fn pull_model(self: &Arc<Self>, id: &str) -> Result<()> {
        let dir = self.ctx.data_dir().models();
        if let Some(name) = id.strip_prefix(store::OLLAMA_PREFIX) {
            return self.use_from_ollama(id, name);
        }
        let entry = match store::resolve(&dir, id) {
            Ok(Resolved::Catalog(e)) => e,
            Ok(Resolved::Local { .. }) => return Err(AppError::invalid(format!("{id} is a file of your own, not a catalog model"))),
            Err(e) => return Err(AppError::new("MODEL_NOT_FOUND", e.to_string())),
        };
        let Some(request) = ::models::hf_request(entry, &dir, &catalog::hf_endpoint()) else {
            return Err(AppError::new("MODEL_NOT_DOWNLOADABLE", format!("{} can only be installed by setup (it has no download source)", entry.name)));
        };
        if store::is_installed(&dir, entry) {
            return Err(AppError::new("MODEL_EXISTS", format!("{} is already installed", entry.name)));
        }
        let cancel = CancellationToken::new();
        {
            let mut pulls = self.pulls.lock().map_err(|_| AppError::new("INTERNAL", "the download list is unavailable"))?;
            if pulls.contains_key(entry.id) {
                return Err(AppError::new("MODEL_DOWNLOADING", format!("{} is already downloading", entry.name)));
            }
            pulls.insert(entry.id.to_owned(), cancel.clone());
        }
        let this = self.clone();
        let mut stop = self.ctx.shutdown_signal();
        tokio::spawn(async move {
            let id = entry.id.to_owned();
            std::fs::create_dir_all(&dir).ok();
            let sink = this.progress_sink(&id);
            let blob = this.ollama_blobs().into_iter().find(|b| b.sha256.eq_ignore_ascii_case(entry.sha256));
            let outcome = match (blob, Downloader::new(DownloadOptions::default())) {
                // Ollama has these exact bytes: copied and checked like a
                // download (hash, header, atomic rename), nothing fetched.
                (Some(blob), _) => {
                    this.emit_pull(&id, ModelPullState::Verifying, 0, entry.size_bytes, 0, None);
                    let dest = dir.join(entry.file);
                    let copied = tokio::task::spawn_blocking(move || ::models::download::install_copy(entry.id, &blob.path, entry.sha256, &dest, true)).await;
                    match copied {
                        Ok(Ok(path)) => Some(Ok(Outcome::Installed { path, sha256: entry.sha256.to_owned() })),
                        Ok(Err(e)) => Some(Err(e)),
                        Err(e) => {
                            this.emit_pull(&id, ModelPullState::Failed, 0, entry.size_bytes, 0, Some(format!("the copy stopped: {e}")));
                            None
                        }
                    }
                }
                (None, Ok(d)) => {
                    let stopping = cancel.clone();
                    tokio::select! {
                        o = d.run(&request, sink, cancel) => Some(o),
                        _ = stop.wait_for(|s| *s) => { stopping.cancel(); None }
                    }
                }
                (None, Err(e)) => {
                    this.emit_pull(&id, ModelPullState::Failed, 0, entry.size_bytes, 0, Some(format!("cannot start the HTTP client: {e}")));
                    None
                }
            };
            if let Ok(mut pulls) = this.pulls.lock() {
                pulls.remove(&id);
            }
            match outcome {
                Some(Ok(Outcome::Installed { .. })) => {
                    // The picker shows how fast it runs here: measured now,
                    // while the person is still looking at it.
                    this.emit_pull(&id, ModelPullState::Measuring, entry.size_bytes, entry.size_bytes, 0, None);
                    if let Err(e) = this.measure_model_speed(&id).await {
                        tracing::warn!(model = %id, code = e.code, error = %e.message, "could not measure the model's speed");
                    }
                    this.emit_pull(&id, ModelPullState::Installed, entry.size_bytes, entry.size_bytes, 0, None)
                }
                Some(Ok(Outcome::Paused { bytes_done, bytes_needed })) => this.emit_pull(
                    &id,
                    ModelPullState::Paused,
                    bytes_done,
                    entry.size_bytes,
                    0,
                    Some(format!("The disk is full: free {:.1} GB and download again; what was downloaded is kept.", bytes_needed as f64 / 1e9)),
                ),
                Some(Ok(Outcome::Cancelled { bytes_done })) => this.emit_pull(&id, ModelPullState::Cancelled, bytes_done, entry.size_bytes, 0, None),
                Some(Err(e)) => this.emit_pull(&id, ModelPullState::Failed, 0, entry.size_bytes, 0, Some(e.to_string())),
                None => {}
            }
        });
        Ok(())
    }

    /// Makes one of Ollama's models usable here, read where Ollama keeps
    /// it, and reports it installed like a finished download.
    fn use_from_ollama(&self, id: &str, name: &str) -> Result<()> {
        let dir = self.ctx.data_dir().models();
        let blob = self
            .ollama_blobs()
            .into_iter()
            .find(|b| store::ollama_name(b) == name)
            .ok_or_else(|| AppError::new("MODEL_NOT_FOUND", format!("Ollama has no model named {name}")))?;
        store::link_ollama_blob(&dir, &blob).map_err(|e| AppError::new("MODEL_LOAD_FAILED", e.to_string()))?;
        self.emit_pull(id, ModelPullState::Installed, blob.size_bytes, blob.size_bytes, 0, None);
        Ok(())
    }

    /// Stops a running download; the bytes already fetched are kept and
    /// the next download of it resumes.
    pub fn cancel_model_pull(&self, id: &str) -> bool {
        match self.pulls.lock().ok().and_then(|p| p.get(id).cloned()) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Deletes an installed catalog model or a model file of the person's
    /// own; the default one cannot go (replies use it).
    pub async fn remove_model(&self, id: &str) -> Result<()> {
        let dir = self.ctx.data_dir().models();
        let r = store::resolve(&dir, id).map_err(|e| AppError::new("MODEL_NOT_FOUND", e.to_string()))?;
        let stem = r.file().strip_suffix(".gguf").map(str::to_owned);
        if stem.is_some() && (stem == self.in_use().await || stem.as_deref() == Some(super::default_local_model(&dir).as_str())) {
            return Err(AppError::invalid("replies use this model now: choose another one first"));
        }
        if self.pulls.lock().is_ok_and(|p| p.contains_key(id)) {
            return Err(AppError::new("MODEL_DOWNLOADING", "it is downloading: cancel the download first"));
        }
        store::remove(&dir, &r).map_err(|e| AppError::new("STORAGE_SAVE_FAILED", e.to_string()))?;
        if let Some(stem) = stem {
            super::speed::forget(&dir, &stem);
        }
        Ok(())
    }

    /// Makes an installed model the profile's default and answers its spec
    /// (`local:stem`). Checks the file against its pinned hash first when
    /// it is a catalog model: a file changed on disk is not used.
    pub async fn choose_default_model(&self, id: &str) -> Result<String> {
        let dir = self.ctx.data_dir().models();
        let r = store::resolve(&dir, id).map_err(|e| AppError::new("MODEL_NOT_FOUND", e.to_string()))?;
        let path = dir.join(r.file());
        if let Resolved::Catalog(e) = &r {
            if !store::is_installed(&dir, e) {
                return Err(AppError::new("MODEL_NOT_FOUND", format!("{} is not installed: download it first", e.name)));
            }
            let (p, want) = (path.clone(), e.sha256);
            let sha = tokio::task::spawn_blocking(move || sha256_file(&p))
                .await
                .map_err(|e| AppError::new("INTERNAL", e.to_string()))?
                .map_err(|e| AppError::new("MODEL_LOAD_FAILED", format!("cannot read {}: {e}", path.display())))?;
            if sha != want {
                return Err(AppError::new(
                    "MODEL_LOAD_FAILED",
                    format!("{} changed on disk (sha256 {sha}, expected {want}): remove it and download it again", path.display()),
                ));
            }
        }
        providers::validate_gguf_file(&path)?;
        let chosen = store::DefaultModel { id: r.id(), file: r.file(), spec: r.spec() };
        store::write_default(&dir, &chosen).map_err(|e| AppError::new("STORAGE_SAVE_FAILED", e.to_string()))?;
        Ok(chosen.spec)
    }

    /// Progress at most a few times a second, every change of state at once.
    fn progress_sink(self: &Arc<Self>, id: &str) -> EventSink {
        let this = Arc::downgrade(self);
        let id = id.to_owned();
        let last = std::sync::Mutex::new(None::<Instant>);
        Arc::new(move |e: &DownloadEvent| {
            let Some(this) = this.upgrade() else { return };
            match e {
                DownloadEvent::Started { bytes_total, resumed_from, .. } => {
                    this.emit_pull(&id, ModelPullState::Downloading, *resumed_from, *bytes_total, 0, None)
                }
                DownloadEvent::Progress { bytes_done, bytes_total, rate_bps, .. } => {
                    let due = last.lock().map(|mut l| {
                        let due = l.is_none_or(|t| t.elapsed() >= Duration::from_millis(250));
                        if due {
                            *l = Some(Instant::now());
                        }
                        due
                    });
                    if due.unwrap_or(true) {
                        this.emit_pull(&id, ModelPullState::Downloading, *bytes_done, *bytes_total, *rate_bps, None)
                    }
                }
                DownloadEvent::Restarted { reason, .. } | DownloadEvent::Retrying { reason, .. } => {
                    this.emit_pull(&id, ModelPullState::Retrying, 0, 0, 0, Some(reason.clone()))
                }
                DownloadEvent::Verifying { .. } => this.emit_pull(&id, ModelPullState::Verifying, 0, 0, 0, None),
                // The end is reported once the task has finished.
                DownloadEvent::Paused { .. } | DownloadEvent::Installed { .. } => {}
            }
        })
    }

    fn emit_pull(&self, id: &str, state: ModelPullState, bytes_done: u64, bytes_total: u64, rate_bps: u64, message: Option<String>) {
        self.ctx.emit(AppEvent::ModelPull { id: id.to_owned(), state, bytes_done, bytes_total, rate_bps, message });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ollama's folder as Ollama writes it (the real Ollama cannot be
    /// installed here): a GGUF blob named by its hash, and a manifest that
    /// names it `mistral:7b`.
    fn fake_ollama(dir: &Path) -> String {
        let blobs = dir.join("blobs");
        std::fs::create_dir_all(&blobs).expect("blobs");
        let tmp = blobs.join("incoming");
        let sha = ::models::testkit::write_synthetic_gguf(&tmp, 8192, 3).expect("gguf");
        std::fs::rename(&tmp, blobs.join(format!("sha256-{sha}"))).expect("name");
        let manifest = dir.join("manifests/registry.ollama.ai/library/mistral");
        std::fs::create_dir_all(&manifest).expect("manifests");
        let layers = serde_json::json!({"layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": format!("sha256:{sha}")}]});
        std::fs::write(manifest.join("7b"), layers.to_string()).expect("manifest");
        sha
    }

    #[tokio::test]
    async fn a_model_ollama_has_is_offered_and_used_in_place_without_a_download() {
        let t = crate::context::testing::context(&[]).await;
        let ollama = tempfile::tempdir().expect("tmp");
        let sha = fake_ollama(ollama.path());
        let models = Arc::new(Models::with_ollama_dir(t.ctx.clone(), ollama.path().to_path_buf()));
        let offered = models.model_choices(&ModelNeeds::default()).await;
        let row = offered.iter().find(|c| c.id == "ollama:mistral:7b").expect("offered");
        assert!(row.in_ollama && !row.installed && !row.downloadable && !row.recommended, "{row:?}");
        assert!(!offered.iter().any(|c| c.id != row.id && c.in_ollama), "no catalog model is in this Ollama");

        let mut events = t.ctx.subscribe();
        models.pull_model("ollama:mistral:7b").expect("use Ollama's copy");
        let installed = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if let Ok(AppEvent::ModelPull { id, state, .. }) = events.recv().await {
                    if id == "ollama:mistral:7b" {
                        break state;
                    }
                }
            }
        })
        .await
        .expect("an event");
        assert_eq!(installed, ModelPullState::Installed);
        let row = models.model_choices(&ModelNeeds::default()).await.into_iter().find(|c| c.id == "ollama:mistral:7b").expect("still offered");
        assert!(row.installed);
        let spec = models.choose_default_model("ollama:mistral:7b").await.expect("use for replies");
        assert_eq!(spec, "local:ollama-mistral-7b");
        // Read where Ollama keeps it: the same file, not a second copy.
        use std::os::unix::fs::MetadataExt;
        let ours = std::fs::metadata(t.ctx.data_dir().models().join("ollama-mistral-7b.gguf")).expect("linked");
        let theirs = std::fs::metadata(ollama.path().join(format!("blobs/sha256-{sha}"))).expect("blob");
        assert_eq!((ours.dev(), ours.ino()), (theirs.dev(), theirs.ino()));
    }

    fn entries() -> Vec<&'static CatalogEntry> {
        catalog::CATALOG.iter().collect()
    }

    #[test]
    fn the_recommendation_follows_language_and_memory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let gb = 1_000_000_000u64;
        let any = ModelNeeds { language: None, spare_bytes: None };
        let pt = |spare| ModelNeeds { language: Some("pt-BR".into()), spare_bytes: spare };
        // Plenty of memory: the largest commercial-use model that downloads.
        let big = recommend(&entries(), &any, Some(64 * gb), dir.path()).expect("one");
        assert!(catalog::find(big).is_some_and(|e| e.commercial_use && e.hf.is_some() && e.caveat.is_none()), "{big}");
        // Two GB to spare: something that needs no more, speaking Portuguese.
        let small = recommend(&entries(), &pt(Some(2 * gb)), Some(64 * gb), dir.path()).expect("one");
        let e = catalog::find(small).expect("catalog");
        assert!(need_of(e) <= 2 * gb && speaks(e, "pt"), "{small} needs {}", need_of(e));
        // Nothing needs as little as 1 GB: the smallest that speaks it, not none.
        let tiny = recommend(&entries(), &pt(Some(gb)), Some(64 * gb), dir.path()).expect("one");
        let t = catalog::find(tiny).expect("catalog");
        assert!(speaks(t, "pt") && need_of(t) > gb, "{tiny}");
        assert!(entries().iter().filter(|c| speaks(c, "pt") && c.hf.is_some()).all(|c| c.size_bytes >= t.size_bytes), "{tiny} is the smallest");
        assert!(need_of(catalog::find(big).expect("catalog")) > need_of(t), "more memory, a larger model");
        // The machine's free memory bounds what the person offers.
        let bounded = recommend(&entries(), &pt(Some(64 * gb)), Some(2 * gb), dir.path()).expect("one");
        assert!(fit::judge(need_of(catalog::find(bounded).expect("catalog")), 2 * gb).fit == Fit::Fits, "{bounded}");
    }
}
