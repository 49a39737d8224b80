//! The local engine against a real GGUF model. Set LEDGERMIND_TEST_MODEL to
//! the path of a small instruct model (SmolLM2-135M-Instruct.Q4_1.gguf).

use std::path::PathBuf;
use std::sync::OnceLock;

use providers::{
    default_threads, ChatMessage, CompletionRequest, FinishReason, LocalEngine, Provider,
    ProviderError, Role,
};

const ENV: &str = "LEDGERMIND_TEST_MODEL";

fn model_path() -> PathBuf {
    let path = std::env::var_os(ENV).map(PathBuf::from).unwrap_or_else(|| {
        panic!(
            "{ENV} is not set: point it at a small GGUF chat model, e.g. \
             `{ENV}=/tmp/lm/models/SmolLM2-135M-Instruct.Q4_1.gguf cargo test -p providers`"
        )
    });
    assert!(path.is_file(), "{ENV}={} is not a file", path.display());
    path
}

/// The tests share one engine and two CPU cores: they run side by side,
/// except the one that times a call against another, which runs alone (a
/// call queued behind another test's long prompt is not what it measures).
static MODEL_USE: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// One engine for all tests, so the model loads once.
fn engine() -> (&'static LocalEngine, String) {
    static ENGINE: OnceLock<LocalEngine> = OnceLock::new();
    let path = model_path();
    let dir = path
        .parent()
        .expect("model file has a directory")
        .to_path_buf();
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .expect("stem")
        .to_string();
    (
        ENGINE.get_or_init(|| LocalEngine::new(dir, default_threads())),
        stem,
    )
}

/// Waits (at most `secs`) until no generation holds the model: an earlier
/// call, abandoned or cancelled, may still be finishing on its thread.
async fn wait_until_idle(engine: &LocalEngine, secs: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while !engine.is_idle() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

fn chat(model: &str, text: &str) -> CompletionRequest {
    let mut r = CompletionRequest::chat(
        model,
        vec![
            ChatMessage::new(Role::System, "You are a helpful assistant."),
            ChatMessage::new(Role::User, text),
        ],
    );
    r.temperature = 0.0;
    r
}

fn drain(rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> Vec<String> {
    let mut v = Vec::new();
    while let Ok(p) = rx.try_recv() {
        v.push(p);
    }
    v
}

#[tokio::test]
async fn short_chat_streams_pieces() {
    let _side_by_side = MODEL_USE.read().await;
    let (engine, stem) = engine();
    assert!(
        engine.list_models().contains(&stem),
        "{:?}",
        engine.list_models()
    );
    let mut req = chat(
        &stem,
        "What is the capital of France? Answer in one sentence.",
    );
    req.max_tokens = 48;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let c = engine.complete(req, Some(tx)).await.expect("completion");
    let pieces: Vec<String> = drain(&mut rx).into_iter().filter(|p| !p.is_empty()).collect();
    println!(
        "reply: {:?} ({} pieces, {:?})",
        c.text,
        pieces.len(),
        c.finish
    );
    assert!(!c.text.trim().is_empty());
    assert!(pieces.len() > 1, "streamed {} pieces", pieces.len());
    assert_eq!(pieces.concat(), c.text);
    assert!(c.prompt_tokens > 10);
    assert!(c.completion_tokens >= 1 && c.completion_tokens <= 48);
    assert!(c.first_token_ms.is_some_and(|ms| ms > 0.0));
    assert!(matches!(
        c.finish,
        FinishReason::Stop | FinishReason::Length
    ));
    assert!(engine.is_loaded(&stem));
}

#[tokio::test]
async fn max_tokens_gives_length() {
    let _side_by_side = MODEL_USE.read().await;
    let (engine, stem) = engine();
    let mut req = chat(
        &stem,
        "Write a long story about a dragon who learns to bake bread.",
    );
    req.max_tokens = 5;
    let c = engine.complete(req, None).await.expect("completion");
    assert_eq!(c.finish, FinishReason::Length);
    assert_eq!(c.completion_tokens, 5);
}

#[tokio::test]
async fn json_schema_output_parses() {
    let _side_by_side = MODEL_USE.read().await;
    let (engine, stem) = engine();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"answer": {"type": "string", "maxLength": 40}},
        "required": ["answer"]
    });
    for temperature in [0.0, 0.8] {
        let mut req = chat(&stem, "What colour is the sky? Reply in JSON.");
        req.json_schema = Some(schema.clone());
        req.max_tokens = 96;
        req.temperature = temperature;
        let c = engine.complete(req, None).await.expect("completion");
        println!("json reply (t={temperature}): {:?} {:?}", c.text, c.finish);
        assert_eq!(
            c.finish,
            FinishReason::Stop,
            "grammar closed the object: {:?}",
            c.text
        );
        let value: serde_json::Value = serde_json::from_str(&c.text).expect("valid JSON");
        let answer = value["answer"].as_str().expect("answer is a string");
        assert!(answer.chars().count() <= 40, "{answer:?}");
        assert_eq!(value.as_object().map(|o| o.len()), Some(1));
    }
}

