//! The queue's contract with the capabilities: job priorities, the reply
//! job's shape, how a job fails, and how background work gives way to a
//! reply. The worker (`crate::worker`) takes the jobs; each capability runs
//! its own kinds.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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
/// How long queued work keeps off the model after the person was last seen
/// composing a message: longer than the pauses between the drafts of one
/// message (a spoken draft comes every half second of speech, a typed one
/// at each pause), short enough that work held back by a draft never sent
/// runs soon after.
pub(crate) const COMPOSING_HOLD: Duration = Duration::from_secs(10);

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
    /// The background calls running now. Usually one; a prompt read ahead
    /// and a queued job's call may overlap (the engine then runs them one
    /// after the other), and one ending must not leave the other beyond the
    /// reach of a send or of the person composing: seen in the window, a
    /// persona's fill that nothing could stop held a spoken reply for 11 s.
    calls: std::sync::Mutex<Vec<BackgroundCall>>,
    next_call: std::sync::atomic::AtomicU64,
    /// A reply is queued and not started yet: background work must not start
    /// another model call (a job of several calls, like extraction, would
    /// otherwise run its next call to the end while the reply waits).
    reply_waiting: AtomicBool,
    /// Until when the person is taken to be composing a message.
    composing_until: std::sync::Mutex<Option<Instant>>,
}

/// One background model call running now.
#[derive(Debug)]
struct BackgroundCall {
    id: u64,
    cancel: CancelFlag,
    began: Instant,
    /// Stopped to let a reply or the person go first: it gives way
    /// (requeued) rather than fails.
    preempted: std::sync::Arc<AtomicBool>,
}

