//! The conversation with a persona: the person's messages, the persona's
//! replies, and the queue they wait in.
//!
//! Inside:
//! - this file: sending a message (screened, then answered directly or
//!   queued as a reply job), the message list, read marks, Stop;
//! - `reply`: one reply job, from reading its context to committing it;
//! - `prompting`: the prompt chosen for the model that reads it;
//! - `ahead`: the next prompt read into the model between turns;
//! - `spoken`: marking a turn as spoken by voice;
//! - `queue`: the queue as the person controls it (pause, resume, list);
//! - `views`: messages as the shells see them.
//!
//! Public surface: [`Conversation`], [`ReplyTiming`], [`VoiceTurn`] and the
//! views. It calls the tools (the planner, direct turns), the office (the
//! frame), the memory (recall, indexing, extraction) and the library
//! (passages, citations); none of them calls back.

pub(crate) mod ahead;
pub(crate) mod prompting;
pub(crate) mod queue;
pub(crate) mod reply;
pub(crate) mod spoken;
pub(crate) mod views;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ledger::{EventBody, MessageRole, NewJob, HUMAN_ENTITY};

use crate::context::jobs::{ReplyJob, PRIORITY_REPLY, REPLY_KIND};
use crate::context::Context;
use crate::error::AppError;
use crate::events::AppEvent;
use crate::library::Documents;
use crate::memory::Memories;
use crate::models::ModelSpec;
use crate::office::Office;
use crate::tools::Tools;
use crate::Result;
pub use queue::{QueueItemView, QueueView};
pub use reply::ReplyTiming;
pub use spoken::VoiceTurn;
pub use views::MessageView;

const MAX_MESSAGE: usize = 32_000;

/// The conversation capability.
pub struct Conversation {
    pub(crate) ctx: Arc<Context>,
    pub(crate) tools: Arc<Tools>,
    pub(crate) office: Arc<Office>,
    pub(crate) memory: Arc<Memories>,
    pub(crate) library: Arc<Documents>,
    /// When each queued reply was sent, and when its message and job were written.
    pub(crate) sent_at: Mutex<HashMap<String, (Instant, Instant)>>,
    pub(crate) timings: Mutex<Vec<ReplyTiming>>,
    /// Reply jobs whose turn ran a tool: never run again.
    pub(crate) acted_jobs: Mutex<HashSet<String>>,
    pub(crate) ahead: ahead::ReadAhead,
}

impl Conversation {
    pub fn new(ctx: Arc<Context>, tools: Arc<Tools>, office: Arc<Office>, memory: Arc<Memories>, library: Arc<Documents>) -> Self {
        Self {
            ctx,
            tools,
            office,
            memory,
            library,
            sent_at: Mutex::new(HashMap::new()),
            timings: Mutex::new(Vec::new()),
            acted_jobs: Mutex::new(HashSet::new()),
            ahead: ahead::ReadAhead::default(),
        }
    }

    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<AppEvent> {
        self.ctx.subscribe()
    }

    pub async fn list_messages(&self, persona: &str) -> Result<Vec<MessageView>> {
        let ledger = &self.ctx.ledger;
        let p = ledger.find_persona(persona).await?;
        let cut = ledger.interrupted_replies(&p.id).await?;
        Ok(ledger
            .messages(&p.id, None)
            .await?
            .into_iter()
            .map(|m| {
                let spoken_chars = cut.get(&m.id).copied();
                MessageView { spoken_chars, ..MessageView::from(m) }
            })
            .collect())
    }

    /// Loads the model `persona` replies with, so a message sent soon after
    /// (the person opened the chat, or one `ledgermind chat` process) does
    /// not wait for the load. A server that went away is warmed as the
    /// local model that stands in for it. Failures are left to the reply,
    /// which reports them where the person sees them.
    pub async fn warm_up(&self, persona: &str) {
        let Ok(p) = self.ctx.ledger.find_persona(persona).await else { return };
        let Ok(spec) = ModelSpec::parse(&p.model) else { return };
        let Ok(served) = self.ctx.serving(&spec).await else { return };
        if let Err(e) = self.ctx.preload(&served.spec).await {
            tracing::debug!(model = %p.model, error = %e.message, "the model could not be loaded ahead of the reply");
        }
    }