#[tokio::test]
async fn cancel_stops_generation() {
    let _side_by_side = MODEL_USE.read().await;
    let (engine, stem) = engine();
    let mut req = chat(
        &stem,
        "Count from one to one hundred in words, separated by commas.",
    );
    req.max_tokens = 200;
    let cancel = req.cancel.clone();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let engine2 = engine.clone();
    let call = tokio::spawn(async move { engine2.complete(req, Some(tx)).await });
    let mut got = 0;
    while rx.recv().await.is_some() {
        got += 1;
        if got == 3 {
            cancel.cancel();
            break;
        }
    }
    let c = call.await.expect("join").expect("completion");
    assert_eq!(c.finish, FinishReason::Cancelled);
    assert!(
        c.completion_tokens < 20,
        "stopped late: {}",
        c.completion_tokens
    );

    // Cancelled before it starts: nothing is generated.
    let req = chat(&stem, "hello");
    req.cancel.cancel();
    let c = engine.complete(req, None).await.expect("completion");
    assert_eq!(
        (c.finish, c.completion_tokens),
        (FinishReason::Cancelled, 0)
    );
}

/// A long prompt says it is still working before its first token, so a
/// caller's "no progress" limit does not cut off a slow CPU.
#[tokio::test]
async fn a_long_prompt_reports_progress_before_its_first_token() {
    let _side_by_side = MODEL_USE.read().await;
    let (engine, stem) = engine();
    let text = "Every message, memory and decision is kept in a signed chain of events. ".repeat(30);
    let mut req = chat(&stem, &format!("Summarise this: {text}"));
    req.max_tokens = 1;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let c = engine.complete(req, Some(tx)).await.expect("completion");
    let pieces = drain(&mut rx);
    let beats = pieces.iter().take_while(|p| p.is_empty()).count();
    println!("{} prompt tokens, {beats} progress pieces before the first token", c.prompt_tokens);
    assert!(c.prompt_tokens > 400, "the prompt is long: {}", c.prompt_tokens);
    assert!(beats as u32 >= c.prompt_tokens / 128 - 1, "{beats} progress pieces for {} prompt tokens", c.prompt_tokens);
}

/// Background work reads its prompt in short chunks, as a prompt read ahead
/// does: a reply or a person starting to talk cancels it, and it stops only
/// between chunks (a 128-token chunk of Qwen 1.5B is four seconds on one
/// thread). Each chunk after the first is announced by an empty piece.
#[tokio::test]
async fn background_work_reads_its_prompt_in_short_chunks() {
    let _side_by_side = MODEL_USE.read().await;
    let (engine, stem) = engine();
    let text = "Every message, memory and decision is kept in a signed chain of events. ".repeat(12);
    let beats = |background: bool| {
        let engine = engine.clone();
        let mut req = chat(&stem, &format!("Summarise this: {text}"));
        req.max_tokens = 1;
        req.background = background;
        async move {
            engine.drop_warm_contexts();
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let c = engine.complete(req, Some(tx)).await.expect("completion");
            (c.prompt_tokens, drain(&mut rx).iter().take_while(|p| p.is_empty()).count() as u32)
        }
    };
    let (tokens, reply_beats) = beats(false).await;
    let (_, background_beats) = beats(true).await;
    println!("{tokens} prompt tokens: {reply_beats} chunk boundaries for a reply, {background_beats} for background work");
    assert!(tokens > 150, "the prompt is long: {tokens}");
    assert!(reply_beats <= tokens / 128, "a reply reads in long chunks: {reply_beats}");
    assert!(background_beats >= tokens / 32 - 1, "background work reads in short chunks: {background_beats}");
}

