//! Persona management and chat state with a scripted model:
//! creating a persona from a description (the model fills traits and
//! topics; the human's words are kept; a failing model falls back), edit,
//! pause until a time, the context status of messages in the prompt,
//! recall of a message whose reply has not started, per-item queue
//! priority, and erasure of a deleted persona's memories.

use std::time::Duration;

use app::PersonaEdit;
use ledger::{Draft, EventBody, MemoryKind, PersonaTopic};

use crate::{await_reply, Harness};

/// Polls `check` until it holds (or fails the test after 20 s).
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn fill_json() -> String {
    serde_json::json!({
        "long_description": "Marta runs a small bakery in Lisbon and loves sharing recipes.",
        "traits": ["warm", "patient", "Warm"],
        "topics": [
            {"name": "bread", "perspective": "a daily ritual"},
            {"name": "Lisbon", "perspective": "home"}
        ]
    })
    .to_string()
}

#[tokio::test]
async fn a_persona_made_from_a_description_is_filled_by_the_model_and_keeps_the_human_words() {
    let h = Harness::new(&[]).await;
    h.provider.push_reply(fill_json());
    let words = "  a baker from Lisbon who loves sourdough  ";
    let marta = h.engine.personas().create_persona_described("Marta", words).await.expect("create");
    assert_eq!(marta.short_description, words.trim(), "the human's words, verbatim");
    eventually("the fill", || async {
        h.engine.personas().persona_profile("Marta").await.expect("profile").profile_source == "llm"
    })
    .await;
    let p = h.engine.personas().persona_profile("Marta").await.expect("profile");
    assert_eq!(p.short_description, words.trim(), "the fill never overwrites the human's words");
    assert_eq!(p.long_description, "Marta runs a small bakery in Lisbon and loves sharing recipes.");
    assert_eq!(p.traits, vec!["warm".to_owned(), "patient".to_owned()], "deduplicated");
    assert_eq!(p.topics.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["bread", "Lisbon"]);
    assert_eq!(p.topics[0].perspective, "a daily ritual");
    // The request was constrained by the schema and carried the description.
    let request = &h.provider.requests()[0];
    assert!(request.json_schema.is_some(), "JSON-schema constrained");
    assert!(request.messages.iter().any(|m| m.content.contains("a baker from Lisbon who loves sourdough")));
    // A persona made with no description is not sent to the model at all.
    h.engine.personas().create_persona_described("Bare", "").await.expect("create");
    assert_eq!(h.engine.personas().persona_profile("Bare").await.expect("profile").profile_source, "none");
    assert_eq!(h.provider.calls(), 1);
}

#[tokio::test]
async fn when_the_model_fails_the_persona_keeps_the_human_words_and_still_chats() {
    let h = Harness::new(&[]).await;
    for bad in ["not json", "{\"traits\": [", "{\"long_description\": \"x\", \"traits\": [], \"topics\": []}"] {
        h.provider.push_reply(bad);
    }
    let mut rx = h.engine.subscribe();
    h.engine.personas().create_persona_described("Rui", "a grumpy chess coach").await.expect("create");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let failed = loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await.expect("dead-lettered in time").expect("event") {
            app::AppEvent::JobFailed { kind, error, .. } => break (kind, error),
            _ => continue,
        }
    };
    assert_eq!(failed.0, "persona_fill");
    assert_eq!(failed.1.code, "LLM_INVALID_JSON");
    let p = h.engine.personas().persona_profile("Rui").await.expect("profile");
    assert_eq!(p.profile_source, "fallback");
    assert_eq!(p.short_description, "a grumpy chess coach");
    assert!(p.traits.is_empty() && p.topics.is_empty() && p.long_description.is_empty(), "nothing invented");
    let dead = h.engine.conversation().queue_view().await.expect("queue");
    assert!(dead.items.iter().any(|i| i.kind == "persona_fill" && i.state == "dead"), "visible as a dead letter");
    // The persona works regardless.
    h.provider.push_reply("Check.");
    h.engine.conversation().send_message("Rui", "hello").await.expect("send");
    assert_eq!(await_reply(&mut rx).await.1.expect("reply").content, "Check.");
}

