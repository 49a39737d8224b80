//! "What they know about you": the human's memories as the UI and CLI see
//! them (filtered by the viewer's groups), the human's edits (confirm,
//! edit, forget = real erasure), persona groups, and "memories used" by
//! each reply.

use ledger::{EventBody, Memory, PersonaGroups, Validation, HUMAN_ENTITY};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use super::Memories;
use crate::error::AppError;
use crate::events::AppEvent;
use crate::Result;

const MAX_MEMORY_TEXT: usize = 500;

/// Where a quote sits in its message (character offsets, end exclusive).
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct QuoteView {
    pub message_id: String,
    pub start: u32,
    pub end: u32,
    /// The whole original message (None when it was erased).
    pub message_text: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct MemoryView {
    pub id: String,
    /// fact | trait | topic | person | quote
    pub kind: String,
    pub subject: String,
    pub text: String,
    /// The group it is filed under: only personas that see this group see it.
    pub group: String,
    pub learned_by: String,
    pub learned_by_name: String,
    pub source_ids: Vec<String>,
    pub quote: Option<QuoteView>,
    pub confidence: f64,
    /// none | ei | human (human = confirmed and locked)
    pub validation: String,
    pub superseded_by: Option<String>,
    /// 1.0 when learned or last used by a reply; decays with the half-life.
    pub exposure: f64,
    pub learned_ts: String,
}

/// One item a reply was given by retrieval.
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct UsedItemView {
    pub item_id: String,
    /// "memory" or "message"
    pub kind: String,
    pub text: String,
    /// Set for memories (so the UI can confirm, edit or forget in place).
    pub memory: Option<MemoryView>,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct PersonaGroupsView {
    pub group_primary: String,
    pub groups_visible: Vec<String>,
    /// Ei sees every group whatever its own are.
    pub sees_all: bool,
}

impl Memories {
    async fn memory_view(&self, m: Memory) -> MemoryView {
        let learned_by_name = self.ctx.ledger.persona(&m.learned_by).await.map(|p| p.name).unwrap_or_default();
        let quote = match m.quote {
            Some(q) => {
                let message_text = self.ctx.ledger.message(&q.message_id).await.ok().flatten().map(|msg| msg.content);
                Some(QuoteView { message_id: q.message_id, start: q.start, end: q.end, message_text })
            }
            None => None,
        };
        MemoryView {
            id: m.id,
            kind: m.kind.as_str().to_owned(),
            subject: m.subject,
            text: m.text,
            group: m.group,
            learned_by: m.learned_by,
            learned_by_name,
            source_ids: m.source_ids,
            quote,
            confidence: m.confidence,
            validation: m.validation.as_str().to_owned(),
            superseded_by: m.superseded_by,
            exposure: m.exposure,
            learned_ts: m.learned_ts,
        }
    }

    /// The human's memories. With `persona`, only what that persona may see
    /// (decided by `memory::Scope`, as for retrieval); without, all of them
    /// (it is the human's own data). Superseded facts are included when asked.
    pub async fn list_memories(&self, persona: Option<&str>, include_superseded: bool) -> Result<Vec<MemoryView>> {
        let scope = match persona {
            Some(p) => self.scope_of(&self.ctx.ledger.find_persona(p).await?).await?,
            None => memory::Scope::All,
        };
        let memories = self.ctx.ledger.memories(None, include_superseded).await?;
        let mut out = Vec::with_capacity(memories.len());
        for m in memories.into_iter().filter(|m| scope.allows(&memory::group_key(&m.group))) {
            out.push(self.memory_view(m).await);
        }
        Ok(out)
    }

    async fn update_memory(&self, id: &str, text: Option<String>, validation: Validation) -> Result<MemoryView> {
        let m = self.ctx.ledger.memory(id).await?;
        let body = EventBody::MemoryUpdated {
            memory_id: m.id.clone(),
            text: text.clone(),
            confidence: Some(1.0),
            validation: Some(validation),
            superseded_by: None,
            add_source_ids: Vec::new(),
        };
        self.ctx.ledger.append(HUMAN_ENTITY, body).await?;
        if let Some(text) = &text {
            if let Err(e) = self.index.update_text(&m.id, text).await {
                tracing::warn!(error = %e, "could not re-index an edited memory; it is on the next start");
            }
        }
        self.ctx.emit(AppEvent::MemoriesChanged { persona_id: None });
        Ok(self.memory_view(self.ctx.ledger.memory(id).await?).await)
    }

    /// The human confirms a memory: validation "human", locked against
    /// extraction (never superseded), and never decays.
    pub async fn confirm_memory(&self, id: &str) -> Result<MemoryView> {
        self.update_memory(id, None, Validation::Human).await
    }

    /// The human corrects a memory's text (which also confirms it).
    pub async fn edit_memory(&self, id: &str, text: &str) -> Result<MemoryView> {
        let text = text.trim();
        if text.is_empty() || text.chars().count() > MAX_MEMORY_TEXT {
            return Err(AppError::invalid(format!("a memory needs 1 to {MAX_MEMORY_TEXT} characters")));
        }
        self.update_memory(id, Some(text.to_owned()), Validation::Human).await
    }

    /// Forgets a memory for real: the payloads of every event about it are
    /// erased (ledger erasure path) and it leaves the search index.
    pub async fn forget_memory(&self, id: &str) -> Result<()> {
        self.ctx.ledger.forget_memory(id).await?;
        if let Err(e) = self.index.remove_item(id).await {
            tracing::warn!(error = %e, "could not drop a forgotten memory from the index");
        }
        self.forget_in_index().await;
        self.ctx.emit(AppEvent::MemoriesChanged { persona_id: None });
        Ok(())
    }

    /// What retrieval gave the reply `message_id`, in rank order. Items
    /// forgotten or erased since are left out.
    pub async fn memories_used(&self, message_id: &str) -> Result<Vec<UsedItemView>> {
        let mut out = Vec::new();
        for id in self.ctx.ledger.reply_sources(message_id).await? {
            if let Ok(m) = self.ctx.ledger.memory(&id).await {
                let view = self.memory_view(m).await;
                out.push(UsedItemView { item_id: id, kind: "memory".into(), text: view.text.clone(), memory: Some(view) });
            } else if let Some(msg) = self.ctx.ledger.message(&id).await? {
                out.push(UsedItemView { item_id: id, kind: "message".into(), text: msg.content, memory: None });
            }
        }
        Ok(out)
    }

    pub async fn persona_groups(&self, persona: &str) -> Result<PersonaGroupsView> {
        let p = self.ctx.ledger.find_persona(persona).await?;
        let g = self.ctx.ledger.persona_groups(&p.id).await?;
        Ok(PersonaGroupsView {
            group_primary: g.group_primary,
            groups_visible: g.groups_visible,
            sees_all: p.is_system || p.id == ledger::EI_PERSONA_ID,
        })
    }

    /// Sets a persona's groups. Changes what it retrieves from now on.
    pub async fn set_persona_groups(&self, persona: &str, primary: &str, visible: &[String]) -> Result<PersonaGroupsView> {
        let p = self.ctx.ledger.find_persona(persona).await?;
        self.ctx.ledger.set_persona_groups(&p.id, &PersonaGroups::normalised(primary, visible)).await?;
        self.ctx.emit(AppEvent::PersonaChanged { persona: self.ctx.ledger.persona(&p.id).await?.into() });
        self.ctx.emit(AppEvent::MemoriesChanged { persona_id: Some(p.id.clone()) });
        self.persona_groups(&p.id).await
    }
}