/// A reply that preempts background work must not wait for the background
/// call's prompt batch (seconds on one CPU thread): the cancelled call returns
/// at once, and the next call starts beside the old one's last batch.
#[tokio::test]
async fn a_cancelled_long_prompt_does_not_hold_up_the_next_call() {
    let _alone = MODEL_USE.write().await;
    let (engine, stem) = engine();
    let long_text = "The ledger keeps every message, memory and decision in a signed chain. ".repeat(30);
    let long = || {
        let mut r = chat(&stem, &format!("Summarise this: {long_text}"));
        r.max_tokens = 1;
        r
    };
    // Warm the model, then time one whole long prompt (one big batch).
    engine.complete(chat(&stem, "hi"), None).await.expect("warm-up");
    // Each long call evaluates its whole prompt (no evaluated prefix kept).
    engine.drop_warm_contexts();
    let t = std::time::Instant::now();
    engine.complete(long(), None).await.expect("long prompt");
    let whole = t.elapsed();
    engine.drop_warm_contexts();

    let req = long();
    let cancel = req.cancel.clone();
    let engine2 = engine.clone();
    let call = tokio::spawn(async move { engine2.complete(req, None).await });
    tokio::time::sleep(whole / 5).await;
    let t = std::time::Instant::now();
    cancel.cancel();
    let c = call.await.expect("join").expect("completion");
    let returned = t.elapsed();
    assert_eq!(c.finish, FinishReason::Cancelled);
    let mut short = chat(&stem, "Say yes.");
    short.max_tokens = 2;
    engine.complete(short, None).await.expect("short call");
    let next = t.elapsed();
    println!("long prompt {whole:?}; cancel returned after {returned:?}; next call done after {next:?}");
    assert!(returned < std::time::Duration::from_millis(50), "the cancelled call took {returned:?} to return");
    assert!(next < whole / 2, "the next call waited for the cancelled one: {next:?} (a whole long prompt takes {whole:?})");
}

#[tokio::test]
async fn missing_model_is_a_load_error() {
    let (engine, _) = engine();
    let err = engine
        .complete(chat("no-such-model.Q4_0", "hi"), None)
        .await
        .expect_err("missing model");
    match &err {
        ProviderError::ModelLoad(m) => assert!(m.contains("does not exist"), "{m}"),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(err.code(), "MODEL_LOAD_FAILED");
}

#[tokio::test]
async fn corrupt_files_are_load_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Random garbage.
    let garbage: Vec<u8> = (0..100_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(dir.path().join("garbage.gguf"), &garbage).expect("write");
    // The right signature, garbage after it.
    let mut magic = b"GGUF".to_vec();
    magic.extend_from_slice(&garbage);
    std::fs::write(dir.path().join("magic.gguf"), &magic).expect("write");
    // A real model cut short.
    let real = std::fs::read(model_path()).expect("read model");
    std::fs::write(dir.path().join("truncated.gguf"), &real[..real.len() / 3]).expect("write");
    // Empty.
    std::fs::write(dir.path().join("empty.gguf"), b"").expect("write");

    let engine = LocalEngine::new(dir.path().to_path_buf(), 1);
    for name in ["garbage", "magic", "truncated", "empty"] {
        let err = engine
            .complete(chat(name, "hi"), None)
            .await
            .expect_err(name);
        println!("{name}: {err}");
        assert!(
            matches!(err, ProviderError::ModelLoad(_)),
            "{name}: {err:?}"
        );
    }
    assert!(LocalEngine::validate_model_file(&model_path()).is_ok());
    assert!(LocalEngine::validate_model_file(&dir.path().join("magic.gguf")).is_err());
}

#[tokio::test]
async fn import_validates_and_copies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = LocalEngine::new(dir.path().join("models"), 1);
    let bad = dir.path().join("bad.gguf");
    std::fs::write(&bad, b"definitely not gguf").expect("write");
    assert!(matches!(
        engine.import_model(&bad),
        Err(ProviderError::ModelLoad(_))
    ));
    let stem = engine.import_model(&model_path()).expect("import");
    assert_eq!(engine.list_models(), vec![stem.clone()]);
    assert!(engine.import_model(&model_path()).is_err(), "no overwrite");
}

