//! Save slots. A checkpoint is a pointer into the ledger — `(seq, name,
//! created_at, state_digest)` — not a copy of the data. Restoring appends a
//! `checkpoint_restored` event and the projections are rebuilt as of the
//! target seq (see `project::rebuild_all`): nothing after it is deleted, a
//! restore is undone by another restore, and since no snapshot is stored,
//! erased content cannot come back from a checkpoint.

use serde::Serialize;
use sqlx::{Connection, Row};
use time::OffsetDateTime;

use crate::body::EventBody;
use crate::error::LedgerError;
use crate::store::{format_ts, Ledger, Receipt, HUMAN_ENTITY};
use crate::Result;

/// Auto-save slots, FIFO: 0 is the oldest, the newest is the highest used.
pub const AUTO_SLOTS: std::ops::Range<u8> = 0..10;
/// Manual, named slots: overwrite and delete allowed.
pub const MANUAL_SLOTS: std::ops::Range<u8> = 10..15;
/// An auto-save is taken this often while something changed.
pub const AUTOSAVE_INTERVAL: time::Duration = time::Duration::seconds(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointKind {
    Auto,
    Manual,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckpointInfo {
    pub slot: u8,
    pub kind: CheckpointKind,
    /// The ledger seq this slot restores to.
    pub seq: i64,
    pub name: String,
    pub created_at: String,
    /// `state_digest()` when the slot was saved.
    pub state_digest: String,
}

/// Auto-save policy, pure: save when the ledger moved since the newest
/// auto-save and at least `interval` has passed since it (or when there is
/// none yet and the ledger has events).
pub fn autosave_due(
    last: Option<(i64, OffsetDateTime)>,
    head_seq: i64,
    now: OffsetDateTime,
    interval: time::Duration,
) -> bool {
    match last {
        None => head_seq > 0,
        Some((seq, at)) => head_seq != seq && now - at >= interval,
    }
}

fn check_slot(slot: i64) -> Result<u8> {
    u8::try_from(slot)
        .ok()
        .filter(|s| AUTO_SLOTS.contains(s) || MANUAL_SLOTS.contains(s))
        .ok_or(LedgerError::CheckpointInvalidSlot(slot))
}

fn manual_slot(slot: i64) -> Result<u8> {
    let s = check_slot(slot)?;
    if AUTO_SLOTS.contains(&s) {
        return Err(LedgerError::CheckpointSlotProtected(s));
    }
    Ok(s)
}

fn row_info(r: &sqlx::sqlite::SqliteRow) -> CheckpointInfo {
    let slot: i64 = r.get(0);
    let slot = slot.clamp(0, 14) as u8;
    CheckpointInfo {
        slot,
        kind: if AUTO_SLOTS.contains(&slot) { CheckpointKind::Auto } else { CheckpointKind::Manual },
        seq: r.get(1),
        name: r.get(2),
        created_at: r.get(3),
        state_digest: r.get(4),
    }
}

const COLS: &str = "slot, seq, name, created_at, state_digest";

impl Ledger {
    /// Every used slot, by slot number.
    pub async fn checkpoints(&self) -> Result<Vec<CheckpointInfo>> {
        let rows = sqlx::query(&format!("SELECT {COLS} FROM checkpoints ORDER BY slot"))
            .fetch_all(self.pool())
            .await
            .map_err(LedgerError::Load)?;
        Ok(rows.iter().map(row_info).collect())
    }

    pub async fn checkpoint(&self, slot: i64) -> Result<CheckpointInfo> {
        let s = check_slot(slot)?;
        let row = sqlx::query(&format!("SELECT {COLS} FROM checkpoints WHERE slot = ?"))
            .bind(i64::from(s))
            .fetch_optional(self.pool())
            .await
            .map_err(LedgerError::Load)?;
        row.as_ref().map(row_info).ok_or(LedgerError::CheckpointSlotEmpty(s))
    }

    /// Saves the current state into manual slot 10-14 (overwriting it).
    pub async fn save_checkpoint(&self, slot: i64, name: &str) -> Result<CheckpointInfo> {
        let s = manual_slot(slot)?;
        let name = name.trim();
        if name.chars().count() > 120 {
            return Err(LedgerError::Invalid("a checkpoint name is at most 120 characters".into()));
        }
        let name = if name.is_empty() { format!("Save {s}") } else { name.to_owned() };
        let info = self.write_slot(Some(s), &name).await?;
        self.publish_sth_quietly().await;
        Ok(info)
    }

    /// Takes an auto-save now (FIFO over slots 0-9).
    pub async fn autosave(&self) -> Result<CheckpointInfo> {
        let info = self.write_slot(None, "Auto-save").await?;
        self.publish_sth_quietly().await;
        Ok(info)
    }

    /// What the engine calls on a timer: auto-saves when [`autosave_due`].
    pub async fn autosave_if_changed(&self) -> Result<Option<CheckpointInfo>> {
        let last = self
            .checkpoints()
            .await?
            .into_iter()
            .filter(|c| c.kind == CheckpointKind::Auto)
            .max_by_key(|c| c.slot)
            .map(|c| {
                let at = OffsetDateTime::parse(&c.created_at, &time::format_description::well_known::Rfc3339)
                    .unwrap_or(OffsetDateTime::UNIX_EPOCH);
                (c.seq, at)
            });
        let (head, _) = self.head().await;
        if !autosave_due(last, head, self.now(), AUTOSAVE_INTERVAL) {
            return Ok(None);
        }
        self.autosave().await.map(Some)
    }

    /// `slot` None: the next auto slot (dropping slot 0 and shifting when full).
    async fn write_slot(&self, slot: Option<u8>, name: &str) -> Result<CheckpointInfo> {
        let mut w = self.writer().await;
        // The writer lock freezes the head while the digest is read.
        let seq = w.seq;
        let digest = self.state_digest().await?;
        let created_at = format_ts(self.now());
        let mut tx = w.conn.begin().await.map_err(LedgerError::Save)?;
        let slot = match slot {
            Some(s) => s,
            None => {
                let used: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM checkpoints WHERE slot < ?")
                    .bind(i64::from(AUTO_SLOTS.end))
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(LedgerError::Load)?;
                if used < i64::from(AUTO_SLOTS.end) {
                    used.clamp(0, 9) as u8
                } else {
                    sqlx::query("DELETE FROM checkpoints WHERE slot = 0")
                        .execute(&mut *tx)
                        .await
                        .map_err(LedgerError::Save)?;
                    for s in 1..i64::from(AUTO_SLOTS.end) {
                        sqlx::query("UPDATE checkpoints SET slot = slot - 1 WHERE slot = ?")
                            .bind(s)
                            .execute(&mut *tx)
                            .await
                            .map_err(LedgerError::Save)?;
                    }
                    AUTO_SLOTS.end - 1
                }
            }
        };
        sqlx::query("INSERT OR REPLACE INTO checkpoints (slot, seq, name, created_at, state_digest) VALUES (?, ?, ?, ?, ?)")
            .bind(i64::from(slot))
            .bind(seq)
            .bind(name)
            .bind(&created_at)
            .bind(&digest)
            .execute(&mut *tx)
            .await
            .map_err(LedgerError::Save)?;
        tx.commit().await.map_err(LedgerError::Save)?;
        Ok(CheckpointInfo {
            slot,
            kind: if AUTO_SLOTS.contains(&slot) { CheckpointKind::Auto } else { CheckpointKind::Manual },
            seq,
            name: name.to_owned(),
            created_at,
            state_digest: digest,
        })
    }

    /// Deletes manual slot 10-14. Auto-saves cannot be deleted.
    pub async fn delete_checkpoint(&self, slot: i64) -> Result<()> {
        let s = manual_slot(slot)?;
        let mut w = self.writer().await;
        let res = sqlx::query("DELETE FROM checkpoints WHERE slot = ?")
            .bind(i64::from(s))
            .execute(&mut w.conn)
            .await
            .map_err(LedgerError::Save)?;
        if res.rows_affected() == 0 {
            return Err(LedgerError::CheckpointSlotEmpty(s));
        }
        Ok(())
    }

    /// Restores a slot: appends `checkpoint_restored` and resets the
    /// projections to the state as of the slot's seq. Nothing is deleted.
    pub async fn restore_checkpoint(&self, slot: i64) -> Result<Receipt> {
        let info = self.checkpoint(slot).await?;
        let r = self.append_restore(Some(info.slot), info.seq).await?;
        Ok(r)
    }

    /// Resets the projections to the state as of `target_seq` (an undo, or
    /// any point in history), as a `checkpoint_restored` event.
    pub async fn restore_to_seq(&self, target_seq: i64) -> Result<Receipt> {
        self.append_restore(None, target_seq).await
    }

    /// Undoes the latest restore: restores the state just before it.
    pub async fn undo_restore(&self) -> Result<Receipt> {
        let last: Option<i64> =
            sqlx::query_scalar("SELECT MAX(seq) FROM events WHERE kind = 'checkpoint_restored'")
                .fetch_one(self.pool())
                .await
                .map_err(LedgerError::Load)?;
        let r = last.ok_or_else(|| LedgerError::Invalid("there is no restore to undo".into()))?;
        self.append_restore(None, r - 1).await
    }

    async fn append_restore(&self, slot: Option<u8>, target_seq: i64) -> Result<Receipt> {
        let receipt = self.append(HUMAN_ENTITY, EventBody::CheckpointRestored { slot, target_seq }).await?;
        self.publish_sth_quietly().await;
        Ok(receipt)
    }

    /// Publishes the tree head; a keychain failure is logged, not fatal.
    pub(crate) async fn publish_sth_quietly(&self) {
        if let Err(e) = self.publish_sth().await {
            tracing::warn!(error = %e, "could not publish the signed tree head");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn autosave_policy() {
        let t0 = OffsetDateTime::UNIX_EPOCH;
        let min = time::Duration::seconds(60);
        assert!(autosave_due(None, 5, t0, min));
        assert!(!autosave_due(None, 0, t0, min));
        assert!(!autosave_due(Some((5, t0)), 5, t0 + time::Duration::hours(1), min), "nothing changed");
        assert!(!autosave_due(Some((5, t0)), 6, t0 + time::Duration::seconds(59), min), "too soon");
        assert!(autosave_due(Some((5, t0)), 6, t0 + min, min));
    }
}
