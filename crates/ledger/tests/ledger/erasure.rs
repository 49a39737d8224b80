use ledger::{EventBody, LedgerError, EI_PERSONA_ID, HUMAN_ENTITY};

use crate::{files_containing, say, Fixture};

#[tokio::test]
async fn an_erased_message_is_in_no_file_and_verify_stays_green() {
    let f = Fixture::new().await;
    let marker = "UNIQUE-ERASE-MARKER-91c2d";
    for i in 0..50 {
        f.ledger.append(HUMAN_ENTITY, say(EI_PERSONA_ID, &format!("m{i}"), &format!("filler {i}"))).await.expect("append");
    }
    let r = f.ledger.append(HUMAN_ENTITY, say(EI_PERSONA_ID, "secret", marker)).await.expect("append");
    for i in 50..80 {
        f.ledger.append(HUMAN_ENTITY, say(EI_PERSONA_ID, &format!("m{i}"), &format!("filler {i}"))).await.expect("append");
    }
    f.ledger.save_checkpoint(10, "before forgetting").await.expect("save");
    assert!(!files_containing(f.dir.path(), marker.as_bytes()).is_empty(), "the marker must be on disk before");

    let erased = f.ledger.erase_message("secret").await.expect("erase");
    assert_eq!(erased.kind, "payload_erased");
    let hits = files_containing(f.dir.path(), marker.as_bytes());
    assert!(hits.is_empty(), "erased text still in {hits:?}");
    assert!(f.ledger.messages(EI_PERSONA_ID, None).await.expect("messages").iter().all(|m| m.id != "secret"));
    let report = f.ledger.verify().await.expect("verify");
    assert!(report.ok(), "{report:?}");
    // The event's header is still there, its payload gone.
    let ev = f.ledger.events(Some(r.seq + 1), 1).await.expect("events");
    assert_eq!(ev[0].seq, r.seq);
    assert!(ev[0].payload.is_none());
    // A rebuild agrees with the incremental erase.
    let d = f.ledger.state_digest().await.expect("digest");
    f.ledger.rebuild_projections().await.expect("rebuild");
    assert_eq!(f.ledger.state_digest().await.expect("digest"), d);
    // Erasing it again, or erasing a key registration, is refused.
    assert!(f.ledger.erase_payload(r.seq, "again").await.is_err());
    assert!(f.ledger.erase_payload(1, "keys").await.is_err());
    // After a reopen too.
    let f = f.reopen().await;
    assert!(f.ledger.verify().await.expect("verify").ok());
    assert!(files_containing(f.dir.path(), marker.as_bytes()).is_empty());
}

#[tokio::test]
async fn deleting_a_persona_needs_archiving_and_erases_its_words() {
    let f = Fixture::new().await;
    let l = &f.ledger;
    let marker_desc = "PERSONA-DESC-MARKER-55ab";
    let marker_msg = "PERSONA-MSG-MARKER-66cd";
    let pk = l.create_key("p1").expect("key");
    l.append_drafts(vec![
        ledger::Draft {
            entity_id: "p1".into(),
            signer: HUMAN_ENTITY.into(),
            body: EventBody::EntityKeyRegistered { entity_id: "p1".into(), entity_kind: "persona".into(), public_key: pk },
        },
        ledger::Draft {
            entity_id: "p1".into(),
            signer: HUMAN_ENTITY.into(),
            body: EventBody::PersonaCreated {
                persona_id: "p1".into(),
                name: "Bob".into(),
                short_description: marker_desc.into(),
                long_description: String::new(),
                model: String::new(),
                is_system: false,
            },
        },
    ])
    .await
    .expect("create");
    l.append(HUMAN_ENTITY, say("p1", "b1", marker_msg)).await.expect("msg");
    l.append(HUMAN_ENTITY, say(EI_PERSONA_ID, "e1", "to Ei")).await.expect("msg");
    let e = l.delete_persona("Bob", false).await.expect_err("not archived");
    assert!(matches!(e, LedgerError::PersonaNotArchived(_)));
    assert_eq!(e.code(), "PERSONA_NOT_ARCHIVED");
    assert!(l.archive_persona("Ei", true).await.is_err(), "Ei cannot be archived");
    l.archive_persona("Bob", true).await.expect("archive");
    let erasure = l.delete_persona("bob", true).await.expect("delete");
    assert_eq!(erasure.erased.len(), 2);
    assert!(l.find_persona("p1").await.is_err());
    assert!(l.messages("p1", None).await.expect("messages").is_empty());
    assert_eq!(l.messages(EI_PERSONA_ID, None).await.expect("messages").len(), 1);
    // The key registration stays.
    assert!(l.all_events().await.expect("events").iter().any(|e| e.kind == "entity_key_registered" && e.entity_id == "p1"));
    for m in [marker_desc, marker_msg] {
        let hits = files_containing(f.dir.path(), m.as_bytes());
        assert!(hits.is_empty(), "{m} still in {hits:?}");
    }
    assert!(l.verify().await.expect("verify").ok());
    let d = l.state_digest().await.expect("digest");
    l.rebuild_projections().await.expect("rebuild");
    assert_eq!(l.state_digest().await.expect("digest"), d);
    // The name is free again.
    assert!(l.find_persona("Bob").await.is_err());
}

#[tokio::test]
async fn delete_all_memories_keeps_ei_and_the_chain() {
    let f = Fixture::new().await;
    let l = &f.ledger;
    let marker = "ALL-MEMORIES-MARKER-0e0e";
    for i in 0..20 {
        l.append(HUMAN_ENTITY, say(EI_PERSONA_ID, &format!("m{i}"), &format!("{marker} {i}"))).await.expect("append");
    }
    let erasure = l.delete_all_memories().await.expect("delete all");
    assert_eq!(erasure.erased.len(), 20);
    assert!(l.messages(EI_PERSONA_ID, None).await.expect("messages").is_empty());
    assert_eq!(l.personas(true).await.expect("personas").len(), 1);
    assert!(files_containing(f.dir.path(), marker.as_bytes()).is_empty());
    assert!(l.verify().await.expect("verify").ok());
    // The ledger keeps working.
    l.append(HUMAN_ENTITY, say(EI_PERSONA_ID, "after", "new life")).await.expect("append");
    assert!(l.verify().await.expect("verify").ok());
}

/// What is derived from a message (a memory) is written only while the
/// message exists, checked under the writer lock that erasure takes too.
#[tokio::test]
async fn nothing_derived_from_an_erased_message_is_written() {
    let f = Fixture::new().await;
    f.ledger.append(HUMAN_ENTITY, say(EI_PERSONA_ID, "m1", "my cat is called Pixel")).await.expect("append");
    let derived = || {
        vec![ledger::Draft::by(
            EI_PERSONA_ID,
            EventBody::MessageAdded {
                message_id: "note-1".into(),
                persona_id: EI_PERSONA_ID.into(),
                role: ledger::MessageRole::Persona,
                content: "Pixel the cat".into(),
                external_id: None,
                said_at: None,
            },
        )]
    };
    let sources = vec!["m1".to_owned()];
    let written = f.ledger.append_drafts_citing(derived(), &sources).await.expect("append");
    assert!(written.is_some_and(|r| r.len() == 1));
    f.ledger.erase_message("m1").await.expect("erase");
    let before = f.ledger.event_count().await.expect("count");
    let written = f.ledger.append_drafts_citing(derived(), &sources).await.expect("no error, nothing written");
    assert!(written.is_none());
    assert_eq!(f.ledger.event_count().await.expect("count"), before);
}
