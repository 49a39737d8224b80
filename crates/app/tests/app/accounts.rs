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
        if path.is_file() {
            let bytes = std::fs::read(&path).expect("read");
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