    /// Screens the human's message with the injection guard, stores it and
    /// queues the persona's reply. Returns the stored message and the
    /// reply's request id (empty when a deterministic intent answered).
    pub async fn send_message(&self, persona: &str, content: &str) -> Result<(MessageView, String)> {
        let ledger = &self.ctx.ledger;
        let sent = Instant::now();
        let content = content.trim();
        if content.is_empty() {
            return Err(AppError::invalid("the message is empty"));
        }
        if content.chars().count() > MAX_MESSAGE {
            return Err(AppError::invalid(format!("the message is longer than {MAX_MESSAGE} characters")));
        }
        let p = ledger.find_persona(persona).await?;
        if p.archived {
            return Err(ledger::LedgerError::PersonaArchived(p.name).into());
        }
        let screened = crate::screening::screen_input(&self.ctx, content).await?;
        let content = screened.as_str();
        let message_id = uuid::Uuid::now_v7().to_string();
        let body = EventBody::MessageAdded {
            message_id: message_id.clone(),
            persona_id: p.id.clone(),
            role: MessageRole::Human,
            content: content.to_owned(),
            external_id: None,
            said_at: None,
        };
        // Delete all, list all, cancel, the answer to a question a tool call
        // asked, and a command missing its argument ("save a movie") are
        // handled without the model.
        let direct = self.tools.direct_turn(&p, content).await?;
        let (receipt, request_id) = if direct.is_some() {
            (ledger.append(HUMAN_ENTITY, body).await?, String::new())
        } else {
            // The reply's retrieval needs this text's embedding: start it now,
            // so it overlaps the write below instead of following it.
            self.memory.prefetch_embedding(content);
            let job = ReplyJob { persona_id: p.id.clone(), reply_to: message_id.clone(), continue_plan: false };
            let job = NewJob {
                kind: REPLY_KIND.to_owned(),
                priority: PRIORITY_REPLY,
                persona_id: Some(p.id.clone()),
                body: serde_json::to_value(&job).map_err(|e| AppError::invalid(e.to_string()))?,
            };
            // One transaction: never a message without its reply job.
            let (receipt, item) = ledger.append_and_enqueue(HUMAN_ENTITY, body, job).await?;
            if let Ok(mut m) = self.sent_at.lock() {
                m.insert(item.id.clone(), (sent, Instant::now()));
            }
            self.ahead.message_sent();
            self.ctx.preempt_background();
            self.ctx.wake.notify_one();
            (receipt, item.id)
        };
        crate::memory::recall::index_message(&self.memory, &message_id, &p.id, MessageRole::Human, content, receipt.seq).await;
        let view = MessageView {
            id: message_id,
            persona_id: p.id.clone(),
            role: views::MessageRole::Human,
            content: content.to_owned(),
            ts: String::new(),
            read: true,
            seq: receipt.seq,
            context_status: "default".into(),
            spoken_chars: None,
        };
        let view = ledger.messages(&view.persona_id, Some(1)).await?.pop().map(MessageView::from).unwrap_or(view);
        self.ctx.emit(AppEvent::LedgerAppended { seq: receipt.seq, kind: receipt.kind });
        self.ctx.emit(AppEvent::MessageAdded { message: view.clone() });
        if let Some(direct) = direct {
            self.tools.handle_direct(&p, content, direct).await?;
        }
        self.ctx.emit_queue().await;
        Ok((view, request_id))
    }

    pub async fn mark_read(&self, persona: &str) -> Result<()> {
        let ledger = &self.ctx.ledger;
        let p = ledger.find_persona(persona).await?;
        if p.unread == 0 {
            return Ok(());
        }
        let (head, _) = ledger.head().await;
        ledger.append(HUMAN_ENTITY, EventBody::MessagesRead { persona_id: p.id.clone(), up_to_seq: head }).await?;
        self.ctx.emit(AppEvent::PersonaChanged { persona: ledger.persona(&p.id).await?.into() });
        Ok(())
    }

    /// Cancels the reply being generated now, if any.
    pub fn abort_current(&self) -> bool {
        self.ctx.abort_current()
    }

