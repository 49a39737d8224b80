//! Models and provider accounts: the local GGUF files in the models folder,
//! the OpenAI-compatible accounts (their keys in the OS keychain, never in
//! the ledger), and which provider serves a persona's model spec.
//!
//! Public surface: [`Models`] (accounts, model list, model import, the local
//! model's status), [`ModelSpec`], [`Providers`] (the registry the context
//! holds), and the views.

pub(crate) mod choices;
pub(crate) mod registry;
pub(crate) mod servers;
pub(crate) mod spec;
pub(crate) mod speed;
pub(crate) mod views;

use std::path::Path;
use std::sync::Arc;

use ledger::{EventBody, HUMAN_ENTITY};

use crate::context::Context;
use crate::error::AppError;
use crate::Result;
use registry::provider_key_account;
pub use registry::Providers;
pub(crate) use registry::{default_local_model, local_model_names, local_server_gone};
pub use spec::{ModelSpec, DEFAULT_LOCAL_MODEL, LOCAL_ACCOUNT, TINY_LOCAL_MODEL};
pub use choices::{ModelChoiceView, ModelNeeds};
pub use servers::ServerView;
pub use speed::SpeedView;
pub use views::{AccountView, ModelPullState, ModelView, NewAccount};

/// Provider accounts and model files.
pub struct Models {
    ctx: Arc<Context>,
    /// Downloads running now, by catalog id, with what cancels each.
    pulls: std::sync::Mutex<std::collections::HashMap<String, ::models::CancellationToken>>,
    /// The servers the last look found: an account is made only from one of
    /// these, never from what a caller says a server is.
    found: std::sync::Mutex<Vec<::models::discover::ServerInfo>>,
    /// Where Ollama keeps its models (`$OLLAMA_MODELS`, else
    /// `~/.ollama/models`): its GGUF blobs are offered without a download.
    ollama_dir: Option<std::path::PathBuf>,
}

impl Models {
    pub fn new(ctx: Arc<Context>) -> Self {
        Self { ctx, pulls: Default::default(), found: Default::default(), ollama_dir: ::models::discover::ollama_models_dir() }
    }

    /// The same, reading Ollama's models from `dir` (tests use a folder of
    /// their own instead of the machine's).
    pub fn with_ollama_dir(ctx: Arc<Context>, dir: std::path::PathBuf) -> Self {
        Self { ollama_dir: Some(dir), ..Self::new(ctx) }
    }

    /// Ollama's GGUF blobs on this machine, none when it has none.
    pub(crate) fn ollama_blobs(&self) -> Vec<::models::discover::OllamaBlob> {
        self.ollama_dir.as_deref().map(::models::discover::ollama_blobs).unwrap_or_default()
    }

    pub async fn list_accounts(&self) -> Result<Vec<AccountView>> {
        let ledger = &self.ctx.ledger;
        let accounts = ledger.accounts().await?;
        Ok(accounts
            .into_iter()
            .map(|a| {
                let has_key = matches!(ledger.keystore().load(&provider_key_account(ledger, &a.name)), Ok(Some(_)));
                AccountView {
                    name: a.name,
                    base_url: a.base_url,
                    default_model: a.default_model,
                    enabled: a.enabled,
                    has_key,
                }
            })
            .collect())
    }

