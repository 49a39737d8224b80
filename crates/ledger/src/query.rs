//! Read queries over the projections and the raw events.

use serde::Serialize;
use sqlx::sqlite::SqliteRow;
use sqlx::Row;

use crate::body::{ContextStatus, MessageRole};
use crate::error::LedgerError;
use crate::project::name_key;
use crate::store::Ledger;
use crate::Result;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Persona {
    pub id: String,
    pub name: String,
    pub short_description: String,
    pub long_description: String,
    pub model: String,
    pub is_system: bool,
    pub archived: bool,
    pub created_seq: i64,
    pub unread: u32,
    /// RFC 3339 UTC; None when not paused.
    pub paused_until: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    pub id: String,
    pub persona_id: String,
    pub role: MessageRole,
    pub content: String,
    pub ts: String,
    pub read: bool,
    pub seq: i64,
    /// Whether it goes into reply prompts.
    pub context_status: ContextStatus,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Account {
    pub name: String,
    pub base_url: String,
    pub default_model: String,
    pub enabled: bool,
}

/// A saved item (runtime).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Item {
    pub id: String,
    pub kind: String,
    pub title: String,
    pub data: serde_json::Value,
    pub persona_id: Option<String>,
    pub ts: String,
    pub seq: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredEvent {
    pub seq: i64,
    pub id: String,
    pub ts: String,
    pub entity_id: String,
    pub kind: String,
    pub signer: String,
    pub payload_hash: String,
    pub prev_hash: String,
    pub hash: String,
    pub signature: String,
    /// The payload JSON, or None when it was erased.
    pub payload: Option<serde_json::Value>,
}

const PERSONA_COLS: &str = "p.id, p.name, p.short_description, p.long_description, p.model, p.is_system, p.archived, p.created_seq, \
     (SELECT COUNT(*) FROM messages m WHERE m.persona_id = p.id AND m.read = 0) AS unread, p.paused_until";

/// The columns `message_row` reads, in order.
pub(crate) const MESSAGE_COLS: &str = "id, persona_id, role, content, ts, read, seq, context_status";

fn persona_row(r: &SqliteRow) -> Persona {
    Persona {
        id: r.get(0),
        name: r.get(1),
        short_description: r.get(2),
        long_description: r.get(3),
        model: r.get(4),
        is_system: r.get(5),
        archived: r.get(6),
        created_seq: r.get(7),
        unread: r.get::<i64, _>(8).try_into().unwrap_or(u32::MAX),
        paused_until: r.get(9),
    }
}

pub(crate) fn message_row(r: &SqliteRow) -> Message {
    let role: String = r.get(2);
    Message {
        id: r.get(0),
        persona_id: r.get(1),
        role: MessageRole::parse(&role).unwrap_or(MessageRole::System),
        content: r.get(3),
        ts: r.get(4),
        read: r.get(5),
        seq: r.get(6),
        context_status: ContextStatus::parse(&r.get::<String, _>(7)).unwrap_or_default(),
    }
}

/// Every column of an event with its payload (NULL once erased): the one
/// SELECT that readers of whole events (listing, verify, export) extend.
pub(crate) const EVENTS_WITH_PAYLOADS: &str = "SELECT e.seq, e.id, e.ts, e.entity_id, e.kind, e.signer, e.payload_hash, \
     e.prev_hash, e.hash, e.signature, p.body FROM events e LEFT JOIN payloads p ON p.seq = e.seq";

impl Ledger {
    pub async fn personas(&self, include_archived: bool) -> Result<Vec<Persona>> {
        let sql = format!(
            "SELECT {PERSONA_COLS} FROM personas p {} ORDER BY p.is_system DESC, p.created_seq",
            if include_archived { "" } else { "WHERE p.archived = 0" }
        );
        let rows = sqlx::query(&sql).fetch_all(self.pool()).await.map_err(LedgerError::Load)?;
        Ok(rows.iter().map(persona_row).collect())
    }

    pub async fn persona(&self, id: &str) -> Result<Persona> {
        let sql = format!("SELECT {PERSONA_COLS} FROM personas p WHERE p.id = ?");
        let row = sqlx::query(&sql).bind(id).fetch_optional(self.pool()).await.map_err(LedgerError::Load)?;
        row.as_ref().map(persona_row).ok_or_else(|| LedgerError::PersonaNotFound(id.to_owned()))
    }

    /// Finds a persona by id or by name (case-insensitive).
    pub async fn find_persona(&self, id_or_name: &str) -> Result<Persona> {
        let sql = format!("SELECT {PERSONA_COLS} FROM personas p WHERE p.id = ? OR p.name_key = ? LIMIT 1");
        let row = sqlx::query(&sql)
            .bind(id_or_name)
            .bind(name_key(id_or_name))
            .fetch_optional(self.pool())
            .await
            .map_err(LedgerError::Load)?;
        row.as_ref().map(persona_row).ok_or_else(|| LedgerError::PersonaNotFound(id_or_name.to_owned()))
    }

    /// Messages of one conversation in order; `last` keeps only the newest N.
    pub async fn messages(&self, persona_id: &str, last: Option<u32>) -> Result<Vec<Message>> {
        let rows = sqlx::query(&format!(
            "SELECT * FROM (SELECT {MESSAGE_COLS} FROM messages \
             WHERE persona_id = ? ORDER BY seq DESC LIMIT ?) ORDER BY seq"
        ))
        .bind(persona_id)
        .bind(last.map(i64::from).unwrap_or(-1))
        .fetch_all(self.pool())
        .await
        .map_err(LedgerError::Load)?;
        Ok(rows.iter().map(message_row).collect())
    }

    /// The replies of `persona_id` that were cut off while spoken aloud:
    /// reply id → how many of its characters were said (`voice_turn`
    /// events; an erased payload counts as no record).
    pub async fn interrupted_replies(&self, persona_id: &str) -> Result<std::collections::HashMap<String, u32>> {
        let rows = sqlx::query(
            "SELECT json_extract(CAST(p.body AS TEXT), '$.reply_id'), json_extract(CAST(p.body AS TEXT), '$.spoken_chars') \
             FROM events e JOIN payloads p ON p.seq = e.seq \
             WHERE e.kind = 'voice_turn' AND json_extract(CAST(p.body AS TEXT), '$.persona_id') = ? \
             AND json_extract(CAST(p.body AS TEXT), '$.interrupted') = 1 ORDER BY e.seq",
        )
        .bind(persona_id)
        .fetch_all(self.pool())
        .await
        .map_err(LedgerError::Load)?;
        let mut out = std::collections::HashMap::new();
        for r in &rows {
            let reply: Option<String> = r.try_get(0).map_err(LedgerError::Load)?;
            let chars: Option<i64> = r.try_get(1).map_err(LedgerError::Load)?;
            if let Some(reply) = reply {
                out.insert(reply, u32::try_from(chars.unwrap_or(0)).unwrap_or(0));
            }
        }
        Ok(out)
    }

    pub async fn accounts(&self) -> Result<Vec<Account>> {
        let rows = sqlx::query("SELECT name, base_url, default_model, enabled FROM accounts ORDER BY created_seq")
            .fetch_all(self.pool())
            .await
            .map_err(LedgerError::Load)?;
        Ok(rows
            .iter()
            .map(|r| Account { name: r.get(0), base_url: r.get(1), default_model: r.get(2), enabled: r.get(3) })
            .collect())
    }

    pub async fn account(&self, name: &str) -> Result<Account> {
        self.accounts()
            .await?
            .into_iter()
            .find(|a| a.name == name)
            .ok_or_else(|| LedgerError::AccountNotFound(name.to_owned()))
    }

    pub async fn event_count(&self) -> Result<u64> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM events")
            .fetch_one(self.pool())
            .await
            .map_err(LedgerError::Load)?;
        Ok(n.max(0) as u64)
    }

    /// Events newest first, before `before_seq` when given.
    pub async fn events(&self, before_seq: Option<i64>, limit: u32) -> Result<Vec<StoredEvent>> {
        let rows = sqlx::query(&format!("{EVENTS_WITH_PAYLOADS} WHERE e.seq < ? ORDER BY e.seq DESC LIMIT ?"))
        .bind(before_seq.unwrap_or(i64::MAX))
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await
        .map_err(LedgerError::Load)?;
        Ok(rows.iter().map(stored_event_row).collect())
    }

    /// Every event of one kind (`document_changed`, …) in order.
    pub async fn events_of_kind(&self, kind: &str) -> Result<Vec<StoredEvent>> {
        let rows = sqlx::query(&format!("{EVENTS_WITH_PAYLOADS} WHERE e.kind = ? ORDER BY e.seq"))
            .bind(kind)
            .fetch_all(self.pool())
            .await
            .map_err(LedgerError::Load)?;
        Ok(rows.iter().map(stored_event_row).collect())
    }

    /// Every event in order (for export and tooling).
    pub async fn all_events(&self) -> Result<Vec<StoredEvent>> {
        let rows = sqlx::query(&format!("{EVENTS_WITH_PAYLOADS} ORDER BY e.seq"))
        .fetch_all(self.pool())
        .await
        .map_err(LedgerError::Load)?;
        Ok(rows.iter().map(stored_event_row).collect())
    }
}