pub(crate) fn edit_of(p: &app::PersonaProfileView) -> PersonaEdit {
    PersonaEdit {
        name: p.name.clone(),
        short_description: p.short_description.clone(),
        long_description: p.long_description.clone(),
        traits: p.traits.clone(),
        topics: p.topics.clone(),
        heartbeat_minutes: p.heartbeat_minutes,
        context_window_hours: p.context_window_hours,
        group_primary: p.group_primary.clone(),
        groups_visible: p.groups_visible.clone(),
    }
}

#[tokio::test]
async fn the_editor_saves_every_field_in_one_append_and_refuses_a_taken_name() {
    let h = Harness::new(&[]).await;
    let ada = h.engine.personas().create_persona("Ada", "a friend").await.expect("create");
    h.engine.personas().create_persona("Bea", "").await.expect("create");
    let before = h.engine.personas().persona_profile(&ada.id).await.expect("profile");
    assert_eq!((before.heartbeat_minutes, before.context_window_hours), (30, 8), "the spec's defaults");
    assert_eq!(before.group_primary, "General");

    let events = h.engine.ledger().event_count().await.expect("count");
    let mut edit = edit_of(&before);
    edit.name = "Ada Lovelace".into();
    edit.long_description = "Counts everything.".into();
    edit.traits = vec!["precise".into(), " ".into()];
    edit.topics = vec![PersonaTopic {
        name: "engines".into(),
        perspective: "poetry in brass".into(),
        approach: String::new(),
        personal_stake: String::new(),
        sentiment: 3.0,
        exposure_current: 0.0,
        exposure_desired: 0.9,
    }];
    edit.heartbeat_minutes = 45;
    edit.context_window_hours = 0;
    edit.group_primary = "Work".into();
    edit.groups_visible = vec!["General".into(), "Work".into()];
    let after = h.engine.personas().update_persona(&ada.id, edit.clone()).await.expect("update");
    assert_eq!(after.name, "Ada Lovelace");
    assert_eq!(after.short_description, "a friend");
    assert_eq!(after.long_description, "Counts everything.");
    assert_eq!(after.traits, vec!["precise".to_owned()]);
    assert_eq!(after.topics[0].sentiment, 1.0, "clamped to -1…1");
    assert_eq!(after.profile_source, "human");
    assert_eq!((after.heartbeat_minutes, after.context_window_hours), (45, 0));
    assert_eq!((after.group_primary.as_str(), after.groups_visible.clone()), ("Work", vec!["General".to_owned()]));
    // Four kinds of change, one atomic batch (updated, profile, settings, groups).
    assert_eq!(h.engine.ledger().event_count().await.expect("count"), events + 4);
    // Saving the same values again writes nothing.
    h.engine.personas().update_persona(&ada.id, edit.clone()).await.expect("update");
    assert_eq!(h.engine.ledger().event_count().await.expect("count"), events + 4);

    edit.name = "bea".into();
    let err = h.engine.personas().update_persona(&ada.id, edit.clone()).await.expect_err("taken");
    assert_eq!(err.code, "PERSONA_EXISTS");
    edit.name = "Ada".into();
    edit.heartbeat_minutes = 1_000_000;
    assert_eq!(h.engine.personas().update_persona(&ada.id, edit).await.expect_err("too long").code, "INVALID_INPUT");
    // The projection survives a rebuild from the events.
    h.engine.ledger().rebuild_projections().await.expect("rebuild");
    assert_eq!(h.engine.personas().persona_profile(&ada.id).await.expect("profile"), after);
}

