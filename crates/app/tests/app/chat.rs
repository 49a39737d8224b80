use app::{AppEvent, MessageRole};
use ledger::{EventBody, HUMAN_ENTITY};
use providers::ProviderError;

use crate::{await_reply, Harness};

#[tokio::test]
async fn a_reply_streams_and_is_committed_signed_by_the_persona() {
    let h = Harness::new(&["Four, of course. Anything else?"]).await;
    let ada = h.engine.personas().create_persona("Ada", "A patient mathematics tutor").await.expect("create");
    let mut rx = h.engine.subscribe();
    let (msg, _request) = h.engine.conversation().send_message("ada", "What is two plus two?").await.expect("send");
    assert_eq!(msg.role, MessageRole::Human);
    let (deltas, reply) = await_reply(&mut rx).await;
    let reply = reply.expect("reply");
    assert!(deltas.len() > 1, "streamed in pieces: {deltas:?}");
    assert_eq!(deltas.concat().trim(), reply.content);
    assert_eq!(reply.persona_id, ada.id);
    let history = h.engine.conversation().list_messages(&ada.id).await.expect("history");
    assert_eq!(history.len(), 2);
    // Newest first: the reply, then the office's records of its frame and tokens.
    let events = h.engine.ledger().events(None, 3).await.expect("events");
    let kinds: Vec<_> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["tokens_used", "reply_framed", "message_added"]);
    assert_eq!(events[2].signer, ada.id, "the persona signs its own words");
    assert!(h.engine.vault().verify().await.expect("verify").ok);
    // The prompt carried the persona and the question.
    let seen = h.provider.requests();
    assert!(seen[0].messages[0].content.contains("Ada"));
    assert!(seen[0].messages.last().map(|m| m.content.contains("two plus two")).unwrap_or(false));
}

/// Ei's model gets the compact prompt (as small local models do), whose
/// start stays put from turn to turn.
async fn compact_prompt_for_ei(h: &Harness) {
    let ei = h.engine.personas().persona("Ei").await.expect("ei");
    let model = ei.model.split_once(':').map_or(ei.model.as_str(), |(_, m)| m);
    h.engine.conversation().set_prompt_profile(model, "compact").await.expect("profile");
}

#[tokio::test]
async fn between_turns_the_next_prompt_is_read_ahead_and_the_next_reply_starts_with_it() {
    // Off by default (one CLI process per message ends with its reply).
    let off = Harness::new(&["Hello!"]).await;
    let mut rx = off.engine.subscribe();
    off.engine.conversation().send_message("Ei", "Hi!").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    off.engine.shutdown().await;
    assert!(off.provider.prefills().is_empty(), "read ahead although it is off");

    let h = Harness::new(&["Nice to meet you, Marta!", "You live in Lisbon.", "Osaka, next month."]).await;
    let conversation = h.engine.conversation();
    let mut rx = h.engine.subscribe();
    conversation.send_message("Ei", "Hi! My name is Marta and I live in Lisbon.").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");

    compact_prompt_for_ei(&h).await;
    conversation.read_ahead_between_turns(true);
    conversation.send_message("Ei", "Where do I live?").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    conversation.until_read_ahead().await;
    let ahead = h.provider.prefills();
    let read = &ahead.last().expect("read ahead after the reply").messages;
    assert!(read.iter().any(|m| m.content == "You live in Lisbon."), "the reply just given is read ahead: {read:?}");
    assert!(!read.last().is_some_and(|m| m.role == providers::Role::User), "the next message is not known yet");

    // What was read ahead ends with the opening of the remembered lines a
    // message may bring; this one brings the line about Lisbon.
    let (opening, start) = read.split_last().expect("something was read ahead");
    assert_eq!(opening.role, providers::Role::System);
    conversation.send_message("Ei", "Next month I fly to Osaka. Do you remember where I live?").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    let sent = h.provider.requests().pop().expect("a request").messages;
    assert!(sent.len() > read.len());
    assert_eq!(sent[..start.len()], start[..], "the next reply's prompt starts with what was read ahead");
    let lines = &sent[start.len()];
    assert!(lines.content.starts_with(&opening.content) && lines.content.contains("Lisbon"), "the remembered lines do not open as read ahead: {lines:?}");
}

