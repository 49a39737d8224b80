//! Retries with exponential backoff and full jitter, and a circuit breaker
//! for falling back to another provider.
//!
//! Delays use `tokio::time::sleep`, so tests can run them on tokio's paused
//! clock (`#[tokio::test(start_paused = true)]`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rand::Rng;
use tokio::time::Instant;

use crate::{Completion, CompletionRequest, Provider, ProviderError, TokenSink};

/// How often and how patiently to retry transient failures.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Total attempts, the first one included (1 = no retry).
    pub max_attempts: u32,
    /// Backoff ceiling for the first retry; doubles on each further retry.
    pub base_delay: Duration,
    /// Backoff ceiling never exceeds this.
    pub max_delay: Duration,
    /// A provider asking to wait longer than this (Retry-After) is not
    /// retried: the error goes back to the caller, who may fall back.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    pub fn new(max_attempts: u32, base_delay: Duration, max_delay: Duration) -> Self {
        Self {
            max_attempts,
            base_delay,
            max_delay,
            ..Self::default()
        }
    }

    /// No retries at all.
    pub fn none() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// The backoff ceiling before retry number `retry` (0-based):
    /// `min(max_delay, base_delay * 2^retry)`.
    pub fn backoff_ceiling(&self, retry: u32) -> Duration {
        let factor = 2u32.checked_pow(retry.min(31)).unwrap_or(u32::MAX);
        self.base_delay
            .checked_mul(factor)
            .unwrap_or(self.max_delay)
            .min(self.max_delay)
    }

    /// The wait before retry number `retry` (0-based) after `error`, or
    /// `None` when the error should not be retried (not transient, or the
    /// provider asked for a wait longer than `max_retry_after`).
    /// Full jitter: uniform in `[0, ceiling]`; a rate limit with Retry-After
    /// waits at least that long.
    pub fn delay_for(&self, retry: u32, error: &ProviderError) -> Option<Duration> {
        if !error.is_transient() {
            return None;
        }
        let ceiling = self.backoff_ceiling(retry);
        let ceiling_ms = u64::try_from(ceiling.as_millis()).unwrap_or(u64::MAX);
        let jittered = Duration::from_millis(rand::thread_rng().gen_range(0..=ceiling_ms));
        match error {
            ProviderError::RateLimited {
                retry_after_ms: Some(ms),
            } => {
                let asked = Duration::from_millis(*ms);
                if asked > self.max_retry_after {
                    None
                } else {
                    Some(asked.max(jittered))
                }
            }
            _ => Some(jittered),
        }
    }
}

/// Runs `attempt` until it succeeds, fails with a non-transient error, or
/// the policy's attempts run out. Between attempts it sleeps per
/// [`RetryPolicy::delay_for`]; `on_retry` sees each error that is retried.
pub async fn retry_async<T, F, Fut>(
    policy: &RetryPolicy,
    mut attempt: F,
    mut on_retry: impl FnMut(u32, &ProviderError, Duration),
) -> Result<T, ProviderError>
where
    F: FnMut(u32) -> Fut,
    Fut: std::future::Future<Output = Result<T, ProviderError>>,
{
    let attempts = policy.max_attempts.max(1);
    let mut n = 0;
    loop {
        match attempt(n).await {
            Ok(v) => return Ok(v),
            Err(e) => {
                if n + 1 >= attempts {
                    return Err(e);
                }
                let Some(delay) = policy.delay_for(n, &e) else {
                    return Err(e);
                };
                on_retry(n, &e, delay);
                tokio::time::sleep(delay).await;
                n += 1;
            }
        }
    }
}

/// A provider that retries its inner provider's transient failures.
///
/// A failure after some pieces were already streamed to the sink is not
/// retried (the caller would see the text twice); the error is returned.
/// Cancelling the request during a backoff wait returns `Cancelled`.
pub struct Retrying<P> {
    inner: P,
    policy: RetryPolicy,
}

impl<P: Provider> Retrying<P> {
    pub fn new(inner: P, policy: RetryPolicy) -> Self {
        Self { inner, policy }
    }
    pub fn inner(&self) -> &P {
        &self.inner
    }
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }
}

