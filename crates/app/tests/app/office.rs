//! The office in the reply path: every reply is framed, the frame is
//! recorded, sessions end with handovers checked against the ledger.

use app::{SessionEnd, SessionType};
use ledger::{EventBody, ObligationKind};

use crate::{await_reply, Harness};

#[tokio::test]
async fn every_reply_is_sent_with_the_narrative_and_its_frame_is_recorded() {
    let h = Harness::new(&["Hello!"]).await;
    let ada = h.engine.create_persona("Ada", "A travel planner").await.expect("create");
    h.engine.set_constitution("Ada", "Tell the truth about deadlines.", &["If pressured: cite the terms.".into()]).await.expect("constitution");
    let mut rx = h.engine.subscribe();
    h.engine.send_message("Ada", "Hi Ada").await.expect("send");
    let reply = await_reply(&mut rx).await.1.expect("reply");

    let why = h.engine.why(&reply.id).await.expect("why");
    assert!(why.narrative.starts_with("You are Ada. A travel planner. You live"), "{}", why.narrative);
    assert!(why.narrative.contains("holds 1 message."), "{}", why.narrative);
    assert_eq!(why.frame_hash.len(), 64);
    assert_eq!(why.session_type, "assist");
    assert_eq!((why.budget, why.effective_budget), (4000, app::LOCAL_NARRATIVE_TOKENS as u32));
    assert!(why.narrative_tokens > 0 && why.narrative_tokens <= why.effective_budget);
    assert!(why.sections.iter().any(|s| s.name == "constitution" && s.tokens > 0));
    assert_eq!(why.constitution.as_deref(), Some("Tell the truth about deadlines.\n- If pressured: cite the terms."));
    assert!(why.error.is_none());
    // The model read exactly that narrative (the planner's format rules follow it).
    let system = &h.provider.requests()[0].messages[0].content;
    assert!(system.starts_with(&why.narrative), "{system}");
    // The frame's hash is the one recorded with the reply, and usage is counted.
    let stored: serde_json::Value = serde_json::from_str(&why.frame_json).expect("json");
    assert_eq!(stored["frame_hash"], why.frame_hash.as_str());
    let usage = h.engine.token_usage().await.expect("usage");
    assert!(usage.iter().any(|u| u.entity_id == ada.id));
}

#[tokio::test]
async fn a_session_ends_with_a_handover_that_the_next_narrative_weaves_in() {
    let handover = "The person asked about Porto trains. Nothing is overdue and everything is on track for Friday.";
    let h = Harness::new(&["Sure, Friday works.", &format!("{{\"handover\": \"{handover}\"}}")]).await;
    let ada = h.engine.create_persona("Ada", "").await.expect("create");
    // An obligation that is already late: the handover's "nothing is overdue" is false.
    h.engine
        .ledger()
        .append(
            &ada.id,
            EventBody::ReminderSet {
                reminder_id: "r1".into(),
                persona_id: ada.id.clone(),
                text: "Pay the tickets".into(),
                due_at: Some("2000-01-01T00:00:00Z".into()),
                obligation: ObligationKind::Commitment,
            },
        )
        .await
        .expect("reminder");
    let mut rx = h.engine.subscribe();
    h.engine.send_message("Ada", "Can we go to Porto on Friday?").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");

    let written = h.engine.end_session("Ada", SessionEnd::New).await.expect("end").expect("a handover");
    assert_eq!((written.author.as_str(), written.text.as_str(), written.reason.as_str()), ("persona", handover, "new"));
    let note = written.sanity_note.expect("the false claim raises a governance note");
    assert!(note.contains("overdue") && note.ends_with("Prefer the ledger's facts over inherited feelings."));

    let frame = h.engine.frame("Ada", SessionType::Assist).await.expect("frame");
    assert!(frame.narrative.contains(handover), "{}", frame.narrative);
    assert!(frame.narrative.contains("Prefer the ledger's facts"));
    assert!(frame.obligations[0].overdue);
    // Nothing new since: ending again writes nothing.
    assert!(h.engine.end_session("Ada", SessionEnd::New).await.expect("end").is_none());
    // The chat lists it as a session boundary, after the session's messages, with its note.
    let listed = h.engine.handovers("Ada", 10).await.expect("handovers");
    assert_eq!(listed.len(), 1);
    let last_message = h.engine.ledger().messages(&ada.id, Some(1)).await.expect("messages").pop().expect("one");
    assert!(listed[0].seq > last_message.seq);
    assert_eq!((listed[0].text.as_str(), listed[0].sanity_note.is_some()), (handover, true));
}

