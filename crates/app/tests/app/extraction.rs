//! Memory with a scripted model: extraction (scan → match → update),
//! malformed JSON, group visibility as a security boundary (recall, reply
//! prompts, memory lists), "memories used", confirm/edit/forget.

use std::sync::Arc;
use std::time::Duration;

use app::{AppEvent, DataDir, Engine, EngineConfig};
use ledger::MemoryKeyStore;
use providers::ScriptedProvider;

use crate::await_reply;

struct Setup {
    _dir: tempfile::TempDir,
    provider: Arc<ScriptedProvider>,
    engine: Arc<Engine>,
}

/// An engine whose extraction runs as soon as a reply is done.
async fn setup() -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let provider = Arc::new(ScriptedProvider::new("fake"));
    let mut config = EngineConfig::new(DataDir::new(dir.path()), Arc::new(MemoryKeyStore::default()));
    config.provider_override = Some(provider.clone());
    config.extraction_delay = Duration::ZERO;
    let engine = Engine::start(config).await.expect("engine starts");
    Setup { _dir: dir, provider, engine }
}

fn scan(facts: &[(&str, &str)], people: &[(&str, &str)], quotes: &[&str], topics: &[&str]) -> String {
    serde_json::json!({
        "facts": facts.iter().map(|(s, t)| serde_json::json!({"subject": s, "text": t})).collect::<Vec<_>>(),
        "traits": [],
        "topics": topics,
        "people": people.iter().map(|(n, r)| serde_json::json!({"name": n, "relation": r})).collect::<Vec<_>>(),
        "quotes": quotes,
    })
    .to_string()
}

/// Sends a message, waits for the reply and for the extraction after it.
/// A message that only asks is not scanned: no scan answer is queued for it.
async fn chat(s: &Setup, persona: &str, text: &str, reply: &str, scan: &str) -> app::MessageView {
    s.provider.push_reply(reply);
    if !text.trim_end().ends_with('?') {
        s.provider.push_reply(scan);
    }
    let mut rx = s.engine.subscribe();
    s.engine.conversation().send_message(persona, text).await.expect("send");
    let message = await_reply(&mut rx).await.1.expect("reply");
    wait_for_extraction(s, &mut rx).await;
    message
}

async fn wait_for_extraction(s: &Setup, rx: &mut tokio::sync::broadcast::Receiver<AppEvent>) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let pending = s.engine.ledger().queue_items(None).await.expect("queue");
        if !pending.iter().any(|i| i.kind == "extract" && i.state != ledger::QueueState::Dead) {
            return;
        }
        let _ = tokio::time::timeout_at(deadline, rx.recv()).await.expect("extraction in time");
    }
}