#[tokio::test]
async fn a_paused_persona_answers_only_when_its_pause_ends() {
    let h = Harness::new(&["Back again!"]).await;
    let ada = h.engine.personas().create_persona("Ada", "").await.expect("create");
    assert_eq!(h.engine.personas().pause_persona("Ada", Some("2001-01-01T00:00:00Z")).await.expect_err("past").code, "INVALID_INPUT");
    let until = (time::OffsetDateTime::now_utc() + time::Duration::hours(2))
        .format(&time::format_description::well_known::Rfc3339)
        .expect("format");
    let paused = h.engine.personas().pause_persona("Ada", Some(&until)).await.expect("pause");
    assert!(paused.paused_until.is_some());
    let mut rx = h.engine.subscribe();
    h.engine.conversation().send_message("Ada", "are you there?").await.expect("send is accepted");
    eventually("the reply to wait for the pause", || async {
        let q = h.engine.ledger().queue_items(None).await.expect("queue");
        q.iter().any(|i| i.kind == "reply" && i.state == ledger::QueueState::Pending && i.not_before > i.enqueued_at && i.attempts == 0)
    })
    .await;
    assert_eq!(h.provider.calls(), 0, "no reply while paused");
    h.engine.personas().pause_persona(&ada.id, None).await.expect("resume");
    assert_eq!(await_reply(&mut rx).await.1.expect("reply").content, "Back again!");
    assert!(h.engine.personas().persona_profile("Ada").await.expect("profile").paused_until.is_none());
}

#[tokio::test]
async fn context_status_decides_what_the_prompt_shows() {
    let h = Harness::new(&["ok"]).await;
    h.engine.personas().create_persona("Ada", "").await.expect("create");
    let mut rows = Vec::new();
    for i in 0..30 {
        let text = match i {
            0 => "ALWAYSMARK my sister is called Leonor".to_owned(),
            28 => "NEVERMARK do not bring this up again".to_owned(),
            _ => format!("filler message {i}"),
        };
        let speaker = if i % 2 == 0 { "human" } else { "Ada" };
        // Said an hour ago: within the prompt's window of recent messages,
        // which goes by when a message was said.
        let said = time::OffsetDateTime::now_utc().unix_timestamp() - 3600 + i;
        rows.push(serde_json::json!({"id": format!("m{i}"), "speaker": speaker, "text": text, "timestamp": said}));
    }
    let file = h.dir.path().join("c.json");
    std::fs::write(&file, serde_json::to_string(&rows).expect("json")).expect("write");
    h.engine.memory().import_conversation("Ada", &file).await.expect("import");
    let messages = h.engine.conversation().list_messages("Ada").await.expect("list");
    let id_of = |needle: &str| messages.iter().find(|m| m.content.contains(needle)).map(|m| m.id.clone()).expect("message");
    let always = h.engine.personas().set_message_context(&id_of("ALWAYSMARK"), "always").await.expect("always");
    assert_eq!(always.context_status, "always");
    h.engine.personas().set_message_context(&id_of("NEVERMARK"), "never").await.expect("never");
    assert_eq!(h.engine.personas().set_message_context(&id_of("filler message 3"), "sometimes").await.expect_err("bad").code, "INVALID_INPUT");

    let mut rx = h.engine.subscribe();
    // (Not "what do you remember?": that is the deterministic "list all" intent.)
    h.engine.conversation().send_message("Ada", "tell me something nice").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    let prompt = &h.provider.requests()[0].messages;
    let turns: Vec<&str> = prompt.iter().skip(1).map(|m| m.content.as_str()).collect();
    assert!(turns.iter().any(|t| t.contains("ALWAYSMARK")), "an always message is shown though it is old: {turns:?}");
    assert!(!turns.iter().any(|t| t.contains("NEVERMARK")), "a never message is left out though it is recent");
    assert!(turns.iter().any(|t| t.contains("filler message 29")), "recent default messages are in");
    assert!(!turns.iter().any(|t| t.contains("filler message 5")), "old default ones beyond the history are not");
    assert_eq!(turns.last().copied(), Some("tell me something nice"));
}

