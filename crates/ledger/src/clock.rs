use time::OffsetDateTime;

/// Wall clock, behind a trait so tests control time.
pub trait Clock: Send + Sync {
    fn now(&self) -> OffsetDateTime;
}

#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}

#[cfg(any(test, feature = "test-support"))]
pub use manual::ManualClock;

#[cfg(any(test, feature = "test-support"))]
mod manual {
    use std::sync::Mutex;
    use time::{Duration, OffsetDateTime};

    /// A clock that only moves when told to.
    #[derive(Debug)]
    pub struct ManualClock(Mutex<OffsetDateTime>);

    impl ManualClock {
        pub fn new(start: OffsetDateTime) -> Self {
            Self(Mutex::new(start))
        }
        pub fn advance(&self, by: Duration) {
            let mut now = self.0.lock().unwrap_or_else(|e| e.into_inner());
            *now += by;
        }
    }

    impl super::Clock for ManualClock {
        fn now(&self) -> OffsetDateTime {
            *self.0.lock().unwrap_or_else(|e| e.into_inner())
        }
    }
}
