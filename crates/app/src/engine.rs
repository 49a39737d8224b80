//! The composition root: one engine per data directory, shared by every
//! shell. It opens the ledger, builds the context and the capabilities on
//! it (each given only what it calls), starts the queue worker and the
//! timers, and hands the shells the capabilities' APIs. No logic lives
//! here beyond putting the pieces together and the status they share.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use ledger::{KeyStore, Ledger, LedgerOptions};
use providers::Provider;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use ts_rs::TS;

use crate::context::Context;
use crate::conversation::Conversation;
use crate::error::AppError;
use crate::events::AppEvent;
use crate::keys::Keys;
use crate::library::Documents;
use crate::memory::Memories;
use crate::models::{default_local_model, ModelSpec, Models, Providers};
use crate::office::Office;
use crate::paths::DataDir;
use crate::personas::Personas;
use crate::tools::Tools;
use crate::vault::Vault;
use crate::worker::{run_worker, Worker};
use crate::Result;

pub struct EngineConfig {
    pub data_dir: DataDir,
    pub keystore: Arc<dyn KeyStore>,
    /// llama.cpp threads; 0: each generation takes the cores other programs
    /// leave free, up to one per physical core (`providers::default_threads`).
    pub local_threads: usize,
    /// Replaces every model provider. Tests use a scripted fake.
    pub provider_override: Option<Arc<dyn Provider>>,
    /// An append is on disk when the call returns (`synchronous=FULL`).
    pub durable: bool,
    /// Extraction starts after a conversation has been quiet this long
    /// (`LEDGERMIND_EXTRACTION_DELAY_SECS`, default 90 s).
    pub extraction_delay: std::time::Duration,
    /// How long a working conversation state (the model writing, a tool
    /// running) may go without progress
    /// (`LEDGERMIND_STALL_TIMEOUT_SECS`, default 30 s).
    pub stall_limit: std::time::Duration,
    /// One request to the metadata service
    /// (`LEDGERMIND_METADATA_TIMEOUT_MS`, default 8 s).
    pub metadata_timeout: std::time::Duration,
    /// The clock behind the ledger's timestamps, the heartbeat and the
    /// ceremony (`Personas::clock_tick`); tests move a manual one.
    pub clock: Arc<dyn ledger::Clock>,
    /// The background timers (auto-save, ceremony and heartbeat, idle
    /// sessions). Engine tests switch them off and call the ticks themselves,
    /// so that nothing is appended behind their backs.
    pub timers: bool,
    /// How documents are read: this executable re-run as a child process
    /// (the shells call `library::run_if_worker` first thing); tests, whose
    /// executable is the test harness, read them in process.
    pub document_extractor: ::library::Extractor,
}

impl EngineConfig {
    pub fn new(data_dir: DataDir, keystore: Arc<dyn KeyStore>) -> Self {
        let extraction_delay = std::env::var("LEDGERMIND_EXTRACTION_DELAY_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .map(std::time::Duration::from_secs)
            .unwrap_or(crate::memory::extraction::DEFAULT_DELAY);
        let stall_limit = crate::tools::stall_limit_from_env();
        Self {
            data_dir,
            keystore,
            local_threads: 1,
            provider_override: None,
            durable: true,
            extraction_delay,
            stall_limit,
            metadata_timeout: crate::tools::metadata::timeout_from_env(),
            clock: Arc::new(ledger::SystemClock),
            timers: true,
            document_extractor: ::library::Extractor::current_exe(),
        }
    }
}

pub struct Engine {
    ctx: Arc<Context>,
    models: Arc<Models>,
    keys: Arc<Keys>,
    memory: Arc<Memories>,
    vault: Arc<Vault>,
    library: Arc<Documents>,
    tools: Arc<Tools>,
    office: Arc<Office>,
    personas: Arc<Personas>,
    conversation: Arc<Conversation>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

impl Engine {
    /// Opens the profile (creating it on first run) and starts the queue worker.
    pub async fn start(config: EngineConfig) -> Result<Arc<Self>> {
        let root = config.data_dir.root().to_path_buf();
        std::fs::create_dir_all(&root).map_err(|e| {
            AppError::new("STORAGE_SAVE_FAILED", format!("cannot create the data folder {}: {e}", root.display()))
        })?;
        match config.data_dir.apply_staged_import() {
            Ok(Some(aside)) => tracing::info!(kept = %aside.display(), "opened the imported profile; the previous one is kept"),
            Ok(None) => {}
            Err(e) => {
                return Err(AppError::new(
                    "STORAGE_SAVE_FAILED",
                    format!("could not put the imported profile in place ({e}); nothing was deleted, see {}", root.display()),
                ))
            }
        }
        crate::guard_model::install_guard_model(&crate::guard_model::guard_model_dirs(&config.data_dir.models()));
        let default_model = ModelSpec::local(&default_local_model(&config.data_dir.models())).to_string();
        let mut opts = LedgerOptions::new(config.data_dir.ledger());
        opts.durable = config.durable;
        opts.default_model = default_model;
        let t0 = Instant::now();
        let ledger = Arc::new(Ledger::open_with_clock(opts, config.keystore.clone(), config.clock.clone()).await?);
        let opened = t0.elapsed();
        let requeued = ledger.requeue_running().await?;
        if requeued > 0 {
            tracing::info!(requeued, "resuming replies interrupted by the last shutdown");
        }
        let providers = Providers::new(&config.data_dir, config.local_threads, config.provider_override.clone());
        let ctx = Context::new(ledger, config.data_dir.clone(), providers);
        let memory = Arc::new(Memories::open(ctx.clone(), config.extraction_delay).await?);
        tracing::debug!(ledger_ms = opened.as_millis() as u64, total_ms = t0.elapsed().as_millis() as u64, "engine opened");
        // Each capability gets the context and the capabilities below it.
        let keys = Arc::new(Keys::new(ctx.clone()));
        let vault = Arc::new(Vault::new(ctx.clone(), memory.clone(), keys.clone()));
        let library = Arc::new(Documents::new(ctx.clone(), memory.clone(), config.document_extractor.clone()));
        let tools = Arc::new(Tools::new(ctx.clone(), config.stall_limit, config.metadata_timeout));
        let office = Arc::new(Office::new(ctx.clone(), tools.clone(), memory.clone()));
        let personas = Arc::new(Personas::new(ctx.clone(), office.clone(), memory.clone(), vault.clone()));
        let conversation =
            Arc::new(Conversation::new(ctx.clone(), tools.clone(), office.clone(), memory.clone(), library.clone()));
        let models = Arc::new(Models::new(ctx.clone()));
        // Questions that were waiting when the app last stopped wait again.
        tools.restore_awaiting().await;
        // Imports left unfinished and watched folders (only for a person who has a library).
        library.start_documents();
        let worker = Worker {
            ctx: ctx.clone(),
            conversation: conversation.clone(),
            memory: memory.clone(),
            personas: personas.clone(),
        };
        let handle = tokio::spawn(run_worker(worker, ctx.shutdown_signal()));
        // The timers hold only weak references and stop with shutdown.
        if config.timers {
            drop(vault.spawn_autosave());
            drop(personas.spawn_ceremony());
            drop(office.spawn_session_timer());
            drop(tools.spawn_proposal_timer());
        }
        Ok(Arc::new(Self {
            ctx,
            models,
            keys,
            memory,
            vault,
            library,
            tools,
            office,
            personas,
            conversation,
            worker: Mutex::new(Some(handle)),
        }))
    }

