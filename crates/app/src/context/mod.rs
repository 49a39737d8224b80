//! The seam between the capabilities and the rest of the engine.
//!
//! A capability (conversation, memory, library, tools, office, personas,
//! vault, keys, models) receives an `Arc<Context>` and the few capabilities
//! below it that it calls, never the `Engine`. The context holds only what
//! every capability shares:
//!
//! - the ledger handle (with its clock: tests move a manual one),
//! - the event sink (the one place events to the shells leave from),
//! - the model providers,
//! - the queue's bell and the worker's signals (busy, paused, the call that
//!   can be cancelled now, background work a reply preempts),
//! - the shutdown signal, and the timers that stop with it.
//!
//! It must never hold a capability's own state, nor import a capability
//! module: it is the bottom of the crate.

pub(crate) mod jobs;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use ledger::Ledger;
use providers::{CancelFlag, Provider};
use tokio::sync::{broadcast, watch, Notify};
use tokio::task::JoinHandle;

use crate::events::AppEvent;
use crate::models::registry::{Providers, Serving};
use crate::models::spec::ModelSpec;
use crate::paths::DataDir;
use crate::Result;

pub use jobs::Background;

/// What every capability shares (see the module docs).
pub struct Context {
    pub(crate) ledger: Arc<Ledger>,
    data_dir: DataDir,
    events: broadcast::Sender<AppEvent>,
    providers: Providers,
    /// The queue's bell: work queued in this process wakes the worker at once.
    pub(crate) wake: Notify,
    /// The worker is running a job now.
    pub(crate) busy: AtomicBool,
    /// The human paused the queue: the worker takes nothing new.
    pub(crate) paused: AtomicBool,
    /// The model call the worker runs now, which Stop cancels.
    pub(crate) current_cancel: Mutex<Option<CancelFlag>>,
    /// Background work (extraction, summaries …) that a reply may preempt.
    pub(crate) background: Background,
    shutdown: watch::Sender<bool>,
}

impl Context {
    /// A context over an open ledger. `providers` serves every model spec
    /// (tests pass one that answers with a scripted fake).
    pub fn new(ledger: Arc<Ledger>, data_dir: DataDir, providers: Providers) -> Arc<Self> {
        let (events, _) = broadcast::channel(1024);
        let (shutdown, _) = watch::channel(false);
        Arc::new(Self {
            ledger,
            data_dir,
            events,
            providers,
            wake: Notify::new(),
            busy: AtomicBool::new(false),
            paused: AtomicBool::new(false),
            current_cancel: Mutex::new(None),
            background: Background::default(),
            shutdown,
        })
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

    /// Tells the shells how busy the queue is.
    pub(crate) async fn emit_queue(&self) {
        let pending = self.ledger.queue_items(Some(ledger::QueueState::Pending)).await.map(|v| v.len()).unwrap_or(0);
        self.emit(AppEvent::QueueChanged { busy: self.busy.load(Ordering::SeqCst), pending: pending as u32 });
    }

    /// Nothing runs and nothing waits in the queue.
    pub(crate) async fn queue_idle(&self) -> Result<bool> {
        if self.busy.load(Ordering::SeqCst) {
            return Ok(false);
        }
        let items = self.ledger.queue_items(None).await?;
        Ok(!items.iter().any(|i| matches!(i.state, ledger::QueueState::Pending | ledger::QueueState::Running)))
    }

    pub(crate) fn is_paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    /// Cancels the model call running now, if any.
    pub(crate) fn abort_current(&self) -> bool {
        match self.current_cancel.lock().ok().and_then(|c| c.clone()) {
            Some(flag) => {
                flag.cancel();
                true
            }
            None => false,
        }
    }

    /// Loads a local model ahead of its first use (see [`Providers::preload`]).
    pub(crate) async fn preload(&self, spec: &ModelSpec) -> Result<()> {
        self.providers.preload(spec).await
    }

    /// What serves a model spec now, a stand-in for a server of this
    /// machine that went away included (see [`Providers::serving`]). Every
    /// model call goes through here.
    pub(crate) async fn serving(&self, spec: &ModelSpec) -> Result<Serving> {
        self.providers.serving(&self.ledger, &self.data_dir().models(), spec).await
    }

    /// The provider that serves a model spec as it is.
    pub(crate) async fn provider_for(&self, spec: &ModelSpec) -> Result<Arc<dyn Provider>> {
        self.providers.provider_for(&self.ledger, spec).await
    }

    /// Deletes the local model's evaluated prompts kept on disk (after an
    /// erasure: they were computed from the erased text).
    pub(crate) fn forget_kept_prompts(&self) {
        self.providers.forget_kept_prompts();
        // The layouts hold remembered lines as they were sent.
        match std::fs::remove_dir_all(self.data_dir.prompt_layouts()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                tracing::error!(error = %e, "could not delete the kept prompt layouts after an erasure");
            }
            _ => {}
        }
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// The signal the worker and the owned tasks stop on.
    pub(crate) fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Stops the worker, the timers and the tasks after their current step.
    pub(crate) fn begin_shutdown(&self) {
        self.abort_current();
        let _already_stopping_is_fine = self.shutdown.send(true);
    }

    /// Runs `tick` every `period` (the first at once, or after one period
    /// when `skip_first`) while `owner` lives: the timer holds only a weak
    /// reference and stops at shutdown. The background timers use it.
    pub(crate) fn spawn_timer<T, F, Fut>(&self, owner: &Arc<T>, period: std::time::Duration, skip_first: bool, tick: F) -> JoinHandle<()>
    where
        T: Send + Sync + 'static,
        F: Fn(Arc<T>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send,
    {
        let owner = Arc::downgrade(owner);
        let shutdown = self.shutdown_signal();
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(period);
            if skip_first {
                interval.tick().await;
            }
            loop {
                interval.tick().await;
                let Some(owner) = owner.upgrade() else { break };
                if *shutdown.borrow() {
                    break;
                }
                tick(owner).await;
            }
        })
    }
}

/// A context over a fresh ledger in a temporary folder, with an in-memory
/// keychain and a scripted model: what a capability's own tests build it
/// on, without the engine, the worker or the timers.
#[cfg(test)]
pub(crate) mod testing {
    use std::sync::Arc;

    use providers::ScriptedProvider;

    use super::Context;
    use crate::models::registry::Providers;
    use crate::paths::DataDir;

    pub(crate) struct TestContext {
        pub dir: tempfile::TempDir,
        pub ctx: Arc<Context>,
        pub provider: Arc<ScriptedProvider>,
    }

    pub(crate) async fn context(replies: &[&str]) -> TestContext {
        let dir = tempfile::tempdir().expect("tempdir");
        let provider = Arc::new(ScriptedProvider::with_replies("fake", replies.iter().copied()));
        let keys = Arc::new(ledger::MemoryKeyStore::default());
        let mut opts = ledger::LedgerOptions::new(dir.path().join("ledger.db"));
        opts.default_model = "local:fake".to_owned();
        let ledger = ledger::Ledger::open(opts, keys).await.expect("ledger");
        let ctx = Context::new(Arc::new(ledger), DataDir::new(dir.path()), Providers::only(provider.clone()));
        TestContext { dir, ctx, provider }
    }
}