pub(crate) fn stored_event_row(r: &SqliteRow) -> StoredEvent {
    let body: Option<Vec<u8>> = r.get(10);
    StoredEvent {
        seq: r.get(0),
        id: r.get(1),
        ts: r.get(2),
        entity_id: r.get(3),
        kind: r.get(4),
        signer: r.get(5),
        payload_hash: hex::encode(r.get::<Vec<u8>, _>(6)),
        prev_hash: hex::encode(r.get::<Vec<u8>, _>(7)),
        hash: hex::encode(r.get::<Vec<u8>, _>(8)),
        signature: hex::encode(r.get::<Vec<u8>, _>(9)),
        payload: body.map(|b| serde_json::from_slice(&b).unwrap_or(serde_json::Value::Null)),
    }
}

impl Ledger {
    /// SHA-256 over every projection table in a fixed order: two ledgers
    /// with the same digest show the user the same state.
    pub async fn state_digest(&self) -> Result<String> {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for sql in [
            "SELECT id || '|' || kind || '|' || hex(public_key) FROM entities ORDER BY id",
            "SELECT id || '|' || name || '|' || short_description || '|' || long_description || '|' || model || '|' || is_system || '|' || archived || '|' || created_seq || '|' || updated_seq FROM personas ORDER BY id",
            "SELECT id || '|' || persona_id || '|' || role || '|' || content || '|' || ts || '|' || read || '|' || seq FROM messages ORDER BY seq, id",
            "SELECT name || '|' || base_url || '|' || default_model || '|' || enabled FROM accounts ORDER BY name",
            "SELECT seq || '|' || erased_by FROM erased ORDER BY seq",
            "SELECT id || '|' || kind || '|' || title || '|' || data || '|' || COALESCE(persona_id, '') || '|' || ts || '|' || seq FROM items ORDER BY id",
            "SELECT key || '|' || value FROM runtime_settings ORDER BY key",
        ]
        .into_iter()
        .chain(crate::memories::DIGEST_SQL)
        .chain(crate::office::DIGEST_SQL)
        {
            h.update(sql.as_bytes());
            let rows: Vec<String> = sqlx::query_scalar(sql).fetch_all(self.pool()).await.map_err(LedgerError::Load)?;
            for r in rows {
                h.update((r.len() as u64).to_be_bytes());
                h.update(r.as_bytes());
            }
        }
        Ok(hex::encode(h.finalize()))
    }
}

