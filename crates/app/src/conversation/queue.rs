//! Queue control for the human: what is pending, running and dead-lettered
//! (with its error), pause / resume, abort the current call.

use std::sync::atomic::Ordering;

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use super::Conversation;
use crate::Result;

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct QueueItemView {
    pub id: String,
    /// "reply", "extract", …
    pub kind: String,
    /// "high" | "normal" | "low"
    pub priority: String,
    /// "pending" | "running" | "dead"
    pub state: String,
    pub persona_id: Option<String>,
    pub persona_name: Option<String>,
    #[ts(type = "number")]
    pub attempts: i64,
    /// `CODE: message` of the last failure.
    pub last_error: Option<String>,
    pub enqueued_at: String,
    pub not_before: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct QueueView {
    pub paused: bool,
    pub busy: bool,
    pub items: Vec<QueueItemView>,
}

fn priority_name(p: i64) -> &'static str {
    match p {
        i64::MIN..=0 => "high",
        1 => "normal",
        _ => "low",
    }
}

impl Conversation {
    pub async fn queue_view(&self) -> Result<QueueView> {
        let personas = self.ctx.ledger.personas(true).await?;
        let items = self
            .ctx.ledger
            .queue_items(None)
            .await?
            .into_iter()
            .map(|i| QueueItemView {
                persona_name: i.persona_id.as_ref().and_then(|id| personas.iter().find(|p| &p.id == id)).map(|p| p.name.clone()),
                id: i.id,
                kind: i.kind,
                priority: priority_name(i.priority).to_owned(),
                state: serde_json::to_value(i.state).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default(),
                persona_id: i.persona_id,
                attempts: i.attempts,
                last_error: i.last_error,
                enqueued_at: i.enqueued_at,
                not_before: i.not_before,
            })
            .collect();
        Ok(QueueView { paused: self.ctx.is_paused(), busy: self.ctx.busy.load(Ordering::SeqCst), items })
    }


    /// Stops taking new work (the current call finishes unless aborted).
    pub async fn pause_queue(&self) {
        self.ctx.paused.store(true, Ordering::SeqCst);
        self.ctx.emit_queue().await;
    }

    pub async fn resume_queue(&self) {
        self.ctx.paused.store(false, Ordering::SeqCst);
        self.ctx.wake.notify_one();
        self.ctx.emit_queue().await;
    }
}
