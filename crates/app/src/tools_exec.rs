//! The built-in tools, for real: each executor writes ledger events (whose
//! projection is the "Saved items" list) and returns the receipt of what it
//! wrote. Also the audit sink that turns every pipeline step into a
//! `tool_audited` ledger event and a log line with the same correlation id.
//!
//! The runtime's traits are synchronous; the pipeline is always driven from
//! a blocking thread (`spawn_blocking`), where these bridge back into the
//! async ledger with `Handle::block_on`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ledger::{EventBody, Ledger, Receipt, HUMAN_ENTITY};
use runtime::{AuditRecord, AuditSink, ToolError, ToolExecutor};
use serde_json::{json, Value};
use tokio::runtime::Handle;
use tokio::sync::broadcast;

use crate::metadata::MetadataService;
use crate::views::{AppEvent, ReceiptView};

/// Longest title kept for an item (longer text stays in its data).
const TITLE_CHARS: usize = 80;
/// Items listed in a search result's message.
const LISTED: usize = 10;

pub(crate) struct AppTools {
    ledger: Arc<Ledger>,
    events: broadcast::Sender<AppEvent>,
    handle: Handle,
    metadata: Arc<MetadataService>,
    /// correlation id → the conversation (persona) the call belongs to.
    conversations: Mutex<HashMap<String, String>>,
}

impl AppTools {
    pub(crate) fn new(
        ledger: Arc<Ledger>,
        events: broadcast::Sender<AppEvent>,
        handle: Handle,
        metadata: Arc<MetadataService>,
    ) -> Self {
        Self { ledger, events, handle, metadata, conversations: Mutex::new(HashMap::new()) }
    }

    pub(crate) fn bind(&self, correlation_id: &str, persona_id: &str) {
        if let Ok(mut m) = self.conversations.lock() {
            if m.len() > 10_000 {
                m.clear();
            }
            m.insert(correlation_id.to_owned(), persona_id.to_owned());
        }
    }

    fn persona_of(&self, correlation_id: &str) -> Option<String> {
        self.conversations.lock().ok().and_then(|m| m.get(correlation_id).cloned())
    }

    fn emit(&self, event: AppEvent) {
        let _no_listener_is_fine = self.events.send(event);
    }

    fn entity(&self, correlation_id: &str) -> String {
        self.persona_of(correlation_id).unwrap_or_else(|| HUMAN_ENTITY.to_owned())
    }

    fn append(&self, entity: &str, body: EventBody) -> Result<Receipt, ToolError> {
        let receipt = self.handle.block_on(self.ledger.append(entity, body)).map_err(|e| {
            tracing::error!(error = %e, "a tool's event could not be written");
            ToolError::Failed(crate::error::AppError::from(e).message)
        })?;
        self.emit(AppEvent::LedgerAppended { seq: receipt.seq, kind: receipt.kind.clone() });
        Ok(receipt)
    }

    fn save(&self, kind: &str, title: &str, data: &Value, correlation_id: &str) -> Result<Value, ToolError> {
        let item_id = uuid::Uuid::now_v7().to_string();
        let title: String = title.trim().chars().take(TITLE_CHARS).collect();
        let persona_id = self.persona_of(correlation_id);
        let receipt = self.append(
            &self.entity(correlation_id),
            EventBody::ItemSaved {
                item_id: item_id.clone(),
                item_kind: kind.to_owned(),
                title: title.clone(),
                data: data.clone(),
                persona_id,
                correlation_id: correlation_id.to_owned(),
            },
        )?;
        self.emit(AppEvent::ItemsChanged {});
        Ok(json!({
            "message": format!("Saved {} “{title}”.", kind_label(kind)),
            // What `delete_memory` needs to undo this save (plan compensation).
            "undo_args": {"item_id": item_id},
            "item_id": item_id,
            "receipt": receipt_json(receipt),
        }))
    }