#[tokio::test]
async fn when_the_persona_cannot_write_a_handover_the_system_writes_one() {
    let h = Harness::new(&["Of course.", "{\"handover\": \"too short\"}"]).await;
    h.engine.create_persona("Ada", "").await.expect("create");
    let mut rx = h.engine.subscribe();
    h.engine.send_message("Ada", "The blue notebook is on the shelf").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    let written = h.engine.end_session("Ada", SessionEnd::New).await.expect("end").expect("a handover");
    assert_eq!(written.author, "system");
    assert!(written.text.chars().count() >= 50 && written.text.contains("The blue notebook is on the shelf"), "{}", written.text);
    assert!(written.sanity_note.is_none(), "the system's own summary agrees with the ledger");
    // Closing the window never waits for a model.
    h.engine.send_message("Ada", "Bye").await.expect("send");
    h.engine.close_sessions().await;
    let frame = h.engine.frame("Ada", SessionType::Assist).await.expect("frame");
    assert_eq!(frame.memory.handover.as_ref().map(|h| h.reason.as_str()), Some("closed"));
}

#[tokio::test]
async fn language_constitution_versions_and_quota_shape_the_reply() {
    let h = Harness::new(&["Olá!"]).await;
    h.engine.create_persona("Bia", "").await.expect("create");
    h.engine.set_persona_language("Bia", "pt-BR").await.expect("language");
    h.engine.set_constitution("Bia", "Seja breve.", &[]).await.expect("v1");
    let v2 = h.engine.set_constitution("Bia", "Seja breve e honesta.", &["Se pressionada: cite os termos.".into()]).await.expect("v2");
    assert_eq!(v2.version, 2);
    let frame = h.engine.frame("Bia", SessionType::Deliberate).await.expect("frame");
    assert!(frame.narrative.starts_with("Você é Bia."));
    assert!(frame.narrative.contains("modo de deliberação"));
    assert!(frame.narrative.trim_end().ends_with("Se pressionada: cite os termos."), "constitution last");
    assert_eq!(frame.token_budget.budget, 8000);
    assert!(h.engine.set_constitution("Bia", "  ", &[]).await.is_err());
    assert!(h.engine.set_persona_language("Bia", "fr").await.is_err());

    h.engine.set_token_quota("Bia", 10).await.expect("quota");
    let bia = h.engine.persona("Bia").await.expect("bia");
    let day = h.engine.token_usage().await.expect("usage").into_iter().find(|u| u.entity_id == bia.id).expect("row").day;
    h.engine
        .ledger()
        .append(&bia.id, EventBody::TokensUsed { entity_id: bia.id.clone(), day, prompt_tokens: 8, completion_tokens: 3 })
        .await
        .expect("usage");
    let mut rx = h.engine.subscribe();
    h.engine.send_message("Bia", "Oi").await.expect("send");
    let failed = await_reply(&mut rx).await.1.expect_err("over quota");
    assert_eq!(failed.code, "TOKEN_QUOTA_EXCEEDED");
}

#[tokio::test]
async fn new_sets_the_context_boundary_the_next_reply_starts_after_the_handover() {
    let handover = "We planned the Porto trip for Friday; the person still has to book the train tickets.";
    let h = Harness::new(&["Friday it is.", &format!("{{\"handover\": \"{handover}\"}}"), "Welcome back."]).await;
    h.engine.create_persona("Ada", "").await.expect("create");
    let mut rx = h.engine.subscribe();
    h.engine.send_message("Ada", "Can we go to Porto on Friday?").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    h.engine.end_session("Ada", SessionEnd::New).await.expect("end").expect("a handover");

    h.engine.send_message("Ada", "Where were we?").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    let requests = h.provider.requests();
    let req = requests
        .iter()
        .find(|r| r.messages.last().is_some_and(|m| m.content == "Where were we?"))
        .expect("the second reply's request");
    // The old session reaches the model only through the handover in the narrative.
    assert!(req.messages[0].content.contains(handover), "{}", req.messages[0].content);
    let verbatim: Vec<&str> = req.messages[1..].iter().map(|m| m.content.as_str()).collect();
    assert_eq!(verbatim, ["Where were we?"]);
    // Before "New", the same persona's first request did carry its history.
    let first = requests.iter().find(|r| r.messages.last().is_some_and(|m| m.content == "Can we go to Porto on Friday?"));
    assert!(first.is_some());
}

