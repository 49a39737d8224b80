//! Forgetting for real. The payload row is deleted (secure_delete zeroes it
//! in place), a `payload_erased` event records what was erased and why, the
//! projections drop what came from it, and the WAL is checkpointed and
//! truncated so the text is in no file under the data directory. The hashed
//! header stays, so the chain still verifies.

use serde::Serialize;
use sqlx::Row;

use crate::body::EventBody;
use crate::error::LedgerError;
use crate::store::{Draft, Ledger, Receipt, EI_PERSONA_ID, HUMAN_ENTITY};
use crate::Result;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Erasure {
    /// The seqs whose payloads were erased by this call.
    pub erased: Vec<i64>,
    pub receipts: Vec<Receipt>,
}

impl Ledger {
    /// Erases one event's payload.
    pub async fn erase_payload(&self, seq: i64, reason: &str) -> Result<Receipt> {
        let mut e = self.erase_payloads(&[seq], reason).await?;
        e.receipts.pop().ok_or_else(|| LedgerError::Invalid(format!("the payload of event {seq} is already erased")))
    }

    /// Erases many payloads in one transaction. Already-erased ones are
    /// skipped; kinds replay depends on (keys, erasures, restores) refused.
    pub async fn erase_payloads(&self, seqs: &[i64], reason: &str) -> Result<Erasure> {
        let mut seqs = seqs.to_vec();
        seqs.sort_unstable();
        seqs.dedup();
        let mut targets = Vec::with_capacity(seqs.len());
        let mut only_messages = true;
        let mut erased_bodies = Vec::new();
        for &seq in &seqs {
            let row = sqlx::query("SELECT e.kind, p.body FROM events e LEFT JOIN payloads p ON p.seq = e.seq WHERE e.seq = ?")
                .bind(seq)
                .fetch_optional(self.pool())
                .await
                .map_err(LedgerError::Load)?
                .ok_or(LedgerError::EventNotFound(seq))?;
            let kind: String = row.get(0);
            let Some(body) = row.get::<Option<Vec<u8>>, _>(1) else { continue };
            let body: EventBody = serde_json::from_slice(&body)
                .map_err(|e| LedgerError::Corrupt { seq, reason: format!("unreadable payload: {e}") })?;
            if !body.is_erasable() {
                return Err(LedgerError::Invalid(format!("event {seq} ({kind}) cannot be erased: the chain depends on it")));
            }
            only_messages &= matches!(body, EventBody::MessageAdded { .. });
            targets.push(seq);
            erased_bodies.push(body);
        }
        // Summaries that cover an erased message quote it: they go too.
        for seq in self.summaries_covering(&targets, &erased_bodies).await? {
            if !targets.contains(&seq) {
                only_messages = false;
                targets.push(seq);
            }
        }
        // The office's records that quote what is erased go with it.
        for seq in self.office_records_quoting(&erased_bodies).await? {
            if !targets.contains(&seq) {
                only_messages = false;
                targets.push(seq);
            }
        }
        if targets.is_empty() {
            return Ok(Erasure { erased: Vec::new(), receipts: Vec::new() });
        }
        let drafts = targets
            .iter()
            .map(|&t| Draft::by(HUMAN_ENTITY, EventBody::PayloadErased { target_seq: t, reason: reason.to_owned() }))
            .collect();
        // Message rows derive from their own event only: deleting them is the
        // same as a rebuild. Anything else replays everything.
        let receipts = self.commit(drafts, &targets, !only_messages).await?;
        self.scrub().await?;
        self.publish_sth_quietly().await;
        Ok(Erasure { erased: targets, receipts })
    }

