use app::NewAccount;

use crate::Harness;

fn account(key: &str) -> NewAccount {
    NewAccount {
        name: "ollama".into(),
        base_url: "http://127.0.0.1:11434/v1/".into(),
        api_key: key.into(),
        default_model: "llama3".into(),
    }
}

#[tokio::test]
async fn an_account_key_lives_only_in_the_keychain() {
    let h = Harness::new(&[]).await;
    let secret = "sk-test-very-secret-123";
    let view = h.engine.models().add_account(account(secret)).await.expect("add");
    assert!(view.has_key);
    assert_eq!(view.base_url, "http://127.0.0.1:11434/v1");
    assert!(h.keys.accounts().iter().any(|a| a.ends_with("/provider/ollama")));
    // Not in the database or its WAL.
    h.engine.shutdown().await;
    for entry in std::fs::read_dir(h.dir.path()).expect("dir") {
        let path = entry.expect("entry").path();
        // The write-ahead log may be removed as the last connection closes.
        if let Ok(bytes) = std::fs::read(&path) {
            assert!(!bytes.windows(secret.len()).any(|w| w == secret.as_bytes()), "key found in {}", path.display());
        }
    }
    // Not in any event.
    let events = h.engine.ledger().all_events().await.expect("events");
    assert!(!serde_json::to_string(&events).expect("json").contains(secret));
}

#[tokio::test]
async fn a_persona_can_use_an_account_model_and_removing_it_removes_the_key() {
    let h = Harness::new(&[]).await;
    h.engine.models().add_account(account("k")).await.expect("add");
    let models = h.engine.models().list_models().await.expect("models");
    assert!(models.iter().any(|m| m.spec == "ollama:llama3"));
    let ei = h.engine.personas().set_persona_model("Ei", "ollama:llama3").await.expect("set model");
    assert_eq!(ei.model, "ollama:llama3");
    assert_eq!(h.engine.personas().set_persona_model("Ei", "nope:x").await.expect_err("unknown account").code, "ACCOUNT_NOT_FOUND");
    assert_eq!(h.engine.models().add_account(account("k")).await.expect_err("dup").code, "ACCOUNT_EXISTS");
    h.engine.models().remove_account("ollama").await.expect("remove");
    assert!(h.keys.accounts().iter().all(|a| !a.ends_with("/provider/ollama")));
}

#[tokio::test]
async fn a_keychain_failure_saves_no_account() {
    let h = Harness::new(&[]).await;
    h.keys.set_unavailable(true);
    let err = h.engine.models().add_account(account("secret")).await.expect_err("keychain down");
    assert_eq!(err.code, "KEYCHAIN_UNAVAILABLE");
    h.keys.set_unavailable(false);
    assert!(h.engine.models().list_accounts().await.expect("list").is_empty());
}

/// A model server found on this machine answers a persona through the
/// account made from it. The server is a fake Ollama API: the real Ollama
/// cannot be installed on this machine.
#[tokio::test]
async fn a_server_found_on_this_machine_answers_a_persona() {
    use models::discover::{Probe, ServerKind};
    use models::testkit::{FakeKind, FakeServer};
    let ollama = FakeServer::start(FakeKind::Ollama, vec!["llama3.2:1b".into()]).await.expect("fake ollama");
    let h = Harness::configured(&[], |c| c.provider_override = None).await;
    let found = h.engine.models().servers_at(&[Probe { kind: ServerKind::Ollama, base: ollama.url() }]).await.expect("discover");
    assert_eq!(found.len(), 1, "{found:?}");
    let account = h.engine.models().add_server_account(&found[0].url, "llama3.2:1b", "").await.expect("account");
    h.engine.personas().create_persona("Ada", "").await.expect("create");
    h.engine.personas().set_persona_model("Ada", &format!("{}:llama3.2:1b", account.name)).await.expect("model");
    let mut rx = h.engine.subscribe();
    h.engine.conversation().send_message("Ada", "Hello from the test").await.expect("send");
    let (_, reply) = crate::await_reply(&mut rx).await;
    let reply = reply.expect("a reply through the server");
    assert!(reply.content.contains("llama3.2:1b"), "the fake names the model it ran: {}", reply.content);
    h.engine.shutdown().await;
}

