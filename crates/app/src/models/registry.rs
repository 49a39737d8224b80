//! The provider registry: which engine answers a model spec. The local
//! llama.cpp engine for `local:…`, an OpenAI-compatible client for an
//! account (its key from the OS keychain), or, in tests, one scripted fake
//! for everything.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ledger::Ledger;
use providers::{OpenAiCompatible, Provider};

use super::spec::{ModelSpec, DEFAULT_LOCAL_MODEL, TINY_LOCAL_MODEL};
use crate::paths::DataDir;
use crate::Result;

/// What answers a model spec now.
pub(crate) struct Serving {
    /// The spec to name in requests: the one asked for, or the local model
    /// standing in for a server of this machine that stopped answering.
    pub spec: ModelSpec,
    pub provider: Arc<dyn Provider>,
    /// Says so when a stand-in answers (the chat shows it once).
    pub stand_in: Option<String>,
}

pub struct Providers {
    #[cfg(feature = "local")]
    pub(crate) local: Arc<providers::LocalEngine>,
    replacement: Option<Arc<dyn Provider>>,
}

impl Providers {
    /// The local models of `data_dir` (their evaluated prompts kept in its
    /// prompt cache between processes); `threads`: llama.cpp threads;
    /// 0: as many as the cores other programs leave free, per generation;
    /// `replacement`: serves every spec instead (tests use a scripted fake).
    pub fn new(data_dir: &DataDir, threads: usize, replacement: Option<Arc<dyn Provider>>) -> Self {
        #[cfg(not(feature = "local"))]
        let _ = (data_dir, threads);
        #[cfg(feature = "local")]
        let local = {
            let local = providers::LocalEngine::new(data_dir.models(), threads);
            local.keep_prompts_in(data_dir.prompt_cache());
            Arc::new(local)
        };
        Self {
            #[cfg(feature = "local")]
            local,
            replacement,
        }
    }

    /// One provider for every spec (a test's scripted model).
    pub fn only(provider: Arc<dyn Provider>) -> Self {
        Self {
            #[cfg(feature = "local")]
            local: Arc::new(providers::LocalEngine::new(std::path::PathBuf::new(), 1)),
            replacement: Some(provider),
        }
    }

    /// Deletes the local model's evaluated prompts kept on disk.
    pub(crate) fn forget_kept_prompts(&self) {
        #[cfg(feature = "local")]
        if let Err(e) = self.local.forget_kept_prompts() {
            tracing::error!(error = %e, "could not delete the kept prompts after an erasure");
        }
    }

    /// Loads a local model now, so the first reply that needs it does not
    /// wait for the load (about a second for the default model). Servers
    /// and a test's replacement need nothing.
    pub(crate) async fn preload(&self, spec: &ModelSpec) -> Result<()> {
        if self.replacement.is_some() || !spec.is_local() {
            return Ok(());
        }
        #[cfg(feature = "local")]
        self.local.preload(&spec.model).await?;
        Ok(())
    }

    /// What serves `spec` now. A server of this machine that went away
    /// (Ollama quit, LM Studio closed) leaves the work to the local default
    /// model, for every caller alike: replies, summaries, extraction and a
    /// persona's own initiatives. A server elsewhere keeps its own failures.
    pub(crate) async fn serving(&self, ledger: &Ledger, models_dir: &Path, spec: &ModelSpec) -> Result<Serving> {
        let mut stand_in = None;
        let mut spec = spec.clone();
        if !spec.is_local() {
            if let Ok(account) = ledger.account(&spec.account).await {
                if local_server_gone(&account.base_url).await == Some(true) {
                    let local = default_local_model(models_dir);
                    stand_in = Some(format!(
                        "{} ({}) is not answering, so replies come from the local model {local} until it runs again.",
                        account.name, account.base_url
                    ));
                    spec = ModelSpec::local(&local);
                }
            }
        }
        let provider = self.provider_for(ledger, &spec).await?;
        Ok(Serving { spec, provider, stand_in })
    }

    /// The provider that serves a model spec.
    pub(crate) async fn provider_for(&self, ledger: &Ledger, spec: &ModelSpec) -> Result<Arc<dyn Provider>> {
        if let Some(p) = &self.replacement {
            return Ok(p.clone());
        }
        if spec.is_local() {
            #[cfg(feature = "local")]
            return Ok(self.local.clone());
            #[cfg(not(feature = "local"))]
            return Err(crate::error::AppError::new("MODEL_LOAD_FAILED", "this build has no local engine"));
        }
        let account = ledger.account(&spec.account).await?;
        let key = ledger.keystore().load(&provider_key_account(ledger, &account.name))?;
        let key = key.map(|k| String::from_utf8_lossy(&k).into_owned());
        Ok(Arc::new(OpenAiCompatible::new(account.name, account.base_url).with_api_key(key)))
    }
}

/// The keychain entry that holds a provider account's API key.
pub(crate) fn provider_key_account(ledger: &Ledger, name: &str) -> String {
    ledger.key_account(&format!("provider/{name}"))
}

/// How long a server on this machine may take to accept a connection
/// before a reply stops waiting for it.
const ANSWER_TIMEOUT: Duration = Duration::from_millis(500);

/// Whether a server at `base_url` that runs on this machine (loopback host)
/// is gone: `Some(true)` when nothing accepts a connection there, `None` for
/// a server elsewhere (a cloud account's failures are its own).
pub(crate) async fn local_server_gone(base_url: &str) -> Option<bool> {
    let url = reqwest::Url::parse(base_url).ok()?;
    let host = url.host_str()?.trim_matches(['[', ']']).to_owned();
    let on_this_machine =
        host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if !on_this_machine {
        return None;
    }
    let addr = (host, url.port_or_known_default()?);
    let answered = tokio::time::timeout(ANSWER_TIMEOUT, tokio::net::TcpStream::connect(addr)).await;
    Some(!matches!(answered, Ok(Ok(_))))
}

pub(crate) fn local_model_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("gguf"))
                .filter_map(|p| p.file_stem().and_then(|s| s.to_str()).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The model chosen with `models use`, else the default when installed,
/// else the tiny one, else the first GGUF in the folder.
pub(crate) fn default_local_model(dir: &Path) -> String {
    // The person's choice (`ledgermind models use ID`), while its file is there.
    if let Some(stem) = ::models::read_default(dir).and_then(|d| d.file.strip_suffix(".gguf").map(str::to_owned)) {
        return stem;
    }
    let names = local_model_names(dir);
    for preferred in [DEFAULT_LOCAL_MODEL, TINY_LOCAL_MODEL] {
        if names.iter().any(|n| n == preferred) {
            return preferred.to_owned();
        }
    }
    names.into_iter().next().unwrap_or_else(|| DEFAULT_LOCAL_MODEL.to_owned())
}