    /// Moves every WAL frame into the database and truncates the WAL to
    /// zero bytes, so erased content survives in no file.
    pub async fn scrub(&self) -> Result<()> {
        for attempt in 0..100 {
            let busy: i64 = {
                let mut w = self.writer().await;
                let row = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
                    .fetch_one(&mut w.conn)
                    .await
                    .map_err(LedgerError::Save)?;
                row.get(0)
            };
            if busy == 0 {
                return Ok(());
            }
            tracing::debug!(attempt, "readers hold the WAL; retrying the checkpoint");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        Err(LedgerError::DataDir("the WAL could not be emptied: another reader keeps it busy".into()))
    }

    async fn seqs_where(&self, kinds: &str, json_filter: &str, value: &str) -> Result<Vec<i64>> {
        let sql = format!(
            "SELECT e.seq FROM events e JOIN payloads p ON p.seq = e.seq \
             WHERE e.kind IN ({kinds}) AND json_extract(CAST(p.body AS TEXT), '$.{json_filter}') = ? ORDER BY e.seq"
        );
        sqlx::query_scalar(&sql).bind(value).fetch_all(self.pool()).await.map_err(LedgerError::Load)
    }

    /// Erases one message (by its message id) everywhere.
    pub async fn erase_message(&self, message_id: &str) -> Result<Receipt> {
        let seqs = self.seqs_where("'message_added'", "message_id", message_id).await?;
        let Some(&seq) = seqs.first() else {
            return Err(LedgerError::Invalid(format!("no message {message_id} (or it is already erased)")));
        };
        self.erase_payload(seq, "message deleted").await
    }

    /// Archives (or unarchives) a persona. Ei cannot be archived.
    pub async fn archive_persona(&self, id_or_name: &str, archived: bool) -> Result<Receipt> {
        let p = self.find_persona(id_or_name).await?;
        if p.is_system {
            return Err(LedgerError::Invalid(format!("{} is built in and cannot be archived", p.name)));
        }
        let draft = Draft {
            entity_id: p.id.clone(),
            signer: HUMAN_ENTITY.into(),
            body: EventBody::PersonaArchived { persona_id: p.id, archived },
        };
        let mut r = self.append_drafts(vec![draft]).await?;
        r.pop().ok_or_else(|| LedgerError::Invalid("empty append".into()))
    }

    /// Deletes an archived persona: erases the payloads of its creation and
    /// updates and of every message of its conversation, and so its rows.
    /// Its key registration stays (the chain's signatures need it).
    /// `with_human_data` also erases what it learned about the human (the
    /// `memory_learned` events it signed for).
    pub async fn delete_persona(&self, id_or_name: &str, with_human_data: bool) -> Result<Erasure> {
        let p = self.find_persona(id_or_name).await?;
        if p.is_system {
            return Err(LedgerError::Invalid(format!("{} is built in and cannot be deleted", p.name)));
        }
        if !p.archived {
            return Err(LedgerError::PersonaNotArchived(p.name));
        }
        let mut seqs = self
            .seqs_where(
                "'persona_created', 'persona_updated', 'message_added', 'persona_profile_set', 'summary_written'",
                "persona_id",
                &p.id,
            )
            .await?;
        if with_human_data {
            seqs.extend(self.seqs_where("'memory_learned'", "learned_by", &p.id).await?);
            // The memories' later updates (edits, merges) quote them too.
            let learned: Vec<String> = sqlx::query_scalar("SELECT id FROM memories WHERE learned_by = ?")
                .bind(&p.id)
                .fetch_all(self.pool())
                .await
                .map_err(LedgerError::Load)?;
            for memory_id in learned {
                seqs.extend(self.seqs_where("'memory_updated'", "memory_id", &memory_id).await?);
            }
            seqs.sort_unstable();
            seqs.dedup();
        }
        self.erase_payloads(&seqs, "persona deleted").await
    }

    /// Erases a saved item's content (runtime `forget`): every event that
    /// saved it. Returns the erased seqs (empty when there was nothing).
    pub async fn erase_item(&self, item_id: &str, reason: &str) -> Result<Erasure> {
        let seqs = self.seqs_where("'item_saved'", "item_id", item_id).await?;
        self.erase_payloads(&seqs, reason).await
    }

    /// Erases every message, every saved item and every persona except Ei.
    pub async fn delete_all_memories(&self) -> Result<Erasure> {
        let mut seqs: Vec<i64> =
            sqlx::query_scalar("SELECT e.seq FROM events e JOIN payloads p ON p.seq = e.seq WHERE e.kind IN ('message_added', 'item_saved')")
                .fetch_all(self.pool())
                .await
                .map_err(LedgerError::Load)?;
        let personas: Vec<i64> = sqlx::query_scalar(
            "SELECT e.seq FROM events e JOIN payloads p ON p.seq = e.seq \
             WHERE e.kind IN ('persona_created', 'persona_updated') \
             AND json_extract(CAST(p.body AS TEXT), '$.persona_id') <> ?",
        )
        .bind(EI_PERSONA_ID)
        .fetch_all(self.pool())
        .await
        .map_err(LedgerError::Load)?;
        seqs.extend(personas);
        self.erase_payloads(&seqs, "all memories deleted").await
    }
}