#[async_trait]
impl<P: Provider> Provider for Retrying<P> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn capability(&self, model: &str) -> crate::ModelCapability {
        self.inner.capability(model).await
    }

    async fn complete(
        &self,
        request: CompletionRequest,
        sink: Option<TokenSink>,
    ) -> Result<Completion, ProviderError> {
        let attempts = self.policy.max_attempts.max(1);
        let mut retry = 0;
        loop {
            let streamed = Arc::new(AtomicBool::new(false));
            let (attempt_sink, forward) = match &sink {
                Some(outer) => {
                    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
                    let outer = outer.clone();
                    let streamed = streamed.clone();
                    let forward = tokio::spawn(async move {
                        while let Some(piece) = rx.recv().await {
                            streamed.store(true, Ordering::SeqCst);
                            let _ = outer.send(piece);
                        }
                    });
                    (Some(tx), Some(forward))
                }
                None => (None, None),
            };
            let result = self.inner.complete(request.clone(), attempt_sink).await;
            if let Some(forward) = forward {
                // The inner provider dropped its sender; wait until every
                // piece reached the outer sink so ordering holds.
                let _ = forward.await;
            }
            let error = match result {
                Ok(c) => return Ok(c),
                Err(e) => e,
            };
            if retry + 1 >= attempts || streamed.load(Ordering::SeqCst) {
                return Err(error);
            }
            let Some(delay) = self.policy.delay_for(retry, &error) else {
                return Err(error);
            };
            tracing::debug!(
                provider = self.inner.name(),
                code = error.code(),
                retry,
                delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                "retrying transient provider error"
            );
            sleep_unless_cancelled(delay, &request).await?;
            retry += 1;
        }
    }
}

async fn sleep_unless_cancelled(
    delay: Duration,
    request: &CompletionRequest,
) -> Result<(), ProviderError> {
    let deadline = Instant::now() + delay;
    loop {
        if request.cancel.is_cancelled() {
            return Err(ProviderError::Cancelled);
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(());
        }
        tokio::time::sleep((deadline - now).min(Duration::from_millis(50))).await;
    }
}

/// Where a [`CircuitBreaker`] stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Calls go through.
    Closed,
    /// Calls are refused until the cool-down ends.
    Open,
    /// The cool-down ended; one probe call is in flight or allowed.
    HalfOpen,
}

#[derive(Debug)]
struct BreakerInner {
    state: BreakerState,
    consecutive_failures: u32,
    opened_at: Option<Instant>,
    probe_in_flight: bool,
}

/// Opens after `failure_threshold` consecutive failures, refuses calls for
/// `cooldown`, then lets one probe through (half-open): its success closes
/// the breaker, its failure opens it again for another cool-down.
///
/// Usage: `if breaker.allow() { match call { Ok => breaker.record_success(),
/// Err(e) => { breaker.record_failure(); fall back } } } else { fall back }`.
#[derive(Debug)]
pub struct CircuitBreaker {
    failure_threshold: u32,
    cooldown: Duration,
    inner: Mutex<BreakerInner>,
}

