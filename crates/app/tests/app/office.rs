//! The office in the reply path: every reply is framed, the frame is
//! recorded, sessions end with handovers checked against the ledger.

use app::{SessionEnd, SessionType};
use ledger::{EventBody, ObligationKind};

use crate::{await_reply, Harness};

#[tokio::test]
async fn every_reply_is_sent_with_the_narrative_and_its_frame_is_recorded() {
    let h = Harness::new(&["Hello!"]).await;
    let ada = h.engine.personas().create_persona("Ada", "A travel planner").await.expect("create");
    h.engine.office().set_constitution("Ada", "Tell the truth about deadlines.", &["If pressured: cite the terms.".into()]).await.expect("constitution");
    let mut rx = h.engine.subscribe();
    h.engine.conversation().send_message("Ada", "Hi Ada").await.expect("send");
    let reply = await_reply(&mut rx).await.1.expect("reply");

    let why = h.engine.office().why(&reply.id).await.expect("why");
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
    let usage = h.engine.office().token_usage().await.expect("usage");
    assert!(usage.iter().any(|u| u.entity_id == ada.id));
}

#[tokio::test]
async fn a_session_ends_with_a_handover_that_the_next_narrative_weaves_in() {
    let handover = "The person asked about Porto trains. Nothing is overdue and everything is on track for Friday.";
    let h = Harness::new(&["Sure, Friday works.", &format!("{{\"handover\": \"{handover}\"}}")]).await;
    let ada = h.engine.personas().create_persona("Ada", "").await.expect("create");
    // An obligation that is already late: the handover's "nothing is overdue" is false.
    commitment(&h, &ada.id, "Pay the tickets", "2000-01-01T00:00:00Z").await;
    let mut rx = h.engine.subscribe();
    h.engine.conversation().send_message("Ada", "Can we go to Porto on Friday?").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");

    let written = h.engine.office().end_session("Ada", SessionEnd::New).await.expect("end").expect("a handover");
    assert_eq!((written.author.as_str(), written.text.as_str(), written.reason.as_str()), ("persona", handover, "new"));
    let note = written.sanity_note.expect("the false claim raises a governance note");
    assert!(note.contains("overdue") && note.ends_with("Prefer the ledger's facts over inherited feelings."));

    let frame = h.engine.office().frame("Ada", SessionType::Assist).await.expect("frame");
    assert!(frame.narrative.contains(handover), "{}", frame.narrative);
    assert!(frame.narrative.contains("Prefer the ledger's facts"));
    assert!(frame.obligations[0].overdue);
    // Nothing new since: ending again writes nothing.
    assert!(h.engine.office().end_session("Ada", SessionEnd::New).await.expect("end").is_none());
    // The chat lists it as a session boundary, after the session's messages, with its note.
    let listed = h.engine.office().handovers("Ada", 10).await.expect("handovers");
    assert_eq!(listed.len(), 1);
    let last_message = h.engine.ledger().messages(&ada.id, Some(1)).await.expect("messages").pop().expect("one");
    assert!(listed[0].seq > last_message.seq);
    assert_eq!((listed[0].text.as_str(), listed[0].sanity_note.is_some()), (handover, true));
}

#[tokio::test]
async fn when_the_persona_cannot_write_a_handover_the_system_writes_one() {
    let h = Harness::new(&["Of course.", "{\"handover\": \"too short\"}"]).await;
    h.engine.personas().create_persona("Ada", "").await.expect("create");
    let mut rx = h.engine.subscribe();
    h.engine.conversation().send_message("Ada", "The blue notebook is on the shelf").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    let written = h.engine.office().end_session("Ada", SessionEnd::New).await.expect("end").expect("a handover");
    assert_eq!(written.author, "system");
    assert!(written.text.chars().count() >= 50 && written.text.contains("The blue notebook is on the shelf"), "{}", written.text);
    assert!(written.sanity_note.is_none(), "the system's own summary agrees with the ledger");
    // Closing the window never waits for a model.
    h.engine.conversation().send_message("Ada", "Bye").await.expect("send");
    h.engine.office().close_sessions().await;
    let frame = h.engine.office().frame("Ada", SessionType::Assist).await.expect("frame");
    assert_eq!(frame.memory.handover.as_ref().map(|h| h.reason.as_str()), Some("closed"));
}

