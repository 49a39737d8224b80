//! The queue's contract with the capabilities: job priorities, the reply
//! job's shape, how a job fails, and how background work gives way to a
//! reply. The worker (`crate::worker`) takes the jobs; each capability runs
//! its own kinds.

use std::sync::atomic::{AtomicBool, Ordering};

use providers::{CancelFlag, CompletionRequest, FinishReason, ProviderError};
use serde::{Deserialize, Serialize};

use super::Context;
use crate::error::AppError;

/// Replies jump ahead of all background work (extraction, ceremony), even
/// work the human set to high: shown as "high", sorted first.
pub(crate) const PRIORITY_REPLY: i64 = -1;
/// The "high" of background work the human promotes in the queue panel.
pub(crate) const PRIORITY_HIGH: i64 = 0;
/// Work the person asked for that is not a reply (a persona's fill).
pub(crate) const PRIORITY_NORMAL: i64 = 1;
/// Background work: after every reply and every normal-priority job.
pub(crate) const PRIORITY_LOW: i64 = 2;
/// Attempts before queued work is dead-lettered.
pub(crate) const MAX_ATTEMPTS: i64 = 3;

pub(crate) const REPLY_KIND: &str = "reply";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ReplyJob {
    pub persona_id: String,
    pub reply_to: String,
    /// Plan the next step of a local plan whose last step was just
    /// confirmed (no new message).
    #[serde(default)]
    pub continue_plan: bool,
}

/// How a job ended when it did not succeed.
pub(crate) enum Failure {
    Retry(AppError),
    Final(AppError),
    /// Low-priority work cancelled so a reply could run first.
    Preempted,
    /// Not now: run again at this time (a paused persona).
    Deferred(time::OffsetDateTime),
}

/// Lets a reply preempt running background work.
#[derive(Debug, Default)]
pub struct Background {
    running: AtomicBool,
    /// When the background call running now began.
    since: std::sync::Mutex<Option<std::time::Instant>>,
    preempted: AtomicBool,
    /// A reply is queued and not started yet: background work must not start
    /// another model call (a job of several calls, like extraction, would
    /// otherwise run its next call to the end while the reply waits).
    reply_waiting: AtomicBool,
}

impl Context {
    /// Called when a reply is queued: background work running now is
    /// cancelled and requeued, and none starts a model call until the reply
    /// has started, so the reply starts at once.
    pub(crate) fn preempt_background(&self) {
        // Flag first, then look (SeqCst): `complete_in_background` marks
        // itself running first, then looks, so one of the two always sees
        // the other.
        self.background.reply_waiting.store(true, Ordering::SeqCst);
        if self.background.running.load(Ordering::SeqCst) {
            self.background.preempted.store(true, Ordering::SeqCst);
            self.abort_current();
        }
    }

    /// When the background model call running now began (None: none runs).
    /// A draft read that began after it waits behind it for the model.
    pub(crate) fn background_since(&self) -> Option<std::time::Instant> {
        self.background.since.lock().ok().and_then(|s| *s)
    }

    fn background_began(&self, running: bool) {
        if let Ok(mut s) = self.background.since.lock() {
            *s = running.then(std::time::Instant::now);
        }
    }

    /// Called when the reply worker starts a reply.
    pub(crate) fn reply_started(&self) {
        self.background.reply_waiting.store(false, Ordering::SeqCst);
    }

    /// Runs one model call as background work: a reply queued meanwhile
    /// cancels it ([`Failure::Preempted`], requeued without counting the attempt).
    pub(crate) async fn complete_in_background(
        &self,
        provider: &dyn providers::Provider,
        request: CompletionRequest,
    ) -> Result<providers::Completion, Failure> {
        self.in_background(request, |r| provider.complete(r, None)).await
    }

    /// Reads a prompt ahead (see [`providers::Provider::prefill`]) as
    /// background work: a reply queued meanwhile stops it.
    pub(crate) async fn prefill_in_background(
        &self,
        provider: &dyn providers::Provider,
        request: CompletionRequest,
    ) -> Result<providers::Completion, Failure> {
        self.in_background(request, |r| provider.prefill(r)).await
    }

    /// Whether a reply waits in the queue. The send raises `reply_waiting`
    /// after its reply is queued, and a worker woken by the queue may take
    /// and start that reply first: the flag then stays up with no reply
    /// waiting, and every background call (the next prompt's read-ahead,
    /// the summary) gave way at once until the next reply, so the next
    /// message found the conversation's context not read ahead. The queue
    /// has the last word; the flag only spares asking it.
    async fn reply_queued(&self) -> bool {
        match self.ledger.queue_items(Some(ledger::QueueState::Pending)).await {
            Ok(items) => items.iter().any(|i| i.kind == REPLY_KIND),
            // Unreadable: give way, as before.
            Err(_) => true,
        }
    }

