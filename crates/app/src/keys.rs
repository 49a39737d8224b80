//! Signing keys as the shells see them: which private keys this keychain
//! holds for the ledger's entities, and a new key epoch for the lost ones.
//! The rules (who signs a replacement, what verify accepts) are the ledger's.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::engine::Engine;
use crate::views::AppEvent;
use crate::Result;

/// One signing entity: `private_key` is `present`, `missing` or `locked`.
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct KeyStatusView {
    pub entity: String,
    pub name: String,
    pub public_key: String,
    pub private_key: String,
}

/// One key a new epoch replaced.
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct KeyReplacementView {
    pub entity: String,
    pub name: String,
    pub old_public_key: String,
    pub new_public_key: String,
    #[ts(type = "number")]
    pub seq: i64,
    pub self_certified: bool,
}

/// One key epoch boundary found by verify ("keys replaced on …").
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct KeyEpochView {
    #[ts(type = "number")]
    pub seq: i64,
    pub ts: String,
    pub entity_id: String,
    /// The entity's name as shown to the person ("You" for the human).
    pub name: String,
    pub old_public_key: String,
    pub new_public_key: String,
    pub reason: String,
    pub self_certified: bool,
}

fn state_name(s: ledger::PrivateKeyState) -> &'static str {
    match s {
        ledger::PrivateKeyState::Present => "present",
        ledger::PrivateKeyState::Missing => "missing",
        ledger::PrivateKeyState::Locked => "locked",
    }
}

impl Engine {
    /// Verify's key epochs, with the names the person knows.
    pub(crate) async fn epoch_views(&self, epochs: Vec<ledger::KeyEpoch>) -> Vec<KeyEpochView> {
        let mut views = Vec::with_capacity(epochs.len());
        for e in epochs {
            let name = if e.entity_id == ledger::HUMAN_ENTITY {
                "You".to_owned()
            } else {
                self.ledger.persona(&e.entity_id).await.map(|p| p.name).unwrap_or_else(|_| e.entity_id.clone())
            };
            views.push(KeyEpochView {
                seq: e.seq,
                ts: e.ts,
                entity_id: e.entity_id,
                name,
                old_public_key: e.old_public_key,
                new_public_key: e.new_public_key,
                reason: e.reason,
                self_certified: e.self_certified,
            });
        }
        views
    }

    /// Every signing entity and whether this keychain holds its private key
    /// (answers within seconds even when the keychain does not).
    pub async fn key_status(&self) -> Result<Vec<KeyStatusView>> {
        Ok(self
            .ledger
            .key_status()
            .await?
            .into_iter()
            .map(|s| KeyStatusView {
                private_key: state_name(s.private_key).to_owned(),
                entity: s.entity,
                name: s.name,
                public_key: s.public_key,
            })
            .collect())
    }

    /// Starts a new key epoch for every entity whose private key is missing.
    /// Replies queued while the keys were missing go out afterwards.
    pub async fn rotate_missing_keys(&self) -> Result<Vec<KeyReplacementView>> {
        let replaced = self.ledger.rotate_missing_keys(ledger::LOST_KEY_REASON).await?;
        for r in &replaced {
            self.emit(AppEvent::LedgerAppended { seq: r.seq, kind: "entity_key_replaced".to_owned() });
        }
        if !replaced.is_empty() {
            self.wake.notify_one();
        }
        Ok(replaced
            .into_iter()
            .map(|r| KeyReplacementView {
                entity: r.entity,
                name: r.name,
                old_public_key: r.old_public_key,
                new_public_key: r.new_public_key,
                seq: r.seq,
                self_certified: r.self_certified,
            })
            .collect())
    }
}
