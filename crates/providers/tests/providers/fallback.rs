use std::time::Duration;

use providers::{
    BreakerState, CircuitBreaker, CompletionRequest, Provider, ProviderError, ScriptedProvider,
    WithFallback,
};

#[tokio::test(start_paused = true)]
async fn falls_back_and_opens_the_breaker() {
    let primary = ScriptedProvider::new("primary");
    for _ in 0..3 {
        primary.push_error(ProviderError::Unavailable("down".into()));
    }
    primary.push_reply("primary is back");
    let fallback = ScriptedProvider::with_replies("fallback", ["f1", "f2", "f3", "f4"]);
    let p = WithFallback::new(
        primary,
        fallback,
        CircuitBreaker::new(2, Duration::from_secs(30)),
    );
    assert_eq!(p.name(), "primary|fallback");
    let req = || CompletionRequest::chat("m", vec![]);

    assert_eq!(p.complete(req(), None).await.expect("fallback").text, "f1");
    assert_eq!(p.complete(req(), None).await.expect("fallback").text, "f2");
    assert_eq!(p.breaker().state(), BreakerState::Open);
    // Open: the primary is not even tried.
    assert_eq!(p.complete(req(), None).await.expect("fallback").text, "f3");

    tokio::time::advance(Duration::from_secs(31)).await;
    assert_eq!(p.breaker().state(), BreakerState::HalfOpen);
    // The probe fails (third scripted error): open again, fallback answers.
    assert_eq!(p.complete(req(), None).await.expect("fallback").text, "f4");
    assert_eq!(p.breaker().state(), BreakerState::Open);

    tokio::time::advance(Duration::from_secs(31)).await;
    assert_eq!(
        p.complete(req(), None).await.expect("primary").text,
        "primary is back"
    );
    assert_eq!(p.breaker().state(), BreakerState::Closed);
}

#[tokio::test]
async fn permanent_errors_do_not_fall_back() {
    let primary = ScriptedProvider::new("primary");
    primary.push_error(ProviderError::Http {
        status: 400,
        message: "bad request".into(),
    });
    let fallback = ScriptedProvider::with_replies("fallback", ["unused"]);
    let p = WithFallback::new(
        primary,
        fallback,
        CircuitBreaker::new(1, Duration::from_secs(30)),
    );
    let err = p
        .complete(CompletionRequest::chat("m", vec![]), None)
        .await
        .expect_err("400");
    assert_eq!(
        err,
        ProviderError::Http {
            status: 400,
            message: "bad request".into()
        }
    );
    assert_eq!(p.breaker().state(), BreakerState::Closed);
}