    async fn in_background<'a, F, Fut>(&self, mut request: CompletionRequest, call: F) -> Result<providers::Completion, Failure>
    where
        F: FnOnce(CompletionRequest) -> Fut,
        Fut: std::future::Future<Output = Result<providers::Completion, ProviderError>> + 'a,
    {
        let cancel = CancelFlag::default();
        request.cancel = cancel.clone();
        if let Ok(mut c) = self.current_cancel.lock() {
            *c = Some(cancel);
        }
        self.background.preempted.store(false, Ordering::SeqCst);
        self.background.running.store(true, Ordering::SeqCst);
        if self.background.reply_waiting.load(Ordering::SeqCst) && self.reply_queued().await {
            self.background.running.store(false, Ordering::SeqCst);
            if let Ok(mut c) = self.current_cancel.lock() {
                *c = None;
            }
            return Err(Failure::Preempted);
        }
        self.background_began(true);
        let result = call(request).await;
        self.background_began(false);
        self.background.running.store(false, Ordering::SeqCst);
        if let Ok(mut c) = self.current_cancel.lock() {
            *c = None;
        }
        let preempted = self.background.preempted.swap(false, Ordering::SeqCst);
        match result {
            Ok(c) if c.finish == FinishReason::Cancelled && preempted => Err(Failure::Preempted),
            Err(ProviderError::Cancelled) if preempted => Err(Failure::Preempted),
            Ok(c) if c.finish == FinishReason::Cancelled => Err(Failure::Final(ProviderError::Cancelled.into())),
            Ok(c) => Ok(c),
            Err(e) if e.is_transient() => Err(Failure::Retry(e.into())),
            Err(e) => Err(Failure::Final(e.into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use providers::{CompletionRequest, ScriptedProvider};

    use super::{Failure, PRIORITY_REPLY, REPLY_KIND};
    use crate::context::Context;
    use crate::models::registry::Providers;
    use crate::paths::DataDir;

    /// A reply queued while a background job sits between two model calls
    /// (extraction makes several) must not wait for the job's next call.
    /// Only the context, on a scripted model that answers `reply` once: no
    /// engine, no worker, no other capability.
    async fn context_answering(reply: &str) -> (tempfile::TempDir, Arc<Context>, Arc<ScriptedProvider>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let provider = Arc::new(ScriptedProvider::new("fake"));
        provider.push_reply(reply);
        let keys = Arc::new(ledger::MemoryKeyStore::default());
        let ledger = ledger::Ledger::open(ledger::LedgerOptions::new(dir.path().join("ledger.db")), keys).await.expect("ledger");
        let ctx = Context::new(Arc::new(ledger), DataDir::new(dir.path()), Providers::only(provider.clone()));
        (dir, ctx, provider)
    }

    #[tokio::test]
    async fn a_reply_queued_between_background_calls_stops_the_next_call() {
        let (_dir, ctx, provider) = context_answering("background answer").await;
        let request = || CompletionRequest::chat("fake", Vec::new());

        // A reply is queued; no model call runs now.
        ctx.ledger.enqueue(REPLY_KIND, PRIORITY_REPLY, None, &serde_json::json!({})).await.expect("enqueue");
        ctx.preempt_background();
        let r = ctx.complete_in_background(provider.as_ref(), request()).await;
        assert!(matches!(r, Err(Failure::Preempted)), "the next background call gives way");
        assert_eq!(provider.calls(), 0, "the model was not called");

        ctx.ledger.take_next(ctx.ledger.now()).await.expect("take").expect("the reply");
        ctx.reply_started();
        let r = ctx.complete_in_background(provider.as_ref(), request()).await;
        assert!(matches!(r, Ok(ref c) if c.text == "background answer"), "background work runs again after the reply started");
    }

    /// The worker, woken by the queue, took the reply and started it before
    /// the send told background work a reply was coming: once that reply is
    /// done, background work (the next prompt's read-ahead) must still run.
    #[tokio::test]
    async fn a_reply_started_before_its_send_flagged_it_does_not_hold_background_work_back() {
        let (_dir, ctx, provider) = context_answering("read ahead").await;

        ctx.ledger.enqueue(REPLY_KIND, PRIORITY_REPLY, None, &serde_json::json!({})).await.expect("enqueue");
        let reply = ctx.ledger.take_next(ctx.ledger.now()).await.expect("take").expect("the reply");
        ctx.reply_started();
        ctx.preempt_background(); // the send, a moment late
        ctx.ledger.finish_item(&reply.id).await.expect("finish");

        let r = ctx.complete_in_background(provider.as_ref(), CompletionRequest::chat("fake", Vec::new())).await;
        assert!(matches!(r, Ok(ref c) if c.text == "read ahead"), "no reply waits: the background call runs");
    }
}
