//! A persona's reply: the queue worker hands over a reply job, and this
//! reads what the reply needs (persona, frame, memories, passages), streams
//! it from the persona's model through the planner, and commits it to the
//! ledger. A stalled model is stopped by the watchdog.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ledger::{EventBody, QueueItem};
use providers::{CancelFlag, CompletionRequest, FinishReason, ProviderError};
use serde::Serialize;

use super::Conversation;
use crate::context::jobs::{Failure, ReplyJob};
use crate::error::AppError;
use crate::models::ModelSpec;
use crate::prompt::{reply_prompt, PromptProfile};
use crate::conversation::views::MessageView;
use crate::events::AppEvent;

/// Reply jobs remembered as having run tools (a bound on memory: a retry
/// follows its failure within seconds).
const ACTED_JOBS_KEPT: usize = 1_000;
/// Includes the planner JSON around the message (about 12 tokens).
const REPLY_MAX_TOKENS: u32 = 176;
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

/// A reply that repeats itself is cut where the repeat starts. Free text is
/// guarded while it streams; a planner reply is sampled under its JSON
/// grammar without that guard, so its message is checked here, before it is
/// saved.
fn trim_repeats(text: &str) -> String {
    let mut guard = providers::LoopGuard::new();
    let _ = guard.push(text);
    let _ = guard.finish();
    if guard.looped() {
        guard.text().trim_end().to_owned()
    } else {
        text.to_owned()
    }
}

impl Conversation {
    /// Runs one reply job (the queue worker calls it). A failed turn is
    /// over for the conversation: its error is what the person sees.
    pub(crate) async fn reply(self: &Arc<Self>, item: &QueueItem, job: &ReplyJob) -> Result<(), Failure> {
        let replied = generate(self, item, job).await;
        if replied.is_err() {
            self.tools.turn_failed(&job.persona_id);
        }
        replied
    }
}

