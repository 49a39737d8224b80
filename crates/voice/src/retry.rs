//! Retries for the calls a spoken turn makes (recognition, the persona's
//! reply): a busy or briefly failing engine gets a few tries with a growing
//! wait before the turn is given up.

use crate::error::VoiceError;

/// Tries per call before a turn is given up, and the first wait between
/// tries (doubled each time; real time, so the simulated clock pays it too).
pub const TRIES: u32 = 3;
pub const BACKOFF_MS: u64 = 200;

/// Runs `f` until it succeeds or has failed [`TRIES`] times.
pub(crate) fn with_retries<T>(mut f: impl FnMut() -> Result<T, VoiceError>) -> Result<T, VoiceError> {
    let mut wait = BACKOFF_MS;
    let mut tries = 1;
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(e) if tries >= TRIES => return Err(e),
            Err(e) => {
                tracing::warn!("voice: try {tries} of {TRIES} failed, again in {wait} ms: {e}");
                std::thread::sleep(std::time::Duration::from_millis(wait));
                wait *= 2;
                tries += 1;
            }
        }
    }
}
