use std::time::Duration;

use providers::retry::retry_async;
use providers::{
    CompletionRequest, Provider, ProviderError, RetryPolicy, Retrying, ScriptedProvider,
};
use tokio::time::Instant;

fn policy(attempts: u32) -> RetryPolicy {
    RetryPolicy::new(attempts, Duration::from_millis(100), Duration::from_secs(1))
}

fn req() -> CompletionRequest {
    CompletionRequest::chat("m", vec![])
}

#[tokio::test(start_paused = true)]
async fn retries_transient_errors_until_success() {
    let fake = ScriptedProvider::new("fake");
    fake.push_error(ProviderError::Unavailable("down".into()))
        .push_error(ProviderError::Timeout(10))
        .push_reply("finally here");
    let p = Retrying::new(fake, policy(3));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let c = p
        .complete(req(), Some(tx))
        .await
        .expect("success on third attempt");
    assert_eq!(c.text, "finally here");
    assert_eq!(p.inner().calls(), 3);
    let mut pieces = Vec::new();
    while let Ok(piece) = rx.try_recv() {
        pieces.push(piece);
    }
    assert_eq!(pieces, vec!["finally", " here"]);
}

#[tokio::test(start_paused = true)]
async fn gives_up_after_max_attempts() {
    let fake = ScriptedProvider::new("fake");
    for _ in 0..5 {
        fake.push_error(ProviderError::Http {
            status: 502,
            message: "bad gateway".into(),
        });
    }
    let p = Retrying::new(fake, policy(3));
    let err = p.complete(req(), None).await.expect_err("all fail");
    assert_eq!(
        err,
        ProviderError::Http {
            status: 502,
            message: "bad gateway".into()
        }
    );
    assert_eq!(p.inner().calls(), 3);
}

#[tokio::test(start_paused = true)]
async fn does_not_retry_permanent_errors() {
    let fake = ScriptedProvider::new("fake");
    fake.push_error(ProviderError::InvalidJson("nope".into()))
        .push_reply("unused");
    let p = Retrying::new(fake, policy(5));
    assert_eq!(
        p.complete(req(), None).await,
        Err(ProviderError::InvalidJson("nope".into()))
    );
    assert_eq!(p.inner().calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn respects_retry_after() {
    let fake = ScriptedProvider::new("fake");
    fake.push_error(ProviderError::RateLimited {
        retry_after_ms: Some(5_000),
    })
    .push_reply("ok");
    let p = Retrying::new(fake, policy(3));
    let started = Instant::now();
    let c = p.complete(req(), None).await.expect("ok after waiting");
    assert_eq!(c.text, "ok");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_secs(5), "waited only {waited:?}");
    assert!(waited < Duration::from_secs(7), "waited {waited:?}");
}

#[tokio::test(start_paused = true)]
async fn retry_after_longer_than_the_cap_is_returned() {
    let fake = ScriptedProvider::new("fake");
    fake.push_error(ProviderError::RateLimited {
        retry_after_ms: Some(600_000),
    })
    .push_reply("ok");
    let p = Retrying::new(fake, policy(3));
    let started = Instant::now();
    let err = p
        .complete(req(), None)
        .await
        .expect_err("caller should fall back");
    assert_eq!(
        err,
        ProviderError::RateLimited {
            retry_after_ms: Some(600_000)
        }
    );
    assert!(started.elapsed() < Duration::from_millis(10));
}

#[tokio::test(start_paused = true)]
async fn backoff_grows_and_stays_under_the_ceiling() {
    let p = RetryPolicy::new(6, Duration::from_millis(100), Duration::from_millis(1600));
    let started = Instant::now();
    let mut delays = Vec::new();
    let r: Result<(), _> = retry_async(
        &p,
        |_| async { Err(ProviderError::Unavailable("x".into())) },
        |n, _, d| delays.push((n, d)),
    )
    .await;
    assert!(r.is_err());
    assert_eq!(delays.len(), 5);
    let mut total = Duration::ZERO;
    for (n, d) in &delays {
        assert!(*d <= p.backoff_ceiling(*n), "retry {n}: {d:?}");
        total += *d;
    }
    // The paused clock advanced exactly by the sleeps.
    let elapsed = started.elapsed();
    assert!(
        elapsed >= total && elapsed < total + Duration::from_millis(50),
        "{elapsed:?} vs {total:?}"
    );
    assert!(total <= Duration::from_millis(100 + 200 + 400 + 800 + 1600));
}

#[tokio::test(start_paused = true)]
async fn cancel_during_backoff() {
    let fake = ScriptedProvider::new("fake");
    fake.push_error(ProviderError::RateLimited {
        retry_after_ms: Some(20_000),
    })
    .push_reply("ok");
    let p = Retrying::new(fake, policy(3));
    let request = req();
    let cancel = request.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        cancel.cancel();
    });
    assert_eq!(
        p.complete(request, None).await,
        Err(ProviderError::Cancelled)
    );
    assert_eq!(p.inner().calls(), 1);
}