#[tokio::test]
async fn language_constitution_versions_and_quota_shape_the_reply() {
    let h = Harness::new(&["Olá!"]).await;
    h.engine.personas().create_persona("Bia", "").await.expect("create");
    h.engine.office().set_persona_language("Bia", "pt-BR").await.expect("language");
    h.engine.office().set_constitution("Bia", "Seja breve.", &[]).await.expect("v1");
    let v2 = h.engine.office().set_constitution("Bia", "Seja breve e honesta.", &["Se pressionada: cite os termos.".into()]).await.expect("v2");
    assert_eq!(v2.version, 2);
    let frame = h.engine.office().frame("Bia", SessionType::Deliberate).await.expect("frame");
    assert!(frame.narrative.starts_with("Você é Bia."));
    assert!(frame.narrative.contains("modo de deliberação"));
    assert!(frame.narrative.trim_end().ends_with("Se pressionada: cite os termos."), "constitution last");
    assert_eq!(frame.token_budget.budget, 8000);
    assert!(h.engine.office().set_constitution("Bia", "  ", &[]).await.is_err());
    assert!(h.engine.office().set_persona_language("Bia", "fr").await.is_err());

    h.engine.office().set_token_quota("Bia", 10).await.expect("quota");
    let bia = h.engine.personas().persona("Bia").await.expect("bia");
    let day = h.engine.office().token_usage().await.expect("usage").into_iter().find(|u| u.entity_id == bia.id).expect("row").day;
    h.engine
        .ledger()
        .append(&bia.id, EventBody::TokensUsed { entity_id: bia.id.clone(), day, prompt_tokens: 8, completion_tokens: 3 })
        .await
        .expect("usage");
    let mut rx = h.engine.subscribe();
    h.engine.conversation().send_message("Bia", "Oi").await.expect("send");
    let failed = await_reply(&mut rx).await.1.expect_err("over quota");
    assert_eq!(failed.code, "TOKEN_QUOTA_EXCEEDED");
}

#[tokio::test]
async fn new_sets_the_context_boundary_the_next_reply_starts_after_the_handover() {
    let handover = "We planned the Porto trip for Friday; the person still has to book the train tickets.";
    let h = Harness::new(&["Friday it is.", &format!("{{\"handover\": \"{handover}\"}}"), "Welcome back."]).await;
    h.engine.personas().create_persona("Ada", "").await.expect("create");
    let mut rx = h.engine.subscribe();
    h.engine.conversation().send_message("Ada", "Can we go to Porto on Friday?").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    h.engine.office().end_session("Ada", SessionEnd::New).await.expect("end").expect("a handover");

    h.engine.conversation().send_message("Ada", "Where were we?").await.expect("send");
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
    let ada = h.engine.personas().create_persona("Ada", "").await.expect("create");
    let ledger = h.engine.ledger().clone();
    let say = |id: &str, text: &str| EventBody::MessageAdded {
        message_id: id.into(),
        persona_id: ada.id.clone(),
        role: ledger::MessageRole::Human,
        content: text.into(),
        external_id: None,
        said_at: None,
    };
    ledger.append(&ada.id, say("m1", "Let's plan the Porto trip for Friday.")).await.expect("message");
    let kinds = |l: std::sync::Arc<ledger::Ledger>| async move {
        l.all_events().await.expect("events").into_iter().map(|e| e.kind).filter(|k| k == "period_synthesized" || k == "baseline_narrative_set").count()
    };

    let t0 = OffsetDateTime::now_utc();
    // One hour before now, so "today's" slot has passed but is before the session ended.
    let at = (t0 - Duration::hours(1)).time();
    let in_days = |d: i64| t0 + Duration::days(d) + Duration::minutes(5);
    assert!(h.engine.office().dream_if_due(in_days(3), at).await.expect("dream").is_empty(), "no session has ended: nothing is due");

    h.engine.office().end_session("Ada", SessionEnd::Closed).await.expect("end").expect("handover");
    assert!(h.engine.office().dream_if_due(t0 + Duration::minutes(5), at).await.expect("dream").is_empty(), "today's slot was before the session");
    assert_eq!(kinds(ledger.clone()).await, 0);

    // Work in the queue: an invocation may run, so no dream starts.
    let later = h.engine.ledger().now() + Duration::days(30);
    let hold = ledger.enqueue_at("test-hold", 10, Some(&ada.id), &serde_json::json!({}), later).await.expect("hold");
    assert!(h.engine.office().dream_if_due(in_days(1), at).await.expect("dream").is_empty(), "the queue is not idle");
    ledger.dead_letter(&hold.id, "test: released").await.expect("release");

    // The next day, after the set time: the daily dream, as two events.
    let dreamt = h.engine.office().dream_if_due(in_days(1), at).await.expect("dream");
    assert_eq!(dreamt, [(ada.id.clone(), app::DreamReason::Daily)]);
    assert_eq!(kinds(ledger.clone()).await, 2);
    let frame = h.engine.office().frame("Ada", SessionType::Assist).await.expect("frame");
    assert!(frame.narrative.contains("the person's trip planner and friend"), "the baseline reaches the narrative");
    assert!(h.engine.office().dream_if_due(in_days(1), at).await.expect("dream").is_empty(), "nothing new since the dream");

    // Something new the same day is not enough …
    ledger.append(&ada.id, say("m2", "Actually I already booked the train.")).await.expect("message");
    assert!(h.engine.office().dream_if_due(t0 + Duration::minutes(10), at).await.expect("dream").is_empty());
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
    let dreamt = h.engine.office().dream_if_due(t0 + Duration::minutes(11), at).await.expect("dream");
    assert_eq!(dreamt, [(ada.id.clone(), app::DreamReason::Critical)]);
    assert_eq!(kinds(ledger.clone()).await, 4);
    // A failed dream (no scripted answer left) is not retried within the hour.
    ledger.append(&ada.id, say("m3", "One more thing.")).await.expect("message");
    for i in 0..app::SESSIONS_PER_DREAM {
        ledger.append(&ada.id, say(&format!("s{i}"), "hello")).await.expect("message");
        h.engine.office().end_session("Ada", SessionEnd::Closed).await.expect("end").expect("handover");
    }
    let calls = h.provider.requests().len();
    assert!(h.engine.office().dream_if_due(t0 + Duration::minutes(12), at).await.expect("dream").is_empty(), "the model's answer was unusable");
    assert_eq!(h.provider.requests().len(), calls + 1, "fifty sessions made it due: the model was asked");
    assert!(h.engine.office().dream_if_due(t0 + Duration::minutes(40), at).await.expect("dream").is_empty());
    assert_eq!(h.provider.requests().len(), calls + 1, "not retried within the hour");
    assert_eq!(kinds(ledger.clone()).await, 4);
}