    /// Send-to-first-token timings of recent replies (for benchmarks).
    pub fn reply_timings(&self) -> Vec<ReplyTiming> {
        self.timings.lock().map(|t| t.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::context::testing;

    /// The conversation built on a context with a scripted model, and the
    /// capabilities it calls built on the same context: no engine, no queue
    /// worker, no timers. The reply job is taken from the queue by hand.
    async fn conversation_on(ctx: &Arc<Context>) -> Arc<Conversation> {
        let memory = Arc::new(Memories::open(ctx.clone(), Duration::from_secs(90)).await.expect("index"));
        let tools = Arc::new(Tools::new(ctx.clone(), Duration::from_secs(30), Duration::from_secs(8)));
        let office = Arc::new(Office::new(ctx.clone(), tools.clone(), memory.clone()));
        let library = Arc::new(Documents::new(ctx.clone(), memory.clone(), ::library::Extractor::InProcess));
        Arc::new(Conversation::new(ctx.clone(), tools, office, memory, library))
    }

    async fn titles(ctx: &Context) -> Vec<String> {
        let mut titles: Vec<String> = ctx.ledger.items(None, 100).await.expect("items").into_iter().map(|i| i.title).collect();
        titles.sort();
        titles
    }

    #[tokio::test]
    async fn a_message_is_answered_with_only_the_conversation_and_its_collaborators() {
        let t = testing::context(&["Two and two make four."]).await;
        let ctx = t.ctx.clone();
        let conversation = conversation_on(&ctx).await;
        let mut rx = conversation.subscribe();

        let (sent, request) = conversation.send_message("Ei", "What is two plus two?").await.expect("send");
        assert_eq!(sent.role, views::MessageRole::Human);
        let item = ctx.ledger.take_next(ctx.ledger.now()).await.expect("queue").expect("the reply job");
        assert_eq!(item.id, request);
        let job: ReplyJob = serde_json::from_value(item.body.clone()).expect("job");
        assert!(conversation.reply(&item, &job).await.is_ok(), "the reply job succeeds");

        let messages = conversation.list_messages("Ei").await.expect("messages");
        let last = messages.last().expect("a reply");
        assert_eq!((last.role, last.content.as_str()), (views::MessageRole::Persona, "Two and two make four."));
        let finished = loop {
            match rx.try_recv() {
                Ok(AppEvent::ReplyFinished { request_id, message }) => break Some((request_id, message)),
                Ok(_) => {}
                Err(_) => break None,
            }
        };
        let (request_id, message) = finished.expect("ReplyFinished was emitted");
        assert_eq!((request_id.as_str(), message.id.as_str()), (request.as_str(), last.id.as_str()));
        assert_eq!(t.provider.calls(), 1);
    }

    /// The worker runs a reply job again after it failed (a slow or locked
    /// ledger failing the reply's commit). When the job's plan had already
    /// run its steps, running it again would plan the same message anew and
    /// save the movie twice, so that a later "delete the movie Heat" leaves
    /// one behind. The job is run here a second time, as that retry would.
    #[tokio::test]
    async fn a_reply_job_whose_tools_ran_never_runs_them_twice() {
        const SAVE_HEAT: &str = r#"{"action":"CALL_TOOL","args":{"title":"Heat","year":1995},"tool":"save_movie"}"#;
        const SAVE_POPCORN: &str = r#"{"action":"CALL_TOOL","args":{"content":"buy popcorn"},"tool":"save_note"}"#;
        let t = testing::context(&[SAVE_HEAT, SAVE_POPCORN, SAVE_HEAT, SAVE_POPCORN]).await;
        let ctx = t.ctx.clone();
        let conversation = conversation_on(&ctx).await;
        conversation.send_message("Ei", "save the movie Heat and then save a note: buy popcorn").await.expect("send");
        let item = ctx.ledger.take_next(ctx.ledger.now()).await.expect("queue").expect("the reply job");
        let job: ReplyJob = serde_json::from_value(item.body.clone()).expect("job");
        assert!(conversation.reply(&item, &job).await.is_ok(), "the plan runs");
        assert_eq!(titles(&ctx).await, ["Heat", "buy popcorn"]);
        assert_eq!(t.provider.calls(), 2);

        let again = ledger::QueueItem { attempts: item.attempts + 1, ..item.clone() };
        match conversation.reply(&again, &job).await {
            Err(crate::context::jobs::Failure::Final(e)) => assert_eq!(e.code, "TOOL_FAILED"),
            Err(_) => panic!("a rerun of a job whose tools ran must fail for good"),
            Ok(()) => panic!("the job ran twice"),
        }
        assert_eq!(titles(&ctx).await, ["Heat", "buy popcorn"], "nothing saved twice");
        assert_eq!(t.provider.calls(), 2, "the model was not asked again");
    }
}
