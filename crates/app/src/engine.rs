//! The engine: one per data directory, shared by every shell.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ledger::{Draft, EventBody, KeyStore, Ledger, LedgerOptions, MessageRole, NewJob, HUMAN_ENTITY};
use providers::{OpenAiCompatible, Provider};
use tokio::sync::{broadcast, watch, Notify};
use tokio::task::JoinHandle;

use crate::chat::{self, ReplyJob, ReplyTiming};
use crate::error::AppError;
use crate::models::{ModelSpec, DEFAULT_LOCAL_MODEL, LOCAL_ACCOUNT, TINY_LOCAL_MODEL};
use crate::paths::DataDir;
use crate::views::*;
use crate::Result;

const MAX_NAME: usize = 80;
const MAX_DESCRIPTION: usize = 4_000;
const MAX_MESSAGE: usize = 32_000;
/// The "high" of background work the human promotes in the queue panel.
pub(crate) const PRIORITY_HIGH: i64 = 0;
/// Replies jump ahead of all background work (extraction, ceremony), even
/// work the human set to high (memory #4): shown as "high", sorted first.
pub(crate) const PRIORITY_REPLY: i64 = -1;

pub struct EngineConfig {
    pub data_dir: DataDir,
    pub keystore: Arc<dyn KeyStore>,
    /// llama.cpp threads; see `providers::default_threads`.
    pub local_threads: usize,
    /// Replaces every model provider. Tests use a scripted fake.
    pub provider_override: Option<Arc<dyn Provider>>,
    /// An append is on disk when the call returns (`synchronous=FULL`).
    pub durable: bool,
    /// Extraction starts after a conversation has been quiet this long
    /// (`LEDGERMIND_EXTRACTION_DELAY_SECS`, default 90 s).
    pub extraction_delay: std::time::Duration,
    /// runtime (#6): how long a working conversation state (the model
    /// writing, a tool running) may go without progress
    /// (`LEDGERMIND_STALL_TIMEOUT_SECS`, default 30 s).
    pub stall_limit: std::time::Duration,
    /// runtime (#6): one request to the metadata service
    /// (`LEDGERMIND_METADATA_TIMEOUT_MS`, default 8 s).
    pub metadata_timeout: std::time::Duration,
    /// memory (#4): the clock behind the ledger's timestamps, the heartbeat
    /// and the ceremony (`Engine::clock_tick`); tests move a manual one.
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
            .unwrap_or(crate::extraction::DEFAULT_DELAY);
        let stall_limit = crate::conversation::stall_limit_from_env();
        Self {
            data_dir,
            keystore,
            local_threads: 1,
            provider_override: None,
            durable: true,
            extraction_delay,
            stall_limit,
            metadata_timeout: crate::metadata::timeout_from_env(),
            clock: Arc::new(ledger::SystemClock),
            timers: true,
            document_extractor: ::library::Extractor::current_exe(),
        }
    }
}

pub struct Engine {
    pub(crate) ledger: Arc<Ledger>,
    data_dir: DataDir,
    events: broadcast::Sender<AppEvent>,
    #[cfg(feature = "local")]
    pub(crate) local: Arc<providers::LocalEngine>,
    provider_override: Option<Arc<dyn Provider>>,
    pub(crate) wake: Notify,
    pub(crate) shutdown: watch::Sender<bool>,
    worker: Mutex<Option<JoinHandle<()>>>,
    pub(crate) busy: AtomicBool,
    /// When each queued reply was sent, and when its message and job were written.
    pub(crate) sent_at: Mutex<HashMap<String, (Instant, Instant)>>,
    pub(crate) timings: Mutex<Vec<ReplyTiming>>,
    /// Per persona, where the compact prompt's window of turns starts.
    pub(crate) prompt_windows: Mutex<HashMap<String, i64>>,
    pub(crate) current_cancel: Mutex<Option<providers::CancelFlag>>,
    pub(crate) memory: Arc<memory::MemoryIndex>,
    /// Set once the embedding model's load was started (it loads on first need).
    pub(crate) embedder_requested: AtomicBool,
    pub(crate) assistant: crate::assistant::Assistant,
    /// Background work (extraction) that a reply may preempt.
    pub(crate) background: crate::extraction::Background,
    pub(crate) extraction_delay: std::time::Duration,
    /// The human paused the queue: the worker takes nothing new.
    pub(crate) paused: AtomicBool,
    /// office (#5): dreams that failed recently (not retried for an hour).
    pub(crate) dreams: crate::office::DreamAttempts,
    /// The document library (opened on first need) and its imports.
    pub(crate) documents: crate::library::Documents,
}