#[tokio::test]
async fn extraction_learns_merges_supersedes_and_keeps_quote_offsets() {
    let s = setup().await;
    s.engine.personas().create_persona("Ada", "").await.expect("create");
    let m1 = "My sister Joana and I live in Lisbon, and I adore strong coffee.";
    chat(&s, "Ada", m1, "Nice!", &scan(&[("home", "Lives in Lisbon")], &[("Joana", "sister")], &["I adore strong coffee"], &["coffee"])).await;

    let all = s.engine.memory().list_memories(None, true).await.expect("list");
    assert_eq!(all.len(), 4, "{all:#?}");
    let fact = all.iter().find(|m| m.kind == "fact").expect("fact");
    assert_eq!((fact.text.as_str(), fact.validation.as_str(), fact.group.as_str()), ("Lives in Lisbon", "none", "General"));
    assert!((fact.confidence - 0.5).abs() < 1e-9);
    assert_eq!(fact.learned_by_name, "Ada");
    let quote = all.iter().find(|m| m.kind == "quote").expect("quote").quote.clone().expect("span");
    let original = quote.message_text.clone().expect("message");
    assert_eq!(original, m1);
    assert_eq!(original.chars().skip(quote.start as usize).take((quote.end - quote.start) as usize).collect::<String>(), "I adore strong coffee");
    // The extraction request was constrained by the JSON schema.
    let requests = s.provider.requests();
    assert!(requests[1].json_schema.is_some() && requests[1].messages.last().is_some_and(|m| m.content.contains(m1)));

    // The same fact again (other words, same content) merges and gains confidence.
    chat(&s, "Ada", "Lisbon is where I live with Joana, by the way.", "Got it.", &scan(&[("home", "lives in Lisbon")], &[("Joana", "sister")], &[], &[])).await;
    let all = s.engine.memory().list_memories(None, true).await.expect("list");
    assert_eq!(all.len(), 4, "merged, not duplicated: {all:#?}");
    let fact = all.iter().find(|m| m.kind == "fact").expect("fact");
    assert!((fact.confidence - 2.0 / 3.0).abs() < 1e-9, "{}", fact.confidence);
    assert_eq!(fact.source_ids.len(), 2);
    let person = all.iter().find(|m| m.kind == "person").expect("person");
    assert_eq!(person.source_ids.len(), 2, "the same person by name merges");

    // A newer fact about the same subject supersedes the older without deleting it.
    chat(&s, "Ada", "I moved to Porto last month.", "Exciting!", &scan(&[("home", "Lives in Porto")], &[], &[], &[])).await;
    let current = s.engine.memory().list_memories(None, false).await.expect("list");
    assert!(current.iter().any(|m| m.text == "Lives in Porto"));
    assert!(!current.iter().any(|m| m.text == "Lives in Lisbon"));
    let all = s.engine.memory().list_memories(None, true).await.expect("list");
    let porto = all.iter().find(|m| m.text == "Lives in Porto").expect("porto");
    let lisbon = all.iter().find(|m| m.text == "Lives in Lisbon").expect("the old fact is kept");
    assert_eq!(lisbon.superseded_by.as_deref(), Some(porto.id.as_str()));
    // Retrieval only offers the current fact.
    let view = s.engine.memory().recall("Ada", "Lives in which city", 10).await.expect("recall");
    assert!(view.results.iter().any(|r| r.kind == "memory" && r.text == "Lives in Porto"));
    assert!(!view.results.iter().any(|r| r.kind == "memory" && r.text == "Lives in Lisbon"));
    assert!(s.engine.vault().verify().await.expect("verify").ok);
}

#[tokio::test]
async fn a_confirmed_fact_is_locked_against_superseding() {
    let s = setup().await;
    s.engine.personas().create_persona("Ada", "").await.expect("create");
    chat(&s, "Ada", "I work as a nurse.", "Great.", &scan(&[("job", "Works as a nurse")], &[], &[], &[])).await;
    let nurse = s.engine.memory().list_memories(None, false).await.expect("list").remove(0);
    let confirmed = s.engine.memory().confirm_memory(&nurse.id).await.expect("confirm");
    assert_eq!(confirmed.validation, "human");
    assert_eq!(confirmed.confidence, 1.0);
    chat(&s, "Ada", "Sometimes I dream of being a pilot.", "Fun.", &scan(&[("job", "Works as a pilot")], &[], &[], &[])).await;
    let all = s.engine.memory().list_memories(None, true).await.expect("list");
    assert!(all.iter().find(|m| m.id == nurse.id).expect("nurse").superseded_by.is_none(), "locked");
    assert!(all.iter().any(|m| m.text == "Works as a pilot"));
}

