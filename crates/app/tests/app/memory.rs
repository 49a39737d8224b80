//! Retrieval in the reply pipeline: an old relevant message reaches the
//! prompt although it is far outside the recent history, and nothing
//! crosses from one persona's conversation to another's.

use std::path::PathBuf;

use crate::{await_reply, Harness};

fn write_conversation(h: &Harness, name: &str, persona: &str, secret: &str) -> PathBuf {
    let mut rows = Vec::new();
    for i in 0..60 {
        let (speaker, text) = match i {
            3 => ("human", secret.to_owned()),
            _ if i % 2 == 0 => ("human", format!("small talk about the weekend and the weather, number {i}")),
            _ => (persona, format!("that sounds lovely, tell me more ({i})")),
        };
        rows.push(serde_json::json!({
            "id": format!("{name}-{i}"), "speaker": speaker, "text": text,
            "timestamp": format!("2025-0{}-1{}T10:00:00Z", 1 + i / 20, i % 10),
        }));
    }
    let path = h.dir.path().join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_string(&rows).expect("json")).expect("write");
    path
}

#[tokio::test]
async fn a_reply_prompt_carries_an_old_relevant_message_beyond_the_history() {
    let h = Harness::new(&["Ingrid, from Bergen!"]).await;
    let ada = h.engine.personas().create_persona("Ada", "A friend").await.expect("create");
    let file = write_conversation(&h, "ada", "Ada", "My grandmother Ingrid grew up in Bergen by the harbour");
    let report = h.engine.memory().import_conversation("Ada", &file).await.expect("import");
    assert_eq!(report.report.imported, 60);

    let mut rx = h.engine.subscribe();
    h.engine.conversation().send_message("Ada", "Do you remember where my grandmother grew up?").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");

    let prompt = &h.provider.requests()[0].messages;
    // 12 recent messages + the system message; the old turn is not among them…
    assert!(prompt.iter().skip(1).all(|m| !m.content.contains("Ingrid")), "not in the recent history");
    // …but recall put it into the system message.
    assert!(prompt[0].content.contains("From earlier conversations"), "{}", prompt[0].content);
    assert!(prompt[0].content.contains("My grandmother Ingrid grew up in Bergen"), "{}", prompt[0].content);

    // The CLI's recall ranks it too (after the question just asked, which is now stored).
    let view = h.engine.memory().recall("Ada", "Do you remember where my grandmother grew up?", 5).await.expect("recall");
    let hit = view.results.iter().find(|r| r.id == "ada-3").expect("the old turn is in the top 5");
    assert_eq!(hit.kind, "message");
    assert_eq!(hit.persona_id, ada.id);
    assert!(hit.source_ids.is_empty());
    // The new messages are indexed as they are written.
    let view = h.engine.memory().recall("Ada", "Bergen", 10).await.expect("recall");
    assert!(view.results.iter().any(|r| r.text.contains("Ingrid, from Bergen!")), "the reply is indexed");
}

#[tokio::test]
async fn no_persona_recalls_or_is_prompted_with_another_conversation() {
    let h = Harness::new(&["I don't know.", "Pixel!"]).await;
    let ada = h.engine.personas().create_persona("Ada", "").await.expect("create");
    let bob = h.engine.personas().create_persona("Bob", "").await.expect("create");
    let a = write_conversation(&h, "ada", "Ada", "my favourite tea is smoky lapsang souchong");
    let b = write_conversation(&h, "bob", "Bob", "my cat is called Pixel and hates the vacuum cleaner");
    h.engine.memory().import_conversation("Ada", &a).await.expect("import");
    h.engine.memory().import_conversation("Bob", &b).await.expect("import");

    // Ada is asked about Bob's secret: neither recall nor the prompt has it.
    for q in ["What is my cat called?", "Pixel vacuum cleaner cat", "weekend weather"] {
        let view = h.engine.memory().recall("Ada", q, 50).await.expect("recall");
        assert!(view.results.iter().all(|r| r.persona_id == ada.id && !r.id.starts_with("bob")), "leak for {q}");
        let view = h.engine.memory().recall("Bob", q, 50).await.expect("recall");
        assert!(view.results.iter().all(|r| r.persona_id == bob.id), "leak for {q}");
    }
    let mut rx = h.engine.subscribe();
    h.engine.conversation().send_message("Ada", "What is my cat Pixel called, the one that hates the vacuum?").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    let prompt = &h.provider.requests()[0].messages;
    assert!(prompt.iter().all(|m| !m.content.contains("vacuum cleaner")), "Bob's conversation leaked into Ada's prompt");

    // Bob does get his own memory.
    h.engine.conversation().send_message("Bob", "What is my cat called?").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    let prompt = &h.provider.requests()[1].messages;
    assert!(prompt[0].content.contains("Pixel and hates the vacuum cleaner"), "{}", prompt[0].content);

    // Ei sees every conversation.
    let view = h.engine.memory().recall("Ei", "Pixel vacuum cleaner", 5).await.expect("recall");
    assert!(view.results.iter().any(|r| r.id == "bob-3"), "Ei finds Bob's turn");
    assert!(view.results.iter().any(|r| r.persona_id == ada.id), "and Ada's question");
}

