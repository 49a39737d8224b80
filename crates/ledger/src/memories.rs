//! Memory projections and queries: persona groups, the human's
//! memories (facts, traits, topics, people, quotes) and the items each
//! reply was given. Visibility itself is decided in `memory::Scope`; this
//! module only stores the group every row is filed under.

use serde::Serialize;
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, Sqlite, Transaction};

use crate::body::{EventBody, MemoryKind, PersonaTopic, QuoteSpan, Validation};
use crate::error::LedgerError;
use crate::event::EventHeader;
use crate::store::{Draft, Ledger, HUMAN_ENTITY};
use crate::Result;

/// Rows folded into `Ledger::state_digest`: everything a replay
/// rebuilds for personas (groups, profile, pause, settings), messages
/// (context status), memories, reply sources and summaries.
pub(crate) const DIGEST_SQL: [&str; 5] = [
    "SELECT id || '|' || group_primary || '|' || groups_visible || '|' || traits || '|' || topics || '|' || profile_source \
     || '|' || COALESCE(paused_until, '') || '|' || heartbeat_minutes || '|' || context_window_hours FROM personas ORDER BY id",
    "SELECT id || '|' || context_status FROM messages ORDER BY seq, id",
    "SELECT id || '|' || kind || '|' || subject || '|' || text || '|' || group_name || '|' || learned_by || '|' || source_ids \
     || '|' || COALESCE(quote_message_id, '') || '|' || COALESCE(quote_start, '') || '|' || COALESCE(quote_end, '') \
     || '|' || confidence || '|' || validation || '|' || COALESCE(superseded_by, '') || '|' || exposure || '|' || learned_ts \
     || '|' || created_seq || '|' || updated_seq FROM memories ORDER BY id",
    "SELECT message_id || '|' || persona_id || '|' || item_ids || '|' || seq FROM reply_sources ORDER BY message_id",
    "SELECT persona_id || '|' || text || '|' || up_to_seq || '|' || source || '|' || seq FROM summaries ORDER BY persona_id",
];

/// The group of personas (and of data) that named no group.
pub const DEFAULT_GROUP: &str = "General";

/// A persona's groups. Empty names mean [`DEFAULT_GROUP`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PersonaGroups {
    pub group_primary: String,
    pub groups_visible: Vec<String>,
}

impl PersonaGroups {
    /// Trimmed, de-duplicated, empty → General; the primary is not repeated.
    pub fn normalised(primary: &str, visible: &[String]) -> Self {
        let clean = |g: &str| {
            let g = g.trim();
            if g.is_empty() { DEFAULT_GROUP.to_owned() } else { g.chars().take(60).collect() }
        };
        let group_primary = clean(primary);
        let mut groups_visible: Vec<String> = Vec::new();
        for g in visible.iter().map(|g| clean(g)) {
            if g != group_primary && !groups_visible.contains(&g) {
                groups_visible.push(g);
            }
        }
        Self { group_primary, groups_visible }
    }

    /// Every group this persona may read.
    pub fn readable(&self) -> Vec<String> {
        std::iter::once(self.group_primary.clone()).chain(self.groups_visible.iter().cloned()).collect()
    }
}

/// One memory about the human, as projected.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Memory {
    pub id: String,
    pub kind: MemoryKind,
    pub subject: String,
    pub text: String,
    pub group: String,
    pub learned_by: String,
    pub source_ids: Vec<String>,
    pub quote: Option<QuoteSpan>,
    pub confidence: f64,
    pub validation: Validation,
    pub superseded_by: Option<String>,
    pub exposure: f64,
    pub learned_ts: String,
    pub created_seq: i64,
    pub updated_seq: i64,
}

type Tx<'a> = Transaction<'a, Sqlite>;

const MEMORY_COLS: &str = "id, kind, subject, text, group_name, learned_by, source_ids, quote_message_id, quote_start, \
     quote_end, confidence, validation, superseded_by, exposure, learned_ts, created_seq, updated_seq";