// ----- session 4: affordances, session modes, simulation, obligations added by the person -----

/// Sends `message` with the planner's scripted `reply` and returns the chat line it ended with.
async fn planned(h: &Harness, persona: &str, message: &str, reply: serde_json::Value) -> String {
    let mut rx = h.engine.subscribe();
    h.provider.push_reply(reply.to_string());
    h.engine.conversation().send_message(persona, message).await.expect("send");
    await_reply(&mut rx).await.1.expect("reply").content
}

/// The proposal the planner's call is waiting on, once it is there.
async fn proposed(h: &Harness, persona: &str) -> app::ProposalView {
    for _ in 0..100 {
        if let Some(p) = h.engine.tools().pending_proposal(persona).await.expect("pending") {
            return p;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("no proposal for {persona}");
}

fn call(tool: &str, args: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"action": "CALL_TOOL", "tool": tool, "args": args})
}

async fn kinds(h: &Harness) -> Vec<String> {
    h.engine.ledger().all_events().await.expect("events").into_iter().map(|e| e.kind).collect()
}

#[tokio::test]
async fn the_office_affordances_run_as_tools_with_receipts_and_error_tokens() {
    let h = Harness::new(&[]).await;
    let ada = h.engine.personas().create_persona("Ada", "").await.expect("create");
    let line = planned(&h, "Ada", "leave a note for yourself about the Porto trip", call("write_note", serde_json::json!({"content": "Porto: trains before noon"}))).await;
    assert_eq!(line, "Note written for the next session.");
    let line = planned(&h, "Ada", "log your reasoning about the trains", call("log_reasoning", serde_json::json!({"reasoning": "Morning trains are cheaper."}))).await;
    assert_eq!(line, "Reasoning logged.");
    let line = planned(&h, "Ada", "please clarify which day", call("request_clarification", serde_json::json!({"question": "Friday or Saturday?"}))).await;
    assert_eq!(line, "Question for you: Friday or Saturday?");
    let line = planned(&h, "Ada", "sign this: I will book the tickets", call("sign", serde_json::json!({"statement": "I will book the tickets"}))).await;
    assert!(line.starts_with(&format!("Signed by {}", ada.id)), "{line}");
    let line = planned(&h, "Ada", "verify the ledger", call("verify", serde_json::json!({}))).await;
    assert!(line.starts_with("The ledger verifies"), "{line}");
    let k = kinds(&h).await;
    for kind in ["note_written", "reasoning_logged", "clarification_requested", "statement_signed"] {
        assert!(k.iter().any(|x| x == kind), "{kind} missing");
    }
    // The persona signs its own events: the statement is signed with its key.
    let signed = h.engine.ledger().all_events().await.expect("events").into_iter().find(|e| e.kind == "statement_signed").expect("signed");
    assert_eq!(signed.signer, ada.id);

    // submit: a binding act, proposed first; commit → a receipt and a commitment.
    h.provider.push_reply(call("submit", serde_json::json!({"intent": "commit", "payload": {"text": "Book the Porto tickets", "due": "2030-03-01T12:00:00Z"}})).to_string());
    h.engine.conversation().send_message("Ada", "I promise to book the tickets").await.expect("send");
    let proposal = proposed(&h, "Ada").await;
    assert_eq!(proposal.tool, "submit");
    let sim = h.engine.office().simulate_proposal("Ada", &proposal.nonce).await.expect("simulate");
    assert_eq!((sim.kind.as_str(), sim.level.as_str(), sim.ran), ("submit:commit", "recommended", true));
    assert_eq!(sim.obligations_added, ["“Book the Porto tickets” due 2030-03-01T12:00:00Z"]);
    assert!(h.engine.office().obligations("Ada").await.expect("obligations").is_empty(), "a simulation commits nothing");
    let done = h.engine.tools().confirm_proposal("Ada", &proposal.nonce).await.expect("confirm");
    assert_eq!(done.receipt.expect("receipt").kind, "intent_submitted");
    let obligations = h.engine.office().obligations("Ada").await.expect("obligations");
    assert_eq!((obligations.len(), obligations[0].kind.as_str()), (1, "commitment"));
    let id = obligations[0].id.clone();

    // query: read-only, the persona's own facts, with a hash and a position.
    let line = planned(&h, "Ada", "what are my obligations?", call("query", serde_json::json!({"about": "obligations"}))).await;
    assert!(line.starts_with("obligations: 1 result(s) as of event"), "{line}");

    // withdraw is critical: without a simulation it is rejected with an ErrorToken.
    let withdraw = serde_json::json!({"intent": "withdraw", "payload": {"obligation_id": id, "reason": "the trip is off"}});
    h.provider.push_reply(call("submit", withdraw.clone()).to_string());
    h.engine.conversation().send_message("Ada", "withdraw the commitment").await.expect("send");
    let proposal = proposed(&h, "Ada").await;
    let refused = h.engine.tools().confirm_proposal("Ada", &proposal.nonce).await.expect("confirm runs");
    assert!(refused.summary.contains("OFFICE_SIMULATION_REQUIRED"), "{}", refused.summary);
    assert!(refused.receipt.is_none());
    assert_eq!(h.engine.office().obligations("Ada").await.expect("obligations").iter().filter(|o| !o.done).count(), 1);
    // Simulate (the tool), then it goes through.
    let line = planned(&h, "Ada", "simulate the withdrawal", call("simulate", serde_json::json!({"tool": "submit", "args": withdraw.clone()}))).await;
    assert!(line.contains("risk 0.90") && line.contains("required, the first time this persona does it") && line.contains("obligation closed"), "{line}");
    h.provider.push_reply(call("submit", withdraw.clone()).to_string());
    h.engine.conversation().send_message("Ada", "withdraw the commitment").await.expect("send");
    let proposal = proposed(&h, "Ada").await;
    let done = h.engine.tools().confirm_proposal("Ada", &proposal.nonce).await.expect("confirm");
    assert_eq!(done.receipt.expect("receipt").kind, "intent_submitted");
    assert!(h.engine.office().obligations("Ada").await.expect("obligations").iter().all(|o| o.done));

    // A structured rejection for an obligation that is not open.
    let again = serde_json::json!({"intent": "fulfil", "payload": {"obligation_id": id}});
    h.provider.push_reply(call("submit", again).to_string());
    h.engine.conversation().send_message("Ada", "I fulfilled it").await.expect("send");
    let proposal = proposed(&h, "Ada").await;
    let rejected = h.engine.tools().confirm_proposal("Ada", &proposal.nonce).await.expect("confirm runs");
    assert!(rejected.summary.starts_with("Rejected (OFFICE_OBLIGATION_NOT_OPEN)"), "{}", rejected.summary);
    assert!(h.engine.vault().verify().await.expect("verify").ok);
}

