//! The built-in tools, for real: each executor writes ledger events (whose
//! projection is the "Saved items" list) and returns the receipt of what it
//! wrote. Also the audit sink that turns every pipeline step into a
//! `tool_audited` ledger event and a log line with the same correlation id.
//!
//! The runtime's traits are synchronous; the pipeline is always driven from
//! a blocking thread (`spawn_blocking`), where these bridge back into the
//! async ledger with `Handle::block_on`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use ledger::{Draft, EventBody, Receipt, HUMAN_ENTITY};
use runtime::{AuditRecord, AuditSink, CancelToken, ToolError, ToolExecutor};
use serde_json::{json, Value};
use tokio::runtime::Handle;

use super::metadata::MetadataService;
use crate::office::session::{parse_session, session_mode_body};
use crate::context::Context;
use crate::events::AppEvent;
use crate::vault::views::ReceiptView;

/// Longest title kept for an item (longer text stays in its data).
const TITLE_CHARS: usize = 80;
/// Items listed in a search result's message.
const LISTED: usize = 10;

pub(crate) struct AppTools {
    ctx: Arc<Context>,
    handle: Handle,
    metadata: Arc<MetadataService>,
    /// correlation id → the conversation (persona) the call belongs to.
    conversations: Mutex<HashMap<String, String>>,
    /// Conversations whose current turn ran a tool that may write: their
    /// reply job must not run again (see `Conversation::reply`).
    acted: Mutex<HashSet<String>>,
}

impl AppTools {
    pub(crate) fn new(ctx: Arc<Context>, handle: Handle, metadata: Arc<MetadataService>) -> Self {
        Self { ctx, handle, metadata, conversations: Mutex::new(HashMap::new()), acted: Mutex::new(HashSet::new()) }
    }

    pub(crate) fn bind(&self, correlation_id: &str, persona_id: &str) {
        if let Ok(mut m) = self.conversations.lock() {
            if m.len() > 10_000 {
                m.clear();
            }
            m.insert(correlation_id.to_owned(), persona_id.to_owned());
        }
    }

    /// Whether `persona_id`'s current turn ran a tool that may write.
    pub(crate) fn acted(&self, persona_id: &str) -> bool {
        self.acted.lock().is_ok_and(|a| a.contains(persona_id))
    }

    /// A new turn starts: nothing has run in it yet.
    pub(crate) fn forget_acted(&self, persona_id: &str) {
        if let Ok(mut a) = self.acted.lock() {
            a.remove(persona_id);
        }
    }

    fn persona_of(&self, correlation_id: &str) -> Option<String> {
        self.conversations.lock().ok().and_then(|m| m.get(correlation_id).cloned())
    }

    fn entity(&self, correlation_id: &str) -> String {
        self.persona_of(correlation_id).unwrap_or_else(|| HUMAN_ENTITY.to_owned())
    }

    fn append(&self, entity: &str, body: EventBody) -> Result<Receipt, ToolError> {
        let receipt = gated(|| {
            self.handle.block_on(self.ctx.ledger.append(entity, body)).map_err(|e| {
                tracing::error!(error = %e, "a tool's event could not be written");
                ToolError::Failed(crate::error::AppError::from(e).message)
            })
        })?;
        self.ctx.emit(AppEvent::LedgerAppended { seq: receipt.seq, kind: receipt.kind.clone() });
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
        self.ctx.emit(AppEvent::ItemsChanged {});
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
        let items = self.handle.block_on(self.ctx.ledger.items(query, limit)).map_err(|e| ToolError::Failed(e.to_string()))?;
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
            .block_on(self.ctx.ledger.item(id))
            .map_err(|e| ToolError::Failed(e.to_string()))?
            .ok_or_else(|| ToolError::Failed(format!("no saved item has the id “{id}”")))
    }

