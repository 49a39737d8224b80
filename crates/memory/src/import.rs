//! Importing a conversation: validate every row first, then append all
//! messages to the ledger in signed batches and index them for keyword
//! search at once (embeddings follow in the background).

use std::collections::HashSet;
use std::path::Path;
use std::time::Instant;

use ledger::{Draft, EventBody, Ledger, MessageRole, Persona, HUMAN_ENTITY};
use serde::Serialize;
use serde_json::Value;

use crate::index::{ItemKind, MemoryIndex, NewItem};
use crate::MemoryError;

/// Messages per ledger transaction.
pub const IMPORT_BATCH: usize = 2_000;
/// Same limit as a typed message.
pub const MAX_TEXT: usize = 32_000;
const MAX_ID: usize = 200;

/// One validated row of an import file.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationRow {
    pub id: String,
    pub role: MessageRole,
    pub text: String,
    pub ts_ms: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ImportReport {
    pub persona_id: String,
    pub imported: usize,
    /// Rows whose id was already imported into this conversation.
    pub skipped: usize,
    pub millis: f64,
    pub messages_per_second: f64,
}

fn bad(index: usize, reason: impl Into<String>) -> MemoryError {
    MemoryError::BadRow { index, reason: reason.into() }
}

/// Accepts RFC 3339 text, or a number of seconds (or milliseconds when
/// larger than 10^11) since 1970.
fn parse_timestamp(v: &Value) -> Option<i64> {
    match v {
        Value::String(s) => crate::index::parse_rfc3339_ms(s.trim()),
        Value::Number(n) => {
            let x = n.as_f64()?;
            if !x.is_finite() || x < 0.0 {
                return None;
            }
            Some(if x > 1e11 { x as i64 } else { (x * 1000.0) as i64 })
        }
        _ => None,
    }
}

/// Validates a whole file. The first bad row is reported by its index
/// (0-based) and reason; nothing is returned unless every row is good.
pub fn parse_conversation(bytes: &[u8], persona_name: &str) -> Result<Vec<ConversationRow>, MemoryError> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| MemoryError::BadFile(format!("not valid JSON: {e}")))?;
    let Value::Array(rows) = value else {
        return Err(MemoryError::BadFile("expected a JSON array of {\"id\", \"speaker\", \"text\", \"timestamp\"}".into()));
    };
    let persona_key = persona_name.trim().to_lowercase();
    let mut seen = HashSet::with_capacity(rows.len());
    let mut out = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        let Value::Object(obj) = row else { return Err(bad(i, "not an object")) };
        let id = match obj.get("id") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_owned(),
            Some(Value::Number(n)) => n.to_string(),
            Some(_) => return Err(bad(i, "\"id\" must be a non-empty string or a number")),
            None => return Err(bad(i, "missing \"id\"")),
        };
        if id.chars().count() > MAX_ID {
            return Err(bad(i, format!("\"id\" is longer than {MAX_ID} characters")));
        }
        if !seen.insert(id.clone()) {
            return Err(bad(i, format!("duplicate id {id:?}")));
        }
        let speaker = match obj.get("speaker") {
            Some(Value::String(s)) => s.trim().to_lowercase(),
            Some(_) => return Err(bad(i, "\"speaker\" must be a string")),
            None => return Err(bad(i, "missing \"speaker\"")),
        };
        let role = if speaker == "human" {
            MessageRole::Human
        } else if speaker == persona_key {
            MessageRole::Persona
        } else {
            return Err(bad(i, format!("speaker {speaker:?} is neither \"human\" nor {persona_name:?}")));
        };
        let text = match obj.get("text") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_owned(),
            Some(Value::String(_)) => return Err(bad(i, "\"text\" is empty")),
            Some(_) => return Err(bad(i, "\"text\" must be a string")),
            None => return Err(bad(i, "missing \"text\"")),
        };
        if text.chars().count() > MAX_TEXT {
            return Err(bad(i, format!("\"text\" is longer than {MAX_TEXT} characters")));
        }
        let ts_ms = match obj.get("timestamp") {
            Some(v) => parse_timestamp(v)
                .ok_or_else(|| bad(i, "\"timestamp\" must be RFC 3339 text or seconds since 1970"))?,
            None => return Err(bad(i, "missing \"timestamp\"")),
        };
        out.push(ConversationRow { id, role, text, ts_ms });
    }
    Ok(out)
}

/// The row's own time as the ledger writes times; none when it is out of
/// the range a date can show.
fn said_at(ts_ms: i64) -> Option<String> {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ts_ms) * 1_000_000).ok()?;
    Some(ledger::format_ts(t))
}

