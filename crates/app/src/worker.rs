//! The queue worker: one owned task that takes queued work one item at a
//! time, hands each to the capability that owns its kind, and settles how
//! it ended (done, retried with backoff, deferred, preempted or
//! dead-lettered). It belongs to the composition root: it is the only
//! place that knows every job kind.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ledger::QueueItem;
use tokio::sync::watch;

use crate::context::jobs::{Failure, ReplyJob, MAX_ATTEMPTS, REPLY_KIND};
use crate::context::Context;
use crate::conversation::Conversation;
use crate::error::AppError;
use crate::events::AppEvent;
use crate::memory::extraction::{self, EXTRACT_KIND};
use crate::memory::summary::{self, SUMMARY_KIND};
use crate::memory::Memories;
use crate::personas::exploration::{self, EXPLORE_KIND};
use crate::personas::heartbeat::{self, HEARTBEAT_KIND};
use crate::personas::persona::{self, FILL_KIND};
use crate::personas::Personas;

/// How long an idle worker sleeps when nothing is due sooner. Work queued
/// in this process wakes it at once (the context's bell); this only bounds the
/// wait for work queued by another process (the CLI on the same data).
const IDLE_BACKSTOP: Duration = Duration::from_secs(60);
/// Before retrying after the queue could not be read.
const RETRY_AFTER: Duration = Duration::from_secs(2);


/// Every capability that runs queued work, by job kind.
pub(crate) struct Worker {
    pub ctx: Arc<Context>,
    pub conversation: Arc<Conversation>,
    pub memory: Arc<Memories>,
    pub personas: Arc<Personas>,
}

pub(crate) async fn run_worker(worker: Worker, mut shutdown: watch::Receiver<bool>) {
    let ctx = &worker.ctx;
    loop {
        if *shutdown.borrow() {
            return;
        }
        let next = if ctx.is_paused() { Ok(None) } else { ctx.ledger.take_next(ctx.ledger.now()).await };
        match next {
            Ok(Some(item)) => {
                ctx.busy.store(true, Ordering::SeqCst);
                ctx.emit_queue().await;
                process(&worker, item).await;
                ctx.busy.store(false, Ordering::SeqCst);
                ctx.emit_queue().await;
            }
            Ok(None) => {
                // Asleep until something is queued or the next delayed item
                // is due: an idle app does not poll its queue.
                let wait = if ctx.is_paused() { IDLE_BACKSTOP } else { until_next_due(ctx).await };
                tokio::select! {
                    _ = ctx.wake.notified() => {}
                    _ = ctx.ledger.queue_changed() => {}
                    _ = tokio::time::sleep(wait) => {}
                    _ = shutdown.changed() => return,
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "the reply queue could not be read; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(RETRY_AFTER) => {}
                    _ = shutdown.changed() => return,
                }
            }
        }
    }
}

/// How long until the earliest delayed item may start, at most the backstop.
async fn until_next_due(ctx: &Context) -> Duration {
    match ctx.ledger.next_not_before().await {
        Ok(Some(at)) => {
            match u64::try_from((at - ctx.ledger.now()).whole_milliseconds()) {
                Ok(left) if left > 0 => Duration::from_millis(left).min(IDLE_BACKSTOP),
                // Due already, yet not taken (it was queued a moment ago, or
                // its time does not compare): look again shortly, as before.
                _ => RETRY_AFTER,
            }
        }
        Ok(None) => IDLE_BACKSTOP,
        Err(e) => {
            tracing::warn!(error = %e, "the queue's next due time could not be read");
            RETRY_AFTER
        }
    }
}