    fn search(&self, args: &Value) -> Result<Value, ToolError> {
        let query = args.get("query").and_then(Value::as_str);
        let limit = args.get("limit").and_then(Value::as_u64).unwrap_or(50).min(100) as u32;
        let items = self.handle.block_on(self.ledger.items(query, limit)).map_err(|e| ToolError::Failed(e.to_string()))?;
        let lines: Vec<String> =
            items.iter().take(LISTED).map(|i| format!("• {} “{}” ({})", kind_label(&i.kind), i.title, i.id)).collect();
        let message = match (items.len(), query) {
            (0, Some(q)) => format!("No saved item matches “{q}”."),
            (0, None) => "Nothing is saved yet.".to_owned(),
            (n, _) => {
                let more = if n > LISTED { format!("\n… and {} more", n - LISTED) } else { String::new() };
                format!("{n} saved item(s):\n{}{more}", lines.join("\n"))
            }
        };
        let list: Vec<Value> = items
            .iter()
            .map(|i| json!({"id": i.id, "kind": i.kind, "title": i.title, "data": i.data}))
            .collect();
        Ok(json!({"message": message, "items": list}))
    }

    fn existing_item(&self, args: &Value) -> Result<ledger::Item, ToolError> {
        let id = args.get("item_id").and_then(Value::as_str).unwrap_or_default();
        self.handle
            .block_on(self.ledger.item(id))
            .map_err(|e| ToolError::Failed(e.to_string()))?
            .ok_or_else(|| ToolError::Failed(format!("no saved item has the id “{id}”")))
    }

    fn delete(&self, args: &Value, correlation_id: &str) -> Result<Value, ToolError> {
        let item = self.existing_item(args)?;
        let receipt = self.append(
            &self.entity(correlation_id),
            EventBody::ItemDeleted { item_id: item.id.clone(), correlation_id: correlation_id.to_owned() },
        )?;
        self.emit(AppEvent::ItemsChanged {});
        Ok(json!({
            "message": format!("Deleted {} “{}”.", kind_label(&item.kind), item.title),
            "item_id": item.id,
            "receipt": receipt_json(receipt),
        }))
    }

    fn forget(&self, args: &Value) -> Result<Value, ToolError> {
        let item = self.existing_item(args)?;
        let erasure = self
            .handle
            .block_on(self.ledger.erase_item(&item.id, "forgotten at the user's request"))
            .map_err(|e| ToolError::Failed(crate::error::AppError::from(e).message))?;
        self.emit(AppEvent::ItemsChanged {});
        let receipt = erasure.receipts.into_iter().last().map(receipt_json);
        Ok(json!({
            "message": format!("Forgot {} “{}”: its content was erased from the ledger.", kind_label(&item.kind), item.title),
            "item_id": item.id,
            "receipt": receipt,
        }))
    }

    fn delete_all(&self) -> Result<Value, ToolError> {
        let erasure = self
            .handle
            .block_on(self.ledger.delete_all_memories())
            .map_err(|e| ToolError::Failed(crate::error::AppError::from(e).message))?;
        self.emit(AppEvent::ItemsChanged {});
        let n = erasure.erased.len();
        let receipt = erasure.receipts.into_iter().last().map(receipt_json);
        Ok(json!({
            "message": format!("Deleted all memories: {n} event payload(s) erased."),
            "erased": n,
            "receipt": receipt,
        }))
    }
}

// The office's obligations and bookmarks (events defined by issue #5).
impl AppTools {
    fn conversation(&self, correlation_id: &str) -> Result<String, ToolError> {
        self.persona_of(correlation_id)
            .ok_or_else(|| ToolError::Failed("reminders and bookmarks belong to a conversation".into()))
    }

    fn set_reminder(&self, args: &Value, correlation_id: &str) -> Result<Value, ToolError> {
        let due = text(args, "due");
        let at = time::OffsetDateTime::parse(due, &time::format_description::well_known::Rfc3339)
            .map_err(|_| ToolError::Failed(format!("“{due}” is not an RFC 3339 date and time")))?;
        let due_at = at
            .to_offset(time::UtcOffset::UTC)
            .format(&time::format_description::well_known::Rfc3339)
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        let persona_id = self.conversation(correlation_id)?;
        let reminder_id = uuid::Uuid::now_v7().to_string();
        let what = text(args, "text").trim().to_owned();
        let receipt = self.append(
            &persona_id,
            EventBody::ReminderSet {
                reminder_id: reminder_id.clone(),
                persona_id: persona_id.clone(),
                text: what.clone(),
                due_at: Some(due_at.clone()),
                obligation: ledger::ObligationKind::Reminder,
            },
        )?;
        Ok(json!({
            "message": format!("Reminder set: “{what}” by {due_at}."),
            "reminder_id": reminder_id,
            "receipt": receipt_json(receipt),
        }))
    }