#[tokio::test]
async fn in_a_long_conversation_every_reply_starts_with_what_was_read_ahead() {
    // Past the history a prompt reads, the window of turns moves and what
    // the person said before it is told again: the read-ahead must tell it
    // as the next message's prompt will, or that prompt is read again.
    let replies: Vec<String> = (0..20).map(|i| format!("Reply number {i}.")).collect();
    let replies: Vec<&str> = replies.iter().map(String::as_str).collect();
    let h = Harness::new(&replies).await;
    let conversation = h.engine.conversation();
    compact_prompt_for_ei(&h).await;
    conversation.read_ahead_between_turns(true);
    let mut rx = h.engine.subscribe();
    for i in 0..20 {
        conversation.send_message("Ei", &format!("Message number {i}, about topic {i}.")).await.expect("send");
        await_reply(&mut rx).await.1.expect("reply");
        conversation.until_read_ahead().await;
        let sent = h.provider.requests().pop().expect("a request").messages;
        let read = h.provider.prefills();
        assert_eq!(read.len(), i + 1, "one read-ahead after each reply");
        if i > 0 {
            // The read-ahead before this message, less the lines' opening.
            let ahead = &read[i - 1].messages;
            let start = &ahead[..ahead.len() - 1];
            assert_eq!(sent[..start.len()], start[..], "message {i}: the prompt does not start with what was read ahead");
        }
    }
}

#[tokio::test]
async fn a_draft_is_read_ahead_and_its_reply_starts_with_the_whole_of_it() {
    let h = Harness::new(&["Nice to meet you, Marta!", "You live in Lisbon."]).await;
    let conversation = h.engine.conversation();
    compact_prompt_for_ei(&h).await;
    let mut rx = h.engine.subscribe();
    conversation.send_message("Ei", "Hi! My name is Marta and I live in Lisbon.").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");

    // Off (one CLI process per message): a draft is not read.
    conversation.read_draft("Ei", "Where do I live?").await;
    assert!(h.provider.prefills().is_empty(), "a draft was read although reading ahead is off");

    conversation.read_ahead_between_turns(true);
    conversation.read_draft("Ei", "Where do I").await;
    conversation.read_draft("Ei", "Where do I live?").await;
    let drafts = h.provider.prefills();
    let read = &drafts.last().expect("the draft was read").messages;
    assert_eq!(read.last().map(|m| m.content.as_str()), Some("Where do I live?"));
    assert!(read.iter().any(|m| m.role == providers::Role::System && m.content.contains("Lisbon")), "remembered lines picked for the draft: {read:?}");

    conversation.send_message("Ei", "Where do I live?").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    let sent = h.provider.requests().pop().expect("a request").messages;
    assert_eq!(&sent, read, "the reply's prompt is the draft's, remembered lines and all");
}

#[tokio::test]
async fn a_new_process_starts_its_prompt_with_the_last_one_remembered_lines_and_all() {
    // One `ledgermind chat` per message: the model keeps the last prompt it
    // read on disk, and reads only what is new if this one starts with it.
    let h = Harness::new(&["Nice to meet you, Owen!", "You play the cello."]).await;
    let conversation = h.engine.conversation();
    compact_prompt_for_ei(&h).await;
    let mut rx = h.engine.subscribe();
    conversation.send_message("Ei", "Hi! My name is Owen and I play the cello in an orchestra.").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    conversation.send_message("Ei", "What instrument do I play?").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    let before = h.provider.requests().pop().expect("a request").messages;
    let lines = before.iter().filter(|m| m.role == providers::Role::System).count();
    assert!(lines >= 2, "the question went with remembered lines: {before:?}");

    let h = h.restart(&["Seven, in May."]).await;
    let mut rx = h.engine.subscribe();
    h.engine.conversation().send_message("Ei", "How old will my daughter Emma be?").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    let sent = h.provider.requests().pop().expect("a request").messages;
    assert!(sent.len() > before.len() + 1, "{sent:?}");
    assert_eq!(sent[..before.len()], before[..], "the new process does not start with the prompt the last one sent");
    assert_eq!(sent[before.len()].content, "You play the cello.");
}

