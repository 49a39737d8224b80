//! Time as a dependency: everything with a TTL or a rate limit asks a
//! [`Clock`], so tests can move time without sleeping.

use std::sync::Mutex;

use time::{Duration, OffsetDateTime};

/// The source of "now" for every timeout, TTL and rate limit in the runtime.
pub trait Clock: Send + Sync {
    fn now(&self) -> OffsetDateTime;
}

/// The real wall clock, in UTC.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}

/// A clock that only moves when told to. For tests and simulations.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<OffsetDateTime>,
}

impl ManualClock {
    pub fn new(start: OffsetDateTime) -> Self {
        Self {
            now: Mutex::new(start),
        }
    }

    /// A clock starting at a fixed, arbitrary instant (2025-01-01T00:00:00Z).
    pub fn at_epoch() -> Self {
        Self::new(time::macros::datetime!(2025-01-01 00:00:00 UTC))
    }

    pub fn set(&self, to: OffsetDateTime) {
        *self.lock() = to;
    }

    pub fn advance(&self, by: Duration) {
        let mut now = self.lock();
        *now += by;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, OffsetDateTime> {
        // A poisoned clock still holds a valid instant; keep going.
        self.now.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Clock for ManualClock {
    fn now(&self) -> OffsetDateTime {
        *self.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::at_epoch();
        let t0 = clock.now();
        assert_eq!(clock.now(), t0);
        clock.advance(Duration::minutes(5));
        assert_eq!(clock.now() - t0, Duration::minutes(5));
        clock.set(t0);
        assert_eq!(clock.now(), t0);
    }

    #[test]
    fn system_clock_is_utc() {
        assert!(SystemClock.now().offset().is_utc());
    }
}