impl Background {
    /// Stops the calls running now; whether there was one.
    fn stop(&self) -> bool {
        let calls = self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut stopped = false;
        for call in calls.iter() {
            call.preempted.store(true, Ordering::SeqCst);
            call.cancel.cancel();
            stopped = true;
        }
        stopped
    }
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
        // The message is sent: from here the reply's own flag holds work back.
        if let Ok(mut until) = self.background.composing_until.lock() {
            *until = None;
        }
        self.background.stop();
    }

    /// The person is composing a message (a draft typed, words spoken), so
    /// its reply will want the model within seconds. A model call of queued
    /// work (extraction, a summary) stopped only at the send still holds the
    /// model until the chunk of prompt it reads is done, and the reply
    /// waits that out (1.5 s in a spoken turn); stopped now, the chunk is
    /// done before the message is. So a background call running now is
    /// stopped (queued work is requeued), and no queued work starts another
    /// for [`COMPOSING_HOLD`] after the last sign or until the send. A
    /// prompt read ahead after that is not held back.
    pub(crate) fn person_composing(&self) {
        // The hold first, then look (both under locks): a job call marks
        // itself first, then looks at the hold, so one of the two sees the other.
        if let Ok(mut until) = self.background.composing_until.lock() {
            *until = Some(Instant::now() + COMPOSING_HOLD);
        }
        // A prompt read ahead running now stops too (keeping what it
        // read): the read of the person's own draft would otherwise wait
        // behind it, and on a slow machine the next prompt's 170 tokens
        // took 12–20 s. One that starts while they compose runs.
        if self.background.stop() {
            tracing::debug!("background work stopped: the person is composing a message");
        }
    }

    /// How long the person composing still holds queued work back.
    fn composing_left(&self) -> Option<Duration> {
        let until = self.background.composing_until.lock().ok().and_then(|u| *u)?;
        until.checked_duration_since(Instant::now()).filter(|left| !left.is_zero())
    }

    /// When the background model call running now began, the earliest of
    /// several (None: none runs).
    /// A draft read that began after it waits behind it for the model.
    pub(crate) fn background_since(&self) -> Option<std::time::Instant> {
        let calls = self.background.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        calls.iter().map(|c| c.began).min()
    }


    /// Called when the reply worker starts a reply.
    pub(crate) fn reply_started(&self) {
        self.background.reply_waiting.store(false, Ordering::SeqCst);
    }

    /// Runs one model call as background work: a reply queued meanwhile
    /// cancels it ([`Failure::Preempted`], requeued without counting the
    /// attempt), as does the person starting to compose a message; while
    /// they compose it does not start ([`Failure::Deferred`]).
    pub(crate) async fn complete_in_background(
        &self,
        provider: &dyn providers::Provider,
        mut request: CompletionRequest,
    ) -> Result<providers::Completion, Failure> {
        request.background = true;
        self.in_background(request, true, |r| provider.complete(r, None)).await
    }

    /// [`Self::complete_in_background`] for a call that measures the model:
    /// its prompt is read as a reply's is (in long chunks, about a tenth
    /// faster than background work's short ones), so that the speed shown
    /// is the speed of a reply.
    pub(crate) async fn measure_in_background(
        &self,
        provider: &dyn providers::Provider,
        request: CompletionRequest,
    ) -> Result<providers::Completion, Failure> {
        self.in_background(request, true, |r| provider.complete(r, None)).await
    }

    /// Reads a prompt ahead (see [`providers::Provider::prefill`]) as
    /// background work: a reply queued meanwhile stops it.
    pub(crate) async fn prefill_in_background(
        &self,
        provider: &dyn providers::Provider,
        request: CompletionRequest,
    ) -> Result<providers::Completion, Failure> {
        self.in_background(request, false, |r| provider.prefill(r)).await
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

    /// `queued_work`: the call is a queued job's, which gives way to a
    /// person composing a message (a prompt read ahead does not).
    async fn in_background<'a, F, Fut>(
        &self,
        mut request: CompletionRequest,
        queued_work: bool,
        call: F,
    ) -> Result<providers::Completion, Failure>
    where
        F: FnOnce(CompletionRequest) -> Fut,
        Fut: std::future::Future<Output = Result<providers::Completion, ProviderError>> + 'a,
    {
        let cancel = CancelFlag::default();
        request.cancel = cancel.clone();
        if let Ok(mut c) = self.current_cancel.lock() {
            *c = Some(cancel.clone());
        }
        let id = self.background.next_call.fetch_add(1, Ordering::SeqCst);
        let preempted = std::sync::Arc::new(AtomicBool::new(false));
        {
            let call = BackgroundCall { id, cancel: cancel.clone(), began: Instant::now(), preempted: preempted.clone() };
            self.background.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(call);
        }
        // Only this call's own marks: another background call may have
        // started meanwhile and still run.
        let clear = || {
            self.background.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner).retain(|c| c.id != id);
            if let Ok(mut c) = self.current_cancel.lock() {
                if c.as_ref().is_some_and(|mine| mine.is_same(&cancel)) {
                    *c = None;
                }
            }
        };
        if self.background.reply_waiting.load(Ordering::SeqCst) && self.reply_queued().await {
            clear();
            return Err(Failure::Preempted);
        }
        if let Some(left) = self.composing_left().filter(|_| queued_work) {
            clear();
            tracing::debug!(?left, "queued work waits: the person is composing a message");
            let left = time::Duration::try_from(left).unwrap_or(time::Duration::ZERO);
            return Err(Failure::Deferred(self.ledger.now() + left));
        }
        let result = call(request).await;
        clear();
        let preempted = preempted.load(Ordering::SeqCst);
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

    /// A person writing or saying a message will want the model in seconds:
    /// queued work does not start a model call meanwhile (it is deferred to
    /// the end of the hold), the prompt read ahead still does, and the send
    /// ends the hold.
    #[tokio::test]
    async fn queued_work_waits_while_the_person_composes_and_reading_ahead_does_not() {
        let (_dir, ctx, provider) = context_answering("summary").await;
        let request = || CompletionRequest::chat("fake", Vec::new());

        let before = ctx.ledger.now();
        ctx.person_composing();
        let r = ctx.complete_in_background(provider.as_ref(), request()).await;
        let Err(Failure::Deferred(until)) = r else { panic!("queued work must wait while the person composes") };
        assert!(until > before && until <= before + super::COMPOSING_HOLD + time::Duration::seconds(1), "{until} vs {before}");
        assert_eq!(provider.calls(), 0, "the model was not called");
        assert!(ctx.prefill_in_background(provider.as_ref(), request()).await.is_ok(), "the prompt is still read ahead");

        ctx.preempt_background(); // the send, with no reply left queued
        let r = ctx.complete_in_background(provider.as_ref(), request()).await;
        assert!(matches!(r, Ok(ref c) if c.text == "summary"), "the send ends the hold");
    }

    type Stalled = tokio::task::JoinHandle<(Result<providers::Completion, Failure>, std::time::Duration)>;

    /// A queued job's call on a model reading a long prompt (one piece every
    /// five seconds), under way after 200 ms: its result and how long it took.
    async fn a_stalled_job(ctx: &Arc<Context>, provider: &Arc<ScriptedProvider>) -> Stalled {
        provider.push(providers::ScriptStep::Paced {
            text: "a long summary of the whole conversation".into(),
            gap: std::time::Duration::from_secs(5),
        });
        let stalled = {
            let ctx = ctx.clone();
            let provider = provider.clone();
            tokio::spawn(async move {
                let started = std::time::Instant::now();
                let r = ctx.complete_in_background(provider.as_ref(), CompletionRequest::chat("fake", Vec::new())).await;
                (r, started.elapsed())
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        stalled
    }

    /// Queued work already reading when the person starts to compose is
    /// stopped then (and requeued), not at the send: the chunk it is
    /// reading is done before the message is.
    #[tokio::test]
    async fn a_person_starting_to_compose_stops_the_queued_call_under_way() {
        let (_dir, ctx, provider) = context_answering("a short one first").await;
        let first = ctx.complete_in_background(provider.as_ref(), CompletionRequest::chat("fake", Vec::new())).await;
        assert!(first.is_ok(), "nobody composes: the work runs");
        let stalled = a_stalled_job(&ctx, &provider).await;
        ctx.person_composing();
        let (r, took) = stalled.await.expect("join");
        assert!(matches!(r, Err(Failure::Preempted)), "the queued call gives way and is requeued");
        assert!(took < std::time::Duration::from_secs(3), "stopped when the person began, not at its end ({took:?})");
    }

    /// A queued job's call and a prompt read ahead may run at once (the
    /// engine takes them in turn); the read ahead ending first must leave
    /// the job's call within reach of the person composing and of a send.
    async fn a_stalled_job_beside_a_read_ahead(ctx: &Arc<Context>, provider: &Arc<ScriptedProvider>) -> Stalled {
        let stalled = a_stalled_job(ctx, provider).await;
        let read = ctx.prefill_in_background(provider.as_ref(), CompletionRequest::chat("fake", Vec::new())).await;
        assert!(read.is_ok(), "the read ahead ran beside the job");
        stalled
    }

    #[tokio::test]
    async fn a_queued_call_gives_way_to_the_person_composing_after_a_read_ahead_beside_it_ended() {
        let (_dir, ctx, provider) = context_answering("a short one first").await;
        assert!(ctx.complete_in_background(provider.as_ref(), CompletionRequest::chat("fake", Vec::new())).await.is_ok());
        let stalled = a_stalled_job_beside_a_read_ahead(&ctx, &provider).await;
        ctx.person_composing();
        let (r, took) = stalled.await.expect("join");
        assert!(matches!(r, Err(Failure::Preempted)), "the queued call gives way and is requeued");
        assert!(took < std::time::Duration::from_secs(3), "stopped when the person began, not at its end ({took:?})");
    }

    #[tokio::test]
    async fn a_queued_call_gives_way_to_a_send_after_a_read_ahead_beside_it_ended() {
        let (_dir, ctx, provider) = context_answering("a short one first").await;
        assert!(ctx.complete_in_background(provider.as_ref(), CompletionRequest::chat("fake", Vec::new())).await.is_ok());
        let stalled = a_stalled_job_beside_a_read_ahead(&ctx, &provider).await;
        ctx.preempt_background();
        let (r, took) = stalled.await.expect("join");
        assert!(matches!(r, Err(Failure::Preempted)), "the queued call gives way to the reply and is requeued");
        assert!(took < std::time::Duration::from_secs(3), "stopped at the send, not at its end ({took:?})");
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
