//! The reply worker: an owned task that takes queued replies one at a time,
//! streams them from the persona's model, and commits them to the ledger.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ledger::{EventBody, QueueItem};
use providers::{CancelFlag, CompletionRequest, FinishReason, ProviderError};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::engine::Engine;
use crate::error::AppError;
use crate::models::ModelSpec;
use crate::prompt::{reply_prompt, PromptProfile};
use crate::views::{AppEvent, MessageView};

pub(crate) const REPLY_KIND: &str = "reply";
/// Attempts before queued work is dead-lettered.
pub(crate) const MAX_ATTEMPTS: i64 = 3;
/// Includes the planner JSON around the message (about 12 tokens).
const REPLY_MAX_TOKENS: u32 = 176;
/// How long an idle worker sleeps when nothing is due sooner. Work queued
/// in this process wakes it at once (`Engine::wake`); this only bounds the
/// wait for work queued by another process (the CLI on the same data).
const IDLE_BACKSTOP: Duration = Duration::from_secs(60);
/// Before retrying after the queue could not be read.
const RETRY_AFTER: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ReplyJob {
    pub persona_id: String,
    pub reply_to: String,
    /// runtime (#6): plan the next step of a local plan whose last step
    /// was just confirmed (no new message).
    #[serde(default)]
    pub continue_plan: bool,
}

/// Where the time between "send" and the first token went.
#[derive(Debug, Clone, Serialize)]
pub struct ReplyTiming {
    pub request_id: String,
    /// Send → provider called: ledger write, queue, prompt building.
    pub overhead_ms: f64,
    /// The part of `overhead_ms` spent writing the message and its job.
    pub write_ms: f64,
    /// The part of `overhead_ms` the job waited before the worker took it.
    pub queue_wait_ms: f64,
    /// The part of `overhead_ms` spent ranking memories for the prompt.
    pub retrieval_ms: f64,
    /// The part of `overhead_ms` spent reading the persona, its profile,
    /// quota and history before the ranking.
    pub reads_ms: f64,
    /// Reading the context frame (beside the ranking) and narrating it.
    pub frame_ms: f64,
    /// The part of `overhead_ms` spent turning the prompt into the planner's request.
    pub planner_ms: f64,
    /// Provider called → first token: the model's own time.
    pub model_first_token_ms: f64,
    /// Last token → reply committed to the ledger.
    pub commit_ms: f64,
    pub completion_tokens: u32,
    /// Tokens of the prompt the model read (as the provider counted them).
    pub prompt_tokens: u32,
    pub total_ms: f64,
}