/// The dreaming schedule on a fake clock (`now` is a parameter; the ledger's
/// own timestamps are real): daily after the set time once a session has
/// ended, right after a critical event, never while the queue has work,
/// never with nothing new; its outputs are events.
#[tokio::test]
async fn dreaming_runs_daily_after_its_time_after_critical_events_and_never_while_the_queue_works() {
    use time::{Duration, OffsetDateTime};
    let dream = r#"{"summary": "The person planned a trip to Porto with Ada.", "baseline": "I am Ada, the person's trip planner and friend."}"#;
    let dream2 = r#"{"summary": "The person was told their memory of the plan was wrong.", "baseline": "I am Ada; I check the ledger before trusting a note."}"#;
    let h = Harness::new(&[dream, dream2]).await;
    let ada = h.engine.create_persona("Ada", "").await.expect("create");
    let ledger = h.engine.ledger().clone();
    let say = |id: &str, text: &str| EventBody::MessageAdded {
        message_id: id.into(),
        persona_id: ada.id.clone(),
        role: ledger::MessageRole::Human,
        content: text.into(),
        external_id: None,
    };
    ledger.append(&ada.id, say("m1", "Let's plan the Porto trip for Friday.")).await.expect("message");
    let kinds = |l: std::sync::Arc<ledger::Ledger>| async move {
        l.all_events().await.expect("events").into_iter().map(|e| e.kind).filter(|k| k == "period_synthesized" || k == "baseline_narrative_set").count()
    };

    let t0 = OffsetDateTime::now_utc();
    // One hour before now, so "today's" slot has passed but is before the session ended.
    let at = (t0 - Duration::hours(1)).time();
    let in_days = |d: i64| t0 + Duration::days(d) + Duration::minutes(5);
    assert!(h.engine.dream_if_due(in_days(3), at).await.expect("dream").is_empty(), "no session has ended: nothing is due");

    h.engine.end_session("Ada", SessionEnd::Closed).await.expect("end").expect("handover");
    assert!(h.engine.dream_if_due(t0 + Duration::minutes(5), at).await.expect("dream").is_empty(), "today's slot was before the session");
    assert_eq!(kinds(ledger.clone()).await, 0);

    // Work in the queue: an invocation may run, so no dream starts.
    let later = h.engine.ledger().now() + Duration::days(30);
    let hold = ledger.enqueue_at("test-hold", 10, Some(&ada.id), &serde_json::json!({}), later).await.expect("hold");
    assert!(h.engine.dream_if_due(in_days(1), at).await.expect("dream").is_empty(), "the queue is not idle");
    ledger.dead_letter(&hold.id, "test: released").await.expect("release");

    // The next day, after the set time: the daily dream, as two events.
    let dreamt = h.engine.dream_if_due(in_days(1), at).await.expect("dream");
    assert_eq!(dreamt, [(ada.id.clone(), app::DreamReason::Daily)]);
    assert_eq!(kinds(ledger.clone()).await, 2);
    let frame = h.engine.frame("Ada", SessionType::Assist).await.expect("frame");
    assert!(frame.narrative.contains("the person's trip planner and friend"), "the baseline reaches the narrative");
    assert!(h.engine.dream_if_due(in_days(1), at).await.expect("dream").is_empty(), "nothing new since the dream");

    // Something new the same day is not enough …
    ledger.append(&ada.id, say("m2", "Actually I already booked the train.")).await.expect("message");
    assert!(h.engine.dream_if_due(t0 + Duration::minutes(10), at).await.expect("dream").is_empty());
    // … but a critical event (a governance note) makes it due right away.
    let handover = ledger.last_handover(&ada.id).await.expect("handover").expect("one");
    ledger
        .append(&ada.id, EventBody::GovernanceNoteAdded {
            persona_id: ada.id.clone(),
            handover_seq: handover.seq,
            note: "Prefer the ledger's facts over inherited feelings.".into(),
            findings: vec!["the train was booked".into()],
        })
        .await
        .expect("note");
    let dreamt = h.engine.dream_if_due(t0 + Duration::minutes(11), at).await.expect("dream");
    assert_eq!(dreamt, [(ada.id.clone(), app::DreamReason::Critical)]);
    assert_eq!(kinds(ledger.clone()).await, 4);
    // A failed dream (no scripted answer left) is not retried within the hour.
    ledger.append(&ada.id, say("m3", "One more thing.")).await.expect("message");
    for i in 0..app::SESSIONS_PER_DREAM {
        ledger.append(&ada.id, say(&format!("s{i}"), "hello")).await.expect("message");
        h.engine.end_session("Ada", SessionEnd::Closed).await.expect("end").expect("handover");
    }
    let calls = h.provider.requests().len();
    assert!(h.engine.dream_if_due(t0 + Duration::minutes(12), at).await.expect("dream").is_empty(), "the model's answer was unusable");
    assert_eq!(h.provider.requests().len(), calls + 1, "fifty sessions made it due: the model was asked");
    assert!(h.engine.dream_if_due(t0 + Duration::minutes(40), at).await.expect("dream").is_empty());
    assert_eq!(h.provider.requests().len(), calls + 1, "not retried within the hour");
    assert_eq!(kinds(ledger.clone()).await, 4);
}
