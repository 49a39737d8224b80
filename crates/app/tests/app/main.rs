//! Engine tests with a scripted fake model and an in-memory keychain.

mod accounts;
mod chat;
mod disk;
mod documents;
mod extraction;
mod keys;
mod memory;
mod office;
mod personas;
mod runtime;
mod vault;

use std::sync::Arc;

use app::{AppEvent, DataDir, Engine, EngineConfig};
use ledger::MemoryKeyStore;
use providers::ScriptedProvider;

pub struct Harness {
    pub dir: tempfile::TempDir,
    pub keys: Arc<MemoryKeyStore>,
    pub provider: Arc<ScriptedProvider>,
    pub engine: Arc<Engine>,
}

impl Harness {
    pub async fn new(replies: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let keys = Arc::new(MemoryKeyStore::default());
        let provider = Arc::new(ScriptedProvider::with_replies("fake", replies.iter().copied()));
        let engine = start(&dir, keys.clone(), provider.clone()).await;
        Self { dir, keys, provider, engine }
    }

    /// With a short stall limit for the working states.
    pub async fn with_stall_limit(replies: &[&str], limit: std::time::Duration) -> Self {
        Self::configured(replies, |config| config.stall_limit = limit).await
    }

    /// With the engine's config changed by `tweak`.
    pub async fn configured(replies: &[&str], tweak: impl FnOnce(&mut EngineConfig)) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let keys = Arc::new(MemoryKeyStore::default());
        let provider = Arc::new(ScriptedProvider::with_replies("fake", replies.iter().copied()));
        let mut config = EngineConfig::new(DataDir::new(dir.path()), keys.clone());
        config.provider_override = Some(provider.clone());
        config.timers = false;
        config.document_extractor = library::Extractor::InProcess;
        tweak(&mut config);
        let engine = Engine::start(config).await.expect("engine starts");
        Self { dir, keys, provider, engine }
    }

    pub async fn restart(self, replies: &[&str]) -> Self {
        self.engine.shutdown().await;
        let Harness { dir, keys, .. } = self;
        let provider = Arc::new(ScriptedProvider::with_replies("fake", replies.iter().copied()));
        let engine = start(&dir, keys.clone(), provider.clone()).await;
        Self { dir, keys, provider, engine }
    }
}


async fn start(dir: &tempfile::TempDir, keys: Arc<MemoryKeyStore>, provider: Arc<ScriptedProvider>) -> Arc<Engine> {
    let mut config = EngineConfig::new(DataDir::new(dir.path()), keys);
    config.provider_override = Some(provider);
    config.timers = false;
    config.document_extractor = library::Extractor::InProcess;
    Engine::start(config).await.expect("engine starts")
}

/// A data directory with the real local model installed (a link to
/// LEDGERMIND_TEST_MODEL, which scripts/test.sh sets) and its engine
/// config; `None` without the variable (the real-model tests are skipped).
pub fn real_model_home() -> Option<(tempfile::TempDir, EngineConfig)> {
    let model = std::env::var("LEDGERMIND_TEST_MODEL").ok()?;
    let dir = tempfile::tempdir().expect("tempdir");
    let models = dir.path().join("models");
    std::fs::create_dir_all(&models).expect("models dir");
    let target = models.join(std::path::Path::new(&model).file_name().expect("model file name"));
    std::fs::hard_link(&model, &target).or_else(|_| std::fs::copy(&model, &target).map(|_| ())).expect("install model");
    let config = EngineConfig::new(DataDir::new(dir.path()), Arc::new(MemoryKeyStore::default()));
    Some((dir, config))
}

/// Waits for the end of one reply, collecting the streamed pieces.
pub async fn await_reply(
    rx: &mut tokio::sync::broadcast::Receiver<AppEvent>,
) -> (Vec<String>, Result<app::MessageView, app::ErrorView>) {
    let mut deltas = Vec::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let ev = tokio::time::timeout_at(deadline, rx.recv()).await.expect("reply in time").expect("event");
        match ev {
            AppEvent::ReplyDelta { text, .. } => deltas.push(text),
            AppEvent::ReplyFinished { message, .. } => return (deltas, Ok(message)),
            AppEvent::ReplyFailed { error, .. } => return (deltas, Err(error)),
            _ => {}
        }
    }
}