#[tokio::test]
async fn a_message_is_recalled_while_its_reply_waits_and_not_after() {
    let h = Harness::new(&["first answer"]).await;
    h.engine.personas().create_persona("Ada", "").await.expect("create");
    h.engine.conversation().pause_queue().await;
    let (sent, request) = h.engine.conversation().send_message("Ada", "I meant to say sorry").await.expect("send");
    assert!(!request.is_empty());
    let text = h.engine.personas().recall_message(&sent.id).await.expect("recall");
    assert_eq!(text, "I meant to say sorry");
    assert!(h.engine.conversation().list_messages("Ada").await.expect("list").is_empty(), "the message left the conversation");
    assert!(h.engine.conversation().queue_view().await.expect("queue").items.is_empty(), "its reply is no longer queued");
    assert!(h.engine.vault().verify().await.expect("verify").ok);
    h.engine.conversation().resume_queue().await;

    let mut rx = h.engine.subscribe();
    let (sent, _) = h.engine.conversation().send_message("Ada", "hello").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    assert_eq!(h.engine.personas().recall_message(&sent.id).await.expect_err("answered").code, "MESSAGE_NOT_RECALLABLE");
    let reply = h.engine.conversation().list_messages("Ada").await.expect("list").pop().expect("reply");
    assert_eq!(h.engine.personas().recall_message(&reply.id).await.expect_err("not mine").code, "MESSAGE_NOT_RECALLABLE");
}

#[tokio::test]
async fn background_work_set_to_high_still_runs_after_the_human_reply() {
    let h = Harness::new(&[]).await;
    let ada = h.engine.personas().create_persona("Ada", "").await.expect("create");
    h.engine.conversation().pause_queue().await;
    let body = serde_json::json!({"persona_id": ada.id, "message_id": "nope"});
    let extract = h.engine.ledger().enqueue("extract", 2, Some(&ada.id), &body).await.expect("enqueue");
    h.engine.personas().set_queue_priority(&extract.id, "high").await.expect("promote");
    let view = h.engine.conversation().queue_view().await.expect("queue");
    assert_eq!(view.items[0].priority, "high");
    assert_eq!(h.engine.personas().set_queue_priority(&extract.id, "urgent").await.expect_err("bad").code, "INVALID_INPUT");

    let (_, reply_id) = h.engine.conversation().send_message("Ada", "hi").await.expect("send");
    let view = h.engine.conversation().queue_view().await.expect("queue");
    assert_eq!(view.items[0].id, reply_id, "the reply is listed first");
    assert_eq!(view.items[0].priority, "high");
    let err = h.engine.personas().set_queue_priority(&reply_id, "low").await.expect_err("replies are fixed");
    assert_eq!(err.code, "INVALID_INPUT");
    // What the worker takes next is the reply, not the promoted background work.
    let next = h.engine.ledger().take_next(h.engine.ledger().now()).await.expect("take").expect("an item");
    assert_eq!(next.id, reply_id);
    // The extraction can be demoted again while it waits.
    h.engine.personas().set_queue_priority(&extract.id, "low").await.expect("demote");
    let view = h.engine.conversation().queue_view().await.expect("queue");
    assert_eq!(view.items.iter().find(|i| i.id == extract.id).map(|i| i.priority.as_str()), Some("low"));
}

#[tokio::test]
async fn deleting_a_persona_with_human_data_erases_its_memories_updates_too() {
    let h = Harness::new(&[]).await;
    let ada = h.engine.personas().create_persona("Ada", "").await.expect("create");
    let learned = "learnedtextmarker";
    let edited = "editedtextmarker";
    h.engine
        .ledger()
        .append_drafts(vec![Draft::by(
            &ada.id,
            EventBody::MemoryLearned {
                memory_id: "mem-1".into(),
                memory_kind: MemoryKind::Fact,
                subject: "pet".into(),
                text: format!("has a parrot {learned}"),
                group: "General".into(),
                learned_by: ada.id.clone(),
                source_ids: Vec::new(),
                quote: None,
                confidence: 0.5,
            },
        )])
        .await
        .expect("learn");
    h.engine.memory().edit_memory("mem-1", &format!("has a parrot {edited}")).await.expect("edit");
    h.engine.vault().archive_persona("Ada", true).await.expect("archive");
    h.engine.vault().delete_persona("Ada", true).await.expect("delete");
    for marker in [learned, edited] {
        let hits = crate::memory::files_containing(h.dir.path(), marker.as_bytes());
        assert!(hits.is_empty(), "{marker} still in {hits:?}");
    }
    assert!(h.engine.vault().verify().await.expect("verify").ok);
}