    fn delete(&self, args: &Value, correlation_id: &str) -> Result<Value, ToolError> {
        let item = self.existing_item(args)?;
        let receipt = self.append(
            &self.entity(correlation_id),
            EventBody::ItemDeleted { item_id: item.id.clone(), correlation_id: correlation_id.to_owned() },
        )?;
        self.ctx.emit(AppEvent::ItemsChanged {});
        Ok(json!({
            "message": format!("Deleted {} “{}”.", kind_label(&item.kind), item.title),
            "item_id": item.id,
            "receipt": receipt_json(receipt),
        }))
    }

    fn forget(&self, args: &Value) -> Result<Value, ToolError> {
        let item = self.existing_item(args)?;
        let erasure = gated(|| {
            self.handle
                .block_on(self.ctx.ledger.erase_item(&item.id, "forgotten at the user's request"))
                .map_err(|e| ToolError::Failed(crate::error::AppError::from(e).message))
        })?;
        self.ctx.emit(AppEvent::ItemsChanged {});
        let receipt = erasure.receipts.into_iter().last().map(receipt_json);
        Ok(json!({
            "message": format!("Forgot {} “{}”: its content was erased from the ledger.", kind_label(&item.kind), item.title),
            "item_id": item.id,
            "receipt": receipt,
        }))
    }

    fn delete_all(&self) -> Result<Value, ToolError> {
        let erasure = gated(|| {
            self.handle
                .block_on(self.ctx.ledger.delete_all_memories())
                .map_err(|e| ToolError::Failed(crate::error::AppError::from(e).message))
        })?;
        self.ctx.emit(AppEvent::ItemsChanged {});
        let n = erasure.erased.len();
        let receipt = erasure.receipts.into_iter().last().map(receipt_json);
        Ok(json!({
            "message": format!("Deleted all memories: {n} event payload(s) erased."),
            "erased": n,
            "receipt": receipt,
        }))
    }
}

// The office's obligations and bookmarks.
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

// ----- office affordances (seed 000): the session's rules, the
// simulation policy, and the executors of submit, query, verify, sign,
// log_reasoning, write_note, request_clarification and simulate. -----

/// Tools that are affordances of the office (run by `AppTools::affordance`).
const AFFORDANCES: &[&str] =
    &["submit", "query", "verify", "sign", "log_reasoning", "write_note", "request_clarification", "simulate"];

/// Most rows a `query` returns.
const QUERY_LIMIT: u64 = 50;

fn block<T>(handle: &Handle, f: impl std::future::Future<Output = ledger::Result<T>>) -> Result<T, ToolError> {
    handle.block_on(f).map_err(|e| ToolError::Failed(crate::error::AppError::from(e).message))
}

fn sha256_hex(v: &Value) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(v.to_string().as_bytes()))
}

impl AppTools {
    /// The persona's session type and mode (stored, else the type's default).
    pub(crate) fn session_of(&self, persona_id: &str) -> (::office::SessionType, ::office::SessionMode) {
        let stored = self.handle.block_on(self.ctx.ledger.session_mode(persona_id)).ok().flatten();
        parse_session(stored)
    }