fn memory_row(r: &SqliteRow) -> Memory {
    let kind: String = r.get(1);
    let sources: String = r.get(6);
    let quote_message: Option<String> = r.get(7);
    let validation: String = r.get(11);
    Memory {
        id: r.get(0),
        kind: MemoryKind::parse(&kind).unwrap_or(MemoryKind::Fact),
        subject: r.get(2),
        text: r.get(3),
        group: r.get(4),
        learned_by: r.get(5),
        source_ids: serde_json::from_str(&sources).unwrap_or_default(),
        quote: quote_message.map(|message_id| QuoteSpan {
            message_id,
            start: r.get::<Option<i64>, _>(8).unwrap_or(0).max(0) as u32,
            end: r.get::<Option<i64>, _>(9).unwrap_or(0).max(0) as u32,
        }),
        confidence: r.get(10),
        validation: Validation::parse(&validation),
        superseded_by: r.get(12),
        exposure: r.get(13),
        learned_ts: r.get(14),
        created_seq: r.get(15),
        updated_seq: r.get(16),
    }
}

fn json(v: &[String]) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "[]".into())
}

/// Projection of the memory events (called by `project::apply`).
pub(crate) async fn apply(tx: &mut Tx<'_>, h: &EventHeader, body: &EventBody) -> Result<()> {
    let seq = h.seq;
    let done = match body {
        EventBody::PersonaGroupsSet { persona_id, group_primary, groups_visible } => {
            sqlx::query("UPDATE personas SET group_primary = ?, groups_visible = ?, updated_seq = ? WHERE id = ?")
                .bind(group_primary)
                .bind(json(groups_visible))
                .bind(seq)
                .bind(persona_id)
                .execute(&mut **tx)
                .await
        }
        EventBody::MemoryLearned { memory_id, memory_kind: kind, subject, text, group, learned_by, source_ids, quote, confidence } => {
            sqlx::query(&format!("INSERT INTO memories ({MEMORY_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'none', NULL, 1.0, ?, ?, ?)"))
                .bind(memory_id)
                .bind(kind.as_str())
                .bind(subject)
                .bind(text)
                .bind(group)
                .bind(learned_by)
                .bind(json(source_ids))
                .bind(quote.as_ref().map(|q| q.message_id.clone()))
                .bind(quote.as_ref().map(|q| i64::from(q.start)))
                .bind(quote.as_ref().map(|q| i64::from(q.end)))
                .bind(confidence)
                .bind(&h.ts)
                .bind(seq)
                .bind(seq)
                .execute(&mut **tx)
                .await
        }
        EventBody::MemoryUpdated { memory_id, text, confidence, validation, superseded_by, add_source_ids } => {
            let sources: Option<String> = if add_source_ids.is_empty() {
                None
            } else {
                let current: Option<String> = sqlx::query_scalar("SELECT source_ids FROM memories WHERE id = ?")
                    .bind(memory_id)
                    .fetch_optional(&mut **tx)
                    .await
                    .map_err(LedgerError::Load)?;
                let mut ids: Vec<String> = current.and_then(|c| serde_json::from_str(&c).ok()).unwrap_or_default();
                for id in add_source_ids {
                    if !ids.contains(id) {
                        ids.push(id.clone());
                    }
                }
                Some(json(&ids))
            };
            sqlx::query(
                "UPDATE memories SET text = COALESCE(?, text), confidence = COALESCE(?, confidence), \
                 validation = COALESCE(?, validation), superseded_by = COALESCE(?, superseded_by), \
                 source_ids = COALESCE(?, source_ids), updated_seq = ? WHERE id = ?",
            )
            .bind(text)
            .bind(confidence)
            .bind(validation.map(Validation::as_str))
            .bind(superseded_by)
            .bind(sources)
            .bind(seq)
            .bind(memory_id)
            .execute(&mut **tx)
            .await
        }
        EventBody::ExposureDecayed { factor, .. } => {
            // Confirmed memories never decay.
            sqlx::query("UPDATE memories SET exposure = exposure * ? WHERE validation <> 'human'")
                .bind(factor)
                .execute(&mut **tx)
                .await
        }
        EventBody::ReplySources { message_id, persona_id, item_ids } => {
            // Used again: fully present again.
            for id in item_ids {
                sqlx::query("UPDATE memories SET exposure = 1.0 WHERE id = ?")
                    .bind(id)
                    .execute(&mut **tx)
                    .await
                    .map_err(LedgerError::Save)?;
            }
            sqlx::query("INSERT OR REPLACE INTO reply_sources (message_id, persona_id, item_ids, seq) VALUES (?, ?, ?, ?)")
                .bind(message_id)
                .bind(persona_id)
                .bind(json(item_ids))
                .bind(seq)
                .execute(&mut **tx)
                .await
        }
        EventBody::PersonaProfileSet { persona_id, traits, topics, source } => {
            let topics = serde_json::to_string(topics).unwrap_or_else(|_| "[]".into());
            sqlx::query("UPDATE personas SET traits = ?, topics = ?, profile_source = ?, updated_seq = ? WHERE id = ?")
                .bind(json(traits))
                .bind(topics)
                .bind(source)
                .bind(seq)
                .bind(persona_id)
                .execute(&mut **tx)
                .await
        }
        EventBody::PersonaPaused { persona_id, until } => {
            sqlx::query("UPDATE personas SET paused_until = ?, updated_seq = ? WHERE id = ?")
                .bind(until)
                .bind(seq)
                .bind(persona_id)
                .execute(&mut **tx)
                .await
        }
        EventBody::PersonaSettingsSet { persona_id, heartbeat_minutes, context_window_hours } => {
            sqlx::query("UPDATE personas SET heartbeat_minutes = ?, context_window_hours = ?, updated_seq = ? WHERE id = ?")
                .bind(i64::from(*heartbeat_minutes))
                .bind(i64::from(*context_window_hours))
                .bind(seq)
                .bind(persona_id)
                .execute(&mut **tx)
                .await
        }
        EventBody::MessageContextSet { message_id, status, .. } => {
            sqlx::query("UPDATE messages SET context_status = ? WHERE id = ?")
                .bind(status.as_str())
                .bind(message_id)
                .execute(&mut **tx)
                .await
        }
        EventBody::SummaryWritten { persona_id, text, up_to_seq, source } => {
            sqlx::query("INSERT OR REPLACE INTO summaries (persona_id, text, up_to_seq, source, seq) VALUES (?, ?, ?, ?, ?)")
                .bind(persona_id)
                .bind(text)
                .bind(up_to_seq)
                .bind(source)
                .bind(seq)
                .execute(&mut **tx)
                .await
        }
        _ => return Ok(()),
    };
    done.map_err(LedgerError::Save)?;
    Ok(())
}

