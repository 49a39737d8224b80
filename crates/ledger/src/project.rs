//! Projections: the tables the UI reads, derived only from events. `apply`
//! runs inside the append transaction, so a failed projection aborts the
//! append; `clear` + replaying `apply` rebuilds them from scratch.

use sqlx::{Sqlite, Transaction};

use crate::body::EventBody;
use crate::error::LedgerError;
use crate::event::EventHeader;
use crate::Result;

type Tx<'a> = Transaction<'a, Sqlite>;

pub(crate) async fn clear(tx: &mut Tx<'_>) -> Result<()> {
    for table in ["entities", "personas", "messages", "accounts", "erased"] {
        sqlx::query(&format!("DELETE FROM {table}"))
            .execute(&mut **tx)
            .await
            .map_err(LedgerError::Save)?;
    }
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
        EventBody::MessageAdded { message_id, persona_id, role, content, .. } => {
            // The human's own messages are read by definition.
            let read = matches!(role, crate::MessageRole::Human);
            sqlx::query(
                "INSERT INTO messages (id, persona_id, role, content, ts, read, seq) VALUES (?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(message_id)
            .bind(persona_id)
            .bind(role.as_str())
            .bind(content)
            .bind(&h.ts)
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
        }
    }
    Ok(())
}
