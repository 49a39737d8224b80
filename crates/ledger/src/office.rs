//! The office's projections and queries: obligations, bookmarks,
//! handovers, governance notes, constitutions, synthesized periods, baseline
//! narratives, token usage and quotas, persona language, reply frames.
//! Everything here is derived from events only.

use serde::Serialize;
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, Sqlite, Transaction};

use crate::body::{EventBody, HandoverAuthor, ObligationKind};
use crate::error::LedgerError;
use crate::event::{EventHeader, HASH_LEN};
use crate::query::StoredEvent;
use crate::store::{format_ts, Draft, Ledger};
use crate::Result;

type Tx<'a> = Transaction<'a, Sqlite>;

pub(crate) const TABLES: [&str; 14] = [
    "reminders",
    "bookmarks",
    "handovers",
    "governance_notes",
    "constitutions",
    "periods",
    "baselines",
    "token_usage",
    "token_quotas",
    "persona_languages",
    "reply_frames",
    "session_modes",
    "simulations",
    "office_actions",
];

/// Rows folded into `Ledger::state_digest`: every office table a replay
/// rebuilds, every column. One exception, for speed: a reply frame is
/// folded in by its message, persona and `frame_hash` (the SHA-256 its
/// builder computed over the frame), not its text or `seq`. Frames are
/// kilobytes each, one per reply, and stored on overflow pages that any
/// column after them (`seq`) or `length(frame)` makes SQLite read: at
/// 100 000 events with 20 000 frames of 4 KB that cost 450–700 ms per
/// digest, against ~50–90 ms for these three columns. The text is a
/// verbatim copy of the signed event's payload, which `verify` checks.
pub(crate) const DIGEST_SQL: [&str; 14] = [
    "SELECT id || '|' || persona_id || '|' || text || '|' || COALESCE(due_at, '') || '|' || obligation || '|' || created_seq \
     || '|' || created_ts || '|' || COALESCE(done_seq, '') || '|' || COALESCE(done_ts, '') FROM reminders ORDER BY id",
    "SELECT id || '|' || persona_id || '|' || target_id || '|' || label || '|' || seq || '|' || ts FROM bookmarks ORDER BY id",
    "SELECT seq || '|' || persona_id || '|' || session_id || '|' || text || '|' || author || '|' || reason || '|' || ts \
     FROM handovers ORDER BY seq",
    "SELECT seq || '|' || persona_id || '|' || handover_seq || '|' || note || '|' || findings || '|' || ts FROM governance_notes ORDER BY seq",
    "SELECT persona_id || '|' || version || '|' || core_directive || '|' || overrides || '|' || seq || '|' || ts \
     FROM constitutions ORDER BY persona_id, version",
    "SELECT seq || '|' || persona_id || '|' || period_start || '|' || period_end || '|' || summary FROM periods ORDER BY seq",
    "SELECT seq || '|' || persona_id || '|' || text || '|' || ts FROM baselines ORDER BY seq",
    "SELECT seq || '|' || entity_id || '|' || day || '|' || prompt_tokens || '|' || completion_tokens FROM token_usage ORDER BY seq",
    "SELECT entity_id || '|' || daily_limit || '|' || seq FROM token_quotas ORDER BY entity_id",
    "SELECT persona_id || '|' || language FROM persona_languages ORDER BY persona_id",
    "SELECT message_id || '|' || persona_id || '|' || frame_hash FROM reply_frames ORDER BY message_id",
    "SELECT persona_id || '|' || session_type || '|' || mode || '|' || seq FROM session_modes ORDER BY persona_id",
    "SELECT seq || '|' || persona_id || '|' || action || '|' || args_hash || '|' || COALESCE(state_hash, '') || '|' || level \
     FROM simulations ORDER BY seq",
    "SELECT persona_id || '|' || action || '|' || executions || '|' || first_seq || '|' || last_seq FROM office_actions \
     ORDER BY persona_id, action",
];

pub(crate) async fn clear(tx: &mut Tx<'_>) -> Result<()> {
    for table in TABLES {
        sqlx::query(&format!("DELETE FROM {table}")).execute(&mut **tx).await.map_err(LedgerError::Save)?;
    }
    Ok(())
}

fn obligation_str(k: ObligationKind) -> &'static str {
    match k {
        ObligationKind::Reminder => "reminder",
        ObligationKind::Commitment => "commitment",
    }
}