pub(crate) async fn run_worker(engine: Arc<Engine>, mut shutdown: watch::Receiver<bool>) {
    loop {
        if *shutdown.borrow() {
            return;
        }
        let next = if engine.is_paused() { Ok(None) } else { engine.ledger.take_next(engine.ledger.now()).await };
        match next {
            Ok(Some(item)) => {
                engine.busy.store(true, Ordering::SeqCst);
                engine.emit_queue().await;
                process(&engine, item).await;
                engine.busy.store(false, Ordering::SeqCst);
                engine.emit_queue().await;
            }
            Ok(None) => {
                // Asleep until something is queued or the next delayed item
                // is due: an idle app does not poll its queue.
                let wait = if engine.is_paused() { IDLE_BACKSTOP } else { until_next_due(&engine).await };
                tokio::select! {
                    _ = engine.wake.notified() => {}
                    _ = engine.ledger.queue_changed() => {}
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
async fn until_next_due(engine: &Engine) -> Duration {
    match engine.ledger.next_not_before().await {
        Ok(Some(at)) => {
            match u64::try_from((at - engine.ledger.now()).whole_milliseconds()) {
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

async fn process(engine: &Arc<Engine>, item: QueueItem) {
    let outcome = match item.kind.as_str() {
        REPLY_KIND => match serde_json::from_value::<ReplyJob>(item.body.clone()) {
            Ok(job) => {
                engine.reply_started();
                let replied = reply(engine, &item, &job).await;
                if replied.is_err() {
                    engine.turn_failed(&job.persona_id);
                }
                replied
            }
            Err(e) => Err(Failure::Final(AppError::invalid(format!("unreadable job: {e}")))),
        },
        crate::extraction::EXTRACT_KIND => crate::extraction::run(engine, &item).await,
        crate::personas::FILL_KIND => crate::personas::run_fill(engine, &item).await,
        crate::summary::SUMMARY_KIND => crate::summary::run(engine, &item).await,
        crate::heartbeat::HEARTBEAT_KIND => crate::heartbeat::run(engine, &item).await,
        crate::exploration::EXPLORE_KIND => crate::exploration::run(engine, &item).await,
        _ => Err(Failure::Final(AppError::invalid("no handler for this kind of work"))),
    };
    match outcome {
        Ok(()) => {
            if let Err(e) = engine.ledger.finish_item(&item.id).await {
                tracing::error!(error = %e, "could not mark queued work as done");
            }
        }
        Err(Failure::Final(e)) if e.code == "LLM_CANCELLED" && engine.is_shutting_down() => {
            // Interrupted by quitting, not by the user: do it again next start.
            if let Err(e) = engine.ledger.retry_item(&item.id, "interrupted by shutdown", engine.ledger.now()).await {
                tracing::error!(error = %e, "could not keep interrupted work queued");
            }
        }
        Err(Failure::Preempted) => {
            // Background work gave way to a reply: it runs again, attempt not counted.
            if let Err(e) = engine.ledger.requeue_item(&item.id).await {
                tracing::error!(error = %e, "could not requeue preempted work");
            }
        }
        Err(Failure::Deferred(until)) => {
            // Waits (attempt not counted), e.g. for a persona's pause to end.
            if let Err(e) = engine.ledger.defer_item(&item.id, until).await {
                tracing::error!(error = %e, "could not defer queued work");
            }
        }
        Err(failure) => settle_failure(engine, &item, failure).await,
    }
}

pub(crate) enum Failure {
    Retry(AppError),
    Final(AppError),
    /// Low-priority work cancelled so a reply could run first.
    Preempted,
    /// Not now: run again at this time (a paused persona).
    Deferred(time::OffsetDateTime),
}

async fn settle_failure(engine: &Engine, item: &QueueItem, failure: Failure) {
    let (error, retry) = match failure {
        Failure::Retry(e) => (e, item.attempts < MAX_ATTEMPTS),
        Failure::Final(e) => (e, false),
        Failure::Preempted | Failure::Deferred(_) => return,
    };
    if retry {
        let delay = backoff(item.attempts);
        tracing::warn!(request = %item.id, kind = %item.kind, code = error.code, ?delay, "queued work failed; retrying");
        if let Err(e) = engine.ledger.retry_item(&item.id, error.code, engine.ledger.now() + delay).await {
            tracing::error!(error = %e, "could not reschedule queued work");
        }
        return;
    }
    tracing::warn!(request = %item.id, kind = %item.kind, code = error.code, "queued work failed for good");
    let stored = format!("{}: {}", error.code, error.message);
    if let Err(e) = engine.ledger.dead_letter(&item.id, &stored).await {
        tracing::error!(error = %e, "could not dead-letter queued work");
    }
    let persona_id = item.persona_id.clone().unwrap_or_default();
    engine.emit(if item.kind == REPLY_KIND {
        AppEvent::ReplyFailed { request_id: item.id.clone(), persona_id, error: error.view() }
    } else {
        AppEvent::JobFailed { request_id: item.id.clone(), kind: item.kind.clone(), persona_id, error: error.view() }
    });
}

/// Exponential backoff with full jitter: up to 1 s, 2 s, 4 s … capped at 30 s.
/// A reply that repeats itself is cut where the repeat starts. Free text is
/// guarded while it streams; a planner reply is sampled under its JSON
/// grammar without that guard, so its message is checked here, before it is
/// saved.
fn trim_repeats(text: &str) -> String {
    let mut guard = providers::LoopGuard::new();
    let _ = guard.push(text);
    let _ = guard.push(" ");
    if guard.looped() {
        guard.text().trim_end().to_owned()
    } else {
        text.to_owned()
    }
}

fn backoff(attempt: i64) -> time::Duration {
    let ceiling_ms = (1_000i64 << attempt.clamp(0, 5)).min(30_000);
    let ms = rand::random::<u32>() as i64 % ceiling_ms.max(1);
    time::Duration::milliseconds(ms.max(100))
}

async fn reply(engine: &Arc<Engine>, item: &QueueItem, job: &ReplyJob) -> Result<(), Failure> {
    let taken = Instant::now();
    // Independent reads side by side; their errors are judged in order.
    let (persona, profile, session_type, spent_quota) = tokio::join!(
        engine.ledger.persona(&job.persona_id),
        engine.ledger.persona_profile(&job.persona_id),
        engine.current_session_type(&job.persona_id),
        engine.spent_quota(&job.persona_id),
    );
    let persona = persona.map_err(|e| Failure::Final(e.into()))?;
    if persona.archived {
        return Err(Failure::Final(ledger::LedgerError::PersonaArchived(persona.name).into()));
    }
    // A paused persona answers when its pause ends (memory #4).
    let profile = profile.map_err(|e| Failure::Retry(e.into()))?;
    if let Some(until) = crate::personas::paused_at(profile.paused_until.as_deref(), engine.ledger.now()) {
        return Err(Failure::Deferred(until));
    }
    if job.continue_plan {
        return continue_plan(engine, &persona).await;
    }
    engine.turn_started(&persona.id);
    let spec = ModelSpec::parse(&persona.model).map_err(Failure::Final)?;
    let provider = engine.provider_for(&spec).await.map_err(Failure::Final)?;
    if let Some(limit) = spent_quota.map_err(Failure::Final)? {
        return Err(Failure::Final(crate::office::quota_exceeded(&persona, limit)));
    }
    let cancel = CancelFlag::default();
    if let Ok(mut c) = engine.current_cancel.lock() {
        *c = Some(cancel.clone());
    }
    let reads = taken.elapsed();
    let context = engine.reply_context(&persona, &profile, session_type).await.map_err(Failure::Retry)?;
    let (history, memories) = (context.history, context.memories);
    let mut framed = engine.framed(&persona, context.frame).await;
    let planning = Instant::now();
    // What is sent depends on the model that reads it (see `prompt`).
    let chosen = engine.prompt_profile(provider.as_ref(), &spec.model, spec.is_local()).await;
    let messages = match chosen.profile {
        PromptProfile::Full => reply_prompt(&framed.narrative, &history),
        PromptProfile::Compact => {
            engine.warn_language_once(&persona.id, &chosen).await;
            engine.compact_messages(&persona, &history, &memories).await
        }
    };
    // Passages of the person's documents, quoted as data. A tool call in
    // this turn may have been asked for by a document: it waits for the
    // person's confirmation.
    let asked = history.iter().rev().find(|m| m.role == ledger::MessageRole::Human).map_or("", |m| m.content.as_str());
    let passages = engine.reply_passages(&persona, asked).await;
    let messages = crate::library::with_passages(messages, &passages);
    engine.quote_documents_in_turn(&persona.id, !passages.is_empty());
    let request = CompletionRequest::chat(spec.model.clone(), messages);
    let crate::assistant::PlannerTurn { mut request, stream, local_plan } =
        engine.planner_request_offering(&persona, &context.offered, request).await;
    let steps = PrepareSteps { reads: reads + context.reads, retrieval: context.retrieval, frame: context.framing, planner: planning.elapsed() };
    if !spec.is_local() {
        engine.prepare_for_cloud(&spec.account, &mut request).await.map_err(Failure::Retry)?;
    }
    request.max_tokens = chosen.profile.max_tokens();
    if request.json_schema.is_none() {
        request.temperature = chosen.profile.temperature();
        request.sampling = Some(chosen.profile.sampling());
    }
    // The ledger keeps which passages were quoted, never their text: a
    // removed document must leave nothing behind.
    let recorded = crate::library::without_passage_text(&request.messages, &passages);
    framed.frame_json = crate::prompt::record_sent(&framed.frame_json, &chosen, &recorded);
    request.cancel = cancel;
    let request_cancel = request.cancel.clone();

    engine.emit(AppEvent::ReplyStarted { request_id: item.id.clone(), persona_id: persona.id.clone() });
    // runtime (#6): a model that stops making progress is stopped.
    let watchdog = Watchdog::start(engine, &persona.id, &request.cancel);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let called = Instant::now();
    let forwarder = {
        let engine = engine.clone();
        let request_id = item.id.clone();
        let persona_id = persona.id.clone();
        tokio::spawn(async move {
            let mut first: Option<Instant> = None;
            // Only a RESPOND's message streams; tool calls are judged at the end.
            let mut stream = stream;
            while let Some(delta) = rx.recv().await {
                engine.assistant.conversations.progress(&persona_id);
                let text = stream.push(&delta);
                if text.is_empty() {
                    continue;
                }
                first.get_or_insert_with(Instant::now);
                engine.emit(AppEvent::ReplyDelta { request_id: request_id.clone(), persona_id: persona_id.clone(), text });
            }
            (first, stream)
        })
    };
    let result = provider.complete(request, Some(tx)).await;
    let (first_token, stream) = forwarder.await.unwrap_or_default();
    let generated = Instant::now();
    if let Ok(mut c) = engine.current_cancel.lock() {
        *c = None;
    }
    let completion = result.map_err(|e| match e {
        ProviderError::Cancelled => Failure::Final(watchdog.cancelled_error()),
        e if e.is_transient() => Failure::Retry(e.into()),
        e => Failure::Final(e.into()),
    })?;
    if completion.finish == FinishReason::Cancelled {
        return Err(Failure::Final(watchdog.cancelled_error()));
    }
    let turn = crate::plans::ModelTurn { provider: provider.clone(), cancel: request_cancel, max_tokens: REPLY_MAX_TOKENS };
    let planned = engine
        .settle_planner_reply(&persona, &completion, &stream, local_plan.map(|p| (p, &turn)))
        .await;
    engine.quote_documents_in_turn(&persona.id, false);
    let planned = planned.map_err(Failure::Retry)?;
    drop(watchdog);
    let (content, role) = (trim_repeats(&planned.content), planned.role);
    if content.trim().is_empty() {
        return Err(Failure::Final(AppError::new("LLM_EMPTY_REPLY", "the model returned an empty reply")));
    }
    let message_id = uuid::Uuid::now_v7().to_string();
    let mut drafts = vec![ledger::Draft::by(
        &persona.id,
        EventBody::MessageAdded {
            message_id: message_id.clone(),
            persona_id: persona.id.clone(),
            role,
            content: content.clone(),
            external_id: None,
        },
    )];
    drafts.extend(engine.reply_records(&persona, &message_id, framed, completion.prompt_tokens, completion.completion_tokens));
    let receipt = engine
        .ledger
        .append_drafts(drafts)
        .await
        .map_err(|e| Failure::Retry(e.into()))?
        .into_iter()
        .next()
        .ok_or_else(|| Failure::Retry(AppError::new("STORAGE_SAVE_FAILED", "the reply was not saved")))?;
    crate::memory::index_message(engine, &message_id, &persona.id, &content, receipt.seq).await;
    crate::memory::record_reply_sources(engine, &persona.id, &message_id, &memories).await;
    if role == ledger::MessageRole::Persona {
        engine.record_reply_citations(&persona.id, &message_id, &passages).await;
    }
    crate::extraction::enqueue(engine, &persona.id, &job.reply_to).await;
    crate::summary::maybe_enqueue(engine, &persona.id).await;
    let committed = Instant::now();
    let message: MessageView = engine
        .ledger
        .messages(&persona.id, Some(1))
        .await
        .map_err(|e| Failure::Retry(e.into()))?
        .pop()
        .map(MessageView::from)
        .ok_or_else(|| Failure::Retry(AppError::new("STORAGE_LOAD_FAILED", "the reply was not found after saving")))?;
    record_timing(engine, item, steps, [taken, called, first_token.unwrap_or(generated), generated, committed], (completion.prompt_tokens, completion.completion_tokens));
    engine.emit(AppEvent::LedgerAppended { seq: receipt.seq, kind: receipt.kind });
    // The conversation is back to IDLE before anyone hears the reply is done.
    engine.turn_delivered(&persona.id);
    engine.emit(AppEvent::ReplyFinished { request_id: item.id.clone(), message });
    if let Ok(p) = engine.ledger.persona(&persona.id).await {
        engine.emit(AppEvent::PersonaChanged { persona: p.into() });
    }
    Ok(())
}

/// Where the prompt's preparation went (see `ReplyTiming`).
struct PrepareSteps {
    reads: Duration,
    retrieval: Duration,
    frame: Duration,
    planner: Duration,
}

/// `marks`: job taken, provider called, first token, last token, reply committed.
fn record_timing(engine: &Engine, item: &QueueItem, steps: PrepareSteps, marks: [Instant; 5], (prompt_tokens, completion_tokens): (u32, u32)) {
    let [taken, called, first, generated, committed] = marks;
    let sent = engine.sent_at.lock().ok().and_then(|mut m| m.remove(&item.id));
    let Some((sent, written)) = sent else { return };
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let timing = ReplyTiming {
        request_id: item.id.clone(),
        overhead_ms: ms(called.saturating_duration_since(sent)),
        write_ms: ms(written.saturating_duration_since(sent)),
        queue_wait_ms: ms(taken.saturating_duration_since(written)),
        retrieval_ms: ms(steps.retrieval),
        reads_ms: ms(steps.reads),
        frame_ms: ms(steps.frame),
        planner_ms: ms(steps.planner),
        model_first_token_ms: ms(first.saturating_duration_since(called)),
        commit_ms: ms(committed.saturating_duration_since(generated)),
        completion_tokens,
        prompt_tokens,
        total_ms: ms(committed.saturating_duration_since(sent)),
    };
    if let Ok(mut t) = engine.timings.lock() {
        if t.len() >= 1_000 {
            t.remove(0);
        }
        t.push(timing);
    }
}

// ----- runtime (#6): the stall watchdog and local-plan continuations -----

/// Watches a turn's working state: when it makes no progress (no token, no
/// finished step) for the stall limit, the conversation times out and the
/// model call is cancelled. Stops when dropped.
struct Watchdog {
    task: tokio::task::JoinHandle<()>,
    stalled: Arc<std::sync::atomic::AtomicBool>,
    limit: Duration,
}

impl Watchdog {
    fn start(engine: &Arc<Engine>, persona_id: &str, cancel: &CancelFlag) -> Self {
        let stalled = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let limit = engine.assistant.conversations.stall_limit();
        let every = (limit / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
        let (engine, persona_id, cancel, flag) = (engine.clone(), persona_id.to_owned(), cancel.clone(), stalled.clone());
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if engine.assistant.conversations.check_stall(&persona_id).is_some() {
                    flag.store(true, Ordering::SeqCst);
                    cancel.cancel();
                    return;
                }
            }
        });
        Self { task, stalled, limit }
    }

    /// The error for a cancelled model call: a stall (LLM_TIMEOUT, never
    /// retried) or the user's Stop.
    fn cancelled_error(&self) -> AppError {
        if self.stalled.load(Ordering::SeqCst) {
            AppError::new(
                "LLM_TIMEOUT",
                format!(
                    "The model made no progress (no new token for {} s, or {} s before the first one), so the reply was stopped. Nothing was retried; send the message again to try once more.",
                    self.limit.as_secs(),
                    self.limit.as_secs() * u64::from(runtime::state::FIRST_PROGRESS_FACTOR.unsigned_abs())
                ),
            )
        } else {
            ProviderError::Cancelled.into()
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The reply job after a confirmed step of a local plan: plans and runs the
/// next steps. Never retried (steps may have run); what happened is posted.
async fn continue_plan(engine: &Arc<Engine>, persona: &ledger::Persona) -> Result<(), Failure> {
    let spec = ModelSpec::parse(&persona.model).map_err(Failure::Final)?;
    let provider = engine.provider_for(&spec).await.map_err(Failure::Final)?;
    let cancel = CancelFlag::default();
    if let Ok(mut c) = engine.current_cancel.lock() {
        *c = Some(cancel.clone());
    }
    engine.turn_started(&persona.id);
    let watchdog = Watchdog::start(engine, &persona.id, &cancel);
    let turn = crate::plans::ModelTurn { provider, cancel, max_tokens: REPLY_MAX_TOKENS };
    let planned = engine.continue_local_plan(persona, &turn).await;
    drop(watchdog);
    if let Ok(mut c) = engine.current_cancel.lock() {
        *c = None;
    }
    let planned = planned.map_err(Failure::Final)?;
    engine.turn_decided(&persona.id);
    if let Some(planned) = planned.filter(|p| !p.content.trim().is_empty()) {
        engine.post_system(&persona.id, &planned.content).await.map_err(Failure::Final)?;
    }
    engine.turn_delivered(&persona.id);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::trim_repeats;

    #[test]
    fn a_looping_reply_is_cut_where_the_repeat_starts_and_a_plain_one_is_kept() {
        let looped = "I'm glad to hear that you enjoy green tea. ".repeat(8);
        assert_eq!(trim_repeats(&looped), "I'm glad to hear that you enjoy green tea.");
        let plain = "You told me you like green tea. Do you drink it every day?";
        assert_eq!(trim_repeats(plain), plain);
    }
}
