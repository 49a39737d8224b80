//! The "Saved items" view: what the tools saved (notes, movies, TV shows,
//! videos, links, facts, bookmarks, reminders), a projection of the ledger.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use super::Tools;
use crate::Result;

/// Most items one listing returns.
const MAX_LIST: u32 = 500;

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct ItemView {
    pub id: String,
    /// note, movie, tv_show, video, link, fact, bookmark, reminder
    pub kind: String,
    pub title: String,
    /// The tool's arguments as saved, pretty JSON.
    pub data: String,
    pub persona_id: Option<String>,
    pub ts: String,
    #[ts(type = "number")]
    pub seq: i64,
}

impl From<ledger::Item> for ItemView {
    fn from(i: ledger::Item) -> Self {
        Self {
            id: i.id,
            kind: i.kind,
            title: i.title,
            data: serde_json::to_string_pretty(&i.data).unwrap_or_default(),
            persona_id: i.persona_id,
            ts: i.ts,
            seq: i.seq,
        }
    }
}

impl Tools {
    /// Saved items, newest first; every word of `query` must match.
    pub async fn list_items(&self, query: Option<&str>) -> Result<Vec<ItemView>> {
        let query = query.map(str::trim).filter(|q| !q.is_empty());
        Ok(self.ctx.ledger.items(query, MAX_LIST).await?.into_iter().map(ItemView::from).collect())
    }
}