#[tokio::test]
async fn personas_and_messages_are_there_after_a_restart() {
    let h = Harness::new(&["Hello!"]).await;
    h.engine.personas().create_persona("Bo", "").await.expect("create");
    let mut rx = h.engine.subscribe();
    h.engine.conversation().send_message("Bo", "hi").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    let h = h.restart(&[]).await;
    let names: Vec<String> = h.engine.personas().list_personas().await.expect("list").into_iter().map(|p| p.name).collect();
    assert_eq!(names, vec!["Ei", "Bo"]);
    assert_eq!(h.engine.conversation().list_messages("bo").await.expect("messages").len(), 2);
}

#[tokio::test]
async fn queued_work_survives_a_restart() {
    let h = Harness::new(&[]).await;
    // Simulate a crash right after the message was stored and its reply queued.
    let ei = h.engine.personas().persona("Ei").await.expect("ei");
    h.engine
        .ledger()
        .append(HUMAN_ENTITY, EventBody::MessageAdded {
            message_id: "m-1".into(), persona_id: ei.id.clone(), role: ledger::MessageRole::Human,
            content: "are you there?".into(), external_id: None,
            said_at: None,
        })
        .await
        .expect("append");
    h.engine.shutdown().await;
    h.engine
        .ledger()
        .enqueue("reply", 0, Some(&ei.id), &serde_json::json!({"persona_id": ei.id, "reply_to": "m-1"}))
        .await
        .expect("enqueue");
    let h = h.restart(&["Yes, I am here."]).await;
    let mut rx = h.engine.subscribe();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        if h.engine.conversation().list_messages("ei").await.expect("messages").len() == 2 {
            break;
        }
        let _ = tokio::time::timeout_at(deadline, rx.recv()).await.expect("the queued reply is produced");
    }
    assert_eq!(h.engine.conversation().list_messages("ei").await.expect("messages")[1].content, "Yes, I am here.");
}

#[tokio::test]
async fn a_failing_model_is_retried_then_reported() {
    let h = Harness::new(&[]).await;
    h.provider.push_error(ProviderError::Unavailable("connection refused".into()));
    h.provider.push_reply("Recovered.");
    let mut rx = h.engine.subscribe();
    h.engine.conversation().send_message("Ei", "hello?").await.expect("send");
    let (_, reply) = await_reply(&mut rx).await;
    assert_eq!(reply.expect("second attempt succeeds").content, "Recovered.");

    h.provider.push_error(ProviderError::InvalidJson("garbage".into()));
    h.engine.conversation().send_message("Ei", "again").await.expect("send");
    let (_, reply) = await_reply(&mut rx).await;
    let err = reply.expect_err("not retried: not transient");
    assert_eq!(err.code, "LLM_INVALID_JSON");
    let dead = h.engine.ledger().queue_items(Some(ledger::QueueState::Dead)).await.expect("dead");
    assert_eq!(dead.len(), 1, "visible in the dead-letter list");
}

#[tokio::test]
async fn bad_input_is_refused_with_codes_and_writes_nothing() {
    let h = Harness::new(&[]).await;
    let before = h.engine.ledger().event_count().await.expect("count");
    assert_eq!(h.engine.conversation().send_message("Ei", "   ").await.expect_err("empty").code, "INVALID_INPUT");
    assert_eq!(h.engine.conversation().send_message("Nobody", "hi").await.expect_err("unknown").code, "PERSONA_NOT_FOUND");
    assert_eq!(h.engine.personas().create_persona("EI", "dup").await.expect_err("dup").code, "PERSONA_EXISTS");
    assert_eq!(h.engine.personas().create_persona("  ", "").await.expect_err("blank").code, "INVALID_INPUT");
    assert_eq!(h.engine.ledger().event_count().await.expect("count"), before);
}