// ---- summaries -------------------------------------------------------------------

async fn import_chat(h: &Harness, persona: &str, n: usize, marker: &str) {
    let rows: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            let speaker = if i % 2 == 0 { "human" } else { persona };
            let text = if i == 2 { format!("my favourite word is {marker}") } else { format!("message number {i}") };
            serde_json::json!({"id": format!("{persona}-{i}"), "speaker": speaker, "text": text, "timestamp": "2025-01-01T00:00:00Z"})
        })
        .collect();
    let file = h.dir.path().join(format!("{persona}.json"));
    std::fs::write(&file, serde_json::to_string(&rows).expect("json")).expect("write");
    h.engine.memory().import_conversation(persona, &file).await.expect("import");
    // The test's own input file is not part of the profile.
    std::fs::remove_file(&file).expect("remove the input");
}

async fn summarize(h: &Harness, persona_id: &str) {
    let body = serde_json::json!({ "persona_id": persona_id });
    h.engine.ledger().enqueue("summarize", 2, Some(persona_id), &body).await.expect("enqueue");
    eventually("the summary job", || async {
        !h.engine.ledger().queue_items(None).await.expect("queue").iter().any(|i| i.kind == "summarize")
    })
    .await;
}

#[tokio::test]
async fn ten_messages_queue_a_low_priority_summary_that_the_next_prompt_carries() {
    let h = Harness::new(&["ok"]).await;
    let ada = h.engine.personas().create_persona("Ada", "").await.expect("create");
    import_chat(&h, "Ada", 9, "none").await;
    let mut rx = h.engine.subscribe();
    h.engine.conversation().send_message("Ada", "and one more").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    // 11 messages not in any summary: one is queued, low priority, after the quiet delay.
    let queue = h.engine.ledger().queue_items(None).await.expect("queue");
    let job = queue.iter().find(|i| i.kind == "summarize").expect("a summary is queued");
    assert_eq!(job.priority, 2);
    assert!(job.not_before > job.enqueued_at, "it waits for the conversation to go quiet");
    h.engine.ledger().finish_item(&job.id).await.expect("drop the delayed one");

    h.provider.push_reply("Ada and the human chatted about numbers; nothing is open.");
    summarize(&h, &ada.id).await;
    let summary = h.engine.memory().conversation_summary("Ada").await.expect("summary").expect("written");
    assert_eq!(summary.source, "llm");
    let profile = h.engine.personas().persona_profile("Ada").await.expect("profile");
    assert_eq!(profile.summary.as_deref(), Some(summary.text.as_str()), "the editor shows it");
    assert_eq!(profile.summary_source.as_deref(), Some("llm"));
    assert_eq!(summary.text, "Ada and the human chatted about numbers; nothing is open.");
    let last = h.engine.conversation().list_messages("Ada").await.expect("list").pop().expect("last");
    assert_eq!(summary.up_to_seq, last.seq);
    let request = h.provider.requests().pop().expect("the summary request");
    assert!(request.messages[0].content.contains("at most 200 words"));
    assert!(request.messages[1].content.contains("message number 3"));

    h.provider.push_reply("noted");
    h.engine.conversation().send_message("Ada", "what did we talk about?").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    let prompt = h.provider.requests().pop().expect("reply request").messages;
    assert!(prompt[0].content.contains("chatted about numbers"), "the summary is in the frame: {}", prompt[0].content);
}

