//! The nightly ceremony: once a day, at a configurable time (UTC,
//! `LEDGERMIND_CEREMONY_TIME=HH:MM`, default 03:00) and only while the
//! queue is idle, exposure decays by `memory::decay_factor` for the days
//! since the last ceremony (one `exposure_decayed` event; confirmed
//! memories are skipped by its projection). Time comes in as a parameter
//! (the ledger's clock in production), so tests are deterministic.
//!
//! The same once-a-minute timer checks the heartbeat (see `heartbeat`).
//! The ceremony also queues each persona's topic exploration and
//! description check (see `exploration`). Its time can be set in the app
//! (`set_ceremony_time`, a ledger setting) over the environment's default.
//!
//! Before exploring, the expiry phase removes the topics a persona no
//! longer cares about (`exploration::EXPIRE_BELOW`).

use std::sync::Arc;

use ledger::{EventBody, HUMAN_ENTITY};
use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use ts_rs::TS;

use super::Personas;
use crate::error::AppError;
use crate::Result;

const CHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct CeremonyView {
    pub at: String,
    pub elapsed_days: f64,
    pub half_life_days: f64,
    /// Exposure of every unconfirmed memory was multiplied by this (1 when
    /// there were no memories to decay).
    pub factor: f64,
    /// Personas whose topic exploration and description check were queued.
    pub explored: u32,
}

/// When the ceremony runs (HH:MM, UTC) and when it last ran.
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct CeremonySettingsView {
    pub time: String,
    pub last_run: Option<String>,
}

const TIME_KEY: &str = "ceremony_time";
const LAST_RUN_KEY: &str = "ceremony_last_run";

fn parse_hhmm(s: &str) -> Option<time::Time> {
    let (h, m) = s.trim().split_once(':')?;
    if h.len() != 2 || m.len() != 2 {
        return None;
    }
    time::Time::from_hms(h.parse().ok()?, m.parse().ok()?, 0).ok()
}

fn hhmm(t: time::Time) -> String {
    format!("{:02}:{:02}", t.hour(), t.minute())
}

/// The configured time of day, from `LEDGERMIND_CEREMONY_TIME` (HH:MM, UTC).
pub fn ceremony_time() -> time::Time {
    std::env::var("LEDGERMIND_CEREMONY_TIME")
        .ok()
        .and_then(|s| {
            let (h, m) = s.trim().split_once(':')?;
            time::Time::from_hms(h.parse().ok()?, m.parse().ok()?, 0).ok()
        })
        .unwrap_or(time::Time::from_hms(3, 0, 0).unwrap_or(time::Time::MIDNIGHT))
}

/// Whether a ceremony is due at `now`: the latest scheduled instant (today
/// at `at`, or yesterday when today's is still ahead) is after the last run.
pub fn ceremony_due(now: OffsetDateTime, last: Option<OffsetDateTime>, at: time::Time) -> bool {
    let today = now.replace_time(at);
    let scheduled = if now >= today { today } else { today - time::Duration::days(1) };
    last.is_none_or(|l| l < scheduled)
}

impl Personas {
    /// Runs the ceremony at `now` when the queue is idle and there are
    /// memories (None otherwise):
    /// decays exposure for the days since the last run (one day on the
    /// first run).
    pub async fn run_ceremony(&self, now: OffsetDateTime) -> Result<Option<CeremonyView>> {
        if !self.ctx.queue_idle().await? {
            return Ok(None);
        }
        let has_memories = !self.ctx.ledger.memories(None, false).await?.is_empty();
        let last = self.ctx.ledger.last_decay_at().await?.and_then(|s| OffsetDateTime::parse(&s, &Rfc3339).ok());
        let elapsed_days = match last {
            Some(l) => ((now - l).as_seconds_f64() / 86_400.0).max(0.0),
            None => 1.0,
        };
        let half_life_days = memory::DEFAULT_HALF_LIFE_DAYS;
        let at = now.format(&Rfc3339).map_err(|e| AppError::invalid(e.to_string()))?;
        let expired = self.expire_topics().await?;
        let explored = self.queue_explorations(now).await?;
        // Nothing to decay, expire or explore: record nothing (a fresh profile stays event-free).
        if !has_memories && explored == 0 && expired == 0 {
            return Ok(None);
        }
        let factor = if has_memories {
            let factor = memory::decay_factor(elapsed_days, half_life_days);
            self.ctx.ledger
                .append(HUMAN_ENTITY, EventBody::ExposureDecayed { at: at.clone(), elapsed_days, half_life_days, factor })
                .await?;
            tracing::info!(elapsed_days, factor, "ceremony: exposure decayed");
            self.ctx.emit(crate::events::AppEvent::MemoriesChanged { persona_id: None });
            factor
        } else {
            1.0
        };
        self.ctx.ledger
            .append(HUMAN_ENTITY, EventBody::RuntimeSettingSet { key: LAST_RUN_KEY.into(), value: Some(at.clone()) })
            .await?;
        if explored > 0 {
            tracing::info!(explored, "ceremony: topic explorations queued");
            self.ctx.emit_queue().await;
        }
        Ok(Some(CeremonyView { at, elapsed_days, half_life_days, factor, explored: explored as u32 }))
    }