    /// The session's rules and the simulation policy, before any tool runs
    /// for a persona: `Some` is the answer instead of running it.
    fn office_gate(&self, tool: &str, args: &Value, correlation_id: &str) -> Result<Option<Value>, ToolError> {
        let Some(persona_id) = self.persona_of(correlation_id) else { return Ok(None) };
        let registry = runtime::ToolRegistry::builtin();
        let Some(spec) = registry.get(tool) else { return Ok(None) };
        let (session, mut mode) = self.session_of(&persona_id);
        let writes = matches!(spec.category, runtime::ToolCategory::Write | runtime::ToolCategory::Destructive);
        let chosen_by_person =
            block(&self.handle, self.ctx.ledger.session_mode_signer(&persona_id))?.is_some_and(|s| s == HUMAN_ENTITY);
        if ::office::session::escalates(session, mode, tool, writes, chosen_by_person) {
            mode = ::office::SessionMode::Commitment;
            self.append(&persona_id, session_mode_body(&persona_id, session, mode))?;
            tracing::info!(correlation_id, tool, "the assist session escalated to commitment before a binding act");
        }
        match ::office::session::rule(session, mode, tool, writes) {
            ::office::SessionRule::Refuse => {
                Ok(Some(::office::affordances::session_refused(tool, session.as_str()).to_result()))
            }
            ::office::SessionRule::SimulateOnly => {
                let mut answer = self.simulate_call(&persona_id, tool, args)?;
                let lines = answer["changes"].as_array().map(|c| c.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("; "));
                answer["status"] = json!("simulated");
                answer["message"] = json!(format!(
                    "Deliberation mode: nothing was committed. `{tool}` would change: {}.",
                    lines.filter(|l| !l.is_empty()).unwrap_or_else(|| "nothing".into())
                ));
                Ok(Some(answer))
            }
            ::office::SessionRule::Run => {
                let facts = ::office::simulation::ToolFacts { name: tool, category: spec.category, base_risk: spec.risk };
                // Whether it is the first time only moves a level to "recommended".
                let risk = ::office::simulation::assess(facts, args, false);
                if risk.level != ::office::simulation::SimulationLevel::Required {
                    return Ok(None);
                }
                // Satisfied by a recorded simulation (also one from before a
                // restart) of the same action and arguments in the same state:
                // once the state changed, the simulation no longer describes it.
                let state = block(&self.handle, self.ctx.ledger.simulation_state())?;
                let recorded =
                    block(&self.handle, self.ctx.ledger.simulation_recorded(&persona_id, &risk.kind, &sha256_hex(args), &state))?;
                if !recorded {
                    return Ok(Some(::office::affordances::simulation_required(&risk.kind).to_result()));
                }
                Ok(None)
            }
        }
    }

    /// Whether the persona has never carried out an action of this kind.
    pub(crate) fn first_time(&self, persona_id: &str, kind: &str) -> Result<bool, ToolError> {
        Ok(block(&self.handle, self.ctx.ledger.action_executions(persona_id, kind))? == 0)
    }

    /// Records a persona's action that was carried out for real (an
    /// `action_executed` event): from now on it is not the first of its kind.
    /// Reads, safe kinds, refusals and simulations are not recorded.
    fn record_action(&self, tool: &str, args: &Value, correlation_id: &str, result: &Result<Value, ToolError>) {
        let Ok(answer) = result else { return };
        let Some(persona_id) = self.persona_of(correlation_id) else { return };
        let Some(spec) = runtime::ToolRegistry::builtin().get(tool).cloned() else { return };
        let kind = ::office::simulation::kind_of(tool, args);
        let refused = matches!(answer["status"].as_str(), Some("rejected" | "simulated"));
        if refused || !::office::simulation::tracks_first_time(&kind, spec.category) {
            return;
        }
        let body = EventBody::ActionExecuted { persona_id: persona_id.clone(), action: kind, correlation_id: correlation_id.to_owned() };
        if let Err(e) = self.append(&persona_id, body) {
            tracing::warn!(correlation_id, tool, "the executed action could not be recorded: {e}");
        }
    }