#[tokio::test]
async fn a_follow_up_turn_reuses_the_evaluated_prompt_instead_of_making_a_new_context() {
    let _alone = MODEL_USE.write().await;
    let (engine, stem) = engine();
    // An earlier test's abandoned call may still be finishing; beside it a
    // call runs without a warm context.
    wait_until_idle(&engine, 120).await;
    engine.drop_warm_contexts();
    let first = chat(&stem, "My name is Marta and I live in Lisbon.");
    let said = engine.complete(first.clone(), None).await.expect("first turn");
    let kept = engine.warm_contexts();
    assert_eq!(kept.len(), 1, "one context kept warm: {kept:?}");
    assert!(kept[0] >= said.prompt_tokens as usize, "{kept:?} vs prompt {}", said.prompt_tokens);

    let mut messages = first.messages.clone();
    messages.push(ChatMessage::new(Role::Assistant, said.text.trim()));
    messages.push(ChatMessage::new(Role::User, "Where do I live?"));
    let mut follow = CompletionRequest::chat(&stem, messages);
    follow.temperature = 0.0;
    follow.max_tokens = 24;
    let warm = engine.complete(follow.clone(), None).await.expect("warm turn");
    let after = engine.warm_contexts();
    assert_eq!(after.len(), 1, "the same context was reused, not a second one made: {after:?}");
    assert!(after[0] >= warm.prompt_tokens as usize);

    // llama.cpp's sums differ slightly with the batch shape, so a greedy
    // reply from a warm prefix may part from a cold one where the model is
    // unsure; both are printed, not compared.
    engine.drop_warm_contexts();
    let cold = engine.complete(follow, None).await.expect("cold turn");
    println!("warm: {:?}\ncold: {:?}", warm.text, cold.text);
    assert_eq!(warm.prompt_tokens, cold.prompt_tokens);
    assert!(!warm.text.trim().is_empty());
}