/// A persona's traits, topics and settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PersonaProfile {
    pub traits: Vec<String>,
    pub topics: Vec<PersonaTopic>,
    /// none | pending | llm | human | fallback
    pub profile_source: String,
    pub paused_until: Option<String>,
    pub heartbeat_minutes: u32,
    pub context_window_hours: u32,
}

/// The latest conversation summary of a persona.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub text: String,
    pub up_to_seq: i64,
    pub source: String,
}

impl Ledger {
    pub async fn persona_groups(&self, persona_id: &str) -> Result<PersonaGroups> {
        let row = sqlx::query("SELECT group_primary, groups_visible FROM personas WHERE id = ?")
            .bind(persona_id)
            .fetch_optional(self.pool())
            .await
            .map_err(LedgerError::Load)?
            .ok_or_else(|| LedgerError::PersonaNotFound(persona_id.to_owned()))?;
        let visible: String = row.get(1);
        Ok(PersonaGroups {
            group_primary: row.get(0),
            groups_visible: serde_json::from_str(&visible).unwrap_or_default(),
        })
    }

    /// Sets a persona's groups (normalised). The human signs it.
    pub async fn set_persona_groups(&self, persona_id: &str, groups: &PersonaGroups) -> Result<PersonaGroups> {
        let g = PersonaGroups::normalised(&groups.group_primary, &groups.groups_visible);
        self.persona(persona_id).await?;
        self.append_drafts(vec![Draft {
            entity_id: persona_id.to_owned(),
            signer: HUMAN_ENTITY.into(),
            body: EventBody::PersonaGroupsSet {
                persona_id: persona_id.to_owned(),
                group_primary: g.group_primary.clone(),
                groups_visible: g.groups_visible.clone(),
            },
        }])
        .await?;
        Ok(g)
    }

