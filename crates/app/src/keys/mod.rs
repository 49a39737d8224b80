//! Signing keys as the shells see them: which private keys this keychain
//! holds for the ledger's entities, and a new key epoch for the lost ones.
//! The rules (who signs a replacement, what verify accepts) are the ledger's.
//!
//! Public surface: [`Keys`] and its views.

pub(crate) mod views;

use std::sync::Arc;

use crate::context::Context;
use crate::events::AppEvent;
use crate::Result;
pub use views::{KeyEpochView, KeyReplacementView, KeyStatusView};

fn state_name(s: ledger::PrivateKeyState) -> &'static str {
    match s {
        ledger::PrivateKeyState::Present => "present",
        ledger::PrivateKeyState::Missing => "missing",
        ledger::PrivateKeyState::Locked => "locked",
    }
}

/// The signing keys of the ledger's entities, as this keychain holds them.
pub struct Keys {
    ctx: Arc<Context>,
}

impl Keys {
    pub fn new(ctx: Arc<Context>) -> Self {
        Self { ctx }
    }

    /// Verify's key epochs, with the names the person knows.
    pub(crate) async fn epoch_views(&self, epochs: Vec<ledger::KeyEpoch>) -> Vec<KeyEpochView> {
        let mut views = Vec::with_capacity(epochs.len());
        for e in epochs {
            let name = if e.entity_id == ledger::HUMAN_ENTITY {
                "You".to_owned()
            } else {
                self.ctx.ledger.persona(&e.entity_id).await.map(|p| p.name).unwrap_or_else(|_| e.entity_id.clone())
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
            .ctx.ledger
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
        let replaced = self.ctx.ledger.rotate_missing_keys(ledger::LOST_KEY_REASON).await?;
        for r in &replaced {
            self.ctx.emit(AppEvent::LedgerAppended { seq: r.seq, kind: "entity_key_replaced".to_owned() });
        }
        if !replaced.is_empty() {
            self.ctx.wake.notify_one();
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