#[tokio::test]
async fn without_a_model_the_summary_falls_back_and_an_erased_message_takes_it_along() {
    let h = Harness::new(&[]).await;
    let ada = h.engine.personas().create_persona("Ada", "").await.expect("create");
    let marker = "quokkamarker";
    import_chat(&h, "Ada", 12, marker).await;
    h.provider.push_error(providers::ProviderError::ModelLoad("no model file".into()));
    summarize(&h, &ada.id).await;
    let summary = h.engine.memory().conversation_summary("Ada").await.expect("summary").expect("written");
    assert_eq!(summary.source, "fallback");
    assert!(summary.text.contains(marker), "{}", summary.text);
    assert!(summary.text.split_whitespace().count() <= 200);
    assert!(summary.text.contains("The human: message number 10"));

    let quoted = h.engine.conversation().list_messages("Ada").await.expect("list").into_iter().find(|m| m.content.contains(marker)).expect("m");
    h.engine.vault().erase_message(&quoted.id).await.expect("erase");
    let hits = crate::memory::files_containing(h.dir.path(), marker.as_bytes());
    assert!(hits.is_empty(), "the erased words survive in {hits:?}");
    assert!(h.engine.memory().conversation_summary("Ada").await.expect("summary").is_none(), "the summary quoting it went too");
    assert!(h.engine.vault().verify().await.expect("verify").ok);
}

// ---- heartbeat -------------------------------------------------------------------

#[tokio::test]
async fn a_quiet_persona_reaches_out_once_after_its_delay_and_never_while_paused() {
    let h = Harness::new(&["Nice to meet you!"]).await;
    let ada = h.engine.personas().create_persona("Ada", "").await.expect("create");
    let mut rx = h.engine.subscribe();
    h.engine.conversation().send_message("Ada", "hi, I am growing tomatoes").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    h.engine.conversation().mark_read("Ada").await.expect("read");
    let now = h.engine.ledger().now();
    assert_eq!(h.engine.personas().heartbeat_tick(now + time::Duration::minutes(29)).await.expect("tick"), 0, "not quiet long enough");

    let until = (now + time::Duration::hours(1)).format(&time::format_description::well_known::Rfc3339).expect("fmt");
    h.engine.personas().pause_persona("Ada", Some(&until)).await.expect("pause");
    assert_eq!(h.engine.personas().heartbeat_tick(now + time::Duration::minutes(31)).await.expect("tick"), 0, "paused");
    h.engine.personas().pause_persona("Ada", None).await.expect("resume");

    h.provider.push_reply("How are the tomatoes doing?");
    assert_eq!(h.engine.personas().heartbeat_tick(now + time::Duration::minutes(31)).await.expect("tick"), 1);
    let queued = h.engine.ledger().queue_items(None).await.expect("queue");
    assert!(queued.iter().any(|i| i.kind == "heartbeat" && i.priority == 2), "low priority");
    eventually("the persona to reach out", || async {
        h.engine.conversation().list_messages("Ada").await.expect("list").last().map(|m| m.content.clone()) == Some("How are the tomatoes doing?".into())
    })
    .await;
    let persona = h.engine.personas().persona("Ada").await.expect("persona");
    assert_eq!(persona.unread, 1, "it arrives unread");
    let prompt = h.provider.requests().pop().expect("request").messages;
    assert!(prompt.last().expect("last").content.contains("quiet for a while"));
    // Once: it spoke last, so it waits for the human.
    assert_eq!(h.engine.personas().heartbeat_tick(now + time::Duration::hours(5)).await.expect("tick"), 0);
    // Archived personas never reach out.
    h.engine.vault().archive_persona(&ada.id, true).await.expect("archive");
    assert_eq!(h.engine.personas().heartbeat_tick(now + time::Duration::hours(50)).await.expect("tick"), 0);
}