    pub async fn add_account(&self, new: NewAccount) -> Result<AccountView> {
        let ledger = &self.ctx.ledger;
        let name = new.name.trim();
        if name.is_empty() || name.contains(':') || name.contains('/') || name == LOCAL_ACCOUNT {
            return Err(AppError::invalid("an account name must be non-empty, without ':' or '/', and not \"local\""));
        }
        let base_url = new.base_url.trim().trim_end_matches('/');
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(AppError::invalid("the base URL must start with http:// or https://"));
        }
        if new.default_model.trim().is_empty() {
            return Err(AppError::invalid("choose a default model for the account"));
        }
        if ledger.account(name).await.is_ok() {
            return Err(ledger::LedgerError::AccountExists(name.to_owned()).into());
        }
        let key = new.api_key.trim();
        let key_account = provider_key_account(ledger, name);
        if !key.is_empty() {
            // The key goes to the keychain first; without it nothing is written.
            ledger.keystore().store(&key_account, key.as_bytes())?;
        }
        let appended = ledger
            .append(
                HUMAN_ENTITY,
                EventBody::ProviderAccountAdded {
                    name: name.to_owned(),
                    base_url: base_url.to_owned(),
                    default_model: new.default_model.trim().to_owned(),
                },
            )
            .await;
        if let Err(e) = appended {
            if !key.is_empty() {
                if let Err(k) = ledger.keystore().delete(&key_account) {
                    tracing::warn!(error = %k, "could not remove the key of an account that was not saved");
                }
            }
            return Err(e.into());
        }
        self.list_accounts()
            .await?
            .into_iter()
            .find(|a| a.name == name)
            .ok_or_else(|| AppError::new("ACCOUNT_NOT_FOUND", "the account was not saved"))
    }

    pub async fn remove_account(&self, name: &str) -> Result<()> {
        let ledger = &self.ctx.ledger;
        ledger.account(name).await?;
        ledger.append(HUMAN_ENTITY, EventBody::ProviderAccountRemoved { name: name.to_owned() }).await?;
        ledger.keystore().delete(&provider_key_account(ledger, name))?;
        Ok(())
    }

    pub async fn list_models(&self) -> Result<Vec<ModelView>> {
        let mut out: Vec<ModelView> = local_model_names(&self.ctx.data_dir().models())
            .into_iter()
            .map(|m| ModelView { spec: ModelSpec::local(&m).to_string(), label: format!("{m} (local)"), local: true, available: true })
            .collect();
        for a in self.ctx.ledger.accounts().await? {
            let gone = local_server_gone(&a.base_url).await == Some(true);
            out.push(ModelView {
                spec: format!("{}:{}", a.name, a.default_model),
                label: format!("{} ({})", a.default_model, a.name),
                local: false,
                available: !gone,
            });
        }
        Ok(out)
    }

    /// Copies a dropped or chosen GGUF file into the models folder.
    pub fn import_model(&self, path: &Path) -> Result<ModelView> {
        if path.extension().and_then(|e| e.to_str()).map(|e| e.eq_ignore_ascii_case("gguf")) != Some(true) {
            return Err(AppError::new("MODEL_LOAD_FAILED", "only .gguf model files can be added"));
        }
        providers::validate_gguf_file(path)?;
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .ok_or_else(|| AppError::invalid("the file name is not valid text"))?
            .to_owned();
        let models = self.ctx.data_dir().models();
        let target = models.join(format!("{stem}.gguf"));
        if target.exists() {
            return Err(AppError::new("MODEL_EXISTS", format!("a model named {stem} is already installed")));
        }
        std::fs::create_dir_all(&models)
            .and_then(|_| {
                // Copy to a temporary name, then rename: never a half model.
                let tmp = target.with_extension("gguf.partial");
                std::fs::copy(path, &tmp)?;
                std::fs::File::open(&tmp)?.sync_all()?;
                std::fs::rename(&tmp, &target)
            })
            .map_err(|e| AppError::new("STORAGE_SAVE_FAILED", format!("could not copy the model: {e}")))?;
        Ok(ModelView { spec: ModelSpec::local(&stem).to_string(), label: format!("{stem} (local)"), local: true, available: true })
    }

    /// The local model replies use by default, checked on disk.
    pub(crate) fn local_model_status(&self) -> Result<String> {
        let models = self.ctx.data_dir().models();
        let name = default_local_model(&models);
        let path = models.join(format!("{name}.gguf"));
        if !path.exists() {
            return Err(AppError::new(
                "MODEL_NOT_FOUND",
                format!(
                    "No local model in {}. Run scripts/setup.sh to fetch the default model, or drop a .gguf file on the window.",
                    models.display()
                ),
            ));
        }
        Ok(providers::validate_gguf_file(&path).map(|_| name)?)
    }
}