#[tokio::test]
async fn session_modes_set_the_rules_the_frame_and_the_narrative() {
    let h = Harness::new(&[]).await;
    let ada = h.engine.personas().create_persona("Ada", "").await.expect("create");
    let s = h.engine.office().session_mode("Ada").await.expect("mode");
    assert_eq!((s.session_type.as_str(), s.mode.as_str()), ("assist", "deliberation"));
    let frame = h.engine.office().frame("Ada", app::SessionType::Assist).await.expect("frame");
    assert!(frame.narrative.contains("nothing binds you until the person asks you to act"), "{}", frame.narrative);

    // Seed: an assist session starts in deliberation and may escalate. A
    // binding act asked for in a turn switches it to commitment first (an
    // event signed by the persona), and the act runs.
    let line = planned(&h, "Ada", "save the movie Alien", call("save_movie", serde_json::json!({"title": "Alien"}))).await;
    assert!(line.starts_with("Saved movie"), "{line}");
    let s = h.engine.office().session_mode("Ada").await.expect("mode");
    assert_eq!((s.session_type.as_str(), s.mode.as_str()), ("assist", "commitment"));
    let escalation = h.engine.ledger().all_events().await.expect("events").into_iter().rfind(|e| e.kind == "session_mode_set");
    assert_eq!(escalation.expect("escalated").signer, ada.id);
    // The escalation ends with the session: the next one deliberates again.
    h.engine.office().end_session("Ada", app::SessionEnd::New).await.expect("end");
    let s = h.engine.office().session_mode("Ada").await.expect("mode");
    assert_eq!((s.session_type.as_str(), s.mode.as_str()), ("assist", "deliberation"));

    let bad = h.engine.office().set_session_mode("Ada", "deliberate", "commitment").await.expect_err("not allowed");
    assert_eq!(bad.code, "INVALID_INPUT");
    assert!(h.engine.office().set_session_mode("Ada", "holiday", "commitment").await.is_err());

    // Deliberation the person chose: writes are simulated, nothing is
    // committed, and the session does not escalate.
    let s = h.engine.office().set_session_mode("Ada", "assist", "deliberation").await.expect("set");
    assert_eq!(s.allowed_modes, ["deliberation", "commitment"]);
    let line = planned(&h, "Ada", "save the movie Heat", call("save_movie", serde_json::json!({"title": "Heat"}))).await;
    assert!(line.starts_with("Deliberation mode: nothing was committed.") && line.contains("movie “Heat”"), "{line}");
    assert!(h.engine.tools().list_items(None).await.expect("items").iter().all(|i| i.title != "Heat"));
    assert_eq!(h.engine.office().session_mode("Ada").await.expect("mode").mode, "deliberation");
    assert!(kinds(&h).await.iter().any(|k| k == "simulation_run"));
    // Drafts still run in deliberation.
    let line = planned(&h, "Ada", "leave a note for yourself: Heat is long", call("write_note", serde_json::json!({"content": "Heat is long"}))).await;
    assert_eq!(line, "Note written for the next session.");
    // The next reply's frame and narrative follow the mode.
    let frame = h.engine.office().frame("Ada", app::SessionType::Assist).await.expect("frame");
    assert_eq!(frame.state.mode, "deliberation");
    assert!(frame.narrative.contains("in deliberation mode"), "{}", frame.narrative);

    // Research: limited actions, refused with an ErrorToken.
    h.engine.office().set_session_mode("Ada", "research", "deliberation").await.expect("set");
    let line = planned(&h, "Ada", "save the movie Heat", call("save_movie", serde_json::json!({"title": "Heat"}))).await;
    assert!(line.starts_with("Rejected (OFFICE_SESSION_RESTRICTED)"), "{line}");
    // Its frame says why: the tool is restricted by the session type.
    let frame = serde_json::to_value(h.engine.office().frame("Ada", app::SessionType::Research).await.expect("frame")).expect("json");
    let restricted = frame["capabilities"]["restricted"].as_array().expect("restricted").clone();
    assert!(restricted.iter().any(|r| r["name"] == "save_movie" && r["reason"] == "session"), "{restricted:?}");
    assert!(!restricted.iter().any(|r| r["name"] == "query"));
    // The reply's budget follows the session type.
    let mut rx = h.engine.subscribe();
    h.provider.push_reply("Looking into it.");
    h.engine.conversation().send_message("Ada", "Hi").await.expect("send");
    let reply = await_reply(&mut rx).await.1.expect("reply");
    let why = h.engine.office().why(&reply.id).await.expect("why");
    assert_eq!((why.session_type.as_str(), why.budget), ("research", 6000));

    // Commitment again: the save runs.
    h.engine.office().set_session_mode("Ada", "work", "commitment").await.expect("set");
    let line = planned(&h, "Ada", "save the movie Heat", call("save_movie", serde_json::json!({"title": "Heat"}))).await;
    assert!(line.starts_with("Saved movie"), "{line}");
    let sets = h.engine.ledger().all_events().await.expect("events").into_iter().filter(|e| e.kind == "session_mode_set").count();
    // The escalation and its reset (signed by the persona), then the person's three choices.
    assert_eq!(sets, 5);
    assert_eq!(h.engine.ledger().session_mode(&ada.id).await.expect("mode"), Some(("work".into(), "commitment".into())));
}