impl Engine {
    /// Opens the profile (creating it on first run) and starts the reply worker.
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
        let memory = crate::memory::open_index(&config.data_dir, &ledger).await?;
        tracing::debug!(ledger_ms = opened.as_millis() as u64, total_ms = t0.elapsed().as_millis() as u64, "engine opened");
        let (events, _) = broadcast::channel(1024);
        let (shutdown, shutdown_rx) = watch::channel(false);
        let assistant = crate::assistant::Assistant::new(ledger.clone(), events.clone(), config.stall_limit, config.metadata_timeout);
        #[cfg(feature = "local")]
        let local = {
            let local = providers::LocalEngine::new(config.data_dir.models(), config.local_threads.max(1));
            local.keep_prompts_in(config.data_dir.prompt_cache());
            Arc::new(local)
        };
        let engine = Arc::new(Self {
            ledger,
            #[cfg(feature = "local")]
            local,
            data_dir: config.data_dir,
            events,
            provider_override: config.provider_override,
            wake: Notify::new(),
            shutdown,
            worker: Mutex::new(None),
            busy: AtomicBool::new(false),
            sent_at: Mutex::new(HashMap::new()),
            timings: Mutex::new(Vec::new()),
            prompt_windows: Mutex::new(HashMap::new()),
            current_cancel: Mutex::new(None),
            memory,
            embedder_requested: AtomicBool::new(false),
            documents: crate::library::Documents::new(config.document_extractor.clone()),
            assistant,
            background: Default::default(),
            extraction_delay: config.extraction_delay,
            paused: AtomicBool::new(false),
            dreams: Default::default(), // office (#5)
        });
        engine.restore_awaiting().await; // runtime (#6): questions waiting across a restart
        // Imports left unfinished and watched folders (only for a person who has a library).
        engine.start_documents();
        let handle = tokio::spawn(chat::run_worker(engine.clone(), shutdown_rx));
        if let Ok(mut w) = engine.worker.lock() {
            *w = Some(handle);
        }
        // The auto-save timer holds only a weak reference and stops with shutdown.
        if config.timers {
            drop(engine.spawn_autosave());
            drop(engine.spawn_ceremony());
            drop(engine.spawn_session_timer());
            drop(engine.spawn_proposal_timer()); // runtime (#6)
        }
        Ok(engine)
    }

    /// Runs `tick` every `period` (the first at once, or after one period
    /// when `skip_first`) while the engine lives: the timer holds only a weak
    /// reference and stops at shutdown. The background timers use it.
    pub(crate) fn spawn_timer<F, Fut>(self: &Arc<Self>, period: std::time::Duration, skip_first: bool, tick: F) -> JoinHandle<()>
    where
        F: Fn(Arc<Engine>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send,
    {
        let engine = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(period);
            if skip_first {
                interval.tick().await;
            }
            loop {
                interval.tick().await;
                let Some(engine) = engine.upgrade() else { break };
                if engine.is_shutting_down() {
                    break;
                }
                tick(engine).await;
            }
        })
    }

    /// Stops the worker after the current step; queued work stays queued.
    pub async fn shutdown(&self) {
        if let Some(flag) = self.current_cancel.lock().ok().and_then(|c| c.clone()) {
            flag.cancel();
        }
        let _ = self.shutdown.send(true);
        self.stop_documents().await;
        self.memory.stop();
        let handle = self.worker.lock().ok().and_then(|mut w| w.take());
        if let Some(handle) = handle {
            if let Err(e) = handle.await {
                tracing::warn!(error = %e, "reply worker ended abnormally");
            }
        }
        // Leave the latest signed tree head outside the database too, so a
        // rolled-back or truncated file is caught at the next verify.
        if let Err(e) = self.publish_tree_head().await {
            tracing::warn!(code = e.code, "could not publish the signed tree head: {}", e.message);
        }
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    pub fn ledger(&self) -> &Arc<Ledger> {
        &self.ledger
    }

    pub fn data_dir(&self) -> &DataDir {
        &self.data_dir
    }

    pub fn subscribe(&self) -> broadcast::Receiver<AppEvent> {
        self.events.subscribe()
    }

    /// Every event to the shells leaves through here.
    pub(crate) fn emit(&self, event: AppEvent) {
        // No subscribers is normal (CLI without a listener).
        let _no_listener_is_fine = self.events.send(event);
    }

    pub async fn status(&self) -> StatusView {
        let keychain =
            self.ledger.keystore().load_within(&self.ledger.key_account("probe"), ledger::KEY_READ_TIMEOUT).map(|_| ());
        let local = self.local_model_status();
        let pending = self.ledger.queue_items(Some(ledger::QueueState::Pending)).await.map(|v| v.len()).unwrap_or(0);
        StatusView {
            data_dir: self.data_dir.root().display().to_string(),
            keychain_ok: keychain.is_ok(),
            keychain_message: keychain.err().map(|e| e.to_string()),
            local_model: local.as_ref().ok().cloned(),
            local_model_message: local.err().map(|e| e.message),
            events: self.ledger.event_count().await.unwrap_or(0),
            queue_busy: self.busy.load(Ordering::SeqCst),
            queue_pending: pending as u32,
        }
    }

    fn local_model_status(&self) -> Result<String> {
        let name = default_local_model(&self.data_dir.models());
        let path = self.data_dir.models().join(format!("{name}.gguf"));
        if !path.exists() {
            return Err(AppError::new(
                "MODEL_NOT_FOUND",
                format!(
                    "No local model in {}. Run scripts/setup.sh to fetch the default model, or drop a .gguf file on the window.",
                    self.data_dir.models().display()
                ),
            ));
        }
        Ok(providers::validate_gguf_file(&path).map(|_| name)?)
    }

    // ----- personas -----

    pub async fn list_personas(&self) -> Result<Vec<PersonaView>> {
        Ok(self.ledger.personas(false).await?.into_iter().map(PersonaView::from).collect())
    }

    pub async fn persona(&self, id_or_name: &str) -> Result<PersonaView> {
        Ok(self.ledger.find_persona(id_or_name).await?.into())
    }

    /// Creates a persona with the human's words only (no model fill; see
    /// `create_persona_described`).
    pub async fn create_persona(&self, name: &str, description: &str) -> Result<PersonaView> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > MAX_NAME {
            return Err(AppError::invalid(format!("a persona needs a name of 1 to {MAX_NAME} characters")));
        }
        if description.chars().count() > MAX_DESCRIPTION {
            return Err(AppError::invalid(format!("the description is longer than {MAX_DESCRIPTION} characters")));
        }
        if self.ledger.find_persona(name).await.is_ok() {
            return Err(ledger::LedgerError::PersonaExists(name.to_owned()).into());
        }
        let id = uuid::Uuid::now_v7().to_string();
        let public_key = self.ledger.create_key(&id)?;
        let model = self
            .ledger
            .persona(ledger::EI_PERSONA_ID)
            .await
            .map(|ei| ei.model)
            .unwrap_or_else(|_| ModelSpec::local(DEFAULT_LOCAL_MODEL).to_string());
        let signed_by_human = |body| Draft { entity_id: id.clone(), signer: HUMAN_ENTITY.into(), body };
        self.ledger
            .append_drafts(vec![
                signed_by_human(EventBody::EntityKeyRegistered {
                    entity_id: id.clone(),
                    entity_kind: "persona".into(),
                    public_key,
                }),
                signed_by_human(EventBody::PersonaCreated {
                    persona_id: id.clone(),
                    name: name.to_owned(),
                    short_description: description.trim().to_owned(),
                    long_description: String::new(),
                    model,
                    is_system: false,
                }),
            ])
            .await?;
        let view: PersonaView = self.ledger.persona(&id).await?.into();
        self.emit(AppEvent::PersonaChanged { persona: view.clone() });
        Ok(view)
    }

    pub async fn set_persona_model(&self, persona: &str, model: &str) -> Result<PersonaView> {
        let spec = ModelSpec::parse(model)?;
        if spec.is_local() {
            let path = self.data_dir.models().join(format!("{}.gguf", spec.model));
            if !path.exists() {
                return Err(AppError::new("MODEL_NOT_FOUND", format!("no local model named {}", spec.model)));
            }
        } else {
            self.ledger.account(&spec.account).await?;
        }
        let p = self.ledger.find_persona(persona).await?;
        self.ledger
            .append(
                HUMAN_ENTITY,
                EventBody::PersonaUpdated {
                    persona_id: p.id.clone(),
                    name: None,
                    short_description: None,
                    long_description: None,
                    model: Some(spec.to_string()),
                },
            )
            .await?;
        let view: PersonaView = self.ledger.persona(&p.id).await?.into();
        self.emit(AppEvent::PersonaChanged { persona: view.clone() });
        Ok(view)
    }

    // ----- messages -----

    pub async fn list_messages(&self, persona: &str) -> Result<Vec<MessageView>> {
        let p = self.ledger.find_persona(persona).await?;
        let cut = self.ledger.interrupted_replies(&p.id).await?;
        Ok(self
            .ledger
            .messages(&p.id, None)
            .await?
            .into_iter()
            .map(|m| {
                let spoken_chars = cut.get(&m.id).copied();
                MessageView { spoken_chars, ..MessageView::from(m) }
            })
            .collect())
    }

    /// Screens the human's message with the injection guard, stores it and
    /// queues the persona's reply. Returns the stored message and the
    /// reply's request id (empty when a deterministic intent answered).
    pub async fn send_message(&self, persona: &str, content: &str) -> Result<(MessageView, String)> {
        let sent = Instant::now();
        let content = content.trim();
        if content.is_empty() {
            return Err(AppError::invalid("the message is empty"));
        }
        if content.chars().count() > MAX_MESSAGE {
            return Err(AppError::invalid(format!("the message is longer than {MAX_MESSAGE} characters")));
        }
        let p = self.ledger.find_persona(persona).await?;
        if p.archived {
            return Err(ledger::LedgerError::PersonaArchived(p.name).into());
        }
        let screened = self.screen_input(content).await?;
        let content = screened.as_str();
        let message_id = uuid::Uuid::now_v7().to_string();
        let body = EventBody::MessageAdded {
            message_id: message_id.clone(),
            persona_id: p.id.clone(),
            role: MessageRole::Human,
            content: content.to_owned(),
            external_id: None,
        };
        // runtime (#6): delete all, list all, cancel, the answer to a question
        // a tool call asked, and a command missing its argument ("save a
        // movie") are handled without the model.
        let direct = self.direct_turn(&p, content).await?;
        let (receipt, request_id) = if direct.is_some() {
            (self.ledger.append(HUMAN_ENTITY, body).await?, String::new())
        } else {
            // The reply's retrieval needs this text's embedding: start it now,
            // so it overlaps the write below instead of following it.
            self.prefetch_embedding(content);
            let job = ReplyJob { persona_id: p.id.clone(), reply_to: message_id.clone(), continue_plan: false };
            let job = NewJob {
                kind: chat::REPLY_KIND.to_owned(),
                priority: PRIORITY_REPLY,
                persona_id: Some(p.id.clone()),
                body: serde_json::to_value(&job).map_err(|e| AppError::invalid(e.to_string()))?,
            };
            // One transaction: never a message without its reply job.
            let (receipt, item) = self.ledger.append_and_enqueue(HUMAN_ENTITY, body, job).await?;
            if let Ok(mut m) = self.sent_at.lock() {
                m.insert(item.id.clone(), (sent, Instant::now()));
            }
            self.preempt_background();
            self.wake.notify_one();
            (receipt, item.id)
        };
        crate::memory::index_message(self, &message_id, &p.id, content, receipt.seq).await;
        let view = MessageView {
            id: message_id,
            persona_id: p.id.clone(),
            role: crate::views::MessageRole::Human,
            content: content.to_owned(),
            ts: String::new(),
            read: true,
            seq: receipt.seq,
            context_status: "default".into(),
            spoken_chars: None,
        };
        let view = self.ledger.messages(&view.persona_id, Some(1)).await?.pop().map(MessageView::from).unwrap_or(view);
        self.emit(AppEvent::LedgerAppended { seq: receipt.seq, kind: receipt.kind });
        self.emit(AppEvent::MessageAdded { message: view.clone() });
        if let Some(direct) = direct {
            self.handle_direct(&p, content, direct).await?;
        }
        self.emit_queue().await;
        Ok((view, request_id))
    }

    pub async fn mark_read(&self, persona: &str) -> Result<()> {
        let p = self.ledger.find_persona(persona).await?;
        if p.unread == 0 {
            return Ok(());
        }
        let (head, _) = self.ledger.head().await;
        self.ledger.append(HUMAN_ENTITY, EventBody::MessagesRead { persona_id: p.id.clone(), up_to_seq: head }).await?;
        self.emit(AppEvent::PersonaChanged { persona: self.ledger.persona(&p.id).await?.into() });
        Ok(())
    }

    /// Cancels the reply being generated now, if any.
    pub fn abort_current(&self) -> bool {
        match self.current_cancel.lock().ok().and_then(|c| c.clone()) {
            Some(flag) => {
                flag.cancel();
                true
            }
            None => false,
        }
    }

    pub(crate) async fn emit_queue(&self) {
        let pending = self.ledger.queue_items(Some(ledger::QueueState::Pending)).await.map(|v| v.len()).unwrap_or(0);
        self.emit(AppEvent::QueueChanged { busy: self.busy.load(Ordering::SeqCst), pending: pending as u32 });
    }

    /// Send-to-first-token timings of recent replies (for benchmarks).
    pub fn reply_timings(&self) -> Vec<ReplyTiming> {
        self.timings.lock().map(|t| t.clone()).unwrap_or_default()
    }

    // ----- ledger -----

    pub async fn verify(&self) -> Result<VerifyView> {
        let mut report = self.ledger.verify().await?;
        let key_epochs = self.epoch_views(std::mem::take(&mut report.key_epochs)).await;
        Ok(VerifyView {
            ok: report.ok(),
            events: report.events,
            first_bad_seq: report.failure.as_ref().map(|f| f.seq),
            reason: report.failure.map(|f| f.reason),
            millis: report.millis,
            key_epochs,
        })
    }

    pub async fn list_events(&self, before_seq: Option<i64>, limit: u32) -> Result<Vec<EventView>> {
        let limit = limit.clamp(1, 500);
        Ok(self.ledger.events(before_seq, limit).await?.into_iter().map(EventView::from).collect())
    }

    // ----- provider accounts -----

    fn provider_key_account(&self, name: &str) -> String {
        self.ledger.key_account(&format!("provider/{name}"))
    }

    pub async fn list_accounts(&self) -> Result<Vec<AccountView>> {
        let accounts = self.ledger.accounts().await?;
        Ok(accounts
            .into_iter()
            .map(|a| {
                let has_key =
                    matches!(self.ledger.keystore().load(&self.provider_key_account(&a.name)), Ok(Some(_)));
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
        if self.ledger.account(name).await.is_ok() {
            return Err(ledger::LedgerError::AccountExists(name.to_owned()).into());
        }
        let key = new.api_key.trim();
        let key_account = self.provider_key_account(name);
        if !key.is_empty() {
            // The key goes to the keychain first; without it nothing is written.
            self.ledger.keystore().store(&key_account, key.as_bytes())?;
        }
        let appended = self
            .ledger
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
                if let Err(k) = self.ledger.keystore().delete(&key_account) {
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
        self.ledger.account(name).await?;
        self.ledger.append(HUMAN_ENTITY, EventBody::ProviderAccountRemoved { name: name.to_owned() }).await?;
        self.ledger.keystore().delete(&self.provider_key_account(name))?;
        Ok(())
    }

    // ----- models -----

    pub async fn list_models(&self) -> Result<Vec<ModelView>> {
        let mut out: Vec<ModelView> = local_model_names(&self.data_dir.models())
            .into_iter()
            .map(|m| ModelView { spec: ModelSpec::local(&m).to_string(), label: format!("{m} (local)"), local: true })
            .collect();
        for a in self.ledger.accounts().await? {
            out.push(ModelView {
                spec: format!("{}:{}", a.name, a.default_model),
                label: format!("{} ({})", a.default_model, a.name),
                local: false,
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
        let target = self.data_dir.models().join(format!("{stem}.gguf"));
        if target.exists() {
            return Err(AppError::new("MODEL_EXISTS", format!("a model named {stem} is already installed")));
        }
        std::fs::create_dir_all(self.data_dir.models())
            .and_then(|_| {
                // Copy to a temporary name, then rename: never a half model.
                let tmp = target.with_extension("gguf.partial");
                std::fs::copy(path, &tmp)?;
                std::fs::File::open(&tmp)?.sync_all()?;
                std::fs::rename(&tmp, &target)
            })
            .map_err(|e| AppError::new("STORAGE_SAVE_FAILED", format!("could not copy the model: {e}")))?;
        Ok(ModelView { spec: ModelSpec::local(&stem).to_string(), label: format!("{stem} (local)"), local: true })
    }

    /// The provider that serves a model spec.
    pub(crate) async fn provider_for(&self, spec: &ModelSpec) -> Result<Arc<dyn Provider>> {
        if let Some(p) = &self.provider_override {
            return Ok(p.clone());
        }
        if spec.is_local() {
            #[cfg(feature = "local")]
            return Ok(self.local.clone());
            #[cfg(not(feature = "local"))]
            return Err(AppError::new("MODEL_LOAD_FAILED", "this build has no local engine"));
        }
        let account = self.ledger.account(&spec.account).await?;
        let key = self.ledger.keystore().load(&self.provider_key_account(&account.name))?;
        let key = key.map(|k| String::from_utf8_lossy(&k).into_owned());
        Ok(Arc::new(OpenAiCompatible::new(account.name, account.base_url).with_api_key(key)))
    }
}

fn local_model_names(dir: &Path) -> Vec<String> {
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
fn default_local_model(dir: &Path) -> String {
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
