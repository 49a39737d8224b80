//! What the personas remember about the person, and how they find it again.
//!
//! Owns the search index (`<home>/index.db`, a projection of the ledger) and
//! the embedding model's lazy load. Inside:
//! - `recall`: the index, recall for the shells, and the memories put into
//!   each reply's prompt (one ranking for everyone);
//! - `human`: the memories as the person reviews them (confirm, edit,
//!   forget, groups);
//! - `extraction`: the background job that learns from the person's
//!   messages;
//! - `summary`: the rolling summary of a conversation.
//!
//! Public surface: [`Memories`] (recall, import, review, summaries) and the
//! views it returns. It receives the [`Context`] only: nothing here calls
//! another capability.

pub(crate) mod extraction;
pub(crate) mod human;
pub(crate) mod recall;
pub(crate) mod summary;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use memory::MemoryIndex;

use crate::context::Context;
use crate::Result;
pub use human::{MemoryView, PersonaGroupsView, QuoteView, UsedItemView};
pub(crate) use recall::ReplyMemories;
pub use recall::{EmbedProgress, ImportReport, RecallItem, RecallSettings, RecallView};

/// The memory capability: the search index and what is learned into it.
pub struct Memories {
    pub(crate) ctx: Arc<Context>,
    pub(crate) index: Arc<MemoryIndex>,
    /// Set once the embedding model's load was started (it loads on first need).
    pub(crate) embedder_requested: AtomicBool,
    /// Extraction starts after a conversation has been quiet this long.
    pub(crate) extraction_delay: std::time::Duration,
}

impl Memories {
    /// Opens the search index and catches it up with the ledger.
    pub async fn open(ctx: Arc<Context>, extraction_delay: std::time::Duration) -> Result<Self> {
        let index = recall::open_index(ctx.data_dir(), &ctx.ledger).await?;
        Ok(Self { ctx, index, embedder_requested: AtomicBool::new(false), extraction_delay })
    }

    /// Brings erasures into the search index at once (not at the next start)
    /// and scrubs its files. Logged, not fatal: the ledger has already
    /// forgotten, and the next start re-derives the index from it.
    pub(crate) async fn forget_in_index(&self) {
        if let Err(e) = self.index.sync_from_ledger(&self.ctx.ledger).await {
            tracing::error!(error = %e, "could not apply an erasure to the search index");
        }
        if let Err(e) = self.index.scrub().await {
            tracing::error!(error = %e, "could not scrub the search index after an erasure");
        }
        // Evaluated prompts kept on disk were computed from the erased text.
        self.ctx.forget_kept_prompts();
    }

    /// Stops the embedding work (at shutdown).
    pub(crate) fn stop(&self) {
        self.index.stop();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ledger::{EventBody, MessageRole, HUMAN_ENTITY};

    use super::*;
    use crate::context::testing;

    /// The person says `text` to `persona`: signed, then indexed as the
    /// reply path does. Returns the message's id.
    async fn say(memory: &Memories, persona: &ledger::Persona, text: &str) -> String {
        let id = uuid::Uuid::now_v7().to_string();
        let body = EventBody::MessageAdded {
            message_id: id.clone(),
            persona_id: persona.id.clone(),
            role: MessageRole::Human,
            content: text.to_owned(),
            external_id: None,
            said_at: None,
        };
        let receipt = memory.ctx.ledger.append(HUMAN_ENTITY, body).await.expect("append");
        recall::index_message(memory, &id, &persona.id, MessageRole::Human, text, receipt.seq).await;
        id
    }

    /// Recall, built on nothing but a context: a message indexed after it
    /// was written is found by the words of a later question.
    #[tokio::test]
    async fn recall_finds_what_the_person_said_with_only_a_context() {
        let t = testing::context(&[]).await;
        let memory = Memories::open(t.ctx.clone(), Duration::from_secs(90)).await.expect("index");
        let ledger = t.ctx.ledger();
        let ei = ledger.persona(ledger::EI_PERSONA_ID).await.expect("ei");
        let id = say(&memory, &ei, "My grandmother grew up in Bergen, by the fish market.").await;

        let view = memory.recall(&ei.name, "Where did my grandmother grow up?", 5).await.expect("recall");
        assert!(view.results.iter().any(|r| r.item_id == id), "{view:?}");
        let view = memory.recall(&ei.name, "a question about bicycles", 5).await.expect("recall");
        assert!(!view.results.iter().any(|r| r.item_id == id), "unrelated words find nothing: {view:?}");
    }

    /// A line the person said several times fills one of the reply's few
    /// memory slots, not several, and one the window holds fills none.
    #[tokio::test]
    async fn the_same_words_said_again_take_one_memory_slot_for_a_reply() {
        let t = testing::context(&[]).await;
        let memory = Memories::open(t.ctx.clone(), Duration::from_secs(90)).await.expect("index");
        let ledger = t.ctx.ledger();
        let ei = ledger.persona(ledger::EI_PERSONA_ID).await.expect("ei");
        let mut said = vec!["My grandmother's farm sold goat cheese at the market."; 4];
        said.extend(["My grandmother's farm had a blue tractor.", "My grandmother's farm was near the river."]);
        said.push("My grandmother's farm sold goat cheese at the market.");
        for text in &said {
            say(&memory, &ei, text).await;
        }
        let question = "What about my grandmother's farm?";
        let message = |id: &str, content: &str| ledger::Message {
            id: id.into(),
            persona_id: ei.id.clone(),
            role: MessageRole::Human,
            content: content.into(),
            ts: String::new(),
            read: true,
            seq: 0,
            context_status: ledger::ContextStatus::Default,
        };
        let history = vec![message("q", question)];
        let used = recall::memories_for_reply(&memory, &ei, &history).await;
        let cheese = used.lines.iter().filter(|l| l.contains("goat cheese")).count();
        assert_eq!(cheese, 1, "{:?}", used.lines);
        assert!(used.lines.iter().any(|l| l.contains("tractor")) && used.lines.iter().any(|l| l.contains("river")), "{:?}", used.lines);
        // A line the window already holds is not sent again.
        let mut history = history;
        history.insert(0, message("w", said[5]));
        let used = recall::memories_for_reply(&memory, &ei, &history).await;
        assert!(!used.lines.iter().any(|l| l.contains("river")), "{:?}", used.lines);
    }
}