#[tokio::test]
async fn malformed_extraction_json_is_retried_then_dead_lettered_with_its_code() {
    let s = setup().await;
    s.engine.personas().create_persona("Ada", "").await.expect("create");
    s.provider.push_reply("Hello!");
    for reply in ["not json at all", "{\"facts\": [", "{oops}"] {
        s.provider.push_reply(reply);
    }
    let mut rx = s.engine.subscribe();
    s.engine.conversation().send_message("Ada", "I have a cat called Miso.").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    let failed = loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await.expect("dead-lettered in time").expect("event") {
            AppEvent::JobFailed { kind, error, .. } => break (kind, error),
            _ => continue,
        }
    };
    assert_eq!(failed.0, "extract");
    assert_eq!(failed.1.code, "LLM_INVALID_JSON");
    let dead = s.engine.ledger().queue_items(Some(ledger::QueueState::Dead)).await.expect("queue");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].attempts, 3);
    assert!(dead[0].last_error.as_deref().unwrap_or("").starts_with("LLM_INVALID_JSON"));
    assert!(s.engine.memory().list_memories(None, true).await.expect("list").is_empty(), "nothing half-learned");
}

#[tokio::test]
async fn an_extraction_for_a_deleted_persona_is_dead_lettered() {
    let s = setup().await;
    let ada = s.engine.personas().create_persona("Ada", "").await.expect("create");
    s.engine.ledger().archive_persona(&ada.id, true).await.expect("archive");
    s.engine.ledger().delete_persona(&ada.id, true).await.expect("delete");
    let mut rx = s.engine.subscribe();
    s.engine
        .ledger()
        .enqueue("extract", 2, Some(&ada.id), &serde_json::json!({"persona_id": ada.id, "message_id": "m"}))
        .await
        .expect("enqueue");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let error = loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await.expect("in time").expect("event") {
            AppEvent::JobFailed { error, .. } => break error,
            _ => continue,
        }
    };
    assert_eq!(error.code, "PERSONA_NOT_FOUND");
    assert_eq!(s.provider.calls(), 0);
}

#[tokio::test]
async fn memories_never_cross_group_boundaries() {
    let s = setup().await;
    let ada = s.engine.personas().create_persona("Ada", "").await.expect("create");
    s.engine.personas().create_persona("Bo", "").await.expect("create");
    s.engine.memory().set_persona_groups("Ada", "Work", &[]).await.expect("groups");
    let bo = s.engine.memory().set_persona_groups("Bo", "Family", &[]).await.expect("groups");
    assert_eq!((bo.group_primary.as_str(), bo.sees_all), ("Family", false));
    assert!(s.engine.memory().persona_groups("Ei").await.expect("ei").sees_all);

    chat(&s, "Ada", "The merger code name is Bluefin.", "Noted.", &scan(&[("project", "Project codename Bluefin")], &[], &[], &[])).await;
    let learned = s.engine.memory().list_memories(None, false).await.expect("list");
    assert_eq!(learned.len(), 1);
    assert_eq!(learned[0].group, "Work", "filed under the learner's primary group");

    // Lists: Ada and Ei see it, Bo does not.
    assert_eq!(s.engine.memory().list_memories(Some("Ada"), false).await.expect("list").len(), 1);
    assert_eq!(s.engine.memory().list_memories(Some("Ei"), false).await.expect("list").len(), 1);
    assert!(s.engine.memory().list_memories(Some("Bo"), false).await.expect("list").is_empty());
    // Recall (the CLI's and the reply's ranking).
    let bluefin = |v: &app::RecallView| v.results.iter().any(|r| r.text.contains("Bluefin"));
    assert!(bluefin(&s.engine.memory().recall("Ada", "Bluefin codename", 10).await.expect("recall")));
    assert!(bluefin(&s.engine.memory().recall("Ei", "Bluefin codename", 10).await.expect("recall")));
    assert!(!bluefin(&s.engine.memory().recall("Bo", "Bluefin codename", 10).await.expect("recall")), "no leak through recall");
    // The reply prompt.
    let before = s.provider.calls();
    chat(&s, "Bo", "What is the Bluefin codename about?", "No idea.", &scan(&[], &[], &[], &[])).await;
    assert_eq!(s.provider.calls(), before + 1, "the reply only: a question is not scanned");
    let prompt = &s.provider.requests()[before].messages[0].content;
    assert!(!prompt.contains("Project codename Bluefin"), "no leak into the prompt: {prompt}");
    let before = s.provider.calls();
    chat(&s, "Ada", "Remind me of the Bluefin codename?", "Bluefin.", &scan(&[], &[], &[], &[])).await;
    assert!(s.provider.requests()[before].messages[0].content.contains("Project codename Bluefin"));

    // Letting Bo see Work opens exactly that group.
    s.engine.memory().set_persona_groups("Bo", "Family", &["Work".into()]).await.expect("groups");
    assert!(bluefin(&s.engine.memory().recall("Bo", "Bluefin codename", 10).await.expect("recall")));
    assert_eq!(s.engine.memory().list_memories(Some("Bo"), false).await.expect("list").len(), 1);
    let _ = ada;
}