    fn bookmark(&self, args: &Value, correlation_id: &str) -> Result<Value, ToolError> {
        let persona_id = self.conversation(correlation_id)?;
        let target_id = text(args, "target_id").trim().to_owned();
        let label = args.get("label").and_then(Value::as_str).unwrap_or(&target_id).trim().to_owned();
        let bookmark_id = uuid::Uuid::now_v7().to_string();
        let receipt = self.append(
            &persona_id,
            EventBody::BookmarkAdded {
                bookmark_id: bookmark_id.clone(),
                persona_id: persona_id.clone(),
                target_id,
                label: label.clone(),
            },
        )?;
        Ok(json!({
            "message": format!("Bookmarked “{label}”."),
            "bookmark_id": bookmark_id,
            "receipt": receipt_json(receipt),
        }))
    }
}

fn kind_label(kind: &str) -> &str {
    match kind {
        "tv_show" => "TV show",
        "fact" => "fact",
        other => other,
    }
}

pub(crate) fn receipt_json(r: Receipt) -> Value {
    serde_json::to_value(ReceiptView::from(r)).unwrap_or(Value::Null)
}

fn text<'a>(args: &'a Value, key: &str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or_default()
}

impl ToolExecutor for AppTools {
    fn execute(&self, tool: &str, args: &Value, correlation_id: &str) -> Result<Value, ToolError> {
        tracing::info!(correlation_id, tool, "executing tool");
        match tool {
            "save_note" => self.save("note", text(args, "content"), args, correlation_id),
            "save_movie" => self.save("movie", text(args, "title"), args, correlation_id),
            "save_tv_show" => self.save("tv_show", text(args, "title"), args, correlation_id),
            "save_video" => {
                let title = args.get("title").and_then(Value::as_str).unwrap_or(text(args, "url"));
                self.save("video", title, args, correlation_id)
            }
            "save_link" => {
                let title = args.get("description").and_then(Value::as_str).unwrap_or(text(args, "url"));
                self.save("link", title, args, correlation_id)
            }
            "remember" => self.save("fact", text(args, "fact"), args, correlation_id),
            "bookmark" => self.bookmark(args, correlation_id),
            "set_reminder" => self.set_reminder(args, correlation_id),
            "search_items" => self.search(args),
            "delete_memory" => self.delete(args, correlation_id),
            "forget" => self.forget(args),
            "delete_all_memories" => self.delete_all(),
            "enrich_movie" | "enrich_tv_show" | "enrich_video" => {
                self.handle.block_on(self.metadata.enrich(tool, args, correlation_id))
            }
            other => Err(ToolError::Unavailable(format!("`{other}` has no executor in this app"))),
        }
    }
}

/// Every pipeline step becomes a `tool_audited` event and a log line.
pub(crate) struct LedgerAudit {
    ledger: Arc<Ledger>,
    handle: Handle,
}

impl LedgerAudit {
    pub(crate) fn new(ledger: Arc<Ledger>, handle: Handle) -> Self {
        Self { ledger, handle }
    }
}

impl AuditSink for LedgerAudit {
    fn record(&self, r: AuditRecord) {
        let step = serde_json::to_value(r.step).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
        tracing::info!(correlation_id = %r.correlation_id, step = %step, tool = ?r.tool, detail = %r.detail, "tool pipeline");
        let body = EventBody::ToolAudited { correlation_id: r.correlation_id, step, tool: r.tool, detail: r.detail };
        if let Err(e) = self.handle.block_on(self.ledger.append(HUMAN_ENTITY, body)) {
            tracing::error!(error = %e, "an audit record could not be written to the ledger");
        }
    }
}