#[tokio::test]
async fn a_bad_row_imports_nothing_and_names_the_row() {
    let h = Harness::new(&[]).await;
    h.engine.personas().create_persona("Ada", "").await.expect("create");
    let path = h.dir.path().join("bad.json");
    std::fs::write(
        &path,
        r#"[{"id":"1","speaker":"human","text":"hello","timestamp":"2025-01-01T00:00:00Z"},
            {"id":"2","speaker":"Ada","text":"hi","timestamp":"2025-01-01T00:00:01Z"},
            {"id":"3","speaker":"Mallory","text":"boo","timestamp":"2025-01-01T00:00:02Z"}]"#,
    )
    .expect("write");
    let before = h.engine.ledger().event_count().await.expect("count");
    let err = h.engine.memory().import_conversation("Ada", &path).await.expect_err("rejected");
    assert_eq!(err.code, "IMPORT_INVALID");
    assert!(err.message.starts_with("row 2:"), "{}", err.message);
    assert_eq!(h.engine.ledger().event_count().await.expect("count"), before);
    assert!(h.engine.conversation().list_messages("Ada").await.expect("list").is_empty());
    // Without model files recall still works, keyword-only, and says so.
    assert!(h.engine.memory().memory_status().contains("keyword"), "{}", h.engine.memory().memory_status());
}

pub(crate) fn files_containing(dir: &std::path::Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if std::fs::read(&path).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle)) {
                hits.push(path);
            }
        }
    }
    hits
}

#[tokio::test]
async fn an_erased_message_leaves_every_file_of_the_profile_including_the_search_index() {
    // Lowercase and one token, so the FTS index stores it verbatim.
    let marker = "zebrafinchmarker";
    let h = Harness::new(&["noted"]).await;
    let mut rx = h.engine.subscribe();
    let (sent, _) = h.engine.conversation().send_message("Ei", &format!("my locker code word is {marker}")).await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    h.engine.vault().save_checkpoint(10, "with the secret").await.expect("checkpoint");
    // Searchable before: the index holds it (keyword search needs no model).
    let found = h.engine.memory().recall("Ei", marker, 5).await.expect("recall");
    assert!(found.results.iter().any(|r| r.text.contains(marker)), "indexed before erasure");
    assert!(
        files_containing(h.dir.path(), marker.as_bytes()).iter().any(|p| p.to_string_lossy().contains("index")),
        "the marker must be in the index files before"
    );

    h.engine.vault().erase_message(&sent.id).await.expect("erase");
    let hits = files_containing(h.dir.path(), marker.as_bytes());
    assert!(hits.is_empty(), "erased text still in {hits:?}");
    assert!(h.engine.memory().recall("Ei", marker, 5).await.expect("recall").results.is_empty());
    assert!(h.engine.vault().verify().await.expect("verify").ok);
    // And after a restart (the index is re-derived from the ledger).
    let h = h.restart(&[]).await;
    assert!(files_containing(h.dir.path(), marker.as_bytes()).is_empty());
    assert!(h.engine.memory().recall("Ei", marker, 5).await.expect("recall").results.is_empty());
}

#[tokio::test]
async fn a_damaged_or_deleted_search_index_is_rebuilt_from_the_ledger() {
    let marker = "harpsichordmarker";
    let h = Harness::new(&["noted"]).await;
    let mut rx = h.engine.subscribe();
    h.engine.conversation().send_message("Ei", &format!("I play the {marker} on sundays")).await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    let h = h.restart(&[]).await;
    assert!(!h.engine.memory().recall("Ei", marker, 5).await.expect("recall").results.is_empty());
    h.engine.shutdown().await;

    // Garbage over the index file, its journal gone.
    let index = h.dir.path().join("index.db");
    let side = |suffix: &str| h.dir.path().join(format!("index.db{suffix}"));
    std::fs::write(&index, vec![0x5a_u8; 64 * 1024]).expect("damage the index");
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(side(suffix));
    }
    let h = h.restart(&[]).await;
    let found = h.engine.memory().recall("Ei", marker, 5).await.expect("recall after the rebuild");
    assert!(found.results.iter().any(|r| r.text.contains(marker)), "re-derived from the ledger");
    h.engine.shutdown().await;

    // The index file deleted; a damaged -wal and -shm stay behind.
    std::fs::remove_file(&index).expect("delete the index");
    let side = |suffix: &str| h.dir.path().join(format!("index.db{suffix}"));
    for suffix in ["-wal", "-shm"] {
        std::fs::write(side(suffix), vec![0xa5_u8; 40 * 1024]).expect("stale journal");
    }
    let h = h.restart(&[]).await;
    let found = h.engine.memory().recall("Ei", marker, 5).await.expect("recall after the rebuild");
    assert!(found.results.iter().any(|r| r.text.contains(marker)), "re-derived from the ledger");
}

#[tokio::test]
async fn an_imported_message_shows_the_time_it_was_said_also_after_a_rebuild() {
    let h = Harness::new(&["Hello again!"]).await;
    h.engine.personas().create_persona("Ada", "A friend").await.expect("create");
    let file = write_conversation(&h, "ada", "Ada", "My grandmother Ingrid grew up in Bergen by the harbour");
    h.engine.memory().import_conversation("Ada", &file).await.expect("import");
    let mut rx = h.engine.subscribe();
    h.engine.conversation().send_message("Ada", "Hi!").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");

    let times = |views: &[app::MessageView]| -> Vec<(String, String)> {
        views.iter().map(|m| (m.content.clone(), m.ts.clone())).collect()
    };
    let before = times(&h.engine.conversation().list_messages("Ada").await.expect("messages"));
    let secret = before.iter().find(|(text, _)| text.contains("Ingrid")).expect("imported");
    assert_eq!(secret.1, "2025-01-13T10:00:00.000Z", "the row's own time, not the import's");
    let today = before.iter().find(|(text, _)| text == "Hi!").expect("sent");
    assert!(today.1.as_str() > "2026-", "a message sent now keeps the time it was sent: {}", today.1);

    h.engine.ledger().rebuild_projections().await.expect("rebuild");
    let after = times(&h.engine.conversation().list_messages("Ada").await.expect("messages"));
    assert_eq!(before, after, "the ledger alone gives the same times");
}
