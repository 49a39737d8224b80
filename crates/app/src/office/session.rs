//! A persona's session as stored in the ledger: its type and mode, read
//! back checked, and the event that sets them. Shared by the office and by
//! the tools' session gate.

use ledger::EventBody;
use ::office::{SessionMode, SessionType};

/// A stored (type, mode) pair, checked; the defaults when absent or invalid.
pub(crate) fn parse_session(stored: Option<(String, String)>) -> (SessionType, SessionMode) {
    let Some((t, m)) = stored else { return (SessionType::Assist, SessionType::Assist.default_mode()) };
    let t = SessionType::parse(&t).unwrap_or_default();
    let m = SessionMode::parse(&m).filter(|m| t.allowed_modes().contains(m)).unwrap_or_else(|| t.default_mode());
    (t, m)
}

/// The event that puts a persona's session in `(session, mode)`.
pub(crate) fn session_mode_body(persona_id: &str, session: SessionType, mode: SessionMode) -> EventBody {
    EventBody::SessionModeSet {
        persona_id: persona_id.to_owned(),
        session_type: session.as_str().to_owned(),
        mode: mode.as_str().to_owned(),
    }
}