    pub async fn persona_profile(&self, persona_id: &str) -> Result<PersonaProfile> {
        let row = sqlx::query(
            "SELECT traits, topics, profile_source, paused_until, heartbeat_minutes, context_window_hours FROM personas WHERE id = ?",
        )
        .bind(persona_id)
        .fetch_optional(self.pool())
        .await
        .map_err(LedgerError::Load)?
        .ok_or_else(|| LedgerError::PersonaNotFound(persona_id.to_owned()))?;
        let traits: String = row.get(0);
        let topics: String = row.get(1);
        Ok(PersonaProfile {
            traits: serde_json::from_str(&traits).unwrap_or_default(),
            topics: serde_json::from_str(&topics).unwrap_or_default(),
            profile_source: row.get(2),
            paused_until: row.get(3),
            heartbeat_minutes: row.get::<i64, _>(4).clamp(0, i64::from(u32::MAX)) as u32,
            context_window_hours: row.get::<i64, _>(5).clamp(0, i64::from(u32::MAX)) as u32,
        })
    }

    /// The messages a reply prompt may show, oldest first: every `always`
    /// message, plus the newest `last` `default` ones written within
    /// `window` of now. `never` messages are left out.
    pub async fn prompt_messages(&self, persona_id: &str, last: u32, window: time::Duration) -> Result<Vec<crate::Message>> {
        let since = crate::store::format_ts(self.now() - window);
        let cols = crate::query::MESSAGE_COLS;
        let rows = sqlx::query(&format!(
            "SELECT * FROM (SELECT {cols} FROM messages WHERE persona_id = ?1 AND context_status = 'always' \
             UNION ALL SELECT * FROM (SELECT {cols} FROM messages WHERE persona_id = ?1 AND context_status = 'default' \
             AND ts >= ?2 ORDER BY seq DESC LIMIT ?3)) ORDER BY seq"
        ))
        .bind(persona_id)
        .bind(since)
        .bind(i64::from(last))
        .fetch_all(self.pool())
        .await
        .map_err(LedgerError::Load)?;
        Ok(rows.iter().map(crate::query::message_row).collect())
    }

    /// Messages of a conversation after `after_seq`, oldest first (at most `limit`).
    pub async fn messages_after(&self, persona_id: &str, after_seq: i64, limit: u32) -> Result<Vec<crate::Message>> {
        let rows = sqlx::query(&format!(
            "SELECT {} FROM messages WHERE persona_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            crate::query::MESSAGE_COLS
        ))
        .bind(persona_id)
        .bind(after_seq)
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await
        .map_err(LedgerError::Load)?;
        Ok(rows.iter().map(crate::query::message_row).collect())
    }

    pub async fn summary(&self, persona_id: &str) -> Result<Option<Summary>> {
        let row = sqlx::query("SELECT text, up_to_seq, source FROM summaries WHERE persona_id = ?")
            .bind(persona_id)
            .fetch_optional(self.pool())
            .await
            .map_err(LedgerError::Load)?;
        Ok(row.map(|r| Summary { text: r.get(0), up_to_seq: r.get(1), source: r.get(2) }))
    }

    /// The `summary_written` events (with payloads) that cover one of the
    /// erased messages: same conversation, `up_to_seq` at or after it.
    /// `seqs[i]` is the event of `bodies[i]`.
    pub(crate) async fn summaries_covering(&self, seqs: &[i64], bodies: &[EventBody]) -> Result<Vec<i64>> {
        let mut out = Vec::new();
        for (seq, body) in seqs.iter().zip(bodies) {
            let EventBody::MessageAdded { persona_id, .. } = body else { continue };
            let found: Vec<i64> = sqlx::query_scalar(
                "SELECT e.seq FROM events e JOIN payloads p ON p.seq = e.seq WHERE e.kind = 'summary_written' \
                 AND json_extract(CAST(p.body AS TEXT), '$.persona_id') = ? \
                 AND json_extract(CAST(p.body AS TEXT), '$.up_to_seq') >= ?",
            )
            .bind(persona_id)
            .bind(seq)
            .fetch_all(self.pool())
            .await
            .map_err(LedgerError::Load)?;
            for f in found {
                if !out.contains(&f) {
                    out.push(f);
                }
            }
        }
        Ok(out)
    }

    /// When the persona or the human last wrote in this conversation (RFC 3339), if ever.
    pub async fn last_message_ts(&self, persona_id: &str) -> Result<Option<String>> {
        sqlx::query_scalar("SELECT ts FROM messages WHERE persona_id = ? ORDER BY seq DESC LIMIT 1")
            .bind(persona_id)
            .fetch_optional(self.pool())
            .await
            .map_err(LedgerError::Load)
    }