#[tokio::test]
async fn the_engines_clock_drives_the_heartbeat_and_ei_never_reaches_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let provider = std::sync::Arc::new(providers::ScriptedProvider::with_replies("fake", ["Hello Ada here.", "Hello, Ei here."]));
    // A fixed morning: the nightly ceremony and the daily dream stay out of the way.
    let clock = std::sync::Arc::new(ledger::ManualClock::new(time::macros::datetime!(2026-01-05 10:00 UTC)));
    let mut config = app::EngineConfig::new(app::DataDir::new(dir.path()), std::sync::Arc::new(ledger::MemoryKeyStore::default()));
    config.provider_override = Some(provider.clone());
    config.clock = clock.clone();
    let engine = app::Engine::start(config).await.expect("engine starts");
    engine.personas().create_persona("Ada", "").await.expect("create");
    let mut rx = engine.subscribe();
    for name in ["Ada", "Ei"] {
        engine.conversation().send_message(name, "hi, the garden is blooming").await.expect("send");
        await_reply(&mut rx).await.1.expect("reply");
    }
    let ei_messages = engine.conversation().list_messages("Ei").await.expect("list").len();
    let heartbeats = || async {
        engine.ledger().queue_items(None).await.expect("queue").into_iter().filter(|i| i.kind == "heartbeat").count()
    };
    // The timer's beat reads the engine's clock: 29 minutes of quiet is not enough.
    clock.advance(time::Duration::minutes(29));
    engine.personas().clock_tick().await;
    assert_eq!(heartbeats().await, 0);
    // The clock also made the conversations' extraction due: it may take
    // (and reject as not JSON) some of these before the heartbeat runs.
    for _ in 0..12 {
        provider.push_reply("How is the garden?");
    }
    clock.advance(time::Duration::minutes(2));
    engine.personas().clock_tick().await;
    eventually("Ada to reach out", || async {
        engine.conversation().list_messages("Ada").await.expect("list").last().map(|m| m.content.clone()) == Some("How is the garden?".into())
    })
    .await;
    // Ei was as quiet for as long, and has no heartbeat.
    clock.advance(time::Duration::hours(3));
    engine.personas().clock_tick().await;
    assert_eq!(heartbeats().await, 0);
    assert_eq!(engine.conversation().list_messages("Ei").await.expect("list").len(), ei_messages);
    engine.shutdown().await;
}

// ---- ceremony: topic exploration, description check, time ---------------------------

#[tokio::test]
async fn the_ceremony_expires_the_topics_a_persona_no_longer_cares_about() {
    let h = Harness::new(&[]).await;
    h.engine.conversation().pause_queue().await; // keep the explorations it queues from running
    let topic = ledger::PersonaTopic::with_exposure;
    let set = |id: &str, source: &str| {
        Draft::by(
            id,
            EventBody::PersonaProfileSet {
                persona_id: id.into(),
                traits: vec!["warm".into()],
                topics: vec![topic("opera", 0.05, 0.02), topic("bread", 0.0, 0.6), topic("rain", 0.4, 0.05)],
                source: source.into(),
            },
        )
    };
    let marta = h.engine.personas().create_persona("Marta", "").await.expect("create");
    let rui = h.engine.personas().create_persona("Rui", "").await.expect("create");
    h.engine.ledger().append_drafts(vec![set(&marta.id, "llm"), set(&rui.id, "human")]).await.expect("profiles");
    let now = h.engine.ledger().now();
    h.engine.personas().run_ceremony(now).await.expect("ceremony").expect("it ran");
    let names = |p: app::PersonaProfileView| p.topics.into_iter().map(|t| t.name).collect::<Vec<_>>();
    assert_eq!(names(h.engine.personas().persona_profile("Marta").await.expect("p")), ["bread", "rain"], "opera expired");
    assert_eq!(h.engine.personas().persona_profile("Marta").await.expect("p").profile_source, "llm");
    assert_eq!(names(h.engine.personas().persona_profile("Rui").await.expect("p")), ["opera", "bread", "rain"], "the human's own topics stay");
}

