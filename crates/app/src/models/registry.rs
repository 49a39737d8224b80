//! The provider registry: which engine answers a model spec. The local
//! llama.cpp engine for `local:…`, an OpenAI-compatible client for an
//! account (its key from the OS keychain), or, in tests, one scripted fake
//! for everything.

use std::sync::Arc;

use ledger::Ledger;
use providers::{OpenAiCompatible, Provider};

use super::spec::ModelSpec;
use crate::paths::DataDir;
use crate::Result;

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