#[tokio::test]
async fn a_reply_records_the_memories_it_used_and_forget_erases_for_real() {
    let s = setup().await;
    s.engine.personas().create_persona("Ada", "").await.expect("create");
    chat(&s, "Ada", "My dog is called Biscuit.", "Cute!", &scan(&[("dog", "Has a dog named Biscuit")], &[], &[], &[])).await;
    let reply = chat(&s, "Ada", "What is my dog called again?", "Biscuit!", &scan(&[], &[], &[], &[])).await;
    let used = s.engine.memory().memories_used(&reply.id).await.expect("used");
    let memory = used.iter().find(|u| u.kind == "memory").expect("the memory was used");
    assert_eq!(memory.text, "Has a dog named Biscuit");
    let id = memory.memory.as_ref().expect("memory view").id.clone();

    // Edit in place, then forget.
    let edited = s.engine.memory().edit_memory(&id, "Has a beagle named Biscuit").await.expect("edit");
    assert_eq!((edited.text.as_str(), edited.validation.as_str()), ("Has a beagle named Biscuit", "human"));
    assert!(s.engine.memory().recall("Ada", "beagle", 5).await.expect("recall").results.iter().any(|r| r.item_id == id));
    s.engine.memory().forget_memory(&id).await.expect("forget");
    assert!(s.engine.memory().list_memories(None, true).await.expect("list").is_empty());
    assert!(!s.engine.memory().recall("Ada", "beagle", 5).await.expect("recall").results.iter().any(|r| r.item_id == id));
    assert!(!s.engine.memory().memories_used(&reply.id).await.expect("used").iter().any(|u| u.item_id == id));
    assert_eq!(s.engine.memory().forget_memory(&id).await.expect_err("gone").code, "MEMORY_NOT_FOUND");
    // The text is in no event payload any more; the chain still verifies.
    for e in s.engine.ledger().all_events().await.expect("events") {
        if let Some(p) = e.payload {
            assert!(!p.to_string().contains("beagle"), "{p}");
        }
    }
    assert!(s.engine.vault().verify().await.expect("verify").ok);
}