/// A reply that says its prompt's words back is written partly from
/// tokens proposed from the prompt; the proposals it did not take leave
/// the context, which then holds exactly the prompt and the reply, and the
/// text says the words back as a reply written a token a step does.
#[tokio::test]
async fn a_reply_written_from_proposed_tokens_leaves_only_its_own_in_the_context() {
    let _alone = MODEL_USE.write().await;
    let (engine, stem) = engine();
    wait_until_idle(&engine, 120).await;
    let sentence = "the blue whale is the largest animal that has ever lived on Earth";
    let mut r = chat(&stem, &format!("Say this sentence back, word for word: {sentence}."));
    r.max_tokens = 40;
    let mut texts = Vec::new();
    for lookahead in [0, 3] {
        engine.drop_warm_contexts();
        let done = engine.with_lookahead(lookahead).complete(r.clone(), None).await.expect("reply");
        let kept = engine.warm_contexts();
        // Ended by its end token or its length: every written token was read.
        assert!(matches!(done.finish, FinishReason::Stop | FinishReason::Length), "{:?}", done.finish);
        assert_eq!(kept, [(done.prompt_tokens + done.completion_tokens) as usize], "{:?}", done.text);
        texts.push(done.text);
    }
    println!("one token a step: {:?}
proposing: {:?}", texts[0], texts[1]);
    for text in &texts {
        assert!(text.to_lowercase().contains("largest animal that has ever lived"), "{text:?}");
    }
}

#[tokio::test]
async fn a_guarded_reply_never_repeats_a_sentence() {
    let _side_by_side = MODEL_USE.read().await;
    let (engine, stem) = engine();
    // A prompt that makes a tiny model chant.
    let mut r = chat(&stem, "Repeat the sentence 'I like apples.' twenty times.");
    r.max_tokens = 120;
    r.sampling = Some(providers::Sampling::CONVERSATION);
    let done = engine.complete(r, None).await.expect("completion");
    assert!(!providers::loop_guard::repeats_itself(&done.text, 8), "{:?}", done.text);
}

/// A prompt read ahead is kept evaluated for the call that continues it;
/// a read stopped half-way keeps what it had read.
#[tokio::test]
async fn a_prompt_read_ahead_is_kept_and_a_stopped_read_keeps_what_it_read() {
    let _alone = MODEL_USE.write().await;
    let (engine, stem) = engine();
    let long_text = "The ledger keeps every message, memory and decision in a signed chain. ".repeat(30);
    let opening = || {
        let mut r = CompletionRequest::chat(
            &stem,
            vec![
                ChatMessage::new(Role::System, format!("You are a careful reader. {long_text}")),
                ChatMessage::new(Role::User, "Hello."),
                ChatMessage::new(Role::Assistant, "Hello! How can I help?"),
            ],
        );
        r.max_tokens = 32;
        r
    };
    engine.drop_warm_contexts();
    let read = engine.prefill(opening()).await.expect("read ahead");
    assert_eq!((read.text.as_str(), read.completion_tokens), ("", 0), "nothing is written");
    assert!(read.prompt_tokens > 300, "{}", read.prompt_tokens);
    assert!(engine.warm_contexts().contains(&(read.prompt_tokens as usize)), "{:?} vs {}", engine.warm_contexts(), read.prompt_tokens);

    // Stopped after about a third of the reading time.
    engine.drop_warm_contexts();
    let t = std::time::Instant::now();
    engine.prefill(opening()).await.expect("read ahead");
    let whole = t.elapsed();
    engine.drop_warm_contexts();
    let req = opening();
    let cancel = req.cancel.clone();
    let call = tokio::spawn(async move { engine.prefill(req).await });
    tokio::time::sleep(whole / 3).await;
    cancel.cancel();
    assert_eq!(call.await.expect("join").expect("result").finish, FinishReason::Cancelled);
    // The engine thread reaches its next chunk boundary, then keeps the context.
    wait_until_idle(&engine, 10).await;
    let kept = engine.warm_contexts();
    println!("read ahead {whole:?} for {} tokens; stopped after {:?}: kept {kept:?}", read.prompt_tokens, whole / 3);
    assert!(kept.iter().any(|&n| n > 0 && n < read.prompt_tokens as usize), "what was read before the stop is kept: {kept:?}");
}

/// A reply cut off while it is being written keeps its context warm: the
/// message that cut it off shares its start and reads only what is new.
#[tokio::test]
async fn a_reply_cut_off_while_written_keeps_what_it_read() {
    let _alone = MODEL_USE.write().await;
    let (engine, stem) = engine();
    wait_until_idle(&engine, 120).await;
    engine.drop_warm_contexts();
    let mut req = chat(&stem, "Count from one to one hundred in words, separated by commas.");
    req.max_tokens = 200;
    let cancel = req.cancel.clone();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let engine2 = engine.clone();
    let call = tokio::spawn(async move { engine2.complete(req, Some(tx)).await });
    let mut got = 0;
    while let Some(piece) = rx.recv().await {
        got += usize::from(!piece.is_empty());
        if got == 3 {
            cancel.cancel();
            break;
        }
    }
    let c = call.await.expect("join").expect("completion");
    assert_eq!(c.finish, FinishReason::Cancelled);
    wait_until_idle(&engine, 10).await;
    let kept = engine.warm_contexts();
    assert!(kept.iter().any(|&n| n >= c.prompt_tokens as usize), "the prompt it read is kept: {kept:?} vs {}", c.prompt_tokens);
}

/// A reply is kept from saying the persona's last replies again: with
/// the conversation's repetition controls, what the persona said last turns
/// counts as already said; without them (the control, same prompt), the
/// tiny model answers in the shape of its last replies.
#[tokio::test]
async fn a_reply_does_not_say_the_last_replies_again() {
    let _side_by_side = MODEL_USE.read().await;
    let (engine, stem) = engine();
    let formula = "Nice! Tell me more.";
    let request = |sampling: providers::Sampling| {
        let mut messages = vec![ChatMessage::new(Role::System, "You are a friendly companion. Reply in one short sentence.")];
        for said in ["I went out.", "I saw a film."] {
            messages.push(ChatMessage::new(Role::User, said));
            messages.push(ChatMessage::new(Role::Assistant, formula));
        }
        messages.push(ChatMessage::new(Role::User, "It was long."));
        let mut r = CompletionRequest::chat(&stem, messages);
        r.temperature = 0.0;
        r.max_tokens = 24;
        r.sampling = Some(sampling);
        r
    };
    let plain = providers::Sampling { repeat_penalty: 1.0, dry_multiplier: 0.0, ..providers::Sampling::CONVERSATION };
    let control = engine.complete(request(plain), None).await.expect("completion");
    assert!(control.text.contains(formula), "the control does not repeat: the check below means nothing: {:?}", control.text);
    let reply = engine.complete(request(providers::Sampling::CONVERSATION), None).await.expect("completion");
    assert!(!reply.text.contains("Tell me more"), "{:?}", reply.text);
}


/// A sentence to say back, greedily, with the words the reply may not begin
/// with and those it may never say.
fn said_back(stem: &str, not_first: &[&str], never: &[&str]) -> CompletionRequest {
    let mut r = chat(stem, "Say exactly this sentence and nothing else: I like to eat ramen.");
    r.max_tokens = 12;
    r.sampling = Some(providers::Sampling::CONVERSATION);
    r.not_first = not_first.iter().map(|w| (*w).to_owned()).collect();
    r.never = never.iter().map(|w| (*w).to_owned()).collect();
    r
}

#[tokio::test]
async fn a_reply_does_not_begin_with_the_words_it_may_not_begin_with() {
    let _side_by_side = MODEL_USE.read().await;
    let (engine, stem) = engine();
    let control = engine.complete(said_back(&stem, &[], &[]), None).await.expect("completion");
    assert!(control.text.trim_start().starts_with("I "), "the control does not begin with \"I\": the check below means nothing: {:?}", control.text);
    let reply = engine.complete(said_back(&stem, &["I", "My"], &[]), None).await.expect("completion");
    let first = reply.text.split_whitespace().next().unwrap_or("");
    assert!(!["I", "My"].contains(&first), "{:?}", reply.text);
    assert!(!reply.text.trim().is_empty(), "the reply still says something");
}

#[tokio::test]
async fn a_reply_never_says_the_words_it_may_never_say() {
    let _side_by_side = MODEL_USE.read().await;
    let (engine, stem) = engine();
    let control = engine.complete(said_back(&stem, &[], &[]), None).await.expect("completion");
    assert!(control.text.contains(" like"), "the control does not say \" like\": the check below means nothing: {:?}", control.text);
    let reply = engine.complete(said_back(&stem, &[], &[" like"]), None).await.expect("completion");
    assert!(!reply.text.contains(" like"), "{:?}", reply.text);
}


/// A call that needs a bigger context than the conversation's (a summary of
/// the whole conversation) leaves the conversation's context warm: the
/// next reply reads only what is new.
/// A reply whose prompt was read ahead whole (a draft the person then
/// sent as it was) starts from the logits that read left: none of its
/// prompt is read again, not even the last token.
#[tokio::test]
async fn a_reply_to_a_prompt_read_ahead_whole_reads_none_of_it_again() {
    let _alone = MODEL_USE.write().await;
    let (engine, stem) = engine();
    wait_until_idle(&engine, 120).await;
    engine.drop_warm_contexts();
    let mut turn = chat(&stem, "What is the capital of France?");
    turn.max_tokens = 16;
    let read = engine.prefill(turn.clone()).await.expect("read ahead");
    let warm = engine.complete(turn.clone(), None).await.expect("reply");
    assert_eq!(warm.prompt_tokens, read.prompt_tokens);
    assert_eq!(engine.last_reused_tokens(), warm.prompt_tokens as usize, "the whole prompt was already read");
    assert!(!warm.text.trim().is_empty());
    // The reply's own tokens follow the prompt in the context now: the
    // same prompt again is read from its last token, as any prompt the
    // context holds more than.
    engine.complete(turn.clone(), None).await.expect("again");
    assert_eq!(engine.last_reused_tokens(), warm.prompt_tokens as usize - 1);

    // llama.cpp's sums differ slightly with the batch shape; printed.
    engine.drop_warm_contexts();
    let cold = engine.complete(turn, None).await.expect("cold");
    println!("after the read ahead: {:?}\ncold: {:?}", warm.text, cold.text);
}

/// A reply sent while background work is being read (a summary, stopped
/// for it) runs beside that call once its caller has gone; it continues the
/// conversation's warm context from the pool instead of reading its whole
/// prompt again, and leaves it there for the conversation's next turn.
#[tokio::test]
async fn a_call_beside_an_abandoned_one_continues_the_conversations_warm_context() {
    let _alone = MODEL_USE.write().await;
    let (engine, stem) = engine();
    let engine = engine.with_overlap_grace(std::time::Duration::ZERO);
    wait_until_idle(&engine, 120).await;
    engine.drop_warm_contexts();
    let turn = chat(&stem, "My name is Marta and I live in Lisbon.");
    let read = engine.prefill(turn.clone()).await.expect("the conversation's prompt");
    assert_eq!(engine.warm_contexts(), [read.prompt_tokens as usize]);

    // Thousands of tokens: still being read when the reply comes.
    let text = "The ledger keeps every message, memory and decision in a signed chain. ".repeat(300);
    let mut summary = chat(&stem, &format!("Summarise this: {text}"));
    summary.max_tokens = 1;
    let cancel = summary.cancel.clone();
    let background = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.complete(summary, None).await })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while engine.is_idle() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!engine.is_idle(), "the summary is still being read when the reply comes");
    cancel.cancel();
    let stopped = background.await.expect("join").expect("summary");
    assert_eq!(stopped.finish, FinishReason::Cancelled);

    let mut messages = turn.messages.clone();
    messages.push(ChatMessage::new(Role::Assistant, "Nice to meet you, Marta."));
    messages.push(ChatMessage::new(Role::User, "Where do I live?"));
    let mut follow = CompletionRequest::chat(&stem, messages);
    follow.temperature = 0.0;
    follow.max_tokens = 1;
    let reply = engine.complete(follow, None).await.expect("the reply");
    wait_until_idle(&engine, 120).await;
    let kept = engine.warm_contexts();
    println!("prompt {} then {} tokens; kept {kept:?}", read.prompt_tokens, reply.prompt_tokens);
    assert!(
        kept.contains(&(reply.prompt_tokens as usize + 1)),
        "the reply's context was not kept for the next turn: {kept:?}"
    );
    assert!(
        !kept.contains(&(read.prompt_tokens as usize)),
        "the conversation's context was left unused in the pool: {kept:?}"
    );
}