/// Imports validated rows into `persona`'s conversation. Rows whose id is
/// already in that conversation are skipped, so an interrupted import can
/// simply be run again. `progress(done, total)` is called after each batch.
pub async fn import_rows(
    ledger: &Ledger,
    index: &MemoryIndex,
    persona: &Persona,
    rows: Vec<ConversationRow>,
    progress: &(dyn Fn(usize, usize) + Send + Sync),
) -> Result<ImportReport, MemoryError> {
    let started = Instant::now();
    // Catch up first so "already imported" is judged on the whole ledger.
    index.sync_from_ledger(ledger).await?;
    let existing = index.external_ids(&persona.id).await?;
    let total_rows = rows.len();
    let rows: Vec<ConversationRow> = rows.into_iter().filter(|r| !existing.contains(&r.id)).collect();
    let skipped = total_rows - rows.len();
    let mut done = 0;
    for batch in rows.chunks(IMPORT_BATCH) {
        let mut drafts = Vec::with_capacity(batch.len());
        let mut ids = Vec::with_capacity(batch.len());
        for r in batch {
            let message_id = uuid::Uuid::now_v7().to_string();
            let signer = match r.role {
                MessageRole::Human => HUMAN_ENTITY.to_owned(),
                _ => persona.id.clone(),
            };
            drafts.push(Draft {
                entity_id: signer.clone(),
                signer,
                body: EventBody::MessageAdded {
                    message_id: message_id.clone(),
                    persona_id: persona.id.clone(),
                    role: r.role,
                    content: r.text.clone(),
                    external_id: Some(r.id.clone()),
                    said_at: said_at(r.ts_ms),
                },
            });
            ids.push(message_id);
        }
        let receipts = ledger.append_drafts(drafts).await?;
        let items: Vec<NewItem> = batch
            .iter()
            .zip(ids)
            .zip(&receipts)
            .map(|((r, message_id), receipt)| NewItem {
                item_id: message_id,
                kind: ItemKind::Message,
                persona_id: persona.id.clone(),
                external_id: Some(r.id.clone()),
                source_ids: Vec::new(),
                text: r.text.clone(),
                ts_ms: r.ts_ms,
                seq: Some(receipt.seq),
                role: Some(r.role),
            })
            .collect();
        index.index_items(&items).await?;
        done += batch.len();
        progress(done, rows.len());
    }
    let millis = started.elapsed().as_secs_f64() * 1e3;
    Ok(ImportReport {
        persona_id: persona.id.clone(),
        imported: done,
        skipped,
        millis,
        messages_per_second: if millis > 0.0 { done as f64 / (millis / 1e3) } else { 0.0 },
    })
}

/// Reads, validates and imports a conversation file (see [`parse_conversation`]).
pub async fn import_file(
    ledger: &Ledger,
    index: &MemoryIndex,
    persona: &Persona,
    path: &Path,
    progress: &(dyn Fn(usize, usize) + Send + Sync),
) -> Result<ImportReport, MemoryError> {
    let bytes = tokio::fs::read(path)
        .await
        .map_err(|e| MemoryError::BadFile(format!("cannot read {}: {e}", path.display())))?;
    let rows = parse_conversation(&bytes, &persona.name)?;
    import_rows(ledger, index, persona, rows, progress).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_rows_parse_with_roles_and_times() {
        let f = br#"[{"id":"a","speaker":"human","text":" hi ","timestamp":"2025-01-02T03:04:05Z"},
                     {"id":7,"speaker":"ADA","text":"hello","timestamp":1735787045}]"#;
        let rows = parse_conversation(f, "Ada").unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].role, MessageRole::Human);
        assert_eq!(rows[0].text, "hi");
        assert_eq!(rows[0].ts_ms, 1_735_787_045_000);
        assert_eq!(rows[1].id, "7");
        assert_eq!(rows[1].role, MessageRole::Persona);
        assert_eq!(rows[1].ts_ms, 1_735_787_045_000);
    }

    #[test]
    fn the_first_bad_row_is_reported_by_index() {
        let cases: &[(&[u8], usize, &str)] = &[
            (br#"[{"id":"a","speaker":"human","text":"x","timestamp":1},{"id":"b","speaker":"bob","text":"x","timestamp":1}]"#, 1, "neither"),
            (br#"[{"id":"a","speaker":"human","text":"x","timestamp":1},{"id":"a","speaker":"human","text":"y","timestamp":1}]"#, 1, "duplicate"),
            (br#"[{"speaker":"human","text":"x","timestamp":1}]"#, 0, "missing \"id\""),
            (br#"[{"id":"a","speaker":"human","text":"  ","timestamp":1}]"#, 0, "empty"),
            (br#"[{"id":"a","speaker":"human","text":"x","timestamp":"yesterday"}]"#, 0, "timestamp"),
            (br#"[{"id":"a","speaker":"human","text":"x"}]"#, 0, "missing \"timestamp\""),
            (br#"[{"id":"a","speaker":"human","text":"x","timestamp":1}, 3]"#, 1, "not an object"),
        ];
        for (file, index, reason) in cases {
            match parse_conversation(file, "Ada") {
                Err(MemoryError::BadRow { index: i, reason: r }) => {
                    assert_eq!(i, *index, "{r}");
                    assert!(r.contains(reason), "{r} should mention {reason}");
                }
                other => panic!("expected a bad row, got {other:?}"),
            }
        }
        assert!(matches!(parse_conversation(b"{}", "Ada"), Err(MemoryError::BadFile(_))));
        assert!(matches!(parse_conversation(b"[", "Ada"), Err(MemoryError::BadFile(_))));
    }
}