    /// Runs `tool` against a scratch copy of the state and records the
    /// simulation (a `simulation_run` event); nothing else is committed.
    pub(crate) fn simulate_call(&self, persona_id: &str, tool: &str, args: &Value) -> Result<Value, ToolError> {
        let registry = runtime::ToolRegistry::builtin();
        let spec = registry.get(tool).ok_or_else(|| ToolError::Failed(format!("there is no tool `{tool}` to simulate")))?;
        if let Err(v) = runtime::schema::validate(&spec.args_schema, args) {
            let why: Vec<String> = v.iter().map(ToString::to_string).collect();
            return Err(ToolError::Failed(format!("invalid arguments for `{tool}`: {}", why.join("; "))));
        }
        let facts = ::office::simulation::ToolFacts { name: tool, category: spec.category, base_risk: spec.risk };
        let first_time = self.first_time(persona_id, &::office::simulation::kind_of(tool, args))?;
        let risk = ::office::simulation::assess(facts, args, first_time);
        let (changes, rejected) = match self.drafts_for(persona_id, tool, args) {
            Ok(drafts) => (block(&self.handle, self.ctx.ledger.simulate_events(&drafts))?, None),
            Err(token) => {
                let state_hash = block(&self.handle, self.ctx.ledger.simulation_state())?;
                (ledger::SimulatedChanges { state_hash, ..Default::default() }, Some(token))
            }
        };
        let lines = ::office::simulation::change_lines(&changes);
        let level = serde_json::to_value(risk.level).unwrap_or_default();
        let receipt = self.append(
            persona_id,
            EventBody::SimulationRun {
                persona_id: persona_id.to_owned(),
                action: risk.kind.clone(),
                args_hash: sha256_hex(args),
                risk_permille: (risk.score * 1000.0).round() as u32,
                level: level.as_str().unwrap_or_default().to_owned(),
                changes: lines.clone(),
                state_hash: Some(changes.state_hash.clone()),
            },
        )?;
        let outcome = match &rejected {
            Some(t) => format!("it would be rejected ({}): {}", t.code, t.message),
            None if lines.is_empty() => "nothing in the ledger would change".to_owned(),
            None => lines.join("; "),
        };
        Ok(json!({
            "message": format!(
                "Simulated `{tool}` (risk {:.2}, simulation {}{}): {outcome}. Nothing was committed.",
                risk.score,
                level.as_str().unwrap_or_default(),
                if risk.first_time { ", the first time this persona does it" } else { "" }
            ),
            "status": "simulated",
            "kind": risk.kind,
            "risk": risk.score,
            "critical": risk.critical,
            "first_time": risk.first_time,
            "level": level,
            "changes": lines,
            "effects": changes,
            "rejected": rejected,
            "recommendation": if rejected.is_some() { "abandon" } else { ::office::simulation::recommendation(&changes) },
            "receipt": receipt_json(receipt),
        }))
    }

    /// The events `tool` would append, without appending them: what the
    /// executors write, for a simulation. Rejections are ErrorTokens.
    fn drafts_for(&self, persona_id: &str, tool: &str, args: &Value) -> Result<Vec<Draft>, ::office::affordances::ErrorToken> {
        use ::office::affordances::{ErrorCategory, ErrorToken, RemediationType};
        let missing = |what: &str| {
            ErrorToken::new(ErrorCategory::State, "OFFICE_NOT_FOUND", format!("{what} does not exist"), RemediationType::Abandon, &[])
        };
        let system = |e: ToolError| ErrorToken::new(ErrorCategory::System, "OFFICE_SYSTEM", e.to_string(), RemediationType::Retry, &[]);
        let by = |body: EventBody| Draft::by(persona_id, body);
        let item = |kind: &str, title: &str| {
            by(EventBody::ItemSaved {
                item_id: uuid::Uuid::now_v7().to_string(),
                item_kind: kind.to_owned(),
                title: title.trim().chars().take(TITLE_CHARS).collect(),
                data: args.clone(),
                persona_id: Some(persona_id.to_owned()),
                correlation_id: String::new(),
            })
        };
        let deleted = |item_id: String| by(EventBody::ItemDeleted { item_id, correlation_id: String::new() });
        Ok(match tool {
            "save_note" => vec![item("note", text(args, "content"))],
            "save_movie" => vec![item("movie", text(args, "title"))],
            "save_tv_show" => vec![item("tv_show", text(args, "title"))],
            "save_video" | "save_link" => vec![item(if tool == "save_video" { "video" } else { "link" }, text(args, "url"))],
            "remember" => vec![item("fact", text(args, "fact"))],
            // forget erases the payload; what the state loses is the item.
            "delete_memory" | "forget" => {
                let i = self.existing_item(args).map_err(|_| missing(&format!("the item “{}”", text(args, "item_id"))))?;
                vec![deleted(i.id)]
            }
            "delete_all_memories" => {
                let items = block(&self.handle, self.ctx.ledger.items(None, u32::MAX)).map_err(system)?;
                items.into_iter().map(|i| deleted(i.id)).collect()
            }
            "set_reminder" => vec![by(EventBody::ReminderSet {
                reminder_id: uuid::Uuid::now_v7().to_string(),
                persona_id: persona_id.to_owned(),
                text: text(args, "text").trim().to_owned(),
                due_at: Some(text(args, "due").to_owned()),
                obligation: ledger::ObligationKind::Reminder,
            })],
            "bookmark" => vec![by(EventBody::BookmarkAdded {
                bookmark_id: uuid::Uuid::now_v7().to_string(),
                persona_id: persona_id.to_owned(),
                target_id: text(args, "target_id").to_owned(),
                label: args.get("label").and_then(Value::as_str).unwrap_or(text(args, "target_id")).to_owned(),
            })],
            "submit" => self.intent_drafts(persona_id, args)?,
            "sign" | "log_reasoning" | "write_note" | "request_clarification" => vec![by(self.record_body(persona_id, tool, args))],
            // Reads and lookups change nothing in the ledger.
            _ => Vec::new(),
        })
    }

