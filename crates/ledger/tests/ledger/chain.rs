use ledger::{EventBody, MessageRole, EI_PERSONA_ID, HUMAN_ENTITY};

use crate::{raw, Fixture};

fn message(i: usize) -> EventBody {
    EventBody::MessageAdded {
        message_id: format!("m{i}"),
        persona_id: EI_PERSONA_ID.into(),
        role: MessageRole::Human,
        content: format!("hello number {i}"),
        external_id: None,
        said_at: None,
    }
}

#[tokio::test]
async fn a_new_ledger_has_a_genesis_with_ei_and_verifies() {
    let f = Fixture::new().await;
    let personas = f.ledger.personas(false).await.expect("personas");
    assert_eq!(personas.len(), 1);
    assert_eq!(personas[0].name, "Ei");
    assert!(personas[0].is_system);
    let report = f.ledger.verify().await.expect("verify");
    assert!(report.ok(), "{report:?}");
    assert_eq!(report.events, 4);
}

#[tokio::test]
async fn appends_survive_reopening_and_chain_on() {
    let f = Fixture::new().await;
    for i in 0..5 {
        f.ledger.append(HUMAN_ENTITY, message(i)).await.expect("append");
    }
    let (seq, head) = f.ledger.head().await;
    let f = f.reopen().await;
    assert_eq!(f.ledger.head().await, (seq, head));
    f.ledger.append(HUMAN_ENTITY, message(9)).await.expect("append after reopen");
    assert_eq!(f.ledger.messages(EI_PERSONA_ID, None).await.expect("messages").len(), 6);
    assert!(f.ledger.verify().await.expect("verify").ok());
}

#[tokio::test]
async fn receipts_link_state_before_and_after() {
    let f = Fixture::new().await;
    let a = f.ledger.append(HUMAN_ENTITY, message(1)).await.expect("append");
    let b = f.ledger.append(HUMAN_ENTITY, message(2)).await.expect("append");
    assert_eq!(b.seq, a.seq + 1);
    assert_eq!(b.state_before, a.state_after);
    assert_ne!(a.action_hash, b.action_hash);
}

#[tokio::test]
async fn triggers_reject_update_and_delete_of_events() {
    let f = Fixture::new().await;
    let mut conn = raw(&f.db_path()).await;
    let upd = sqlx::query("UPDATE events SET kind = 'x' WHERE seq = 1").execute(&mut conn).await;
    assert!(upd.is_err(), "update must be rejected");
    let del = sqlx::query("DELETE FROM events WHERE seq = 1").execute(&mut conn).await;
    assert!(del.is_err(), "delete must be rejected");
}

#[tokio::test]
async fn an_altered_payload_is_named_by_verify() {
    let f = Fixture::new().await;
    for i in 0..3 {
        f.ledger.append(HUMAN_ENTITY, message(i)).await.expect("append");
    }
    let mut conn = raw(&f.db_path()).await;
    sqlx::query("UPDATE payloads SET body = replace(body, 'number 1', 'number 7') WHERE seq = 6")
        .execute(&mut conn)
        .await
        .expect("tamper");
    let report = f.ledger.verify().await.expect("verify");
    let failure = report.failure.expect("tampering must be detected");
    assert_eq!(failure.seq, 6, "{}", failure.reason);
}

#[tokio::test]
async fn an_altered_header_byte_is_named_by_verify() {
    let f = Fixture::new().await;
    for i in 0..3 {
        f.ledger.append(HUMAN_ENTITY, message(i)).await.expect("append");
    }
    let mut conn = raw(&f.db_path()).await;
    sqlx::query("DROP TRIGGER events_reject_update").execute(&mut conn).await.expect("drop trigger");
    sqlx::query("UPDATE events SET ts = replace(ts, '.', ',') WHERE seq = 5")
        .execute(&mut conn)
        .await
        .expect("tamper");
    let failure = f.ledger.verify().await.expect("verify").failure.expect("detected");
    assert_eq!(failure.seq, 5, "{}", failure.reason);
}

#[tokio::test]
async fn a_forged_signature_is_named_by_verify() {
    let f = Fixture::new().await;
    for i in 0..3 {
        f.ledger.append(HUMAN_ENTITY, message(i)).await.expect("append");
    }
    let mut conn = raw(&f.db_path()).await;
    sqlx::query("DROP TRIGGER events_reject_update").execute(&mut conn).await.expect("drop trigger");
    sqlx::query("UPDATE events SET signature = (SELECT signature FROM events WHERE seq = 5) WHERE seq = 6")
        .execute(&mut conn)
        .await
        .expect("tamper");
    let failure = f.ledger.verify().await.expect("verify").failure.expect("detected");
    assert_eq!(failure.seq, 6, "{}", failure.reason);
}

#[tokio::test]
async fn a_missing_keychain_fails_the_append_and_writes_nothing() {
    let f = Fixture::new().await;
    let f = f.reopen().await; // empty the in-memory signer cache
    let before = f.ledger.event_count().await.expect("count");
    f.keys.set_unavailable(true);
    let err = f.ledger.append(HUMAN_ENTITY, message(1)).await.expect_err("must fail");
    assert_eq!(err.code(), "KEYCHAIN_UNAVAILABLE");
    assert_eq!(f.ledger.event_count().await.expect("count"), before);
    f.keys.set_unavailable(false);
    f.ledger.append(HUMAN_ENTITY, message(1)).await.expect("works again");
    assert!(f.ledger.verify().await.expect("verify").ok());
}

#[tokio::test]
async fn a_duplicate_persona_name_is_refused_and_nothing_is_written() {
    let f = Fixture::new().await;
    let before = f.ledger.event_count().await.expect("count");
    let err = f
        .ledger
        .append(
            HUMAN_ENTITY,
            EventBody::PersonaCreated {
                persona_id: "p2".into(),
                name: "ei".into(),
                short_description: String::new(),
                long_description: String::new(),
                model: String::new(),
                is_system: false,
            },
        )
        .await
        .expect_err("duplicate");
    assert_eq!(err.code(), "PERSONA_EXISTS");
    assert_eq!(f.ledger.event_count().await.expect("count"), before);
    // The chain head did not move either: the next append still verifies.
    f.ledger.append(HUMAN_ENTITY, message(1)).await.expect("append");
    assert!(f.ledger.verify().await.expect("verify").ok());
}

#[tokio::test]
async fn a_large_batch_is_signed_in_parallel_and_verifies() {
    let f = Fixture::new().await;
    let drafts: Vec<_> = (0..2_000).map(|i| ledger::Draft::by(HUMAN_ENTITY, message(i))).collect();
    let receipts = f.ledger.append_drafts(drafts).await.expect("batch");
    assert_eq!(receipts.len(), 2_000);
    let report = f.ledger.verify().await.expect("verify");
    assert!(report.ok(), "{report:?}");
    assert_eq!(report.events, 2_004);
}