impl CircuitBreaker {
    pub fn new(failure_threshold: u32, cooldown: Duration) -> Self {
        Self {
            failure_threshold: failure_threshold.max(1),
            cooldown,
            inner: Mutex::new(BreakerInner {
                state: BreakerState::Closed,
                consecutive_failures: 0,
                opened_at: None,
                probe_in_flight: false,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BreakerInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current state (an open breaker whose cool-down ended reports
    /// `HalfOpen`).
    pub fn state(&self) -> BreakerState {
        let mut inner = self.lock();
        self.refresh(&mut inner);
        inner.state
    }

    fn refresh(&self, inner: &mut BreakerInner) {
        if inner.state == BreakerState::Open {
            if let Some(at) = inner.opened_at {
                if at.elapsed() >= self.cooldown {
                    inner.state = BreakerState::HalfOpen;
                    inner.probe_in_flight = false;
                }
            }
        }
    }

    /// Whether a call may go through now. In half-open state only one
    /// caller gets `true` until it records its outcome.
    pub fn allow(&self) -> bool {
        let mut inner = self.lock();
        self.refresh(&mut inner);
        match inner.state {
            BreakerState::Closed => true,
            BreakerState::Open => false,
            BreakerState::HalfOpen => {
                if inner.probe_in_flight {
                    false
                } else {
                    inner.probe_in_flight = true;
                    true
                }
            }
        }
    }

    pub fn record_success(&self) {
        let mut inner = self.lock();
        inner.state = BreakerState::Closed;
        inner.consecutive_failures = 0;
        inner.opened_at = None;
        inner.probe_in_flight = false;
    }

    pub fn record_failure(&self) {
        let mut inner = self.lock();
        self.refresh(&mut inner);
        inner.consecutive_failures = inner.consecutive_failures.saturating_add(1);
        let trip = inner.state == BreakerState::HalfOpen
            || inner.consecutive_failures >= self.failure_threshold;
        if trip {
            inner.state = BreakerState::Open;
            inner.opened_at = Some(Instant::now());
            inner.probe_in_flight = false;
        }
    }

    /// Records the outcome of a call: success closes the breaker, transient
    /// failures count against the provider, and other errors (bad request,
    /// invalid JSON, cancel) say nothing about its health and leave the
    /// state as it is.
    pub fn record(&self, result: &Result<Completion, ProviderError>) {
        match result {
            Ok(_) => self.record_success(),
            Err(e) if e.is_transient() => self.record_failure(),
            Err(_) => {
                // Not the provider's health: release a half-open probe slot.
                let mut inner = self.lock();
                inner.probe_in_flight = false;
            }
        }
    }
}

/// Calls `primary` while its breaker allows, falling back to `fallback`
/// when the breaker is open or the primary fails with a transient error
/// before streaming anything.
pub struct WithFallback<P, F> {
    name: String,
    primary: P,
    fallback: F,
    breaker: CircuitBreaker,
}

impl<P: Provider, F: Provider> WithFallback<P, F> {
    pub fn new(primary: P, fallback: F, breaker: CircuitBreaker) -> Self {
        let name = format!("{}|{}", primary.name(), fallback.name());
        Self {
            name,
            primary,
            fallback,
            breaker,
        }
    }
    pub fn breaker(&self) -> &CircuitBreaker {
        &self.breaker
    }
}

#[async_trait]
impl<P: Provider, F: Provider> Provider for WithFallback<P, F> {
    fn name(&self) -> &str {
        &self.name
    }

    async fn complete(
        &self,
        request: CompletionRequest,
        sink: Option<TokenSink>,
    ) -> Result<Completion, ProviderError> {
        if self.breaker.allow() {
            let streamed = Arc::new(AtomicBool::new(false));
            let (attempt_sink, forward) = match &sink {
                Some(outer) => {
                    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
                    let outer = outer.clone();
                    let streamed = streamed.clone();
                    let forward = tokio::spawn(async move {
                        while let Some(piece) = rx.recv().await {
                            streamed.store(true, Ordering::SeqCst);
                            let _ = outer.send(piece);
                        }
                    });
                    (Some(tx), Some(forward))
                }
                None => (None, None),
            };
            let result = self.primary.complete(request.clone(), attempt_sink).await;
            if let Some(forward) = forward {
                let _ = forward.await;
            }
            self.breaker.record(&result);
            match result {
                Err(e) if e.is_transient() && !streamed.load(Ordering::SeqCst) => {
                    tracing::info!(
                        primary = self.primary.name(),
                        fallback = self.fallback.name(),
                        code = e.code(),
                        "primary provider failed; falling back"
                    );
                }
                other => return other,
            }
        }
        self.fallback.complete(request, sink).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceiling_doubles_and_caps() {
        let p = RetryPolicy::new(5, Duration::from_millis(100), Duration::from_millis(700));
        assert_eq!(p.backoff_ceiling(0), Duration::from_millis(100));
        assert_eq!(p.backoff_ceiling(1), Duration::from_millis(200));
        assert_eq!(p.backoff_ceiling(2), Duration::from_millis(400));
        assert_eq!(p.backoff_ceiling(3), Duration::from_millis(700));
        assert_eq!(p.backoff_ceiling(40), Duration::from_millis(700));
    }

    #[test]
    fn jitter_stays_within_ceiling() {
        let p = RetryPolicy::new(5, Duration::from_millis(100), Duration::from_secs(1));
        let err = ProviderError::Unavailable("x".into());
        for retry in 0..6 {
            for _ in 0..50 {
                let d = p.delay_for(retry, &err).expect("transient");
                assert!(d <= p.backoff_ceiling(retry));
            }
        }
    }

    #[test]
    fn non_transient_and_long_retry_after_are_not_retried() {
        let p = RetryPolicy::default();
        assert_eq!(
            p.delay_for(0, &ProviderError::InvalidJson("x".into())),
            None
        );
        assert_eq!(
            p.delay_for(
                0,
                &ProviderError::Http {
                    status: 401,
                    message: "no".into()
                }
            ),
            None
        );
        let long = ProviderError::RateLimited {
            retry_after_ms: Some(3_600_000),
        };
        assert_eq!(p.delay_for(0, &long), None);
        let short = ProviderError::RateLimited {
            retry_after_ms: Some(2_000),
        };
        let d = p.delay_for(0, &short).expect("retry");
        assert!(d >= Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn retry_async_counts_attempts() {
        let p = RetryPolicy::new(3, Duration::from_millis(10), Duration::from_millis(10));
        let mut seen = Vec::new();
        let r: Result<(), _> = retry_async(
            &p,
            |_| async { Err(ProviderError::Timeout(1)) },
            |n, _, _| seen.push(n),
        )
        .await;
        assert_eq!(r, Err(ProviderError::Timeout(1)));
        assert_eq!(seen, vec![0, 1]);
    }

    #[tokio::test(start_paused = true)]
    async fn breaker_opens_probes_and_closes() {
        let b = CircuitBreaker::new(2, Duration::from_secs(10));
        assert!(b.allow());
        b.record_failure();
        assert_eq!(b.state(), BreakerState::Closed);
        b.record_failure();
        assert_eq!(b.state(), BreakerState::Open);
        assert!(!b.allow());
        tokio::time::advance(Duration::from_secs(11)).await;
        assert_eq!(b.state(), BreakerState::HalfOpen);
        assert!(b.allow(), "one probe");
        assert!(!b.allow(), "only one probe");
        b.record_failure();
        assert_eq!(b.state(), BreakerState::Open);
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(b.allow());
        b.record_success();
        assert_eq!(b.state(), BreakerState::Closed);
        assert!(b.allow());
    }
}