    /// A submitted intent: the signed `intent_submitted` event and its
    /// effect on the persona's obligations, or the ErrorToken.
    fn intent_drafts(&self, persona_id: &str, args: &Value) -> Result<Vec<Draft>, ::office::affordances::ErrorToken> {
        use ::office::affordances::{not_open, Intent};
        let intent = Intent::parse(args)?;
        intent.check_time(self.ctx.ledger.now())?;
        let open = |id: &str| {
            self.handle
                .block_on(self.ctx.ledger.reminder(id))
                .ok()
                .flatten()
                .filter(|r| r.persona_id == persona_id && r.done_ts.is_none())
                .ok_or_else(|| not_open(id))
        };
        let intent_id = uuid::Uuid::now_v7().to_string();
        let effect = match &intent {
            Intent::Commit { text, due_at } => EventBody::ReminderSet {
                reminder_id: intent_id.clone(),
                persona_id: persona_id.to_owned(),
                text: text.clone(),
                due_at: Some(due_at.clone()),
                obligation: ledger::ObligationKind::Commitment,
            },
            Intent::Fulfil { obligation_id } | Intent::Withdraw { obligation_id, .. } => {
                EventBody::ReminderDone { reminder_id: open(obligation_id)?.id }
            }
        };
        let submitted = EventBody::IntentSubmitted {
            persona_id: persona_id.to_owned(),
            intent_id,
            intent: intent.name().to_owned(),
            payload: args.get("payload").cloned().unwrap_or(Value::Null),
        };
        Ok(vec![Draft::by(persona_id, submitted), Draft::by(persona_id, effect)])
    }

    /// The one event of sign, log_reasoning, write_note and request_clarification.
    fn record_body(&self, persona_id: &str, tool: &str, args: &Value) -> EventBody {
        let persona_id = persona_id.to_owned();
        let id = uuid::Uuid::now_v7().to_string();
        match tool {
            "sign" => EventBody::StatementSigned { persona_id, statement: text(args, "statement").to_owned() },
            "log_reasoning" => EventBody::ReasoningLogged { persona_id, reasoning: text(args, "reasoning").to_owned() },
            "write_note" => EventBody::NoteWritten { persona_id, note_id: id, content: text(args, "content").to_owned() },
            _ => EventBody::ClarificationRequested { persona_id, request_id: id, question: text(args, "question").to_owned() },
        }
    }

    fn append_all(&self, drafts: Vec<Draft>) -> Result<Vec<Receipt>, ToolError> {
        // Refused once the call was stopped, like every other tool write.
        let receipts = gated(|| block(&self.handle, self.ctx.ledger.append_drafts(drafts)))?;
        for r in &receipts {
            self.ctx.emit(AppEvent::LedgerAppended { seq: r.seq, kind: r.kind.clone() });
        }
        Ok(receipts)
    }