#[tokio::test]
async fn delete_all_must_be_simulated_on_a_copy_before_it_runs() {
    let h = Harness::new(&[
        r#"{"action":"CALL_TOOL","args":{"title":"Heat"},"tool":"save_movie"}"#,
        r#"{"action":"CALL_TOOL","args":{"content":"buy milk"},"tool":"save_note"}"#,
    ])
    .await;
    let ei = h.engine.personas().list_personas().await.expect("personas").remove(0);
    let mut rx = h.engine.subscribe();
    for m in ["save the movie Heat", "save a note: buy milk"] {
        h.engine.conversation().send_message(&ei.id, m).await.expect("send");
        await_reply(&mut rx).await.1.expect("saved");
    }
    h.engine.conversation().send_message(&ei.id, "delete all my memories").await.expect("send");
    let proposal = h.engine.tools().pending_proposal(&ei.id).await.expect("pending").expect("a proposal");
    let head = h.engine.ledger().head().await;
    let sim = h.engine.office().simulate_proposal(&ei.id, &proposal.nonce).await.expect("simulate");
    assert_eq!((sim.level.as_str(), sim.critical, sim.ran), ("required", true, true));
    assert_eq!(sim.items_removed.len(), 2);
    assert_eq!(sim.recommendation.as_deref(), Some("modify"));
    // Only the simulation's own record was appended; the items are all there.
    assert_eq!(h.engine.ledger().head().await.0, head.0 + 1);
    assert_eq!(h.engine.tools().list_items(None).await.expect("items").len(), 2);
    let done = h.engine.tools().confirm_proposal(&ei.id, &proposal.nonce).await.expect("confirm");
    assert_eq!(done.receipt.expect("receipt").kind, "payload_erased");
    assert!(h.engine.tools().list_items(None).await.expect("items").is_empty());
    // The simulation named the items: its record is erased with them.
    let events = h.engine.ledger().all_events().await.expect("events");
    let simulation = events.iter().find(|e| e.kind == "simulation_run").expect("the simulation's event stays in the chain");
    assert!(simulation.payload.is_none(), "{:?}", simulation.payload);
    assert!(events.iter().filter_map(|e| e.payload.as_ref()).all(|p| !p.to_string().contains("Heat")), "nothing names Heat any more");
    assert!(h.engine.vault().verify().await.expect("verify").ok);

    // Without a simulation, a required one refuses to run.
    h.provider.push_reply(r#"{"action":"CALL_TOOL","args":{"title":"Ran"},"tool":"save_movie"}"#);
    h.engine.conversation().send_message(&ei.id, "save the movie Ran").await.expect("send");
    await_reply(&mut rx).await.1.expect("saved");
    h.engine.conversation().send_message(&ei.id, "delete all my memories").await.expect("send");
    let proposal = h.engine.tools().pending_proposal(&ei.id).await.expect("pending").expect("a proposal");
    let refused = h.engine.tools().confirm_proposal(&ei.id, &proposal.nonce).await.expect("confirm runs");
    assert!(refused.summary.contains("OFFICE_SIMULATION_REQUIRED"), "{}", refused.summary);
    assert_eq!(h.engine.tools().list_items(None).await.expect("items").len(), 1);
}

#[tokio::test]
async fn the_person_adds_obligations_as_the_same_event_the_tool_writes() {
    let h = Harness::new(&[]).await;
    let ada = h.engine.personas().create_persona("Ada", "").await.expect("create");
    let o = h.engine.office().add_obligation("Ada", "  Send the draft  ", Some("2030-01-31T18:00:00-03:00"), "commitment").await.expect("add");
    assert_eq!((o.text.as_str(), o.kind.as_str(), o.due_at.as_deref()), ("Send the draft", "commitment", Some("2030-01-31T21:00:00Z")));
    assert!(!o.overdue && o.minutes_left.is_some_and(|m| m > 0));
    let undated = h.engine.office().add_obligation("Ada", "Water the plants", None, "reminder").await.expect("add");
    assert_eq!(undated.due_at, None);
    for (text, due, kind) in [("", None, "reminder"), ("x", Some("friday"), "reminder"), ("x", None, "wish")] {
        assert_eq!(h.engine.office().add_obligation("Ada", text, due, kind).await.expect_err("invalid").code, "INVALID_INPUT");
    }
    let events = h.engine.ledger().all_events().await.expect("events");
    let set: Vec<_> = events.iter().filter(|e| e.kind == "reminder_set").collect();
    assert_eq!(set.len(), 2);
    assert!(set.iter().all(|e| e.entity_id == ada.id && e.signer == "human"));
    let frame = h.engine.office().frame("Ada", app::SessionType::Work).await.expect("frame");
    assert_eq!(frame.obligations.len(), 2);
    assert_eq!(frame.state.mode, "commitment");
}

// ----- session 5: the first time of an action; simulations recorded in the ledger -----

async fn count(h: &Harness, kind: &str) -> usize {
    kinds(h).await.iter().filter(|k| *k == kind).count()
}

#[tokio::test]
async fn the_first_action_of_a_kind_is_recommended_a_simulation() {
    let h = Harness::new(&[]).await;
    let ada = h.engine.personas().create_persona("Ada", "").await.expect("create");
    h.engine.personas().create_persona("Bob", "").await.expect("create");
    let pay = h.engine.office().add_obligation("Ada", "Pay the tickets", None, "commitment").await.expect("add");
    let book = h.engine.office().add_obligation("Ada", "Book the hotel", None, "commitment").await.expect("add");
    let fulfil = |id: &str| call("submit", serde_json::json!({"intent": "fulfil", "payload": {"obligation_id": id}}));

    // Fulfilling scores 0.5 (no simulation needed above it), but Ada never did it: recommended, and run.
    h.provider.push_reply(fulfil(&pay.id).to_string());
    h.engine.conversation().send_message("Ada", "I fulfilled the tickets commitment").await.expect("send");
    let proposal = proposed(&h, "Ada").await;
    let sim = h.engine.office().simulate_proposal("Ada", &proposal.nonce).await.expect("simulate");
    assert_eq!((sim.kind.as_str(), sim.level.as_str(), sim.first_time, sim.ran), ("submit:fulfil", "recommended", true, true));
    assert!((sim.risk - 0.5).abs() < 1e-6, "{}", sim.risk);
    assert_eq!(sim.obligations_closed, ["“Pay the tickets”"]);
    assert_eq!(count(&h, "action_executed").await, 0, "a simulation is not an executed action");
    let done = h.engine.tools().confirm_proposal("Ada", &proposal.nonce).await.expect("confirm");
    assert_eq!(done.receipt.expect("receipt").kind, "intent_submitted");
    // The ledger now holds Ada's first fulfilment, signed by her.
    let executed: Vec<_> = h.engine.ledger().all_events().await.expect("events").into_iter().filter(|e| e.kind == "action_executed").collect();
    assert_eq!(executed.len(), 1);
    assert_eq!((executed[0].entity_id.as_str(), executed[0].signer.as_str()), (ada.id.as_str(), ada.id.as_str()));
    assert_eq!(h.engine.ledger().action_executions(&ada.id, "submit:fulfil").await.expect("executions"), 1);

    // The second time it is an ordinary 0.5: no simulation.
    h.provider.push_reply(fulfil(&book.id).to_string());
    h.engine.conversation().send_message("Ada", "I fulfilled the hotel booking").await.expect("send");
    let proposal = proposed(&h, "Ada").await;
    let sim = h.engine.office().simulate_proposal("Ada", &proposal.nonce).await.expect("simulate");
    assert_eq!((sim.level.as_str(), sim.first_time, sim.ran), ("optional", false, false));
    h.engine.tools().confirm_proposal("Ada", &proposal.nonce).await.expect("confirm");
    assert_eq!(h.engine.ledger().action_executions(&ada.id, "submit:fulfil").await.expect("executions"), 2);

    // Per persona: Bob never fulfilled anything. A refused action does not count.
    h.provider.push_reply(fulfil(&pay.id).to_string());
    h.engine.conversation().send_message("Bob", "I fulfilled the tickets for Ada").await.expect("send");
    let proposal = proposed(&h, "Bob").await;
    let sim = h.engine.office().simulate_proposal("Bob", &proposal.nonce).await.expect("simulate");
    assert_eq!((sim.level.as_str(), sim.first_time), ("recommended", true));
    assert!(sim.rejected.is_some(), "not Bob's obligation");
    let refused = h.engine.tools().confirm_proposal("Bob", &proposal.nonce).await.expect("confirm runs");
    assert!(refused.summary.starts_with("Rejected (OFFICE_OBLIGATION_NOT_OPEN)"), "{}", refused.summary);
    assert_eq!(count(&h, "action_executed").await, 2);

    // The count is a projection of the events: a replay rebuilds it.
    h.engine.ledger().rebuild_projections().await.expect("rebuild");
    assert_eq!(h.engine.ledger().action_executions(&ada.id, "submit:fulfil").await.expect("executions"), 2);
}

/// Saves the movie `title` (if any), then asks to delete everything: the proposal.
async fn save_then_delete_all(h: &Harness, persona: &str, title: Option<&str>) -> app::ProposalView {
    if let Some(title) = title {
        planned(h, persona, &format!("save the movie {title}"), call("save_movie", serde_json::json!({"title": title}))).await;
    }
    h.engine.conversation().send_message(persona, "delete all my memories").await.expect("send");
    proposed(h, persona).await
}

#[tokio::test]
async fn a_recorded_simulation_covers_the_same_action_after_a_restart_until_the_state_changes() {
    let h = Harness::new(&[]).await;
    let ei = h.engine.personas().list_personas().await.expect("personas").remove(0);
    // Simulated, then left unanswered: the app closes.
    let proposal = save_then_delete_all(&h, &ei.id, Some("Heat")).await;
    let sim = h.engine.office().simulate_proposal(&ei.id, &proposal.nonce).await.expect("simulate");
    assert_eq!((sim.level.as_str(), sim.ran, sim.items_removed.len()), ("required", true, 1));
    h.engine.tools().reject_proposal(&ei.id).await.expect("reject");

    // After a restart, the state changed (one more item): the recorded simulation no longer describes it.
    let h = h.restart(&[]).await;
    let proposal = save_then_delete_all(&h, &ei.id, Some("Ran")).await;
    let refused = h.engine.tools().confirm_proposal(&ei.id, &proposal.nonce).await.expect("confirm runs");
    assert!(refused.summary.contains("OFFICE_SIMULATION_REQUIRED"), "{}", refused.summary);
    assert_eq!(h.engine.tools().list_items(None).await.expect("items").len(), 2);

    // Simulated in this state, then restarted: the same action runs without asking again.
    let proposal = save_then_delete_all(&h, &ei.id, None).await;
    let sim = h.engine.office().simulate_proposal(&ei.id, &proposal.nonce).await.expect("simulate");
    assert_eq!(sim.items_removed.len(), 2);
    h.engine.tools().reject_proposal(&ei.id).await.expect("reject");
    let simulations = count(&h, "simulation_run").await;
    let h = h.restart(&[]).await;
    let proposal = save_then_delete_all(&h, &ei.id, None).await;
    let done = h.engine.tools().confirm_proposal(&ei.id, &proposal.nonce).await.expect("confirm");
    assert_eq!(done.receipt.expect("receipt").kind, "payload_erased");
    assert!(h.engine.tools().list_items(None).await.expect("items").is_empty());
    assert_eq!(count(&h, "simulation_run").await, simulations, "no new simulation was needed");
}

// ----- latency: the printed frame is the one the reply sends -----

/// `ledgermind frame` (`Engine::frame`) must print the frame the next reply
/// sends: same history, retrieved lines (the persona's profile, summary and
/// memories), session type and state, hence the same hash. The queue is
/// paused so the frame is printed between the message and its reply.
#[tokio::test]
async fn the_frame_printed_before_a_reply_is_the_one_the_reply_sends() {
    let clock = std::sync::Arc::new(ledger::ManualClock::new(time::macros::datetime!(2026-03-02 09:00 UTC)));
    let h = crate::Harness::configured(&["The train leaves at nine.", "Noted, Friday it is."], |c| c.clock = clock.clone()).await;
    let ada = h.engine.personas().create_persona("Ada", "A travel planner").await.expect("create");
    let mut edit = crate::personas::edit_of(&h.engine.personas().persona_profile("Ada").await.expect("profile"));
    edit.traits = vec!["punctual".into(), "dry humour".into()];
    h.engine.personas().update_persona(&ada.id, edit).await.expect("traits");
    h.engine.office().set_constitution("Ada", "Tell the truth about deadlines.", &[]).await.expect("constitution");
    h.engine.office().set_session_mode("Ada", "work", "commitment").await.expect("session");
    commitment(&h, &ada.id, "Book the Porto train", "2026-03-06T18:00:00Z").await;
    let mut rx = h.engine.subscribe();
    h.engine.conversation().send_message("Ada", "When does the Porto train leave?").await.expect("send");
    await_reply(&mut rx).await.1.expect("first reply");

    h.engine.conversation().pause_queue().await;
    h.engine.conversation().send_message("Ada", "Can we go to Porto on Friday by train?").await.expect("send");
    let printed = h.engine.office().frame("Ada", SessionType::Work).await.expect("frame");
    h.engine.conversation().resume_queue().await;
    let reply = await_reply(&mut rx).await.1.expect("reply");

    let why = h.engine.office().why(&reply.id).await.expect("why");
    assert_eq!(why.frame_hash, printed.frame_hash, "printed:\n{}\nsent:\n{}", printed.narrative, why.narrative);
    assert_eq!(why.narrative, printed.narrative);
    assert!(printed.memory.retrieved.iter().any(|l| l.contains("punctual")), "{:?}", printed.memory.retrieved);
    assert!(printed.memory.recent_events.iter().any(|e| e.text.as_deref() == Some("Can we go to Porto on Friday by train?")));
    assert_eq!((printed.state.session_type, printed.obligations.len()), (SessionType::Work, 1));
}

/// Appends the persona's commitment `r1`, due at `due_at`.
async fn commitment(h: &crate::Harness, persona_id: &str, text: &str, due_at: &str) {
    let body = EventBody::ReminderSet {
        reminder_id: "r1".into(),
        persona_id: persona_id.to_owned(),
        text: text.to_owned(),
        due_at: Some(due_at.to_owned()),
        obligation: ObligationKind::Commitment,
    };
    h.engine.ledger().append(persona_id, body).await.expect("reminder");
}