#[tokio::test]
async fn the_ceremony_explores_topics_and_checks_descriptions_only_when_the_queue_is_idle() {
    let h = Harness::new(&[]).await;
    // Marta's profile came from the model; Rui's was edited by the human.
    h.provider.push_reply(fill_json());
    h.engine.personas().create_persona_described("Marta", "a baker from Lisbon").await.expect("create");
    eventually("the fill", || async { h.engine.personas().persona_profile("Marta").await.expect("p").profile_source == "llm" }).await;
    let rui = h.engine.personas().create_persona("Rui", "a chess coach").await.expect("create");
    let mut edit = edit_of(&h.engine.personas().persona_profile(&rui.id).await.expect("p"));
    edit.long_description = "Written by me.".into();
    edit.topics = vec![PersonaTopic {
        name: "chess".into(),
        perspective: "my words".into(),
        approach: String::new(),
        personal_stake: String::new(),
        sentiment: 0.5,
        exposure_current: 0.0,
        exposure_desired: 0.5,
    }];
    h.engine.personas().update_persona(&rui.id, edit).await.expect("edit");

    // Not while the queue has work.
    h.engine.conversation().pause_queue().await;
    h.engine.ledger().enqueue("extract", 2, Some(&rui.id), &serde_json::json!({"persona_id": rui.id, "message_id": "x"})).await.expect("q");
    let now = h.engine.ledger().now();
    assert!(h.engine.personas().run_ceremony(now).await.expect("ceremony").is_none(), "the queue is not idle");
    let items = h.engine.ledger().queue_items(None).await.expect("queue");
    for i in &items {
        h.engine.ledger().finish_item(&i.id).await.expect("clear");
    }

    let explore = |name: &str, perspective: &str, long: &str| {
        serde_json::json!({
            "topics": [
                {"name": name, "perspective": perspective, "approach": "asks how it went", "personal_stake": "it is their craft"},
                {"name": "pastries", "perspective": "a weekend treat", "approach": "shares a recipe", "personal_stake": "grew up with them"}
            ],
            "long_description": long
        })
        .to_string()
    };
    // Jobs run in the order queued: Marta, then Rui.
    h.provider.push_reply(explore("bread", "IGNORED", "Marta bakes before dawn and talks about bread and pastries."));
    h.provider.push_reply(explore("chess", "IGNORED", "NOT USED: Rui's description is his own."));
    let view = h.engine.personas().run_ceremony(now).await.expect("ceremony").expect("idle: it runs");
    assert_eq!(view.explored, 2, "Ei is not explored");
    assert_eq!(view.factor, 1.0, "no memories to decay");
    h.engine.conversation().resume_queue().await;
    eventually("both explorations", || async {
        !h.engine.ledger().queue_items(None).await.expect("q").iter().any(|i| i.kind == "persona_explore")
    })
    .await;

    let marta = h.engine.personas().persona_profile("Marta").await.expect("p");
    let bread = marta.topics.iter().find(|t| t.name == "bread").expect("bread");
    assert_eq!(bread.perspective, "a daily ritual", "what a topic says stays");
    assert_eq!(bread.approach, "asks how it went", "empty fields are explored");
    assert!(marta.topics.iter().any(|t| t.name == "pastries"), "a related topic is added");
    assert_eq!(marta.long_description, "Marta bakes before dawn and talks about bread and pastries.", "description checked");
    assert_eq!(marta.short_description, "a baker from Lisbon", "the human's words stay");

    let rui = h.engine.personas().persona_profile("Rui").await.expect("p");
    assert_eq!(rui.topics[0].perspective, "my words");
    assert_eq!(rui.topics[0].personal_stake, "it is their craft");
    assert_eq!(rui.long_description, "Written by me.", "a description the human shaped is not rewritten");
    assert_eq!(rui.profile_source, "human");

    // The ceremony's time is a setting.
    assert_eq!(h.engine.personas().set_ceremony_time("25:00").await.expect_err("bad").code, "INVALID_INPUT");
    let settings = h.engine.personas().set_ceremony_time("22:15").await.expect("set");
    assert_eq!(settings.time, "22:15");
    assert_eq!(settings.last_run.as_deref(), Some(view.at.as_str()));
}