fn item_row(r: &SqliteRow) -> Item {
    let data: String = r.get(3);
    Item {
        id: r.get(0),
        kind: r.get(1),
        title: r.get(2),
        data: serde_json::from_str(&data).unwrap_or(serde_json::Value::Null),
        persona_id: r.get(4),
        ts: r.get(5),
        seq: r.get(6),
    }
}

// ----- runtime -----
impl Ledger {
    /// Saved items, newest first; `query` matches title, kind and data
    /// (case-insensitive substring, every word must match).
    pub async fn items(&self, query: Option<&str>, limit: u32) -> Result<Vec<Item>> {
        let words: Vec<String> = query
            .unwrap_or_default()
            .split_whitespace()
            .map(|w| format!("%{}%", w.to_lowercase().replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")))
            .collect();
        let mut q = sqlx::QueryBuilder::new("SELECT id, kind, title, data, persona_id, ts, seq FROM items WHERE 1 = 1");
        for w in &words {
            q.push(" AND lower(kind || ' ' || title || ' ' || data) LIKE ").push_bind(w).push(" ESCAPE '\\'");
        }
        q.push(" ORDER BY seq DESC LIMIT ").push_bind(i64::from(limit));
        let rows = q.build().fetch_all(self.pool()).await.map_err(LedgerError::Load)?;
        Ok(rows.iter().map(item_row).collect())
    }

    pub async fn item(&self, id: &str) -> Result<Option<Item>> {
        let row = sqlx::query("SELECT id, kind, title, data, persona_id, ts, seq FROM items WHERE id = ?")
            .bind(id)
            .fetch_optional(self.pool())
            .await
            .map_err(LedgerError::Load)?;
        Ok(row.as_ref().map(item_row))
    }

    /// Every runtime setting whose key starts with `prefix`, in one query.
    pub async fn runtime_settings_with_prefix(&self, prefix: &str) -> Result<Vec<(String, String)>> {
        let rows = sqlx::query("SELECT key, value FROM runtime_settings WHERE substr(key, 1, length(?1)) = ?1")
            .bind(prefix)
            .fetch_all(self.pool())
            .await
            .map_err(LedgerError::Load)?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    pub async fn runtime_setting(&self, key: &str) -> Result<Option<String>> {
        sqlx::query_scalar("SELECT value FROM runtime_settings WHERE key = ?")
            .bind(key)
            .fetch_optional(self.pool())
            .await
            .map_err(LedgerError::Load)
    }
}

impl Ledger {
    /// Rebuilds the receipt of a stored event (the same one its append returned).
    pub async fn receipt(&self, seq: i64) -> Result<crate::store::Receipt> {
        let r = sqlx::query("SELECT seq, id, kind, payload_hash, prev_hash, hash, signer, signature FROM events WHERE seq = ?")
            .bind(seq)
            .fetch_optional(self.pool())
            .await
            .map_err(LedgerError::Load)?
            .ok_or(LedgerError::EventNotFound(seq))?;
        Ok(crate::store::Receipt {
            seq: r.get(0),
            event_id: r.get(1),
            kind: r.get(2),
            action_hash: hex::encode(r.get::<Vec<u8>, _>(3)),
            state_before: hex::encode(r.get::<Vec<u8>, _>(4)),
            state_after: hex::encode(r.get::<Vec<u8>, _>(5)),
            signer: r.get(6),
            signature: hex::encode(r.get::<Vec<u8>, _>(7)),
        })
    }
}
