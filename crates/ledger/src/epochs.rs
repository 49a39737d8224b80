//! Key epochs: which private keys this keychain holds for the ledger's
//! signing entities, and a new epoch for those that are lost.
//!
//! A new epoch makes a new key per lost entity, stores it in the keychain,
//! then appends one `entity_key_replaced` per entity in a single commit.
//! When the human's own key is lost, its replacement comes first and is
//! self-certified (signed by the new key); the personas' replacements after
//! it are endorsed by the human key now in force. See `verify` for the rule.

use std::collections::HashMap;

use ed25519_dalek::{Signer as _, SigningKey};
use rand::rngs::OsRng;
use serde::Serialize;
use sqlx::Row;

use crate::body::{EventBody, KeyAuthority};
use crate::error::LedgerError;
use crate::keys::{KeyStoreError, KEY_READ_TIMEOUT};
use crate::store::{Draft, Ledger, HUMAN_ENTITY};
use crate::verify::key_proof_message;
use crate::Result;

/// Whether this keychain holds an entity's private key in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PrivateKeyState {
    Present,
    /// Not in the keychain (or a key that is not the one in force).
    Missing,
    /// The keychain did not answer: locked, or not running.
    Locked,
}

/// One signing entity and its key (`ledgermind keys status --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EntityKeyStatus {
    pub entity: String,
    pub name: String,
    pub public_key: String,
    pub private_key: PrivateKeyState,
}

/// One key replaced by a new epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyReplacement {
    pub entity: String,
    pub name: String,
    pub old_public_key: String,
    pub new_public_key: String,
    pub seq: i64,
    pub self_certified: bool,
}

/// The reason recorded when a new epoch replaces lost keys.
pub const LOST_KEY_REASON: &str = "the private key was missing from the keychain";

/// The human's display name in key listings.
const HUMAN_NAME: &str = "You (device key)";

impl Ledger {
    /// Every signing entity (the human and each persona that still exists)
    /// with its public key in force and whether the keychain holds its
    /// private key. Never waits on the keychain longer than a few seconds:
    /// after one read that does not answer, the rest count as locked too.
    pub async fn key_status(&self) -> Result<Vec<EntityKeyStatus>> {
        let rows = sqlx::query(
            "SELECT e.id, COALESCE(p.name, ''), e.public_key FROM entities e LEFT JOIN personas p ON p.id = e.id \
             WHERE e.id = ? OR p.id IS NOT NULL ORDER BY e.created_seq",
        )
        .bind(HUMAN_ENTITY)
        .fetch_all(self.pool())
        .await
        .map_err(LedgerError::Load)?;
        let entities: Vec<(String, String, Vec<u8>)> = rows.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect();
        let keys = self.keystore().clone();
        let accounts: Vec<String> = entities.iter().map(|(id, ..)| self.key_account(id)).collect();
        let publics: Vec<Vec<u8>> = entities.iter().map(|(_, _, pk)| pk.clone()).collect();
        let states = tokio::task::spawn_blocking(move || {
            let mut states = Vec::with_capacity(accounts.len());
            let mut locked = false;
            for (account, public) in accounts.iter().zip(&publics) {
                if locked {
                    states.push(PrivateKeyState::Locked);
                    continue;
                }
                let state = match keys.load_within(account, KEY_READ_TIMEOUT) {
                    Ok(Some(secret)) => {
                        let secret = zeroize::Zeroizing::new(secret);
                        match <[u8; 32]>::try_from(secret.as_slice()) {
                            Ok(bytes) if SigningKey::from_bytes(&bytes).verifying_key().to_bytes()[..] == public[..] => {
                                PrivateKeyState::Present
                            }
                            _ => PrivateKeyState::Missing,
                        }
                    }
                    Ok(None) => PrivateKeyState::Missing,
                    Err(e) => {
                        tracing::warn!(error = %e, "the keychain did not give a signing key");
                        locked = true;
                        PrivateKeyState::Locked
                    }
                };
                states.push(state);
            }
            states
        })
        .await
        .map_err(|e| LedgerError::Invalid(format!("key check failed: {e}")))?;
        Ok(entities
            .into_iter()
            .zip(states)
            .map(|((id, name, public), state)| EntityKeyStatus {
                name: if id == HUMAN_ENTITY { HUMAN_NAME.to_owned() } else if name.is_empty() { id.clone() } else { name },
                entity: id,
                public_key: hex::encode(public),
                private_key: state,
            })
            .collect())
    }

    /// Starts a new key epoch for every entity whose private key is missing
    /// and returns what was replaced (nothing when no key is missing). Refuses,
    /// replacing nothing, while the keychain does not answer: a locked key is
    /// not a lost one.
    pub async fn rotate_missing_keys(&self, reason: &str) -> Result<Vec<KeyReplacement>> {
        let status = self.key_status().await?;
        if let Some(s) = status.iter().find(|s| s.private_key == PrivateKeyState::Locked) {
            return Err(LedgerError::Keychain(KeyStoreError::Locked(format!(
                "the keychain did not give the key of {}; unlock it and try again (nothing was replaced)",
                s.name
            ))));
        }
        let mut missing: Vec<&EntityKeyStatus> =
            status.iter().filter(|s| s.private_key == PrivateKeyState::Missing).collect();
        if missing.is_empty() {
            return Ok(Vec::new());
        }
        // The human's replacement first: the ones after it are signed by
        // the human key it puts in force.
        missing.sort_by_key(|s| s.entity != HUMAN_ENTITY);
        let mut new_keys: HashMap<String, SigningKey> = HashMap::new();
        let mut drafts = Vec::with_capacity(missing.len());
        for s in &missing {
            let key = SigningKey::generate(&mut OsRng);
            let new_public_key = hex::encode(key.verifying_key().to_bytes());
            let proof = key.sign(&key_proof_message(&s.entity, &s.public_key, &new_public_key));
            let authority = if s.entity == HUMAN_ENTITY { KeyAuthority::NewKey } else { KeyAuthority::KeyInForce };
            drafts.push(Draft {
                entity_id: s.entity.clone(),
                signer: HUMAN_ENTITY.to_owned(),
                body: EventBody::EntityKeyReplaced {
                    entity_id: s.entity.clone(),
                    old_public_key: s.public_key.clone(),
                    new_public_key,
                    reason: reason.to_owned(),
                    authority,
                    new_key_proof: hex::encode(proof.to_bytes()),
                },
            });
            new_keys.insert(s.entity.clone(), key);
        }
        // Keys first: a key in the keychain that the ledger never put in
        // force only counts as missing (the next epoch replaces it), while
        // a key in force that the keychain never got would be lost at once.
        for (entity, key) in &new_keys {
            self.keystore().store(&self.key_account(entity), &key.to_bytes())?;
        }
        let receipts = self.append_signed_with(drafts.clone(), new_keys).await?;
        tracing::info!(replaced = receipts.len(), "new key epoch");
        Ok(missing
            .iter()
            .zip(drafts)
            .zip(receipts)
            .map(|((s, d), r)| {
                let new_public_key = match d.body {
                    EventBody::EntityKeyReplaced { new_public_key, .. } => new_public_key,
                    _ => String::new(),
                };
                KeyReplacement {
                    entity: s.entity.clone(),
                    name: s.name.clone(),
                    old_public_key: s.public_key.clone(),
                    new_public_key,
                    seq: r.seq,
                    self_certified: s.entity == HUMAN_ENTITY,
                }
            })
            .collect())
    }
}
