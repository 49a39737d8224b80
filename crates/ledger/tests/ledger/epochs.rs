//! Key epochs: lost keys are reported fast, replaced by a signed event, and
//! verify checks each event with the key in force at its time; forged or
//! history-rewriting epochs are caught.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ed25519_dalek::{Signer as _, SigningKey};
use ledger::{
    key_proof_message, EventBody, EventHeader, KeyAuthority, KeyStore, PrivateKeyState, EI_PERSONA_ID, HUMAN_ENTITY,
    LOST_KEY_REASON,
};
use sha2::{Digest, Sha256};
use sqlx::Row;

use crate::{raw, say, Fixture};

async fn with_messages(n: usize) -> Fixture {
    let f = Fixture::new().await;
    for i in 0..n {
        f.ledger.append(HUMAN_ENTITY, say(EI_PERSONA_ID, &format!("m{i}"), &format!("message {i}"))).await.expect("append");
        f.ledger
            .append(
                EI_PERSONA_ID,
                EventBody::MessageAdded {
                    message_id: format!("r{i}"),
                    persona_id: EI_PERSONA_ID.into(),
                    role: ledger::MessageRole::Persona,
                    content: format!("reply {i}"),
                    external_id: None,
                    said_at: None,
                },
            )
            .await
            .expect("append reply");
    }
    f
}

fn states(status: &[ledger::EntityKeyStatus]) -> Vec<(String, PrivateKeyState)> {
    status.iter().map(|s| (s.entity.clone(), s.private_key)).collect()
}

#[tokio::test]
async fn a_wiped_keychain_is_reported_fast_and_a_new_epoch_keeps_old_events_verifiable() {
    let f = with_messages(3).await;
    let old_human = f.ledger.key_status().await.expect("status")[0].public_key.clone();
    f.keys.wipe();
    let f = f.reopen().await;
    let status = f.ledger.key_status().await.expect("status");
    assert_eq!(
        states(&status),
        vec![(HUMAN_ENTITY.into(), PrivateKeyState::Missing), (EI_PERSONA_ID.into(), PrivateKeyState::Missing)]
    );
    assert_eq!(status[0].public_key, old_human);
    assert_eq!(status[1].name, "Ei");

    let before = f.ledger.event_count().await.expect("count");
    let t = Instant::now();
    let err = f.ledger.append(HUMAN_ENTITY, say(EI_PERSONA_ID, "x", "lost")).await.expect_err("no key");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert_eq!(err.code(), "KEY_MISSING");
    assert!(err.to_string().contains("ledgermind keys rotate --all-missing"), "{err}");
    assert_eq!(f.ledger.event_count().await.expect("count"), before);

    let replaced = f.ledger.rotate_missing_keys(LOST_KEY_REASON).await.expect("rotate");
    assert_eq!(replaced.len(), 2);
    assert_eq!(replaced[0].entity, HUMAN_ENTITY, "the human's key is replaced first");
    assert!(replaced[0].self_certified);
    assert!(!replaced[1].self_certified, "the persona's new key is endorsed by the new human key");
    assert_eq!(replaced[0].old_public_key, old_human);
    assert!(f.ledger.key_status().await.expect("status").iter().all(|s| s.private_key == PrivateKeyState::Present));
    assert!(f.ledger.rotate_missing_keys(LOST_KEY_REASON).await.expect("again").is_empty(), "nothing left to replace");

    f.ledger.append(HUMAN_ENTITY, say(EI_PERSONA_ID, "after", "new epoch")).await.expect("append after");
    let report = f.ledger.verify().await.expect("verify");
    assert!(report.ok(), "{report:?}");
    assert_eq!(report.key_epochs.len(), 2);
    assert_eq!(report.key_epochs[0].old_public_key, old_human);
    assert_eq!(report.key_epochs[0].new_public_key, replaced[0].new_public_key);
    assert!(report.key_epochs[0].self_certified && !report.key_epochs[1].self_certified);
    assert_eq!(report.key_epochs[0].reason, LOST_KEY_REASON);

    // The new keys are the ones in force after a restart too.
    let f = f.reopen().await;
    f.ledger.append(EI_PERSONA_ID, say(EI_PERSONA_ID, "later", "signed by the new persona key")).await.expect("append");
    assert!(f.ledger.verify().await.expect("verify").ok());
}