async fn process(worker: &Worker, item: QueueItem) {
    let ctx = &worker.ctx;
    // A reply that was given: the next prompt is read ahead once it is marked done.
    let mut replied: Option<ReplyJob> = None;
    let outcome = match item.kind.as_str() {
        REPLY_KIND => match serde_json::from_value::<ReplyJob>(item.body.clone()) {
            Ok(job) => {
                ctx.reply_started();
                let outcome = worker.conversation.reply(&item, &job).await;
                replied = outcome.is_ok().then_some(job);
                outcome
            }
            Err(e) => Err(Failure::Final(AppError::invalid(format!("unreadable job: {e}")))),
        },
        EXTRACT_KIND => extraction::run(&worker.memory, &item).await,
        SUMMARY_KIND => summary::run(&worker.memory, &item).await,
        FILL_KIND => persona::run_fill(&worker.personas, &item).await,
        HEARTBEAT_KIND => heartbeat::run(&worker.personas, &item).await,
        EXPLORE_KIND => exploration::run(&worker.personas, &item).await,
        _ => Err(Failure::Final(AppError::invalid("no handler for this kind of work"))),
    };
    match outcome {
        Ok(()) => {
            if let Err(e) = ctx.ledger.finish_item(&item.id).await {
                tracing::error!(error = %e, "could not mark queued work as done");
            }
        }
        Err(Failure::Final(e)) if e.code == "LLM_CANCELLED" && ctx.is_shutting_down() => {
            // Interrupted by quitting, not by the user: do it again next start.
            if let Err(e) = ctx.ledger.retry_item(&item.id, "interrupted by shutdown", ctx.ledger.now()).await {
                tracing::error!(error = %e, "could not keep interrupted work queued");
            }
        }
        Err(Failure::Preempted) => {
            // Background work gave way to a reply: it runs again, attempt not counted.
            if let Err(e) = ctx.ledger.requeue_item(&item.id).await {
                tracing::error!(error = %e, "could not requeue preempted work");
            }
        }
        Err(Failure::Deferred(until)) => {
            // Waits (attempt not counted), e.g. for a persona's pause to end.
            if let Err(e) = ctx.ledger.defer_item(&item.id, until).await {
                tracing::error!(error = %e, "could not defer queued work");
            }
        }
        Err(failure) => settle_failure(ctx, &item, failure).await,
    }
    // After the reply is marked done (a crash while reading ahead must not
    // answer the message twice), and before other background work: the
    // person is reading it now and will write next.
    if let Some(job) = replied.filter(|j| !j.continue_plan) {
        worker.conversation.read_ahead(&job.persona_id).await;
    }
}

async fn settle_failure(ctx: &Context, item: &QueueItem, failure: Failure) {
    let (error, retry) = match failure {
        Failure::Retry(e) => (e, item.attempts < MAX_ATTEMPTS),
        Failure::Final(e) => (e, false),
        Failure::Preempted | Failure::Deferred(_) => return,
    };
    if retry {
        let delay = backoff(item.attempts);
        tracing::warn!(request = %item.id, kind = %item.kind, code = error.code, ?delay, "queued work failed; retrying");
        if let Err(e) = ctx.ledger.retry_item(&item.id, error.code, ctx.ledger.now() + delay).await {
            tracing::error!(error = %e, "could not reschedule queued work");
        }
        return;
    }
    tracing::warn!(request = %item.id, kind = %item.kind, code = error.code, "queued work failed for good");
    let stored = format!("{}: {}", error.code, error.message);
    if let Err(e) = ctx.ledger.dead_letter(&item.id, &stored).await {
        tracing::error!(error = %e, "could not dead-letter queued work");
    }
    let persona_id = item.persona_id.clone().unwrap_or_default();
    ctx.emit(if item.kind == REPLY_KIND {
        AppEvent::ReplyFailed { request_id: item.id.clone(), persona_id, error: error.view() }
    } else {
        AppEvent::JobFailed { request_id: item.id.clone(), kind: item.kind.clone(), persona_id, error: error.view() }
    });
}


/// Exponential backoff with full jitter: up to 1 s, 2 s, 4 s … capped at 30 s.
fn backoff(attempt: i64) -> time::Duration {
    let ceiling_ms = (1_000i64 << attempt.clamp(0, 5)).min(30_000);
    let ms = rand::random::<u32>() as i64 % ceiling_ms.max(1);
    time::Duration::milliseconds(ms.max(100))
}
