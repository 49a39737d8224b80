//! Projections: the tables the UI reads, derived only from events. `apply`
//! runs inside the append transaction, so a failed projection aborts the
//! append; `clear` + replaying `apply` rebuilds them from scratch.

use sqlx::{Row, Sqlite, Transaction};

use crate::body::EventBody;
use crate::error::LedgerError;
use crate::event::{to_hash, EventHeader, HASH_LEN};
use crate::Result;

pub(crate) type Tx<'a> = Transaction<'a, Sqlite>;

pub(crate) async fn clear(tx: &mut Tx<'_>) -> Result<()> {
    for table in [
        "entities", "personas", "messages", "accounts", "erased", "items", "runtime_settings", "memories", "reply_sources",
        "summaries",
    ] {
        sqlx::query(&format!("DELETE FROM {table}"))
            .execute(&mut **tx)
            .await
            .map_err(LedgerError::Save)?;
    }
    crate::office::clear(tx).await?;
    Ok(())
}

fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.is_unique_violation())
}

pub(crate) fn name_key(name: &str) -> String {
    name.trim().to_lowercase()
}

pub(crate) async fn apply(tx: &mut Tx<'_>, h: &EventHeader, body: &EventBody) -> Result<()> {
    let seq = h.seq;
    match body {
        EventBody::LedgerCreated { .. } => {}
        EventBody::EntityKeyRegistered { entity_id, entity_kind, public_key } => {
            let key = hex::decode(public_key).map_err(|e| LedgerError::Invalid(e.to_string()))?;
            sqlx::query("INSERT OR REPLACE INTO entities (id, kind, public_key, created_seq) VALUES (?, ?, ?, ?)")
                .bind(entity_id)
                .bind(entity_kind)
                .bind(key)
                .bind(seq)
                .execute(&mut **tx)
                .await
                .map_err(LedgerError::Save)?;
        }
        EventBody::EntityKeyReplaced { entity_id, new_public_key, .. } => {
            let key = hex::decode(new_public_key).map_err(|e| LedgerError::Invalid(e.to_string()))?;
            sqlx::query("UPDATE entities SET public_key = ? WHERE id = ?")
                .bind(key)
                .bind(entity_id)
                .execute(&mut **tx)
                .await
                .map_err(LedgerError::Save)?;
        }
        EventBody::PersonaCreated { persona_id, name, short_description, long_description, model, is_system } => {
            sqlx::query(
                "INSERT INTO personas (id, name, name_key, short_description, long_description, model, is_system, archived, created_seq, updated_seq) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?)",
            )
            .bind(persona_id)
            .bind(name)
            .bind(name_key(name))
            .bind(short_description)
            .bind(long_description)
            .bind(model)
            .bind(is_system)
            .bind(seq)
            .bind(seq)
            .execute(&mut **tx)
            .await
            .map_err(|e| if is_unique_violation(&e) { LedgerError::PersonaExists(name.clone()) } else { LedgerError::Save(e) })?;
        }
        EventBody::PersonaUpdated { persona_id, name, short_description, long_description, model } => {
            let res = sqlx::query(
                "UPDATE personas SET name = COALESCE(?, name), name_key = COALESCE(?, name_key), \
                 short_description = COALESCE(?, short_description), long_description = COALESCE(?, long_description), \
                 model = COALESCE(?, model), updated_seq = ? WHERE id = ?",
            )
            .bind(name)
            .bind(name.as_deref().map(name_key))
            .bind(short_description)
            .bind(long_description)
            .bind(model)
            .bind(seq)
            .bind(persona_id)
            .execute(&mut **tx)
            .await
            .map_err(|e| {
                if is_unique_violation(&e) {
                    LedgerError::PersonaExists(name.clone().unwrap_or_default())
                } else {
                    LedgerError::Save(e)
                }
            })?;
            if res.rows_affected() == 0 {
                return Err(LedgerError::PersonaNotFound(persona_id.clone()));
            }
        }
        EventBody::PersonaArchived { persona_id, archived } => {
            sqlx::query("UPDATE personas SET archived = ?, updated_seq = ? WHERE id = ?")
                .bind(archived)
                .bind(seq)
                .bind(persona_id)
                .execute(&mut **tx)
                .await
                .map_err(LedgerError::Save)?;
        }
        EventBody::MessageAdded { message_id, persona_id, role, content, said_at, .. } => {
            // The human's own messages are read by definition.
            let read = matches!(role, crate::MessageRole::Human);
            sqlx::query(
                "INSERT INTO messages (id, persona_id, role, content, ts, read, seq) VALUES (?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(message_id)
            .bind(persona_id)
            .bind(role.as_str())
            .bind(content)
            .bind(said_at.as_deref().unwrap_or(&h.ts))
            .bind(read)
            .bind(seq)
            .execute(&mut **tx)
            .await
            .map_err(LedgerError::Save)?;
        }
        EventBody::MessagesRead { persona_id, up_to_seq } => {
            sqlx::query("UPDATE messages SET read = 1 WHERE persona_id = ? AND seq <= ? AND read = 0")
                .bind(persona_id)
                .bind(up_to_seq)
                .execute(&mut **tx)
                .await
                .map_err(LedgerError::Save)?;
        }
        EventBody::ProviderAccountAdded { name, base_url, default_model } => {
            sqlx::query(
                "INSERT INTO accounts (name, base_url, default_model, enabled, created_seq) VALUES (?, ?, ?, 1, ?)",
            )
            .bind(name)
            .bind(base_url)
            .bind(default_model)
            .bind(seq)
            .execute(&mut **tx)
            .await
            .map_err(|e| if is_unique_violation(&e) { LedgerError::AccountExists(name.clone()) } else { LedgerError::Save(e) })?;
        }
        EventBody::ProviderAccountRemoved { name } => {
            sqlx::query("DELETE FROM accounts WHERE name = ?")
                .bind(name)
                .execute(&mut **tx)
                .await
                .map_err(LedgerError::Save)?;
        }
        EventBody::PayloadErased { target_seq, .. } => {
            sqlx::query("INSERT OR REPLACE INTO erased (seq, erased_by) VALUES (?, ?)")
                .bind(target_seq)
                .bind(seq)
                .execute(&mut **tx)
                .await
                .map_err(LedgerError::Save)?;
            // A message's row derives from its own event only; other kinds
            // of erasure are followed by a full rebuild (see store).
            sqlx::query("DELETE FROM messages WHERE seq = ?")
                .bind(target_seq)
                .execute(&mut **tx)
                .await
                .map_err(LedgerError::Save)?;
        }
        // Handled by `rebuild_all`: an append containing a restore rebuilds.
        EventBody::CheckpointRestored { .. } => {}
        // ----- runtime -----
        EventBody::ItemSaved { item_id, item_kind, title, data, persona_id, .. } => {
            sqlx::query(
                "INSERT OR REPLACE INTO items (id, kind, title, data, persona_id, ts, seq) VALUES (?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(item_id)
            .bind(item_kind)
            .bind(title)
            .bind(data.to_string())
            .bind(persona_id)
            .bind(&h.ts)
            .bind(seq)
            .execute(&mut **tx)
            .await
            .map_err(LedgerError::Save)?;
        }
        EventBody::ItemDeleted { item_id, .. } => {
            sqlx::query("DELETE FROM items WHERE id = ?")
                .bind(item_id)
                .execute(&mut **tx)
                .await
                .map_err(LedgerError::Save)?;
        }
        EventBody::ToolAudited { .. } | EventBody::PiiScrubbed { .. } | EventBody::GuardFlagged { .. } => {}
        EventBody::RuntimeSettingSet { key, value } => {
            match value {
                Some(v) => sqlx::query("INSERT OR REPLACE INTO runtime_settings (key, value, seq) VALUES (?, ?, ?)")
                    .bind(key)
                    .bind(v)
                    .bind(seq)
                    .execute(&mut **tx)
                    .await,
                None => sqlx::query("DELETE FROM runtime_settings WHERE key = ?").bind(key).execute(&mut **tx).await,
            }
            .map_err(LedgerError::Save)?;
        }
        EventBody::ReminderSet { .. }
        | EventBody::ReminderDone { .. }
        | EventBody::BookmarkAdded { .. }
        | EventBody::HandoverWritten { .. }
        | EventBody::GovernanceNoteAdded { .. }
        | EventBody::ConstitutionSet { .. }
        | EventBody::PeriodSynthesized { .. }
        | EventBody::BaselineNarrativeSet { .. }
        | EventBody::TokensUsed { .. }
        | EventBody::TokenQuotaSet { .. }
        | EventBody::PersonaLanguageSet { .. }
        | EventBody::ReplyFramed { .. }
        | EventBody::SessionModeSet { .. }
        | EventBody::SimulationRun { .. }
        | EventBody::ActionExecuted { .. } => crate::office::apply(tx, h, body).await?,
        EventBody::IntentSubmitted { .. }
        | EventBody::ReasoningLogged { .. }
        | EventBody::NoteWritten { .. }
        | EventBody::StatementSigned { .. }
        | EventBody::ClarificationRequested { .. }
        | EventBody::VoiceTurn { .. }
        | EventBody::DocumentChanged { .. } => {}
        EventBody::PersonaGroupsSet { .. }
        | EventBody::MemoryLearned { .. }
        | EventBody::MemoryUpdated { .. }
        | EventBody::ReplySources { .. }
        | EventBody::ExposureDecayed { .. }
        | EventBody::PersonaProfileSet { .. }
        | EventBody::PersonaPaused { .. }
        | EventBody::PersonaSettingsSet { .. }
        | EventBody::MessageContextSet { .. }
        | EventBody::SummaryWritten { .. } => crate::memories::apply(tx, h, body).await?,
    }
    Ok(())
}

/// Rows of one multi-row insert (7 bound values each, well under SQLite's limit).
pub(crate) const INSERT_CHUNK: usize = 400;

/// `apply` for events in order: runs of plain messages go in as multi-row
/// inserts (the same rows `apply` writes), everything else one by one. A
/// replay (`replay = true`) skips updates of personas whose creation was erased.
pub(crate) async fn apply_in_order(tx: &mut Tx<'_>, events: &[(&EventHeader, &EventBody)], replay: bool) -> Result<()> {
    let mut i = 0;
    while i < events.len() {
        let run =
            events[i..].iter().take(INSERT_CHUNK).take_while(|(_, b)| matches!(b, EventBody::MessageAdded { .. })).count();
        if run >= 2 {
            insert_messages(tx, &events[i..i + run]).await?;
            i += run;
            continue;
        }
        let (h, body) = events[i];
        match apply(tx, h, body).await {
            // The persona's creation was erased: its updates have nothing to update.
            Err(LedgerError::PersonaNotFound(_)) if replay => {}
            other => other?,
        }
        i += 1;
    }
    Ok(())
}

/// `apply` for a run of `MessageAdded` events, as one statement.
async fn insert_messages(tx: &mut Tx<'_>, events: &[(&EventHeader, &EventBody)]) -> Result<()> {
    let mut q = sqlx::QueryBuilder::new("INSERT INTO messages (id, persona_id, role, content, ts, read, seq) ");
    q.push_values(events, |mut b, (h, body)| {
        if let EventBody::MessageAdded { message_id, persona_id, role, content, said_at, .. } = body {
            b.push_bind(message_id)
                .push_bind(persona_id)
                .push_bind(role.as_str())
                .push_bind(content)
                .push_bind(said_at.as_deref().unwrap_or(&h.ts))
                .push_bind(matches!(role, crate::MessageRole::Human))
                .push_bind(h.seq);
        }
    });
    q.build().execute(&mut **tx).await.map_err(LedgerError::Save)?;
    Ok(())
}

/// The ranges of events whose replay gives the state at `head`, oldest
/// first. A `checkpoint_restored` at seq `r` targeting `t` means "the state
/// at `t`, then the events after `r`", applied recursively to `t`. The ranges
/// are disjoint, so a rebuild never replays more than `head` events.
pub(crate) fn segments(head: i64, restores: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut cur = head;
    loop {
        match restores.iter().rev().find(|(r, t)| *r <= cur && *t < *r) {
            Some(&(r, t)) => {
                if r < cur {
                    out.push((r + 1, cur));
                }
                cur = t;
            }
            None => {
                if cur >= 1 {
                    out.push((1, cur));
                }
                break;
            }
        }
    }
    out.reverse();
    out
}

/// Rebuilds every projection from the events as stored in this transaction:
/// restores honoured, erased payloads skipped, erasure records kept whole.
pub(crate) async fn rebuild_all(tx: &mut Tx<'_>) -> Result<()> {
    clear(tx).await?;
    let head: Option<i64> =
        sqlx::query_scalar("SELECT MAX(seq) FROM events").fetch_one(&mut **tx).await.map_err(LedgerError::Load)?;
    let Some(head) = head else { return Ok(()) };
    let mut restores = Vec::new();
    let mut erasures = Vec::new();
    let rows = sqlx::query(
        "SELECT e.seq, p.body FROM events e JOIN payloads p ON p.seq = e.seq \
         WHERE e.kind IN ('checkpoint_restored', 'payload_erased') ORDER BY e.seq",
    )
    .fetch_all(&mut **tx)
    .await
    .map_err(LedgerError::Load)?;
    for row in rows {
        let seq: i64 = row.get(0);
        let body: Vec<u8> = row.get(1);
        match serde_json::from_slice::<EventBody>(&body) {
            Ok(EventBody::CheckpointRestored { target_seq, .. }) => restores.push((seq, target_seq)),
            Ok(EventBody::PayloadErased { target_seq, .. }) => erasures.push((target_seq, seq)),
            _ => return Err(LedgerError::Corrupt { seq, reason: "unreadable payload".into() }),
        }
    }
    for (from, to) in segments(head, &restores) {
        let rows = sqlx::query(
            "SELECT e.seq, e.id, e.ts, e.entity_id, e.kind, e.signer, e.payload_hash, e.prev_hash, p.body \
             FROM events e JOIN payloads p ON p.seq = e.seq WHERE e.seq BETWEEN ? AND ? ORDER BY e.seq",
        )
        .bind(from)
        .bind(to)
        .fetch_all(&mut **tx)
        .await
        .map_err(LedgerError::Load)?;
        let mut events = Vec::with_capacity(rows.len());
        for row in rows {
            let seq: i64 = row.get(0);
            let body: Vec<u8> = row.get(8);
            let body: EventBody = serde_json::from_slice(&body)
                .map_err(|e| LedgerError::Corrupt { seq, reason: format!("unreadable payload: {e}") })?;
            if matches!(body, EventBody::PayloadErased { .. } | EventBody::CheckpointRestored { .. }) {
                continue;
            }
            let header = EventHeader {
                seq,
                id: row.get(1),
                ts: row.get(2),
                entity_id: row.get(3),
                kind: row.get(4),
                signer: row.get(5),
                payload_hash: to_hash(&row.get::<Vec<u8>, _>(6)).unwrap_or([0; HASH_LEN]),
                prev_hash: to_hash(&row.get::<Vec<u8>, _>(7)).unwrap_or([0; HASH_LEN]),
            };
            events.push((header, body));
        }
        let refs: Vec<(&EventHeader, &EventBody)> = events.iter().map(|(h, b)| (h, b)).collect();
        apply_in_order(tx, &refs, true).await?;
    }
    for (target, by) in erasures {
        sqlx::query("INSERT OR REPLACE INTO erased (seq, erased_by) VALUES (?, ?)")
            .bind(target)
            .bind(by)
            .execute(&mut **tx)
            .await
            .map_err(LedgerError::Save)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::segments;

    #[test]
    fn segments_follow_restores_back_in_time() {
        assert_eq!(segments(10, &[]), vec![(1, 10)]);
        // restore at 8 to 5: events 1..5 then 9..10
        assert_eq!(segments(10, &[(8, 5)]), vec![(1, 5), (9, 10)]);
        // undo at 11 targeting 7 (the state just before the restore)
        assert_eq!(segments(12, &[(8, 5), (11, 7)]), vec![(1, 7), (12, 12)]);
        // undo targeting 8 (after the restore): the restore stays in effect
        assert_eq!(segments(12, &[(8, 5), (11, 8)]), vec![(1, 5), (12, 12)]);
    }
}