    /// Runs one of the office's affordances for the persona of the call.
    fn affordance(&self, tool: &str, args: &Value, correlation_id: &str) -> Result<Value, ToolError> {
        let persona_id = self.conversation(correlation_id)?;
        match tool {
            "simulate" => {
                let target = text(args, "tool");
                if target == "simulate" {
                    return Err(ToolError::Failed("a simulation cannot simulate itself".into()));
                }
                let inner = args.get("args").cloned().unwrap_or_else(|| json!({}));
                self.simulate_call(&persona_id, target, &inner)
            }
            "query" => self.query(&persona_id, args),
            "verify" => self.verify(),
            "submit" => match self.intent_drafts(&persona_id, args) {
                Err(token) => Ok(token.to_result()),
                Ok(drafts) => {
                    let receipts = self.append_all(drafts)?;
                    let intent = text(args, "intent");
                    let receipt = receipts.into_iter().next().map(receipt_json);
                    Ok(json!({"status": "committed", "message": format!("Submitted `{intent}`: signed and committed."), "receipt": receipt}))
                }
            },
            _ => {
                let body = self.record_body(&persona_id, tool, args);
                let receipt = self.append(&persona_id, body)?;
                let message = match tool {
                    "sign" => format!("Signed by {} (signature {}…).", receipt.signer, &receipt.signature[..16.min(receipt.signature.len())]),
                    "log_reasoning" => "Reasoning logged.".to_owned(),
                    "write_note" => "Note written for the next session.".to_owned(),
                    _ => format!("Question for you: {}", text(args, "question")),
                };
                Ok(json!({"message": message, "signature": receipt.signature.clone(), "receipt": receipt_json(receipt)}))
            }
        }
    }

    /// A read-only look at the persona's own facts, with a hash of the data
    /// and the ledger position it was read at.
    fn query(&self, persona_id: &str, args: &Value) -> Result<Value, ToolError> {
        let about = text(args, "about");
        let limit = args.get("limit").and_then(Value::as_u64).unwrap_or(20).min(QUERY_LIMIT) as u32;
        let l = &self.ctx.ledger;
        let to = |v: Result<Value, serde_json::Error>| v.map_err(|e| ToolError::Failed(e.to_string()));
        let data = match about {
            "obligations" => to(serde_json::to_value(block(&self.handle, l.reminders(persona_id, false))?))?,
            "bookmarks" => to(serde_json::to_value(block(&self.handle, l.bookmarks(persona_id, limit))?))?,
            "handovers" => to(serde_json::to_value(block(&self.handle, l.handovers(persona_id, limit))?))?,
            "events" => to(serde_json::to_value(block(&self.handle, l.persona_events(persona_id, limit))?))?,
            "constitution" => to(serde_json::to_value(block(&self.handle, l.constitution(persona_id))?))?,
            "items" => {
                let items = block(&self.handle, l.items(None, limit))?;
                Value::Array(items.into_iter().map(|i| json!({"id": i.id, "kind": i.kind, "title": i.title})).collect())
            }
            "session" => {
                let (t, m) = self.session_of(persona_id);
                json!({"session_type": t.as_str(), "mode": m.as_str()})
            }
            other => return Err(ToolError::Failed(format!("cannot query “{other}”"))),
        };
        let n = data.as_array().map_or(1, Vec::len);
        let (as_of, _) = self.handle.block_on(l.head());
        Ok(json!({
            "message": format!("{about}: {n} result(s) as of event {as_of}."),
            "data": data,
            "hash": sha256_hex(&data),
            "as_of": as_of,
        }))
    }