#[tokio::test]
async fn a_lost_persona_key_alone_is_replaced_under_the_human_key() {
    let f = with_messages(2).await;
    f.keys.delete(&f.ledger.key_account(EI_PERSONA_ID)).expect("delete");
    let f = f.reopen().await;
    let err = f.ledger.append(EI_PERSONA_ID, say(EI_PERSONA_ID, "x", "y")).await.expect_err("persona key lost");
    assert_eq!(err.code(), "KEY_MISSING");
    let replaced = f.ledger.rotate_missing_keys("test").await.expect("rotate");
    assert_eq!(replaced.len(), 1);
    assert_eq!(replaced[0].entity, EI_PERSONA_ID);
    assert!(!replaced[0].self_certified);
    f.ledger.append(EI_PERSONA_ID, say(EI_PERSONA_ID, "x", "y")).await.expect("append");
    let report = f.ledger.verify().await.expect("verify");
    assert!(report.ok(), "{report:?}");
    assert_eq!(report.key_epochs.len(), 1);
}

#[tokio::test]
async fn a_key_of_another_epoch_in_the_keychain_counts_as_missing() {
    let f = with_messages(1).await;
    let stranger = SigningKey::from_bytes(&[7u8; 32]);
    f.keys.store(&f.ledger.key_account(EI_PERSONA_ID), &stranger.to_bytes()).expect("store");
    let f = f.reopen().await;
    let ei = f.ledger.key_status().await.expect("status").into_iter().find(|s| s.entity == EI_PERSONA_ID).expect("ei");
    assert_eq!(ei.private_key, PrivateKeyState::Missing);
    let err = f.ledger.append(EI_PERSONA_ID, say(EI_PERSONA_ID, "x", "y")).await.expect_err("wrong key never signs");
    assert_eq!(err.code(), "KEY_MISSING");
    assert!(f.ledger.verify().await.expect("verify").ok());
}

#[tokio::test]
async fn a_keychain_that_does_not_answer_fails_within_seconds_and_replaces_nothing() {
    let f = with_messages(1).await;
    let f = f.reopen().await;
    f.keys.set_read_delay(Some(Duration::from_secs(60)));
    let t = Instant::now();
    let err = f.ledger.append(HUMAN_ENTITY, say(EI_PERSONA_ID, "x", "y")).await.expect_err("locked");
    assert_eq!(err.code(), "KEYCHAIN_UNAVAILABLE");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    let t = Instant::now();
    let status = f.ledger.key_status().await.expect("status");
    assert!(status.iter().all(|s| s.private_key == PrivateKeyState::Locked), "{status:?}");
    assert!(t.elapsed() < Duration::from_secs(10), "one wait, not one per key: {:?}", t.elapsed());
    let before = f.ledger.event_count().await.expect("count");
    f.keys.set_read_delay(Some(Duration::from_secs(60)));
    let err = f.ledger.rotate_missing_keys("x").await.expect_err("a locked key is not a lost one");
    assert_eq!(err.code(), "KEYCHAIN_UNAVAILABLE");
    assert_eq!(f.ledger.event_count().await.expect("count"), before);
    f.keys.set_read_delay(None);
    f.ledger.append(HUMAN_ENTITY, say(EI_PERSONA_ID, "x", "y")).await.expect("works once unlocked");
}

// ----- forgeries, written straight into the database as an attacker would -----

struct RawRow {
    seq: i64,
    id: String,
    ts: String,
    entity_id: String,
    kind: String,
    signer: String,
    body: Vec<u8>,
}

async fn rows(path: &std::path::Path) -> Vec<RawRow> {
    let mut conn = raw(path).await;
    sqlx::query(
        "SELECT e.seq, e.id, e.ts, e.entity_id, e.kind, e.signer, p.body FROM events e JOIN payloads p ON p.seq = e.seq ORDER BY e.seq",
    )
    .fetch_all(&mut conn)
    .await
    .expect("rows")
    .iter()
    .map(|r| RawRow {
        seq: r.get(0),
        id: r.get(1),
        ts: r.get(2),
        entity_id: r.get(3),
        kind: r.get(4),
        signer: r.get(5),
        body: r.get(6),
    })
    .collect()
}