/// The whole path with the real local model (SmolLM2-135M through
/// llama.cpp, scan constrained by the JSON-schema grammar). Needs
/// LEDGERMIND_TEST_MODEL (scripts/test.sh sets it); skipped without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_local_model_extracts_memories_with_valid_quote_offsets() {
    let Some((_dir, mut config)) = crate::real_model_home() else {
        eprintln!("skipped: set LEDGERMIND_TEST_MODEL to the SmolLM2 GGUF to run the real-model extraction test");
        return;
    };
    config.extraction_delay = Duration::ZERO;
    let engine = Engine::start(config).await.expect("engine starts");
    engine.personas().create_persona("Ada", "A friendly companion").await.expect("create");

    let mut rx = engine.subscribe();
    let text = "My name is Marta and I live in Lisbon. My brother Tomás is a doctor. I love playing the piano.";
    engine.conversation().send_message("Ada", text).await.expect("send");
    await_reply(&mut rx).await.1.expect("the local model replied");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
    loop {
        let queue = engine.ledger().queue_items(None).await.expect("queue");
        if let Some(dead) = queue.iter().find(|i| i.state == ledger::QueueState::Dead) {
            panic!("extraction was dead-lettered: {:?}", dead.last_error);
        }
        if !queue.iter().any(|i| i.kind == "extract") {
            break;
        }
        let _ = tokio::time::timeout_at(deadline, rx.recv()).await.expect("extraction in time");
    }
    let learned = engine.memory().list_memories(None, true).await.expect("list");
    eprintln!("learned from the real model: {learned:#?}");
    assert!(!learned.is_empty(), "the real model's scan produced memories");
    for m in &learned {
        assert_eq!(m.learned_by_name, "Ada");
        assert_eq!(m.group, "General");
        assert!(!m.text.trim().is_empty());
        if let Some(q) = &m.quote {
            let original = q.message_text.as_deref().expect("quoted message");
            let span: String = original.chars().skip(q.start as usize).take((q.end - q.start) as usize).collect();
            assert_eq!(span, m.text, "a quote's offsets point at its text in the message");
        }
    }
    assert!(engine.vault().verify().await.expect("verify").ok);
    engine.shutdown().await;
}

#[tokio::test]
async fn the_ceremony_decays_exposure_by_the_half_life_except_confirmed_memories() {
    let s = setup().await;
    s.engine.personas().create_persona("Ada", "").await.expect("create");
    chat(&s, "Ada", "I swim on Sundays and I work as a nurse.", "Nice.", &scan(&[("sport", "Swims on Sundays"), ("job", "Works as a nurse")], &[], &[], &[])).await;
    let all = s.engine.memory().list_memories(None, false).await.expect("list");
    let swim = all.iter().find(|m| m.text == "Swims on Sundays").expect("swim").id.clone();
    let nurse = all.iter().find(|m| m.text == "Works as a nurse").expect("nurse").id.clone();
    s.engine.memory().confirm_memory(&nurse).await.expect("confirm");
    let exposure = |list: &[app::MemoryView], id: &str| list.iter().find(|m| m.id == id).expect("memory").exposure;

    // The scheduler may already have run today's ceremony at start: go on from its time.
    let rfc = &time::format_description::well_known::Rfc3339;
    let last = s.engine.ledger().last_decay_at().await.expect("last").map(|t| time::OffsetDateTime::parse(&t, rfc).expect("ts"));
    let e0 = exposure(&s.engine.memory().list_memories(None, false).await.expect("list"), &swim);
    let t1 = last.unwrap_or_else(time::OffsetDateTime::now_utc) + time::Duration::days(1);
    let first = s.engine.personas().run_ceremony(t1).await.expect("ceremony").expect("idle queue: it runs");
    assert!((first.elapsed_days - 1.0).abs() < 1e-9, "a day after the last run (or the first run)");
    let second = s.engine.personas().run_ceremony(t1 + time::Duration::days(7)).await.expect("ceremony").expect("runs");
    assert!((second.elapsed_days - 7.0).abs() < 1e-9);
    assert!((second.factor - 0.5).abs() < 1e-12, "one half-life halves: {}", second.factor);
    let list = s.engine.memory().list_memories(None, false).await.expect("list");
    let expected = e0 * 0.5f64.powf(1.0 / 7.0) * 0.5;
    assert!((exposure(&list, &swim) - expected).abs() < 1e-12, "{} vs {expected}", exposure(&list, &swim));
    assert_eq!(exposure(&list, &nurse), 1.0, "confirmed memories never decay");

    // A reply that uses the memory makes it fully present again.
    chat(&s, "Ada", "When do I swim?", "On Sundays.", &scan(&[], &[], &[], &[])).await;
    let list = s.engine.memory().list_memories(None, false).await.expect("list");
    assert_eq!(exposure(&list, &swim), 1.0);
    // Projections replay to the same values.
    assert!(s.engine.vault().verify().await.expect("verify").ok);
}