#[tokio::test]
async fn a_locked_keychain_gives_a_clear_error_and_no_event() {
    let h = Harness::new(&[]).await;
    let h = h.restart(&[]).await; // clears cached signing keys
    h.keys.set_unavailable(true);
    let before = h.engine.ledger().event_count().await.expect("count");
    let err = h.engine.conversation().send_message("Ei", "hello").await.expect_err("locked");
    assert_eq!(err.code, "KEYCHAIN_UNAVAILABLE");
    assert!(err.message.contains("keychain"), "{}", err.message);
    assert_eq!(h.engine.ledger().event_count().await.expect("count"), before);
    let status = h.engine.status().await;
    assert!(!status.keychain_ok);
    h.keys.set_unavailable(false);
    let mut rx = h.engine.subscribe();
    h.provider.push_reply("ok");
    h.engine.conversation().send_message("Ei", "hello").await.expect("works once unlocked");
    assert!(matches!(await_reply(&mut rx).await.1, Ok(_)));
    let _ = AppEvent::QueueChanged { busy: false, pending: 0 };
}

#[tokio::test]
async fn a_spoken_turn_goes_through_the_same_pipeline_and_is_marked_as_voice() {
    let h = Harness::new(&["Sure. I can speak more slowly. Just ask."]).await;
    let ada = h.engine.personas().create_persona("Ada", "A patient mathematics tutor").await.expect("create");
    let mut rx = h.engine.subscribe();
    let (msg, _request) = h.engine.conversation().send_message("ada", "Can you talk slower?").await.expect("send");
    let reply = await_reply(&mut rx).await.1.expect("reply");
    // Cut off after the first sentence: only that much was said aloud.
    let turn = app::VoiceTurn {
        message_id: msg.id.clone(),
        reply_id: Some(reply.id.clone()),
        interrupted: true,
        spoken_chars: Some(5),
    };
    h.engine.conversation().record_voice_turn("ada", turn.clone()).await.expect("record");
    let events = h.engine.ledger().events(None, 1).await.expect("events");
    assert_eq!(events[0].kind, "voice_turn");
    assert_eq!(events[0].signer, HUMAN_ENTITY);
    let payload = events[0].payload.clone().expect("payload");
    assert_eq!(payload["persona_id"], ada.id);
    assert_eq!(payload["message_id"], msg.id);
    assert_eq!(payload["reply_id"], reply.id);
    assert_eq!(payload["interrupted"], true);
    assert_eq!(payload["spoken_chars"], 5);
    assert!(h.engine.vault().verify().await.expect("verify").ok);
    // A turn of another conversation, or a count without an interruption, is refused.
    let other = h.engine.personas().persona("Ei").await.expect("ei");
    let e = h.engine.conversation().record_voice_turn(&other.id, turn.clone()).await.expect_err("not Ei's message");
    assert_eq!(e.code, "INVALID_INPUT", "{e:?}");
    let e = h
        .engine
        .conversation()
        .record_voice_turn("ada", app::VoiceTurn { interrupted: false, ..turn })
        .await
        .expect_err("spoken_chars without an interruption");
    assert_eq!(e.code, "INVALID_INPUT", "{e:?}");
    assert_eq!(h.engine.ledger().events(None, 1).await.expect("events")[0].kind, "voice_turn");
}

