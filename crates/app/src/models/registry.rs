//! The provider registry: which engine answers a model spec. The local
//! llama.cpp engine for `local:…`, an OpenAI-compatible client for an
//! account (its key from the OS keychain), or, in tests, one scripted fake
//! for everything.

use std::path::Path;
use std::sync::Arc;

use ledger::Ledger;
use providers::{OpenAiCompatible, Provider};

use super::spec::ModelSpec;
use crate::Result;

pub struct Providers {
    #[cfg(feature = "local")]
    pub(crate) local: Arc<providers::LocalEngine>,
    replacement: Option<Arc<dyn Provider>>,
}

impl Providers {
    /// `models`: where local GGUF files live; `threads`: llama.cpp threads;
    /// `replacement`: serves every spec instead (tests use a scripted fake).
    pub fn new(models: &Path, threads: usize, replacement: Option<Arc<dyn Provider>>) -> Self {
        #[cfg(not(feature = "local"))]
        let _ = (models, threads);
        Self {
            #[cfg(feature = "local")]
            local: Arc::new(providers::LocalEngine::new(models.to_path_buf(), threads.max(1))),
            replacement,
        }
    }

    /// One provider for every spec (a test's scripted model).
    pub fn only(provider: Arc<dyn Provider>) -> Self {
        Self::new(Path::new(""), 1, Some(provider))
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
