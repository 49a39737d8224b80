use ledger::MessageRole;
use office::dreaming::{dream, DreamInput};
use office::Language;
use providers::ScriptedProvider;

use crate::{Fixture, ADA};

#[tokio::test]
async fn a_dream_returns_the_summary_and_baseline_the_model_wrote() {
    let f = Fixture::rich().await;
    let messages = f.ledger.messages(ADA, None).await.expect("messages");
    let handovers = f.ledger.handovers(ADA, 10).await.expect("handovers");
    let provider = ScriptedProvider::with_replies(
        "fake",
        [r#"{"summary": "We planned the Porto trip and set two deadlines.", "baseline": "I keep the trip on track for the person."}"#],
    );
    let out = dream(
        &provider,
        "m",
        DreamInput { persona_name: "Ada", language: Language::En, messages: &messages, handovers: &handovers, previous_baseline: Some("old view") },
    )
    .await
    .expect("dream");
    assert_eq!(out.summary, "We planned the Porto trip and set two deadlines.");
    assert!(out.baseline.starts_with("I keep"));
    // The model saw the period's material.
    let seen = provider.requests();
    assert!(seen[0].messages[0].content.contains("Can you book the train to Porto"));
    assert!(seen[0].json_schema.is_some());
    assert_eq!(messages.iter().filter(|m| m.role == MessageRole::Human).count(), 1);
}

#[tokio::test]
async fn an_unusable_dream_is_an_error_not_an_empty_event() {
    let provider = ScriptedProvider::with_replies("fake", [r#"{"summary": "ok", "baseline": "ok"}"#, "not json"]);
    let input = || DreamInput { persona_name: "Ada", language: Language::PtBr, messages: &[], handovers: &[], previous_baseline: None };
    assert_eq!(dream(&provider, "m", input()).await.expect_err("short").code(), "LLM_INVALID_JSON");
    assert_eq!(dream(&provider, "m", input()).await.expect_err("not json").code(), "LLM_INVALID_JSON");
}