    /// Memories filed under any of `groups` (None: all of them), newest first.
    /// Superseded ones are included only when asked.
    pub async fn memories(&self, groups: Option<&[String]>, include_superseded: bool) -> Result<Vec<Memory>> {
        let mut q = sqlx::QueryBuilder::new(format!("SELECT {MEMORY_COLS} FROM memories WHERE 1"));
        if let Some(groups) = groups {
            if groups.is_empty() {
                return Ok(Vec::new());
            }
            q.push(" AND group_name IN (");
            let mut sep = q.separated(", ");
            for g in groups {
                sep.push_bind(g.clone());
            }
            q.push(")");
        }
        if !include_superseded {
            q.push(" AND superseded_by IS NULL");
        }
        q.push(" ORDER BY created_seq DESC");
        let rows = q.build().fetch_all(self.pool()).await.map_err(LedgerError::Load)?;
        Ok(rows.iter().map(memory_row).collect())
    }

    pub async fn memory(&self, id: &str) -> Result<Memory> {
        sqlx::query(&format!("SELECT {MEMORY_COLS} FROM memories WHERE id = ?"))
            .bind(id)
            .fetch_optional(self.pool())
            .await
            .map_err(LedgerError::Load)?
            .as_ref()
            .map(memory_row)
            .ok_or_else(|| LedgerError::MemoryNotFound(id.to_owned()))
    }

    /// When the last exposure decay ran (its `at`), if ever.
    pub async fn last_decay_at(&self) -> Result<Option<String>> {
        sqlx::query_scalar(
            "SELECT json_extract(CAST(p.body AS TEXT), '$.at') FROM events e JOIN payloads p ON p.seq = e.seq \
             WHERE e.kind = 'exposure_decayed' ORDER BY e.seq DESC LIMIT 1",
        )
        .fetch_optional(self.pool())
        .await
        .map_err(LedgerError::Load)
    }

    /// One message by id (None when it does not exist or was erased).
    pub async fn message(&self, id: &str) -> Result<Option<crate::Message>> {
        let row = sqlx::query(&format!("SELECT {} FROM messages WHERE id = ?", crate::query::MESSAGE_COLS))
            .bind(id)
            .fetch_optional(self.pool())
            .await
            .map_err(LedgerError::Load)?;
        Ok(row.as_ref().map(crate::query::message_row))
    }

    /// The item ids retrieval gave a reply (empty when none were recorded).
    pub async fn reply_sources(&self, message_id: &str) -> Result<Vec<String>> {
        let ids: Option<String> = sqlx::query_scalar("SELECT item_ids FROM reply_sources WHERE message_id = ?")
            .bind(message_id)
            .fetch_optional(self.pool())
            .await
            .map_err(LedgerError::Load)?;
        Ok(ids.and_then(|s| serde_json::from_str(&s).ok()).unwrap_or_default())
    }

    /// Forgets a memory for real: every event about it is erased (the
    /// existing erasure path), so its text is in no file afterwards.
    pub async fn forget_memory(&self, memory_id: &str) -> Result<crate::Erasure> {
        let seqs: Vec<i64> = sqlx::query_scalar(
            "SELECT e.seq FROM events e JOIN payloads p ON p.seq = e.seq \
             WHERE e.kind IN ('memory_learned', 'memory_updated') \
             AND json_extract(CAST(p.body AS TEXT), '$.memory_id') = ? ORDER BY e.seq",
        )
        .bind(memory_id)
        .fetch_all(self.pool())
        .await
        .map_err(LedgerError::Load)?;
        if seqs.is_empty() {
            return Err(LedgerError::MemoryNotFound(memory_id.to_owned()));
        }
        self.erase_payloads(&seqs, "memory forgotten").await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_normalised_and_empty_means_general() {
        let g = PersonaGroups::normalised("  ", &["Work".into(), " ".into(), "Work".into(), "General".into()]);
        assert_eq!(g.group_primary, "General");
        assert_eq!(g.groups_visible, vec!["Work".to_owned()]);
        assert_eq!(g.readable(), vec!["General".to_owned(), "Work".to_owned()]);
    }
}