    /// The ceremony's time: the one set in the app, else the environment's.
    pub async fn ceremony_settings(&self) -> Result<CeremonySettingsView> {
        let time = match self.ctx.ledger.runtime_setting(TIME_KEY).await?.as_deref().and_then(parse_hhmm) {
            Some(t) => t,
            None => ceremony_time(),
        };
        Ok(CeremonySettingsView { time: hhmm(time), last_run: self.ctx.ledger.runtime_setting(LAST_RUN_KEY).await? })
    }

    /// Sets the ceremony's time of day (HH:MM, UTC).
    pub async fn set_ceremony_time(&self, hh_mm: &str) -> Result<CeremonySettingsView> {
        let t = parse_hhmm(hh_mm).ok_or_else(|| AppError::invalid(format!("\"{hh_mm}\" is not a time of day as HH:MM (00:00 to 23:59)")))?;
        self.ctx.ledger
            .append(HUMAN_ENTITY, EventBody::RuntimeSettingSet { key: TIME_KEY.into(), value: Some(hhmm(t)) })
            .await?;
        self.ceremony_settings().await
    }

    /// The latest run: the last decay or the last recorded ceremony.
    async fn last_ceremony(&self) -> Result<Option<OffsetDateTime>> {
        let decay = self.ctx.ledger.last_decay_at().await?;
        let run = self.ctx.ledger.runtime_setting(LAST_RUN_KEY).await?;
        Ok([decay, run].into_iter().flatten().filter_map(|s| OffsetDateTime::parse(&s, &Rfc3339).ok()).max())
    }

    /// Checks once a minute whether the ceremony is due (first at start).
    pub fn spawn_ceremony(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        self.ctx.spawn_timer(self, CHECK_EVERY, false, |personas| async move { personas.clock_tick().await })
    }

    /// One beat of the timer at the engine's clock (`Ledger::now`): the
    /// heartbeat, the ceremony when due, the dreaming cycle. Errors are logged.
    pub async fn clock_tick(&self) {
        let now = self.ctx.ledger.now();
        // The heartbeat shares this timer: personas quiet for their delay reach out.
        if let Err(e) = self.heartbeat_tick(now).await {
            tracing::warn!(code = e.code, "heartbeat check failed: {}", e.message);
        }
        let (last, at) = match (self.last_ceremony().await, self.ceremony_settings().await) {
            (Ok(last), Ok(settings)) => (last, parse_hhmm(&settings.time).unwrap_or_else(ceremony_time)),
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(code = e.code, "ceremony: could not read its settings: {}", e.message);
                return;
            }
        };
        if ceremony_due(now, last, at) {
            if let Err(e) = self.run_ceremony(now).await {
                tracing::warn!(code = e.code, "ceremony failed: {}", e.message);
            }
        }
        // The dreaming cycle runs on the ceremony's clock, time and idle rule.
        if let Err(e) = self.office.dream_if_due(now, at).await {
            tracing::warn!(code = e.code, "dreaming failed: {}", e.message);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_of_day_is_hh_mm() {
        assert_eq!(parse_hhmm("03:30").map(hhmm), Some("03:30".to_owned()));
        assert_eq!(parse_hhmm(" 23:59 ").map(hhmm), Some("23:59".to_owned()));
        for bad in ["24:00", "3:30", "12:60", "noon", ""] {
            assert!(parse_hhmm(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn the_ceremony_is_due_once_per_day_after_its_time() {
        let at = time::Time::from_hms(3, 0, 0).expect("time");
        let t = |s: &str| OffsetDateTime::parse(s, &Rfc3339).expect("ts");
        assert!(ceremony_due(t("2026-01-02T03:00:00Z"), None, at));
        assert!(ceremony_due(t("2026-01-02T02:59:00Z"), None, at), "never ran: yesterday's is due");
        assert!(!ceremony_due(t("2026-01-02T10:00:00Z"), Some(t("2026-01-02T03:01:00Z")), at));
        assert!(ceremony_due(t("2026-01-03T03:00:00Z"), Some(t("2026-01-02T03:01:00Z")), at));
        assert!(!ceremony_due(t("2026-01-03T02:00:00Z"), Some(t("2026-01-02T03:01:00Z")), at));
    }
}