#[tokio::test]
async fn a_conversation_keeps_what_was_read_when_the_threads_change() {
    let _alone = MODEL_USE.write().await;
    let (engine, stem) = engine();
    wait_until_idle(engine, 120).await;
    engine.drop_warm_contexts();
    let turn = chat(&stem, "My name is Marta and I live in Lisbon. My brother Tomas is a doctor in Porto.");
    let read = engine.with_threads(1).prefill(turn.clone()).await.expect("read on one thread");
    let n = read.prompt_tokens as usize;
    assert_eq!(engine.warm_context_threads(), [1]);

    // The next call runs on two threads: it continues from what one thread read.
    let mut reply = turn.clone();
    reply.max_tokens = 12;
    let moved = engine.with_threads(2).complete(reply.clone(), None).await.expect("reply on two threads");
    assert_eq!(engine.last_reused_tokens(), n - 1, "the prompt was read again");
    assert_eq!(engine.warm_context_threads(), [2], "the one-thread context was kept beside a new one");

    // The keys and values moved are the ones reading the prompt gives.
    wait_until_idle(engine, 120).await;
    engine.drop_warm_contexts();
    let fresh = engine.with_threads(2).complete(reply, None).await.expect("reply read afresh");
    assert_eq!(engine.last_reused_tokens(), 0);
    assert_eq!(moved.text, fresh.text);
}

#[tokio::test]
async fn a_call_needing_a_bigger_context_leaves_the_smaller_one_warm() {
    let _alone = MODEL_USE.write().await;
    let (engine, stem) = engine();
    wait_until_idle(&engine, 120).await;
    engine.drop_warm_contexts();
    let turn = chat(&stem, "My name is Marta and I live in Lisbon.");
    let read = engine.prefill(turn.clone()).await.expect("the conversation's prompt");
    assert_eq!(engine.warm_contexts(), [read.prompt_tokens as usize]);

    // Room for a long answer: more than the conversation's context holds.
    let mut summary = chat(&stem, "Summarise everything we said so far, at length.");
    summary.max_tokens = 3000;
    engine.prefill(summary).await.expect("the summary's prompt");
    let kept = engine.warm_contexts();
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert!(kept.contains(&(read.prompt_tokens as usize)), "the conversation's context was dropped: {kept:?}");

    let again = engine.prefill(turn).await.expect("the conversation again");
    assert_eq!(again.prompt_tokens, read.prompt_tokens);
    assert_eq!(engine.warm_contexts().len(), 2, "the conversation's context was used again, not a third made");
}