    /// Stops the worker after the current step; queued work stays queued.
    pub async fn shutdown(&self) {
        self.ctx.begin_shutdown();
        self.library.stop_documents().await;
        self.memory.stop();
        let handle = self.worker.lock().ok().and_then(|mut w| w.take());
        if let Some(handle) = handle {
            if let Err(e) = handle.await {
                tracing::warn!(error = %e, "the queue worker ended abnormally");
            }
        }
        // Leave the latest signed tree head outside the database too, so a
        // rolled-back or truncated file is caught at the next verify.
        if let Err(e) = self.vault.publish_tree_head().await {
            tracing::warn!(code = e.code, "could not publish the signed tree head: {}", e.message);
        }
    }

    pub fn ledger(&self) -> &Arc<Ledger> {
        &self.ctx.ledger
    }

    pub fn data_dir(&self) -> &DataDir {
        self.ctx.data_dir()
    }

    pub fn subscribe(&self) -> broadcast::Receiver<AppEvent> {
        self.ctx.subscribe()
    }

    /// The shared context the capabilities were built on.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// Messages, replies, and the queue the person controls.
    pub fn conversation(&self) -> &Arc<Conversation> {
        &self.conversation
    }

    pub fn personas(&self) -> &Arc<Personas> {
        &self.personas
    }

    pub fn memory(&self) -> &Arc<Memories> {
        &self.memory
    }

    pub fn library(&self) -> &Arc<Documents> {
        &self.library
    }

    pub fn tools(&self) -> &Arc<Tools> {
        &self.tools
    }

    pub fn office(&self) -> &Arc<Office> {
        &self.office
    }

    pub fn vault(&self) -> &Arc<Vault> {
        &self.vault
    }

    pub fn keys(&self) -> &Arc<Keys> {
        &self.keys
    }

    pub fn models(&self) -> &Arc<Models> {
        &self.models
    }

    pub async fn status(&self) -> StatusView {
        let ledger = &self.ctx.ledger;
        let keychain = ledger.keystore().load_within(&ledger.key_account("probe"), ledger::KEY_READ_TIMEOUT).map(|_| ());
        let local = self.models.local_model_status();
        let pending = ledger.queue_items(Some(ledger::QueueState::Pending)).await.map(|v| v.len()).unwrap_or(0);
        StatusView {
            data_dir: self.ctx.data_dir().root().display().to_string(),
            keychain_ok: keychain.is_ok(),
            keychain_message: keychain.err().map(|e| e.to_string()),
            local_model: local.as_ref().ok().cloned(),
            local_model_message: local.err().map(|e| e.message),
            events: ledger.event_count().await.unwrap_or(0),
            queue_busy: self.ctx.busy.load(std::sync::atomic::Ordering::SeqCst),
            queue_pending: pending as u32,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct StatusView {
    pub data_dir: String,
    pub keychain_ok: bool,
    pub keychain_message: Option<String>,
    pub local_model: Option<String>,
    pub local_model_message: Option<String>,
    #[ts(type = "number")]
    pub events: u64,
    pub queue_busy: bool,
    #[ts(type = "number")]
    pub queue_pending: u32,
}

impl StatusView {
    /// What the status panel shows when the engine could not start at all.
    pub fn unavailable(error: &AppError) -> Self {
        let keychain = error.code == "KEYCHAIN_UNAVAILABLE";
        Self {
            data_dir: DataDir::from_env().root().display().to_string(),
            keychain_ok: !keychain,
            keychain_message: keychain.then(|| error.message.clone()),
            local_model: None,
            local_model_message: (!keychain).then(|| error.message.clone()),
            events: 0,
            queue_busy: false,
            queue_pending: 0,
        }
    }
}