#[tokio::test]
async fn the_next_prompt_holds_only_what_was_said_aloud_of_an_interrupted_reply() {
    let h = Harness::new(&["Sure. I can speak more slowly. Just ask.", "Fine.", "Of course. Ask away."]).await;
    h.engine.personas().create_persona("Ada", "A patient mathematics tutor").await.expect("create");
    let mut rx = h.engine.subscribe();
    let (msg, _) = h.engine.conversation().send_message("ada", "Can you talk slower?").await.expect("send");
    let reply = await_reply(&mut rx).await.1.expect("reply");
    // Cut off after "Sure." (5 characters said aloud).
    let turn = app::VoiceTurn { message_id: msg.id, reply_id: Some(reply.id), interrupted: true, spoken_chars: Some(5) };
    h.engine.conversation().record_voice_turn("ada", turn).await.expect("record");
    h.engine.conversation().send_message("ada", "Thanks.").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    let prompt = |i: usize| h.provider.requests()[i].messages.iter().map(|m| m.content.clone()).collect::<Vec<_>>().join("\n");
    let seen = prompt(h.provider.requests().len() - 1);
    assert!(seen.contains("Sure.…"), "{seen}");
    assert!(!seen.contains("I can speak more slowly"), "the unspoken rest reached the prompt: {seen}");
    // The conversation itself keeps the whole reply (the ledger is not rewritten),
    // and a reply spoken to the end stays whole in the next prompt.
    let messages = h.engine.conversation().list_messages("ada").await.expect("messages");
    let cut = messages.iter().find(|m| m.content == "Sure. I can speak more slowly. Just ask.").expect("the whole reply");
    // The chat marks it as cut off, with how much was said aloud.
    assert_eq!(cut.spoken_chars, Some(5));
    assert!(messages.iter().filter(|m| m.id != cut.id).all(|m| m.spoken_chars.is_none()), "{messages:?}");
    h.engine.conversation().send_message("ada", "And again?").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    let seen = prompt(h.provider.requests().len() - 1);
    assert!(seen.contains("Fine.") && !seen.contains("Fine.…"), "{seen}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_desktop_voice_turn_goes_to_the_persona_and_is_recorded_as_spoken() {
    use voice::audio::WavLoopback;
    use voice::stt::ScriptedStt;
    use voice::tts::ToneSynth;
    let h = Harness::new(&["Sure. I can speak more slowly. Just ask."]).await;
    h.engine.personas().create_persona("Ada", "A patient mathematics tutor").await.expect("create");
    let (engine, runtime) = (h.engine.clone(), tokio::runtime::Handle::current());
    let outcome = tokio::task::spawn_blocking(move || {
        // espeak-ng's voice as the person (the recogniser is scripted).
        use voice::SpeechSynthesizer;
        let request = voice::SynthesisRequest { text: "Can you talk slower?", language: voice::Language::En, rate: 1.0 };
        let voice = voice::EspeakNg::default().synthesize(&request).expect("espeak-ng").resampled(16_000).samples;
        let samples = [vec![0.0; 4_800], voice, vec![0.0; 16 * 9_000]].concat();
        let mut io = WavLoopback::new(voice::wav::Pcm { samples, rate: 16_000 }, None);
        let mut stt = ScriptedStt {
            replies: [voice::Transcript { text: "Can you talk slower?".into(), language: "en".into(), segments: vec![] }].into(),
            heard: vec![],
        };
        let mut responder = app::voice::PersonaResponder::new(engine.conversation().clone(), "ada".into(), runtime);
        let config = app::voice::TurnConfig::default();
        app::voice::run_turn(
            &mut io,
            &mut stt,
            &mut responder,
            &ToneSynth { rate_hz: 16_000 },
            &config,
            &app::voice::TurnControl::new(),
            &mut |_| {},
        )
    })
    .await
    .expect("join")
    .expect("turn");
    assert!(matches!(outcome, app::voice::TurnOutcome::Done { interrupted: false, .. }), "{outcome:?}");
    let messages = h.engine.conversation().list_messages("ada").await.expect("messages");
    assert_eq!(messages.iter().map(|m| m.content.as_str()).collect::<Vec<_>>(), vec!["Can you talk slower?", "Sure. I can speak more slowly. Just ask."]);
    let events = h.engine.ledger().events(None, 1).await.expect("events");
    assert_eq!(events[0].kind, "voice_turn");
    let payload = events[0].payload.clone().expect("payload");
    assert_eq!(payload["interrupted"], false);
    assert_eq!(payload["reply_id"], messages[1].id);
}