    fn verify(&self) -> Result<Value, ToolError> {
        let report = block(&self.handle, self.ctx.ledger.verify())?;
        let message = match &report.failure {
            Some(f) => format!("The ledger does NOT verify: event {} — {}.", f.seq, f.reason),
            None => format!("The ledger verifies: {} events, chain and signatures intact.", report.events),
        };
        Ok(json!({"message": message, "ok": report.ok(), "events": report.events, "failure": report.failure}))
    }
}
// ----- end office affordances -----

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

// ----- a stopped call writes nothing more -----

thread_local! {
    /// The token of the tool call running on this thread (each call has a
    /// thread of its own: `runtime::Stoppable`).
    static CALL: std::cell::RefCell<Option<CancelToken>> = const { std::cell::RefCell::new(None) };
}

/// Sets this thread's call token for the duration of a call.
struct CallScope;

impl CallScope {
    fn enter(token: &CancelToken) -> Self {
        CALL.with(|c| *c.borrow_mut() = Some(token.clone()));
        Self
    }
}

impl Drop for CallScope {
    fn drop(&mut self) {
        CALL.with(|c| *c.borrow_mut() = None);
    }
}

/// One write of a tool's effects: refused once the call was stopped (and
/// a stop waits for a write in progress). Outside a call it just runs.
pub(crate) fn gated<T>(write: impl FnOnce() -> Result<T, ToolError>) -> Result<T, ToolError> {
    match CALL.with(|c| c.borrow().clone()) {
        Some(token) => token.write(write).inspect_err(|e| {
            if *e == ToolError::Cancelled {
                tracing::warn!("a stopped tool tried to write; refused");
            }
        }),
        None => write(),
    }
}

impl ToolExecutor for AppTools {
    fn execute(&self, tool: &str, args: &Value, correlation_id: &str, cancel: &CancelToken) -> Result<Value, ToolError> {
        tracing::info!(correlation_id, tool, "executing tool");
        let _scope = CallScope::enter(cancel);
        let reads_only = runtime::ToolRegistry::builtin().get(tool).is_some_and(|s| s.category == runtime::ToolCategory::Read);
        if let (false, Some(persona_id)) = (reads_only, self.persona_of(correlation_id)) {
            if let Ok(mut a) = self.acted.lock() {
                a.insert(persona_id);
            }
        }
        // The office's session rules and simulation policy come first.
        if let Some(answer) = self.office_gate(tool, args, correlation_id)? {
            return Ok(answer);
        }
        let result = match tool {
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
                let enriched = self.handle.block_on(self.metadata.enrich(tool, args, correlation_id, cancel));
                if let Some(flag) = enriched.flag {
                    gated(|| {
                        self.handle.block_on(self.ctx.ledger.append_drafts(vec![flag])).map_err(|e| ToolError::Failed(e.to_string()))
                    })?;
                }
                enriched.outcome
            }
            t if AFFORDANCES.contains(&t) => self.affordance(t, args, correlation_id),
            other => Err(ToolError::Unavailable(format!("`{other}` has no executor in this app"))),
        };
        // The office: the first action of a kind is recommended a simulation.
        self.record_action(tool, args, correlation_id, &result);
        result
    }
}

/// Every pipeline step becomes a `tool_audited` event and a log line.
pub(crate) struct LedgerAudit {
    ctx: Arc<Context>,
    handle: Handle,
}

impl LedgerAudit {
    pub(crate) fn new(ctx: Arc<Context>, handle: Handle) -> Self {
        Self { ctx, handle }
    }
}

impl AuditSink for LedgerAudit {
    fn record(&self, r: AuditRecord) {
        let step = serde_json::to_value(r.step).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
        tracing::info!(correlation_id = %r.correlation_id, step = %step, tool = ?r.tool, detail = %r.detail, "tool pipeline");
        let body = EventBody::ToolAudited { correlation_id: r.correlation_id, step, tool: r.tool, detail: r.detail };
        if let Err(e) = self.handle.block_on(self.ctx.ledger.append(HUMAN_ENTITY, body)) {
            tracing::error!(error = %e, "an audit record could not be written to the ledger");
        }
    }
}