fn row(seq: i64, entity: &str, signer: &str, body: &EventBody) -> RawRow {
    RawRow {
        seq,
        id: format!("forged-{seq}"),
        ts: "2026-11-25T12:00:00.000Z".into(),
        entity_id: entity.into(),
        kind: body.kind().into(),
        signer: signer.into(),
        body: serde_json::to_vec(body).expect("json"),
    }
}

/// Replaces every event from `rows[0].seq` on with `rows`, chained and
/// signed by `sign(row)`, bypassing the ledger (the triggers are dropped).
async fn rewrite_tail(path: &std::path::Path, rows: &[RawRow], sign: impl Fn(&RawRow) -> SigningKey) {
    let mut conn = raw(path).await;
    for t in ["events_reject_update", "events_reject_delete"] {
        sqlx::query(&format!("DROP TRIGGER IF EXISTS {t}")).execute(&mut conn).await.expect("drop trigger");
    }
    let from = rows[0].seq;
    let mut prev: [u8; 32] = if from == 1 {
        [0; 32]
    } else {
        let h: Vec<u8> = sqlx::query_scalar("SELECT hash FROM events WHERE seq = ?")
            .bind(from - 1)
            .fetch_one(&mut conn)
            .await
            .expect("prev");
        h.try_into().expect("32 bytes")
    };
    sqlx::query("DELETE FROM payloads WHERE seq >= ?").bind(from).execute(&mut conn).await.expect("delete payloads");
    sqlx::query("DELETE FROM events WHERE seq >= ?").bind(from).execute(&mut conn).await.expect("delete events");
    for r in rows {
        let header = EventHeader {
            seq: r.seq,
            id: r.id.clone(),
            ts: r.ts.clone(),
            entity_id: r.entity_id.clone(),
            kind: r.kind.clone(),
            signer: r.signer.clone(),
            payload_hash: Sha256::digest(&r.body).into(),
            prev_hash: prev,
        };
        let hash = header.hash();
        let sig = sign(r).sign(&hash).to_bytes();
        sqlx::query(
            "INSERT INTO events (seq, id, ts, entity_id, kind, signer, payload_hash, prev_hash, hash, signature) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(r.seq)
        .bind(&r.id)
        .bind(&r.ts)
        .bind(&r.entity_id)
        .bind(&r.kind)
        .bind(&r.signer)
        .bind(&header.payload_hash[..])
        .bind(&prev[..])
        .bind(&hash[..])
        .bind(&sig[..])
        .execute(&mut conn)
        .await
        .expect("insert event");
        sqlx::query("INSERT INTO payloads (seq, body) VALUES (?, ?)").bind(r.seq).bind(&r.body).execute(&mut conn).await.expect("payload");
        prev = hash;
    }
}

fn replacement(entity: &str, old: &str, new: &SigningKey, authority: KeyAuthority, proof_by: &SigningKey) -> EventBody {
    let new_public_key = hex::encode(new.verifying_key().to_bytes());
    EventBody::EntityKeyReplaced {
        entity_id: entity.into(),
        old_public_key: old.into(),
        new_key_proof: hex::encode(proof_by.sign(&key_proof_message(entity, old, &new_public_key)).to_bytes()),
        new_public_key,
        reason: "forged".into(),
        authority,
    }
}

async fn key_of(f: &Fixture, entity: &str) -> SigningKey {
    let bytes = f.keys.load(&f.ledger.key_account(entity)).expect("load").expect("present");
    SigningKey::from_bytes(&bytes.try_into().expect("32 bytes"))
}

async fn public_of(f: &Fixture, entity: &str) -> String {
    f.ledger.key_status().await.expect("status").into_iter().find(|s| s.entity == entity).expect("entity").public_key
}

async fn first_failure(f: &Fixture) -> (i64, String) {
    let report = f.ledger.verify().await.expect("verify");
    let failure = report.failure.expect("the forgery is detected");
    (failure.seq, failure.reason)
}

#[tokio::test]
async fn an_epoch_event_signed_by_a_key_that_was_never_valid_is_detected() {
    let f = with_messages(2).await;
    let n = f.ledger.event_count().await.expect("count") as i64;
    let old_ei = public_of(&f, EI_PERSONA_ID).await;
    let forger = SigningKey::from_bytes(&[9u8; 32]);
    let new = SigningKey::from_bytes(&[10u8; 32]);
    // "Endorsed by the human", but signed by the forger's key.
    let body = replacement(EI_PERSONA_ID, &old_ei, &new, KeyAuthority::KeyInForce, &new);
    rewrite_tail(&f.db_path(), &[row(n + 1, EI_PERSONA_ID, HUMAN_ENTITY, &body)], |_| forger.clone()).await;
    let (seq, reason) = first_failure(&f).await;
    assert_eq!(seq, n + 1, "{reason}");
    assert!(reason.contains("signature"), "{reason}");
}

#[tokio::test]
async fn a_self_certified_human_epoch_must_be_signed_by_its_own_new_key() {
    let f = with_messages(1).await;
    let n = f.ledger.event_count().await.expect("count") as i64;
    let old_human = public_of(&f, HUMAN_ENTITY).await;
    let new = SigningKey::from_bytes(&[11u8; 32]);
    let other = SigningKey::from_bytes(&[12u8; 32]);
    let body = replacement(HUMAN_ENTITY, &old_human, &new, KeyAuthority::NewKey, &new);
    rewrite_tail(&f.db_path(), &[row(n + 1, HUMAN_ENTITY, HUMAN_ENTITY, &body)], |_| other.clone()).await;
    let (seq, reason) = first_failure(&f).await;
    assert_eq!(seq, n + 1, "{reason}");
}

#[tokio::test]
async fn an_epoch_without_the_new_keys_proof_or_for_a_persona_on_its_own_is_detected() {
    let f = with_messages(1).await;
    let n = f.ledger.event_count().await.expect("count") as i64;
    let human = key_of(&f, HUMAN_ENTITY).await;
    let old_ei = public_of(&f, EI_PERSONA_ID).await;
    let new = SigningKey::from_bytes(&[13u8; 32]);
    let stranger = SigningKey::from_bytes(&[14u8; 32]);
    // Proof of possession made by another key: whoever wrote it does not hold the new key.
    let body = replacement(EI_PERSONA_ID, &old_ei, &new, KeyAuthority::KeyInForce, &stranger);
    rewrite_tail(&f.db_path(), &[row(n + 1, EI_PERSONA_ID, HUMAN_ENTITY, &body)], |_| human.clone()).await;
    let (seq, reason) = first_failure(&f).await;
    assert_eq!((seq, reason.contains("proof of possession")), (n + 1, true), "{reason}");
    // A persona certifying its own new key.
    let body = replacement(EI_PERSONA_ID, &old_ei, &new, KeyAuthority::NewKey, &new);
    rewrite_tail(&f.db_path(), &[row(n + 1, EI_PERSONA_ID, HUMAN_ENTITY, &body)], |_| new.clone()).await;
    let (seq, reason) = first_failure(&f).await;
    assert_eq!((seq, reason.contains("endorsement")), (n + 1, true), "{reason}");
    // Re-registering a key instead of replacing it.
    let body = EventBody::EntityKeyRegistered {
        entity_id: EI_PERSONA_ID.into(),
        entity_kind: "persona".into(),
        public_key: hex::encode(new.verifying_key().to_bytes()),
    };
    rewrite_tail(&f.db_path(), &[row(n + 1, EI_PERSONA_ID, HUMAN_ENTITY, &body)], |_| human.clone()).await;
    let (seq, reason) = first_failure(&f).await;
    assert_eq!((seq, reason.contains("key replacement event")), (n + 1, true), "{reason}");
}

#[tokio::test]
async fn an_epoch_that_names_an_old_key_not_in_force_is_detected() {
    let f = with_messages(1).await;
    let n = f.ledger.event_count().await.expect("count") as i64;
    let human = key_of(&f, HUMAN_ENTITY).await;
    let new = SigningKey::from_bytes(&[15u8; 32]);
    let not_in_force = hex::encode(SigningKey::from_bytes(&[16u8; 32]).verifying_key().to_bytes());
    let body = replacement(EI_PERSONA_ID, &not_in_force, &new, KeyAuthority::KeyInForce, &new);
    rewrite_tail(&f.db_path(), &[row(n + 1, EI_PERSONA_ID, HUMAN_ENTITY, &body)], |_| human.clone()).await;
    let (seq, reason) = first_failure(&f).await;
    assert_eq!((seq, reason.contains("not the one in force")), (n + 1, true), "{reason}");
}

/// After a real new epoch, whoever holds the new keys re-signs an old
/// message (and everything after it) with them: the old message is checked
/// with the key of its own epoch, and fails.
#[tokio::test]
async fn a_rotation_cannot_be_used_to_rewrite_events_of_an_earlier_epoch() {
    let f = with_messages(3).await;
    f.keys.wipe();
    let f = f.reopen().await;
    f.ledger.rotate_missing_keys(LOST_KEY_REASON).await.expect("rotate");
    f.ledger.append(HUMAN_ENTITY, say(EI_PERSONA_ID, "after", "after the epoch")).await.expect("append");
    assert!(f.ledger.verify().await.expect("verify").ok());
    let new_keys: HashMap<String, SigningKey> =
        [(HUMAN_ENTITY.to_owned(), key_of(&f, HUMAN_ENTITY).await), (EI_PERSONA_ID.to_owned(), key_of(&f, EI_PERSONA_ID).await)]
            .into();
    let mut tail: Vec<RawRow> = rows(&f.db_path()).await.into_iter().filter(|r| r.seq >= 5).collect();
    let target = tail.iter().position(|r| r.kind == "message_added" && r.signer == HUMAN_ENTITY).expect("an old message");
    let edited_seq = tail[target].seq;
    tail[target].body = serde_json::to_vec(&say(EI_PERSONA_ID, "m0", "I never said this")).expect("json");
    rewrite_tail(&f.db_path(), &tail, |r| new_keys[&r.signer].clone()).await;
    let (seq, reason) = first_failure(&f).await;
    assert_eq!(seq, edited_seq, "{reason}");
    assert!(reason.contains("signature"), "{reason}");
}

/// Someone with the database file alone cuts the history at a self-certified
/// epoch of their own and re-signs everything after it. By the chain rules
/// alone that is a valid history; the signed tree head kept in the keychain
/// (outside the database) catches it.
#[tokio::test]
async fn a_history_rewritten_behind_a_forged_epoch_is_caught_by_the_keychain_tree_head() {
    let f = with_messages(3).await;
    f.ledger.publish_sth().await.expect("publish");
    let old_human = public_of(&f, HUMAN_ENTITY).await;
    let old_ei = public_of(&f, EI_PERSONA_ID).await;
    let mine = SigningKey::from_bytes(&[21u8; 32]);
    let my_ei = SigningKey::from_bytes(&[22u8; 32]);
    let cut = 5;
    let mut forged = vec![
        row(cut, HUMAN_ENTITY, HUMAN_ENTITY, &replacement(HUMAN_ENTITY, &old_human, &mine, KeyAuthority::NewKey, &mine)),
        row(cut + 1, EI_PERSONA_ID, HUMAN_ENTITY, &replacement(EI_PERSONA_ID, &old_ei, &my_ei, KeyAuthority::KeyInForce, &my_ei)),
    ];
    for (i, r) in rows(&f.db_path()).await.into_iter().filter(|r| r.seq >= cut).enumerate() {
        let body = if r.signer == HUMAN_ENTITY && r.kind == "message_added" {
            serde_json::to_vec(&say(EI_PERSONA_ID, &format!("f{i}"), "a different past")).expect("json")
        } else {
            r.body
        };
        forged.push(RawRow { seq: cut + 2 + i as i64, body, ..r });
    }
    rewrite_tail(&f.db_path(), &forged, |r| if r.signer == HUMAN_ENTITY { mine.clone() } else { my_ei.clone() }).await;
    let f = f.reopen().await;
    let report = f.ledger.verify().await.expect("verify");
    assert_eq!(report.key_epochs.len(), 2, "the forged boundary is shown: {report:?}");
    let failure = report.failure.expect("caught by the tree head");
    assert!(failure.reason.contains("signed tree head"), "{}", failure.reason);
}