async fn generate(conv: &Arc<Conversation>, item: &QueueItem, job: &ReplyJob) -> Result<(), Failure> {
    // A job whose tools already ran (then it failed) is not run again: the
    // planner would plan the same message again and its steps would run
    // twice (a movie saved twice, so a later delete leaves one behind).
    if conv.acted_jobs.lock().is_ok_and(|j| j.contains(&item.id)) {
        return Err(Failure::Final(AppError::new(
            "TOOL_FAILED",
            "This reply was interrupted after its actions ran, so it is not run again (nothing runs twice). \
             See the saved items and the ledger for what was done; send the message again if you still want an answer.",
        )));
    }
    let taken = Instant::now();
    // Independent reads side by side; their errors are judged in order.
    let (persona, profile, session_type, spent_quota) = tokio::join!(
        conv.ctx.ledger.persona(&job.persona_id),
        conv.ctx.ledger.persona_profile(&job.persona_id),
        conv.office.current_session_type(&job.persona_id),
        conv.office.spent_quota(&job.persona_id),
    );
    let persona = persona.map_err(|e| Failure::Final(e.into()))?;
    if persona.archived {
        return Err(Failure::Final(ledger::LedgerError::PersonaArchived(persona.name).into()));
    }
    // A paused persona answers when its pause ends.
    let profile = profile.map_err(|e| Failure::Retry(e.into()))?;
    if let Some(until) = crate::personas::rules::paused_at(profile.paused_until.as_deref(), conv.ctx.ledger.now()) {
        return Err(Failure::Deferred(until));
    }
    if job.continue_plan {
        return continue_plan(conv, &persona).await;
    }
    conv.tools.turn_started(&persona.id);
    let spec = ModelSpec::parse(&persona.model).map_err(Failure::Final)?;
    let served = conv.ctx.serving(&spec).await.map_err(Failure::Final)?;
    // A server of this machine that went away (Ollama quit, LM Studio
    // closed) leaves the reply to the local default, said in the chat.
    if let Some(notice) = &served.stand_in {
        conv.say_once(&persona.id, notice).await;
    }
    let (spec, provider) = (served.spec, served.provider);
    if let Some(limit) = spent_quota.map_err(Failure::Final)? {
        return Err(Failure::Final(crate::office::quota_exceeded(&persona, limit)));
    }
    let cancel = CancelFlag::default();
    if let Ok(mut c) = conv.ctx.current_cancel.lock() {
        *c = Some(cancel.clone());
    }
    let reads = taken.elapsed();
    let context = conv.office.reply_context(&persona, &profile, session_type).await.map_err(Failure::Retry)?;
    let (history, memories) = (context.history, context.memories);
    let mut framed = conv.office.framed(&persona, context.frame).await;
    let planning = Instant::now();
    // What is sent depends on the model that reads it (see `prompt`).
    let chosen = conv.prompt_profile(provider.as_ref(), &spec.model, spec.is_local()).await;
    let messages = match chosen.profile {
        PromptProfile::Full => reply_prompt(&framed.narrative, &history),
        PromptProfile::Compact => {
            conv.warn_language_once(&persona.id, &chosen).await;
            conv.compact_messages(&persona, &history, &memories).await
        }
    };
    // Passages of the person's documents, quoted as data. A tool call in
    // this turn may have been asked for by a document: it waits for the
    // person's confirmation.
    let asked = history.iter().rev().find(|m| m.role == ledger::MessageRole::Human).map_or("", |m| m.content.as_str());
    let passages = conv.library.reply_passages(&persona, asked).await;
    let messages = crate::library::with_passages(messages, &passages);
    conv.tools.quote_documents_in_turn(&persona.id, !passages.is_empty());
    // What the model reads, for finding out why a reply went wrong.
    tracing::trace!(messages = ?messages, "the reply's prompt");
    let request = CompletionRequest::chat(spec.model.clone(), messages);
    let crate::tools::assistant::PlannerTurn { mut request, stream, local_plan } =
        conv.tools.planner_request_offering(&persona, &context.offered, request).await;
    let steps = PrepareSteps { reads: reads + context.reads, retrieval: context.retrieval, frame: context.framing, planner: planning.elapsed() };
    if !spec.is_local() {
        conv.tools.prepare_for_cloud(&spec.account, &mut request).await.map_err(Failure::Retry)?;
    }
    request.max_tokens = chosen.profile.max_tokens();
    if request.json_schema.is_none() {
        request.temperature = chosen.profile.temperature();
        request.sampling = Some(chosen.profile.sampling());
        let steer = crate::prompt::perspective::steer(asked);
        request.not_first = steer.not_first;
        request.never = steer.never;
    }
    // The ledger keeps which passages were quoted, never their text: a
    // removed document must leave nothing behind.
    let recorded = crate::library::without_passage_text(&request.messages, &passages);
    framed.frame_json = crate::prompt::record_sent(&framed.frame_json, &chosen, &recorded);
    request.cancel = cancel;
    let request_cancel = request.cancel.clone();

    conv.ctx.emit(AppEvent::ReplyStarted { request_id: item.id.clone(), persona_id: persona.id.clone() });
    // A model that stops making progress is stopped.
    let watchdog = Watchdog::start(conv, &persona.id, &request.cancel);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let called = Instant::now();
    let forwarder = {
        let conv = conv.clone();
        let request_id = item.id.clone();
        let persona_id = persona.id.clone();
        tokio::spawn(async move {
            let mut first: Option<Instant> = None;
            // Only a RESPOND's message streams; tool calls are judged at the end.
            let mut stream = stream;
            while let Some(delta) = rx.recv().await {
                conv.tools.assistant.conversations.progress(&persona_id);
                let text = stream.push(&delta);
                if text.is_empty() {
                    continue;
                }
                first.get_or_insert_with(Instant::now);
                conv.ctx.emit(AppEvent::ReplyDelta { request_id: request_id.clone(), persona_id: persona_id.clone(), text });
            }
            (first, stream)
        })
    };
    let result = provider.complete(request, Some(tx)).await;
    let (first_token, stream) = forwarder.await.unwrap_or_default();
    let generated = Instant::now();
    if let Ok(mut c) = conv.ctx.current_cancel.lock() {
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
    let turn = crate::tools::plans::ModelTurn { provider: provider.clone(), cancel: request_cancel, max_tokens: REPLY_MAX_TOKENS };
    let planned = conv
        .tools.settle_planner_reply(&persona, &completion, &stream, local_plan.map(|p| (p, &turn)))
        .await;
    conv.tools.quote_documents_in_turn(&persona.id, false);
    // Once a tool of this turn ran, a failure is final: a retry would run
    // the turn's tools again.
    let acted = conv.tools.acted_in_turn(&persona.id);
    if acted {
        if let Ok(mut jobs) = conv.acted_jobs.lock() {
            if jobs.len() >= ACTED_JOBS_KEPT {
                jobs.clear();
            }
            jobs.insert(item.id.clone());
        }
    }
    let failed = |e: AppError| if acted { Failure::Final(e) } else { Failure::Retry(e) };
    let planned = planned.map_err(failed)?;
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
            said_at: None,
        },
    )];
    drafts.extend(conv.office.reply_records(&persona, &message_id, framed, completion.prompt_tokens, completion.completion_tokens));
    let receipt = conv
        .ctx.ledger
        .append_drafts(drafts)
        .await
        .map_err(|e| failed(e.into()))?
        .into_iter()
        .next()
        .ok_or_else(|| failed(AppError::new("STORAGE_SAVE_FAILED", "the reply was not saved")))?;
    crate::memory::recall::index_message(&conv.memory, &message_id, &persona.id, role, &content, receipt.seq).await;
    crate::memory::recall::record_reply_sources(&conv.memory, &persona.id, &message_id, &memories).await;
    if role == ledger::MessageRole::Persona {
        conv.library.record_reply_citations(&persona.id, &message_id, &passages).await;
    }
    crate::memory::extraction::enqueue(&conv.memory, &persona.id, &job.reply_to).await;
    crate::memory::summary::maybe_enqueue(&conv.memory, &persona.id).await;
    let committed = Instant::now();
    let message: MessageView = conv
        .ctx.ledger
        .messages(&persona.id, Some(1))
        .await
        .map_err(|e| failed(e.into()))?
        .pop()
        .map(MessageView::from)
        .ok_or_else(|| failed(AppError::new("STORAGE_LOAD_FAILED", "the reply was not found after saving")))?;
    record_timing(conv, item, steps, [taken, called, first_token.unwrap_or(generated), generated, committed], (completion.prompt_tokens, completion.completion_tokens));
    conv.ctx.emit(AppEvent::LedgerAppended { seq: receipt.seq, kind: receipt.kind });
    // The conversation is back to IDLE before anyone hears the reply is done.
    conv.tools.turn_delivered(&persona.id);
    conv.ahead_due();
    conv.ctx.emit(AppEvent::ReplyFinished { request_id: item.id.clone(), message });
    if let Ok(p) = conv.ctx.ledger.persona(&persona.id).await {
        conv.ctx.emit(AppEvent::PersonaChanged { persona: p.into() });
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
fn record_timing(conv: &Conversation, item: &QueueItem, steps: PrepareSteps, marks: [Instant; 5], (prompt_tokens, completion_tokens): (u32, u32)) {
    let [taken, called, first, generated, committed] = marks;
    let sent = conv.sent_at.lock().ok().and_then(|mut m| m.remove(&item.id));
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
    if let Ok(mut t) = conv.timings.lock() {
        if t.len() >= 1_000 {
            t.remove(0);
        }
        t.push(timing);
    }
}

// ----- the stall watchdog and local-plan continuations -----

/// Watches a turn's working state: when it makes no progress (no token, no
/// finished step) for the stall limit, the conversation times out and the
/// model call is cancelled. Stops when dropped.
struct Watchdog {
    task: tokio::task::JoinHandle<()>,
    stalled: Arc<std::sync::atomic::AtomicBool>,
    limit: Duration,
}

impl Watchdog {
    fn start(conv: &Arc<Conversation>, persona_id: &str, cancel: &CancelFlag) -> Self {
        let stalled = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let limit = conv.tools.assistant.conversations.stall_limit();
        let every = (limit / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
        let (conv, persona_id, cancel, flag) = (conv.clone(), persona_id.to_owned(), cancel.clone(), stalled.clone());
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if conv.tools.assistant.conversations.check_stall(&persona_id).is_some() {
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
async fn continue_plan(conv: &Arc<Conversation>, persona: &ledger::Persona) -> Result<(), Failure> {
    // The plan names the persona's own model in its requests, so no
    // stand-in: a server that went away fails the step, which is posted.
    let spec = ModelSpec::parse(&persona.model).map_err(Failure::Final)?;
    let provider = conv.ctx.provider_for(&spec).await.map_err(Failure::Final)?;
    let cancel = CancelFlag::default();
    if let Ok(mut c) = conv.ctx.current_cancel.lock() {
        *c = Some(cancel.clone());
    }
    conv.tools.turn_started(&persona.id);
    let watchdog = Watchdog::start(conv, &persona.id, &cancel);
    let turn = crate::tools::plans::ModelTurn { provider, cancel, max_tokens: REPLY_MAX_TOKENS };
    let planned = conv.tools.continue_local_plan(persona, &turn).await;
    drop(watchdog);
    if let Ok(mut c) = conv.ctx.current_cancel.lock() {
        *c = None;
    }
    let planned = planned.map_err(Failure::Final)?;
    conv.tools.turn_decided(&persona.id);
    if let Some(planned) = planned.filter(|p| !p.content.trim().is_empty()) {
        conv.tools.post_system(&persona.id, &planned.content).await.map_err(Failure::Final)?;
    }
    conv.tools.turn_delivered(&persona.id);
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