fn author_str(a: HandoverAuthor) -> &'static str {
    match a {
        HandoverAuthor::Persona => "persona",
        HandoverAuthor::System => "system",
    }
}

/// Projects one office event; other kinds are ignored.
pub(crate) async fn apply(tx: &mut Tx<'_>, h: &EventHeader, body: &EventBody) -> Result<()> {
    let seq = h.seq;
    let q = match body {
        EventBody::ReminderSet { reminder_id, persona_id, text, due_at, obligation } => sqlx::query(
            "INSERT OR REPLACE INTO reminders (id, persona_id, text, due_at, obligation, created_seq, created_ts) \
             VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(reminder_id)
        .bind(persona_id)
        .bind(text)
        .bind(due_at)
        .bind(obligation_str(*obligation))
        .bind(seq)
        .bind(&h.ts),
        EventBody::ReminderDone { reminder_id } => {
            sqlx::query("UPDATE reminders SET done_seq = ?, done_ts = ? WHERE id = ? AND done_seq IS NULL")
                .bind(seq)
                .bind(&h.ts)
                .bind(reminder_id)
        }
        EventBody::BookmarkAdded { bookmark_id, persona_id, target_id, label } => sqlx::query(
            "INSERT OR REPLACE INTO bookmarks (id, persona_id, target_id, label, seq, ts) VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(bookmark_id)
        .bind(persona_id)
        .bind(target_id)
        .bind(label)
        .bind(seq)
        .bind(&h.ts),
        EventBody::HandoverWritten { persona_id, session_id, text, author, reason } => sqlx::query(
            "INSERT INTO handovers (seq, persona_id, session_id, text, author, reason, ts) VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(seq)
        .bind(persona_id)
        .bind(session_id)
        .bind(text)
        .bind(author_str(*author))
        .bind(reason)
        .bind(&h.ts),
        EventBody::GovernanceNoteAdded { persona_id, handover_seq, note, findings } => sqlx::query(
            "INSERT INTO governance_notes (seq, persona_id, handover_seq, note, findings, ts) VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(seq)
        .bind(persona_id)
        .bind(handover_seq)
        .bind(note)
        .bind(findings.join("\n"))
        .bind(&h.ts),
        EventBody::ConstitutionSet { persona_id, version, core_directive, overrides } => sqlx::query(
            "INSERT OR REPLACE INTO constitutions (persona_id, version, core_directive, overrides, seq, ts) VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(persona_id)
        .bind(version)
        .bind(core_directive)
        .bind(overrides.join("\n"))
        .bind(seq)
        .bind(&h.ts),
        EventBody::PeriodSynthesized { persona_id, period_start, period_end, summary } => sqlx::query(
            "INSERT INTO periods (seq, persona_id, period_start, period_end, summary) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(seq)
        .bind(persona_id)
        .bind(period_start)
        .bind(period_end)
        .bind(summary),
        EventBody::BaselineNarrativeSet { persona_id, text } => {
            sqlx::query("INSERT INTO baselines (seq, persona_id, text, ts) VALUES (?, ?, ?, ?)")
                .bind(seq)
                .bind(persona_id)
                .bind(text)
                .bind(&h.ts)
        }
        EventBody::TokensUsed { entity_id, day, prompt_tokens, completion_tokens } => sqlx::query(
            "INSERT INTO token_usage (seq, entity_id, day, prompt_tokens, completion_tokens) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(seq)
        .bind(entity_id)
        .bind(day)
        .bind(prompt_tokens)
        .bind(completion_tokens),
        EventBody::TokenQuotaSet { entity_id, daily_limit } => {
            sqlx::query("INSERT OR REPLACE INTO token_quotas (entity_id, daily_limit, seq) VALUES (?, ?, ?)")
                .bind(entity_id)
                .bind(daily_limit)
                .bind(seq)
        }
        EventBody::PersonaLanguageSet { persona_id, language } => {
            sqlx::query("INSERT OR REPLACE INTO persona_languages (persona_id, language) VALUES (?, ?)")
                .bind(persona_id)
                .bind(language)
        }
        EventBody::ReplyFramed { persona_id, message_id, frame_hash, frame } => sqlx::query(
            "INSERT OR REPLACE INTO reply_frames (message_id, persona_id, frame_hash, frame, seq) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(message_id)
        .bind(persona_id)
        .bind(frame_hash)
        .bind(frame)
        .bind(seq),
        EventBody::SessionModeSet { persona_id, session_type, mode } => sqlx::query(
            "INSERT OR REPLACE INTO session_modes (persona_id, session_type, mode, seq) VALUES (?, ?, ?, ?)",
        )
        .bind(persona_id)
        .bind(session_type)
        .bind(mode)
        .bind(seq),
        EventBody::SimulationRun { persona_id, action, args_hash, level, state_hash, .. } => sqlx::query(
            "INSERT INTO simulations (seq, persona_id, action, args_hash, state_hash, level) VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(seq)
        .bind(persona_id)
        .bind(action)
        .bind(args_hash)
        .bind(state_hash)
        .bind(level),
        EventBody::ActionExecuted { persona_id, action, .. } => sqlx::query(
            "INSERT INTO office_actions (persona_id, action, executions, first_seq, last_seq) VALUES (?1, ?2, 1, ?3, ?3) \
             ON CONFLICT (persona_id, action) DO UPDATE SET executions = executions + 1, last_seq = excluded.last_seq",
        )
        .bind(persona_id)
        .bind(action)
        .bind(seq),
        _ => return Ok(()),
    };
    q.execute(&mut **tx).await.map_err(LedgerError::Save)?;
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reminder {
    pub id: String,
    pub persona_id: String,
    pub text: String,
    pub due_at: Option<String>,
    pub obligation: ObligationKind,
    pub created_seq: i64,
    pub created_ts: String,
    pub done_ts: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bookmark {
    pub id: String,
    pub persona_id: String,
    pub target_id: String,
    pub label: String,
    pub seq: i64,
    pub ts: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Handover {
    pub seq: i64,
    pub persona_id: String,
    pub session_id: String,
    pub text: String,
    pub author: HandoverAuthor,
    pub reason: String,
    pub ts: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GovernanceNote {
    pub seq: i64,
    pub persona_id: String,
    pub handover_seq: i64,
    pub note: String,
    pub findings: Vec<String>,
    pub ts: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Constitution {
    pub persona_id: String,
    pub version: u32,
    pub core_directive: String,
    pub overrides: Vec<String>,
    pub seq: i64,
    pub ts: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Period {
    pub seq: i64,
    pub persona_id: String,
    pub period_start: String,
    pub period_end: String,
    pub summary: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Baseline {
    pub seq: i64,
    pub persona_id: String,
    pub text: String,
    pub ts: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TokenDay {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// 0 means no limit.
    pub daily_limit: u32,
}

/// What the dreaming schedule needs to know about a persona since its last dream.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DreamState {
    /// Sessions (handovers) ended since.
    pub sessions: u64,
    /// When the first of those sessions ended.
    pub first_session_ts: Option<String>,
    /// Critical events since: governance notes on the persona's handovers
    /// and checkpoint restores (the world changed under it).
    pub critical: u64,
    /// The newest message of its conversation (0: none).
    pub last_message_seq: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplyFrame {
    pub message_id: String,
    pub persona_id: String,
    pub frame_hash: String,
    /// The frame as JSON text, exactly as recorded.
    pub frame: String,
    pub seq: i64,
}

fn lines(s: String) -> Vec<String> {
    if s.is_empty() {
        Vec::new()
    } else {
        s.split('\n').map(str::to_owned).collect()
    }
}

fn reminder_row(r: &SqliteRow) -> Reminder {
    let obligation: String = r.get(4);
    Reminder {
        id: r.get(0),
        persona_id: r.get(1),
        text: r.get(2),
        due_at: r.get(3),
        obligation: if obligation == "commitment" { ObligationKind::Commitment } else { ObligationKind::Reminder },
        created_seq: r.get(5),
        created_ts: r.get(6),
        done_ts: r.get(7),
    }
}

fn handover_row(r: &SqliteRow) -> Handover {
    let author: String = r.get(4);
    Handover {
        seq: r.get(0),
        persona_id: r.get(1),
        session_id: r.get(2),
        text: r.get(3),
        author: if author == "persona" { HandoverAuthor::Persona } else { HandoverAuthor::System },
        reason: r.get(5),
        ts: r.get(6),
    }
}

const NARRATED_ELSEWHERE: &str = "'reply_framed', 'tokens_used', 'token_quota_set', 'handover_written', 'governance_note_added', \
     'period_synthesized', 'baseline_narrative_set', 'constitution_set', 'persona_language_set', 'entity_key_registered', \
     'session_mode_set', 'action_executed'";
const REMINDER_COLS: &str = "id, persona_id, text, due_at, obligation, created_seq, created_ts, done_ts";
const HANDOVER_COLS: &str = "seq, persona_id, session_id, text, author, reason, ts";

impl Ledger {
    /// A persona's obligations: open ones first by deadline (undated last),
    /// then, with `include_done`, the finished ones.
    pub async fn reminders(&self, persona_id: &str, include_done: bool) -> Result<Vec<Reminder>> {
        let sql = format!(
            "SELECT {REMINDER_COLS} FROM reminders WHERE persona_id = ? {} \
             ORDER BY done_seq IS NOT NULL, due_at IS NULL, due_at, created_seq",
            if include_done { "" } else { "AND done_seq IS NULL" }
        );
        let rows = sqlx::query(&sql).bind(persona_id).fetch_all(self.pool()).await.map_err(LedgerError::Load)?;
        Ok(rows.iter().map(reminder_row).collect())
    }

    pub async fn reminder(&self, id: &str) -> Result<Option<Reminder>> {
        let sql = format!("SELECT {REMINDER_COLS} FROM reminders WHERE id = ?");
        let row = sqlx::query(&sql).bind(id).fetch_optional(self.pool()).await.map_err(LedgerError::Load)?;
        Ok(row.as_ref().map(reminder_row))
    }

    /// The newest `limit` bookmarks of a persona, newest first.
    pub async fn bookmarks(&self, persona_id: &str, limit: u32) -> Result<Vec<Bookmark>> {
        let rows = sqlx::query(
            "SELECT id, persona_id, target_id, label, seq, ts FROM bookmarks WHERE persona_id = ? ORDER BY seq DESC LIMIT ?",
        )
        .bind(persona_id)
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await
        .map_err(LedgerError::Load)?;
        Ok(rows
            .iter()
            .map(|r| Bookmark {
                id: r.get(0),
                persona_id: r.get(1),
                target_id: r.get(2),
                label: r.get(3),
                seq: r.get(4),
                ts: r.get(5),
            })
            .collect())
    }

    /// A persona's handovers, newest first.
    pub async fn handovers(&self, persona_id: &str, limit: u32) -> Result<Vec<Handover>> {
        let sql = format!("SELECT {HANDOVER_COLS} FROM handovers WHERE persona_id = ? ORDER BY seq DESC LIMIT ?");
        let rows = sqlx::query(&sql)
            .bind(persona_id)
            .bind(i64::from(limit))
            .fetch_all(self.pool())
            .await
            .map_err(LedgerError::Load)?;
        Ok(rows.iter().map(handover_row).collect())
    }

    pub async fn last_handover(&self, persona_id: &str) -> Result<Option<Handover>> {
        Ok(self.handovers(persona_id, 1).await?.pop())
    }

    /// The governance note raised about one handover, if any.
    pub async fn governance_note(&self, handover_seq: i64) -> Result<Option<GovernanceNote>> {
        let row = sqlx::query(
            "SELECT seq, persona_id, handover_seq, note, findings, ts FROM governance_notes \
             WHERE handover_seq = ? ORDER BY seq DESC LIMIT 1",
        )
        .bind(handover_seq)
        .fetch_optional(self.pool())
        .await
        .map_err(LedgerError::Load)?;
        Ok(row.map(|r| GovernanceNote {
            seq: r.get(0),
            persona_id: r.get(1),
            handover_seq: r.get(2),
            note: r.get(3),
            findings: lines(r.get(4)),
            ts: r.get(5),
        }))
    }

    /// Every version of a persona's constitution, newest first.
    pub async fn constitutions(&self, persona_id: &str) -> Result<Vec<Constitution>> {
        let rows = sqlx::query(
            "SELECT persona_id, version, core_directive, overrides, seq, ts FROM constitutions \
             WHERE persona_id = ? ORDER BY version DESC",
        )
        .bind(persona_id)
        .fetch_all(self.pool())
        .await
        .map_err(LedgerError::Load)?;
        Ok(rows
            .iter()
            .map(|r| Constitution {
                persona_id: r.get(0),
                version: r.get(1),
                core_directive: r.get(2),
                overrides: lines(r.get(3)),
                seq: r.get(4),
                ts: r.get(5),
            })
            .collect())
    }

    pub async fn constitution(&self, persona_id: &str) -> Result<Option<Constitution>> {
        Ok(self.constitutions(persona_id).await?.into_iter().next())
    }

    /// Synthesized periods ending at or after `since` (RFC 3339), oldest first.
    pub async fn periods(&self, persona_id: &str, since: &str) -> Result<Vec<Period>> {
        let rows = sqlx::query(
            "SELECT seq, persona_id, period_start, period_end, summary FROM periods \
             WHERE persona_id = ? AND period_end >= ? ORDER BY period_start, seq",
        )
        .bind(persona_id)
        .bind(since)
        .fetch_all(self.pool())
        .await
        .map_err(LedgerError::Load)?;
        Ok(rows
            .iter()
            .map(|r| Period {
                seq: r.get(0),
                persona_id: r.get(1),
                period_start: r.get(2),
                period_end: r.get(3),
                summary: r.get(4),
            })
            .collect())
    }

    pub async fn baseline(&self, persona_id: &str) -> Result<Option<Baseline>> {
        let row = sqlx::query("SELECT seq, persona_id, text, ts FROM baselines WHERE persona_id = ? ORDER BY seq DESC LIMIT 1")
            .bind(persona_id)
            .fetch_optional(self.pool())
            .await
            .map_err(LedgerError::Load)?;
        Ok(row.map(|r| Baseline { seq: r.get(0), persona_id: r.get(1), text: r.get(2), ts: r.get(3) }))
    }

    /// Tokens an entity spent on `day` (`YYYY-MM-DD`) and its daily limit.
    pub async fn token_day(&self, entity_id: &str, day: &str) -> Result<TokenDay> {
        let row = sqlx::query(
            "SELECT COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0), \
             (SELECT daily_limit FROM token_quotas WHERE entity_id = ?) FROM token_usage WHERE entity_id = ? AND day = ?",
        )
        .bind(entity_id)
        .bind(entity_id)
        .bind(day)
        .fetch_one(self.pool())
        .await
        .map_err(LedgerError::Load)?;
        Ok(TokenDay {
            prompt_tokens: row.get::<i64, _>(0).max(0) as u64,
            completion_tokens: row.get::<i64, _>(1).max(0) as u64,
            daily_limit: row.get::<Option<i64>, _>(2).unwrap_or(0).clamp(0, i64::from(u32::MAX)) as u32,
        })
    }

    pub async fn persona_language(&self, persona_id: &str) -> Result<Option<String>> {
        sqlx::query_scalar("SELECT language FROM persona_languages WHERE persona_id = ?")
            .bind(persona_id)
            .fetch_optional(self.pool())
            .await
            .map_err(LedgerError::Load)
    }

    pub async fn reply_frame(&self, message_id: &str) -> Result<Option<ReplyFrame>> {
        let row = sqlx::query("SELECT message_id, persona_id, frame_hash, frame, seq FROM reply_frames WHERE message_id = ?")
            .bind(message_id)
            .fetch_optional(self.pool())
            .await
            .map_err(LedgerError::Load)?;
        Ok(row.map(|r| ReplyFrame {
            message_id: r.get(0),
            persona_id: r.get(1),
            frame_hash: r.get(2),
            frame: r.get(3),
            seq: r.get(4),
        }))
    }

    /// The newest `limit` events of a persona's world, oldest first: its own
    /// events and its conversation's messages, without the office's
    /// bookkeeping (frames, token counts) and without what the frame already
    /// carries in its own sections (handover, notes, periods, constitution).
    pub async fn persona_events(&self, persona_id: &str, limit: u32) -> Result<Vec<StoredEvent>> {
        // The newest of two indexed look-ups (own events, conversation
        // messages), merged by SQLite in one round trip: a single filter over
        // `events` scans the whole log when the persona's events are sparse
        // (31 ms at 100 000 events).
        let sql = format!(
            "{} WHERE e.seq IN (\
               SELECT seq FROM (SELECT seq FROM events WHERE entity_id = ?1 AND kind NOT IN ({NARRATED_ELSEWHERE}) \
                 ORDER BY seq DESC LIMIT ?2) \
               UNION SELECT seq FROM (SELECT seq FROM messages WHERE persona_id = ?1 ORDER BY seq DESC LIMIT ?2) \
               ORDER BY 1 DESC LIMIT ?2) \
             ORDER BY e.seq",
            crate::query::EVENTS_WITH_PAYLOADS
        );
        let rows = sqlx::query(&sql)
            .bind(persona_id)
            .bind(i64::from(limit))
            .fetch_all(self.pool())
            .await
            .map_err(LedgerError::Load)?;
        Ok(rows.iter().map(crate::query::stored_event_row).collect())
    }

    /// Handovers written for a persona after event `after_seq`.
    pub async fn handovers_since(&self, persona_id: &str, after_seq: i64) -> Result<u64> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM handovers WHERE persona_id = ? AND seq > ?")
            .bind(persona_id)
            .bind(after_seq)
            .fetch_one(self.pool())
            .await
            .map_err(LedgerError::Load)?;
        Ok(n.max(0) as u64)
    }

    /// Sessions, critical events and the newest message of a persona after
    /// event `after_seq` (its last dream), in one indexed query.
    pub async fn dream_state(&self, persona_id: &str, after_seq: i64) -> Result<DreamState> {
        let row = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM handovers WHERE persona_id = ?1 AND seq > ?2), \
                    (SELECT ts FROM handovers WHERE persona_id = ?1 AND seq > ?2 ORDER BY seq LIMIT 1), \
                    (SELECT COUNT(*) FROM governance_notes WHERE persona_id = ?1 AND seq > ?2) \
                      + (SELECT COUNT(*) FROM events WHERE kind = 'checkpoint_restored' AND seq > ?2), \
                    (SELECT COALESCE(MAX(seq), 0) FROM messages WHERE persona_id = ?1)",
        )
        .bind(persona_id)
        .bind(after_seq)
        .fetch_one(self.pool())
        .await
        .map_err(LedgerError::Load)?;
        Ok(DreamState {
            sessions: row.get::<i64, _>(0).max(0) as u64,
            first_session_ts: row.get(1),
            critical: row.get::<i64, _>(2).max(0) as u64,
            last_message_seq: row.get(3),
        })
    }

    /// Hex Ed25519 public key registered for an entity.
    pub async fn entity_public_key(&self, entity_id: &str) -> Result<Option<String>> {
        let key: Option<Vec<u8>> = sqlx::query_scalar("SELECT public_key FROM entities WHERE id = ?")
            .bind(entity_id)
            .fetch_optional(self.pool())
            .await
            .map_err(LedgerError::Load)?;
        Ok(key.map(hex::encode))
    }

    /// How many messages a persona's conversation holds.
    pub async fn message_count(&self, persona_id: &str) -> Result<u64> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM messages WHERE persona_id = ?")
            .bind(persona_id)
            .fetch_one(self.pool())
            .await
            .map_err(LedgerError::Load)?;
        Ok(n.max(0) as u64)
    }

    /// Messages of a conversation after event `after_seq`, oldest first (at most `limit`, the newest).
    pub async fn messages_since(&self, persona_id: &str, after_seq: i64, limit: u32) -> Result<Vec<crate::Message>> {
        let mut all = self.messages(persona_id, Some(limit)).await?;
        all.retain(|m| m.seq > after_seq);
        Ok(all)
    }

    /// Reminders and bookmarks a persona created after event `after_seq`.
    pub async fn office_activity_since(&self, persona_id: &str, after_seq: i64) -> Result<(u64, u64)> {
        let row = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM reminders WHERE persona_id = ?1 AND created_seq > ?2), \
                    (SELECT COUNT(*) FROM bookmarks WHERE persona_id = ?1 AND seq > ?2)",
        )
        .bind(persona_id)
        .bind(after_seq)
        .fetch_one(self.pool())
        .await
        .map_err(LedgerError::Load)?;
        Ok((row.get::<i64, _>(0).max(0) as u64, row.get::<i64, _>(1).max(0) as u64))
    }

    /// Office records whose payload quotes what is erased: an erasure must
    /// take them too. Frames, handovers, notes, periods and baselines quote
    /// messages, found by their first characters, escaped the way the
    /// payload stores them (once, or twice inside a recorded frame);
    /// simulations name the items they would add or remove (`kind “title”`).
    pub(crate) async fn office_records_quoting(&self, erased: &[EventBody]) -> Result<Vec<i64>> {
        let mut out = Vec::new();
        for body in erased {
            let (needle, kinds) = match body {
                EventBody::MessageAdded { content, .. } => {
                    let needle: String = content.trim().chars().take(QUOTE_CHARS).collect();
                    if needle.chars().count() < 8 {
                        continue;
                    }
                    (needle, "'reply_framed', 'handover_written', 'governance_note_added', 'period_synthesized', 'baseline_narrative_set'")
                }
                EventBody::ItemSaved { item_kind, title, .. } => (format!("{item_kind} “{title}”"), "'simulation_run'"),
                _ => continue,
            };
            let once = json_escaped(&needle);
            let twice = json_escaped(&once);
            let seqs: Vec<i64> = sqlx::query_scalar(&format!(
                "SELECT e.seq FROM events e JOIN payloads p ON p.seq = e.seq WHERE e.kind IN ({kinds}) \
                 AND (instr(CAST(p.body AS TEXT), ?) > 0 OR instr(CAST(p.body AS TEXT), ?) > 0)"
            ))
            .bind(&once)
            .bind(&twice)
            .fetch_all(self.pool())
            .await
            .map_err(LedgerError::Load)?;
            out.extend(seqs);
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }
}

/// Characters of a message that identify a quote of it.
const QUOTE_CHARS: usize = 32;

/// `s` as it appears inside a JSON string (without the quotes).
fn json_escaped(s: &str) -> String {
    let quoted = serde_json::to_string(s).unwrap_or_default();
    quoted.get(1..quoted.len().saturating_sub(1)).unwrap_or_default().to_owned()
}

/// What a simulated action would change, found on a scratch copy of the
/// state (see [`Ledger::simulate_events`]); nothing here was committed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct SimulatedChanges {
    /// Kinds of the events the action would append, in order.
    pub events: Vec<String>,
    pub items_added: Vec<String>,
    pub items_removed: Vec<String>,
    pub obligations_added: Vec<String>,
    pub obligations_closed: Vec<String>,
    pub bookmarks_added: Vec<String>,
    /// The state the simulation ran against (see [`Ledger::simulation_state`]).
    #[serde(default)]
    pub state_hash: String,
}

/// The parts of the state a simulation reports on, keyed by id.
#[derive(Default)]
struct Scratch {
    items: std::collections::BTreeMap<String, String>,
    open: std::collections::BTreeMap<String, String>,
    bookmarks: std::collections::BTreeMap<String, String>,
}

async fn scratch_rows(tx: &mut Tx<'_>, sql: &str) -> Result<std::collections::BTreeMap<String, String>> {
    let rows = sqlx::query(sql).fetch_all(&mut **tx).await.map_err(LedgerError::Load)?;
    // A column of another type is a load error, not a panic.
    rows.iter().map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).collect::<std::result::Result<_, sqlx::Error>>().map_err(LedgerError::Load)
}

async fn scratch(tx: &mut Tx<'_>) -> Result<Scratch> {
    Ok(Scratch {
        items: scratch_rows(tx, "SELECT id, kind || ' “' || title || '”' FROM items").await?,
        open: scratch_rows(
            tx,
            "SELECT id, '“' || text || '”' || COALESCE(' due ' || due_at, '') FROM reminders WHERE done_seq IS NULL",
        )
        .await?,
        bookmarks: scratch_rows(tx, "SELECT id, '“' || label || '”' FROM bookmarks").await?,
    })
}

impl Scratch {
    /// SHA-256 over every row, length-prefixed: equal exactly when the
    /// parts of the state a simulation reads and reports on are equal.
    fn hash(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for (name, rows) in [("items", &self.items), ("open", &self.open), ("bookmarks", &self.bookmarks)] {
            h.update(name.as_bytes());
            h.update((rows.len() as u64).to_be_bytes());
            for (k, v) in rows {
                for s in [k, v] {
                    h.update((s.len() as u64).to_be_bytes());
                    h.update(s.as_bytes());
                }
            }
        }
        hex::encode(h.finalize())
    }
}

fn added(before: &std::collections::BTreeMap<String, String>, after: &std::collections::BTreeMap<String, String>) -> Vec<String> {
    after.iter().filter(|(k, _)| !before.contains_key(*k)).map(|(_, v)| v.clone()).collect()
}

impl Ledger {
    /// The session type and mode last set for a persona.
    pub async fn session_mode(&self, persona_id: &str) -> Result<Option<(String, String)>> {
        let row = sqlx::query("SELECT session_type, mode FROM session_modes WHERE persona_id = ?")
            .bind(persona_id)
            .fetch_optional(self.pool())
            .await
            .map_err(LedgerError::Load)?;
        Ok(row.map(|r| (r.get(0), r.get(1))))
    }

    /// Who signed the persona's current session type and mode: `human`
    /// when the person chose it, the persona when it escalated or reset it
    /// itself; None when nothing was ever set (the type's default).
    pub async fn session_mode_signer(&self, persona_id: &str) -> Result<Option<String>> {
        sqlx::query_scalar("SELECT e.signer FROM session_modes s JOIN events e ON e.seq = s.seq WHERE s.persona_id = ?")
            .bind(persona_id)
            .fetch_optional(self.pool())
            .await
            .map_err(LedgerError::Load)
    }

    /// What appending `drafts` would change, computed on a scratch copy of
    /// the state: their projections are applied inside a transaction that is
    /// always rolled back. Nothing is appended, signed or committed.
    pub async fn simulate_events(&self, drafts: &[Draft]) -> Result<SimulatedChanges> {
        let mut w = self.writer().await;
        let next = w.seq + 1;
        let mut tx = sqlx::Connection::begin(&mut w.conn).await.map_err(LedgerError::Save)?;
        let before = scratch(&mut tx).await?;
        let ts = format_ts(self.now());
        for (i, d) in (next..).zip(drafts) {
            let h = EventHeader {
                seq: i,
                id: format!("simulated-{i}"),
                ts: ts.clone(),
                entity_id: d.entity_id.clone(),
                kind: d.body.kind().to_owned(),
                signer: d.signer.clone(),
                payload_hash: [0; HASH_LEN],
                prev_hash: [0; HASH_LEN],
            };
            crate::project::apply(&mut tx, &h, &d.body).await?;
        }
        let after = scratch(&mut tx).await?;
        tx.rollback().await.map_err(LedgerError::Save)?;
        Ok(SimulatedChanges {
            events: drafts.iter().map(|d| d.body.kind().to_owned()).collect(),
            items_added: added(&before.items, &after.items),
            items_removed: added(&after.items, &before.items),
            obligations_added: added(&before.open, &after.open),
            obligations_closed: added(&after.open, &before.open),
            bookmarks_added: added(&before.bookmarks, &after.bookmarks),
            state_hash: before.hash(),
        })
    }

    /// The hash of the state simulations run against: saved items, open
    /// obligations and bookmarks (what they read and report on). Equal to
    /// the `state_hash` a simulation records when nothing there changed since.
    pub async fn simulation_state(&self) -> Result<String> {
        let mut tx = self.pool().begin().await.map_err(LedgerError::Load)?;
        let state = scratch(&mut tx).await?;
        tx.rollback().await.map_err(LedgerError::Load)?;
        Ok(state.hash())
    }

    /// Whether a simulation of this action with these arguments (by hash)
    /// was recorded for the persona against the state `state_hash`.
    pub async fn simulation_recorded(&self, persona_id: &str, action: &str, args_hash: &str, state_hash: &str) -> Result<bool> {
        let n: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM simulations WHERE persona_id = ? AND action = ? AND args_hash = ? AND state_hash = ?",
        )
        .bind(persona_id)
        .bind(action)
        .bind(args_hash)
        .bind(state_hash)
        .fetch_one(self.pool())
        .await
        .map_err(LedgerError::Load)?;
        Ok(n > 0)
    }

    /// How many times the persona carried out an action of this kind
    /// (`action_executed` events).
    pub async fn action_executions(&self, persona_id: &str, action: &str) -> Result<u64> {
        let n: Option<i64> = sqlx::query_scalar("SELECT executions FROM office_actions WHERE persona_id = ? AND action = ?")
            .bind(persona_id)
            .bind(action)
            .fetch_optional(self.pool())
            .await
            .map_err(LedgerError::Load)?;
        Ok(n.unwrap_or(0).max(0) as u64)
    }
}
