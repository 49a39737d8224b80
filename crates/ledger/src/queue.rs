//! The persisted LLM work queue. Operational state, not memory: rows change
//! in place and finished work is removed, but nothing queued is lost on a
//! crash or restart (running items go back to pending on open).

use serde::Serialize;
use sqlx::sqlite::SqliteRow;
use sqlx::Row;
use time::OffsetDateTime;

use crate::error::LedgerError;
use crate::store::{format_ts, Ledger};
use crate::Result;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueState {
    Pending,
    Running,
    Dead,
}

impl QueueState {
    fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Dead => "dead",
        }
    }
    fn parse(s: &str) -> Self {
        match s {
            "running" => Self::Running,
            "dead" => Self::Dead,
            _ => Self::Pending,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueItem {
    pub id: String,
    /// 0 = high, 1 = normal, 2 = low.
    pub priority: i64,
    pub kind: String,
    pub persona_id: Option<String>,
    pub body: serde_json::Value,
    pub state: QueueState,
    pub attempts: i64,
    pub last_error: Option<String>,
    pub enqueued_at: String,
    pub not_before: String,
}

const COLS: &str = "id, priority, kind, persona_id, body, state, attempts, last_error, enqueued_at, not_before";

fn item_row(r: &SqliteRow) -> QueueItem {
    let body: String = r.get(4);
    let state: String = r.get(5);
    QueueItem {
        id: r.get(0),
        priority: r.get(1),
        kind: r.get(2),
        persona_id: r.get(3),
        body: serde_json::from_str(&body).unwrap_or(serde_json::Value::Null),
        state: QueueState::parse(&state),
        attempts: r.get(6),
        last_error: r.get(7),
        enqueued_at: r.get(8),
        not_before: r.get(9),
    }
}

/// Work to queue, possibly in the same transaction as the events it follows
/// from (see `Ledger::append_and_enqueue`).
#[derive(Debug, Clone)]
pub struct NewJob {
    pub kind: String,
    /// 0 = high, 1 = normal, 2 = low.
    pub priority: i64,
    pub persona_id: Option<String>,
    pub body: serde_json::Value,
}

pub(crate) async fn insert_job(conn: &mut sqlx::SqliteConnection, job: &NewJob, now: OffsetDateTime) -> Result<QueueItem> {
    insert_job_at(conn, job, now, now).await
}

async fn insert_job_at(
    conn: &mut sqlx::SqliteConnection,
    job: &NewJob,
    now: OffsetDateTime,
    not_before: OffsetDateTime,
) -> Result<QueueItem> {
    let id = uuid::Uuid::now_v7().to_string();
    let (now, not_before) = (format_ts(now), format_ts(not_before));
    sqlx::query(&format!("INSERT INTO queue ({COLS}) VALUES (?, ?, ?, ?, ?, 'pending', 0, NULL, ?, ?) RETURNING {COLS}"))
        .bind(&id)
        .bind(job.priority)
        .bind(&job.kind)
        .bind(&job.persona_id)
        .bind(job.body.to_string())
        .bind(&now)
        .bind(&not_before)
        .fetch_one(conn)
        .await
        .map(|r| item_row(&r))
        .map_err(LedgerError::Save)
}

impl Ledger {
    pub async fn enqueue(
        &self,
        kind: &str,
        priority: i64,
        persona_id: Option<&str>,
        body: &serde_json::Value,
    ) -> Result<QueueItem> {
        self.enqueue_at(kind, priority, persona_id, body, self.now()).await
    }

    /// Queues work that must not start before `not_before`.
    pub async fn enqueue_at(
        &self,
        kind: &str,
        priority: i64,
        persona_id: Option<&str>,
        body: &serde_json::Value,
        not_before: OffsetDateTime,
    ) -> Result<QueueItem> {
        let job = NewJob { kind: kind.to_owned(), priority, persona_id: persona_id.map(str::to_owned), body: body.clone() };
        let now = self.now();
        let mut conn = self.writer_conn().await;
        let item = insert_job_at(&mut conn, &job, now, not_before.max(now)).await?;
        self.queue_changed.notify_one();
        Ok(item)
    }

    /// Resolves when queued work may have become ready (something was
    /// queued, put back, re-prioritised or re-timed) since the last wait.
    pub async fn queue_changed(&self) {
        self.queue_changed.notified().await
    }

    /// Takes the most urgent ready item (priority, then age) and marks it running.
    ///
    /// The claim is not flushed to disk on its own (the next durable commit
    /// carries it): losing it in a power cut changes nothing, because running
    /// items are put back to pending when the ledger opens anyway.
    pub async fn take_next(&self, now: OffsetDateTime) -> Result<Option<QueueItem>> {
        let now = format_ts(now);
        let mut conn = self.writer_conn().await;
        sqlx::query("PRAGMA synchronous = NORMAL").execute(&mut *conn).await.map_err(LedgerError::Save)?;
        let taken = sqlx::query(&format!(
            "UPDATE queue SET state = 'running', attempts = attempts + 1 WHERE id = (\
               SELECT id FROM queue WHERE state = 'pending' AND not_before <= ? \
               ORDER BY priority, enqueued_at, id LIMIT 1) RETURNING {COLS}"
        ))
        .bind(now)
        .fetch_optional(&mut *conn)
        .await
        .map(|r| r.as_ref().map(item_row))
        .map_err(LedgerError::Save);
        let restore = if self.durable() { "PRAGMA synchronous = FULL" } else { "PRAGMA synchronous = NORMAL" };
        sqlx::query(restore).execute(&mut *conn).await.map_err(LedgerError::Save)?;
        taken
    }

    pub async fn finish_item(&self, id: &str) -> Result<()> {
        let mut conn = self.writer_conn().await;
        sqlx::query("DELETE FROM queue WHERE id = ?").bind(id).execute(&mut *conn).await.map_err(LedgerError::Save)?;
        Ok(())
    }

    pub async fn retry_item(&self, id: &str, error: &str, not_before: OffsetDateTime) -> Result<()> {
        let mut conn = self.writer_conn().await;
        sqlx::query("UPDATE queue SET state = 'pending', last_error = ?, not_before = ? WHERE id = ?")
            .bind(error)
            .bind(format_ts(not_before))
            .bind(id)
            .execute(&mut *conn)
            .await
            .map_err(LedgerError::Save)?;
        self.queue_changed.notify_one();
        Ok(())
    }

    pub async fn dead_letter(&self, id: &str, error: &str) -> Result<()> {
        let mut conn = self.writer_conn().await;
        sqlx::query("UPDATE queue SET state = 'dead', last_error = ? WHERE id = ?")
            .bind(error)
            .bind(id)
            .execute(&mut *conn)
            .await
            .map_err(LedgerError::Save)?;
        Ok(())
    }

    /// Delays pending work of `kind` for a persona to `not_before` (e.g.
    /// extraction waits until a conversation has gone quiet). Returns how many.
    pub async fn postpone(&self, kind: &str, persona_id: &str, not_before: OffsetDateTime) -> Result<u64> {
        let mut conn = self.writer_conn().await;
        let r = sqlx::query("UPDATE queue SET not_before = ? WHERE kind = ? AND persona_id = ? AND state = 'pending'")
            .bind(format_ts(not_before))
            .bind(kind)
            .bind(persona_id)
            .execute(&mut *conn)
            .await
            .map_err(LedgerError::Save)?;
        self.queue_changed.notify_one();
        Ok(r.rows_affected())
    }

    /// Puts running work back without counting the attempt (it was
    /// preempted by more urgent work, not failed).
    pub async fn requeue_item(&self, id: &str) -> Result<()> {
        let mut conn = self.writer_conn().await;
        sqlx::query("UPDATE queue SET state = 'pending', attempts = MAX(attempts - 1, 0) WHERE id = ?")
            .bind(id)
            .execute(&mut *conn)
            .await
            .map_err(LedgerError::Save)?;
        self.queue_changed.notify_one();
        Ok(())
    }

    // ----- memory: per-item priority, deferral, recall -----

    /// Changes the priority of pending work; false when it is not pending
    /// (running, dead-lettered or gone).
    pub async fn set_priority(&self, id: &str, priority: i64) -> Result<bool> {
        let mut conn = self.writer_conn().await;
        let r = sqlx::query("UPDATE queue SET priority = ? WHERE id = ? AND state = 'pending'")
            .bind(priority)
            .bind(id)
            .execute(&mut *conn)
            .await
            .map_err(LedgerError::Save)?;
        self.queue_changed.notify_one();
        Ok(r.rows_affected() > 0)
    }

    /// Puts running work back to wait until `not_before`, attempt not counted
    /// (e.g. a reply to a paused persona waits for the pause to end).
    pub async fn defer_item(&self, id: &str, not_before: OffsetDateTime) -> Result<()> {
        let mut conn = self.writer_conn().await;
        sqlx::query("UPDATE queue SET state = 'pending', attempts = MAX(attempts - 1, 0), not_before = ? WHERE id = ?")
            .bind(format_ts(not_before))
            .bind(id)
            .execute(&mut *conn)
            .await
            .map_err(LedgerError::Save)?;
        self.queue_changed.notify_one();
        Ok(())
    }

    /// Removes pending (not running) work of `kind` whose body's `field`
    /// equals `value`; returns how many were removed.
    pub async fn remove_pending(&self, kind: &str, field: &str, value: &str) -> Result<u64> {
        if !field.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(LedgerError::Invalid(format!("not a field name: {field}")));
        }
        let mut conn = self.writer_conn().await;
        let r = sqlx::query(&format!(
            "DELETE FROM queue WHERE kind = ? AND state = 'pending' AND json_extract(body, '$.{field}') = ?"
        ))
        .bind(kind)
        .bind(value)
        .execute(&mut *conn)
        .await
        .map_err(LedgerError::Save)?;
        Ok(r.rows_affected())
    }

    /// Drops a dead-lettered item for good (the human dismissed it).
    pub async fn discard_dead(&self, id: &str) -> Result<bool> {
        let mut conn = self.writer_conn().await;
        let r = sqlx::query("DELETE FROM queue WHERE id = ? AND state = 'dead'")
            .bind(id)
            .execute(&mut *conn)
            .await
            .map_err(LedgerError::Save)?;
        Ok(r.rows_affected() > 0)
    }

    // ----- end memory -----

    /// After a crash, work that was running is pending again.
    pub async fn requeue_running(&self) -> Result<u64> {
        let mut conn = self.writer_conn().await;
        let r = sqlx::query("UPDATE queue SET state = 'pending' WHERE state = 'running'")
            .execute(&mut *conn)
            .await
            .map_err(LedgerError::Save)?;
        self.queue_changed.notify_one();
        Ok(r.rows_affected())
    }

    /// When the earliest pending item may start (None: nothing is pending),
    /// so a worker can sleep until then instead of polling.
    pub async fn next_not_before(&self) -> Result<Option<OffsetDateTime>> {
        let earliest: Option<String> = sqlx::query_scalar("SELECT MIN(not_before) FROM queue WHERE state = 'pending'")
            .fetch_one(self.pool())
            .await
            .map_err(LedgerError::Load)?;
        Ok(earliest.and_then(|t| OffsetDateTime::parse(&t, &time::format_description::well_known::Rfc3339).ok()))
    }

    pub async fn queue_items(&self, state: Option<QueueState>) -> Result<Vec<QueueItem>> {
        let rows = sqlx::query(&format!(
            "SELECT {COLS} FROM queue WHERE (?1 IS NULL OR state = ?1) ORDER BY priority, enqueued_at, id"
        ))
        .bind(state.map(QueueState::as_str))
        .fetch_all(self.pool())
        .await
        .map_err(LedgerError::Load)?;
        Ok(rows.iter().map(item_row).collect())
    }
}