/// A server of this machine that stops (Ollama quit): its model is shown as
/// not answering, and the persona on it replies with the local model, with
/// one note in the chat that says so. The local model is the real one
/// (LEDGERMIND_TEST_MODEL; skipped without it).
#[tokio::test]
async fn a_server_that_went_away_leaves_the_reply_to_the_local_model() {
    use models::discover::{Probe, ServerKind};
    use models::testkit::{FakeKind, FakeServer};
    let Some((_dir, config)) = crate::real_model_home() else {
        eprintln!("skipped: set LEDGERMIND_TEST_MODEL to the SmolLM2 GGUF to run the server fallback test");
        return;
    };
    let engine = app::Engine::start(config).await.expect("engine starts");
    let ollama = FakeServer::start(FakeKind::Ollama, vec!["llama3.2:1b".into()]).await.expect("fake ollama");
    let found = engine.models().servers_at(&[Probe { kind: ServerKind::Ollama, base: ollama.url() }]).await.expect("discover");
    let account = engine.models().add_server_account(&found[0].url, "llama3.2:1b", "").await.expect("account");
    let spec = format!("{}:llama3.2:1b", account.name);
    engine.personas().create_persona("Ada", "").await.expect("create");
    engine.personas().set_persona_model("Ada", &spec).await.expect("model");
    let listed = engine.models().list_models().await.expect("models");
    assert!(listed.iter().any(|m| m.spec == spec && m.available), "{listed:?}");

    drop(ollama);
    let listed = engine.models().list_models().await.expect("models");
    assert!(listed.iter().any(|m| m.spec == spec && !m.available), "shown as not answering: {listed:?}");
    let mut rx = engine.subscribe();
    for question in ["Hello, are you there?", "What is the capital of France?"] {
        engine.conversation().send_message("Ada", question).await.expect("send");
        let (_, reply) = crate::await_reply(&mut rx).await;
        let reply = reply.expect("a reply from the local model");
        assert!(!reply.content.contains("llama3.2:1b"), "the stopped server did not answer: {}", reply.content);
    }
    let messages = engine.conversation().list_messages("Ada").await.expect("messages");
    let notes: Vec<_> = messages.iter().filter(|m| m.content.contains("is not answering")).collect();
    assert_eq!(notes.len(), 1, "one note, not one per reply: {messages:?}");
    assert!(notes[0].content.contains(&account.name) && notes[0].content.contains("local model"), "{}", notes[0].content);
    assert_eq!(engine.personas().persona("Ada").await.expect("persona").model, spec, "the persona keeps its server model");
    engine.shutdown().await;
}

/// How fast the real local model runs here is measured, kept beside the
/// models and answered (LEDGERMIND_TEST_MODEL; skipped without it).
#[tokio::test]
async fn a_local_model_speed_is_measured_and_kept() {
    let Some((dir, config)) = crate::real_model_home() else {
        eprintln!("skipped: set LEDGERMIND_TEST_MODEL to the SmolLM2 GGUF to measure a model's speed");
        return;
    };
    let stem = std::path::Path::new(&std::env::var("LEDGERMIND_TEST_MODEL").expect("set")).file_stem().expect("stem").to_string_lossy().into_owned();
    let engine = app::Engine::start(config).await.expect("engine starts");
    let speed = engine.models().measure_model_speed(&stem).await.expect("measured");
    assert!(speed.prompt_tokens_per_s > 1.0 && speed.reply_tokens_per_s > 1.0, "{speed:?}");
    assert!(speed.prompt_tokens_per_s.is_finite() && speed.reply_tokens_per_s.is_finite(), "{speed:?}");
    let kept = std::fs::read_to_string(dir.path().join("models/speed.json")).expect("kept");
    assert!(kept.contains(&stem), "{kept}");
    assert!(engine.models().measure_model_speed("no-such-model").await.is_err(), "only an installed model");
    engine.shutdown().await;
}
