//! The context frame: a situated picture of a persona's world, read from the
//! ledger before an LLM call, with a SHA-256 over its canonical content.

use ledger::{Constitution, Handover, Ledger, ObligationKind, StoredEvent};
use runtime::{Role, ToolRegistry};
use serde::Serialize;
use sha2::{Digest, Sha256};
use time::format_description::well_known::Rfc3339;
use time::{Duration, OffsetDateTime};

use crate::narrator::{self, NarrativeBudget};
use crate::session::{Language, SessionMode, SessionType};
use crate::tokens::TokenCounter;
use crate::OfficeError;

/// Events shown verbatim in the frame.
pub const RECENT_EVENTS: u32 = 20;
/// Bookmarks shown in the frame.
pub const BOOKMARKS: u32 = 10;
/// How far back synthesized periods reach.
pub const PERIOD_WINDOW: Duration = Duration::weeks(3);
/// Longest event line kept verbatim (characters).
const EVENT_CHARS: usize = 400;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContextFrame {
    pub identity: Identity,
    pub position: Position,
    pub state: State,
    pub obligations: Vec<Obligation>,
    pub capabilities: Capabilities,
    pub memory: Memory,
    pub temporal: Temporal,
    pub narrative: String,
    pub frame_hash: String,
    pub token_budget: NarrativeBudget,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Identity {
    pub entity_id: String,
    pub name: String,
    /// Hex Ed25519 key the persona signs its events with.
    pub public_key: Option<String>,
    pub roles: Vec<String>,
    /// The entity the persona answers to.
    pub guardian: String,
    pub language: Language,
    pub constitution: Option<Constitution>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Position {
    pub description: String,
    pub is_system: bool,
    pub model: String,
    pub conversation_messages: u64,
    pub created_seq: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct State {
    pub session_type: SessionType,
    /// `deliberation` (think, nothing binding) or `commitment` (acts count).
    pub mode: String,
    pub ledger_head: i64,
    pub unread: u32,
    pub archived: bool,
    pub open_obligations: usize,
    pub overdue_obligations: usize,
    /// The governance note raised about the last handover, if any.
    pub sanity_note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Obligation {
    pub id: String,
    pub text: String,
    pub kind: ObligationKind,
    pub due_at: Option<String>,
    /// Minutes until the deadline; negative when overdue.
    pub minutes_left: Option<i64>,
    pub overdue: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Capabilities {
    pub allowed: Vec<Tool>,
    pub restricted: Vec<RestrictedTool>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tool {
    pub name: String,
    pub description: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Restriction {
    /// The tool is for another role (usually only the person).
    Role,
    /// The tool exists in the registry but has no executor in this build.
    NotAvailable,
    /// Needs a setting first (e.g. a metadata service).
    NeedsSetting,
    /// The session type does not allow it (a research session only reads).
    Session,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RestrictedTool {
    pub name: String,
    pub reason: Restriction,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Memory {
    /// The last events of the persona's world, oldest first, verbatim.
    pub recent_events: Vec<EventLine>,
    pub periods: Vec<ledger::Period>,
    pub bookmarks: Vec<ledger::Bookmark>,
    pub baseline: Option<String>,
    /// Retrieved memories and passages, best first.
    pub retrieved: Vec<String>,
    pub handover: Option<Handover>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventLine {
    pub seq: i64,
    pub ts: String,
    pub kind: String,
    pub entity_id: String,
    /// The message text, or the payload's JSON; None when erased.
    pub text: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Temporal {
    pub now: String,
    pub next_deadlines: Vec<Deadline>,
    pub scheduled: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Deadline {
    pub text: String,
    pub due_at: String,
}

/// What the caller knows that the ledger does not.
pub struct FrameRequest<'a> {
    pub persona_id: &'a str,
    pub session_type: SessionType,
    pub now: OffsetDateTime,
    pub capabilities: Capabilities,
    pub retrieved: Vec<String>,
    /// Things scheduled for later (e.g. the next dreaming cycle), already phrased.
    pub scheduled: Vec<String>,
    /// A tighter budget than the session type's (a small local model).
    pub budget_cap: Option<usize>,
}

/// Which tools a role may use now, and why the others are restricted.
pub fn capabilities(
    registry: &ToolRegistry,
    role: Role,
    unavailable: &dyn Fn(&str) -> Option<Restriction>,
) -> Capabilities {
    let mut allowed = Vec::new();
    let mut restricted = Vec::new();
    for t in registry.all() {
        let reason = if t.allowed_roles.contains(&role) { unavailable(&t.name) } else { Some(Restriction::Role) };
        match reason {
            None => allowed.push(Tool { name: t.name.clone(), description: t.description.clone() }),
            Some(reason) => restricted.push(RestrictedTool { name: t.name.clone(), reason }),
        }
    }
    Capabilities { allowed, restricted }
}

pub(crate) fn format_ts(t: OffsetDateTime) -> String {
    t.to_offset(time::UtcOffset::UTC).replace_nanosecond(0).ok().and_then(|t| t.format(&Rfc3339).ok()).unwrap_or_default()
}

pub(crate) fn parse_ts(s: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(s, &Rfc3339).ok()
}

/// How a reply the person cut off while it was spoken reads in what the
/// persona is shown (history, recent events): the part said aloud, trailing
/// off, so the unspoken rest is not taken as heard. A bracketed marker here
/// was copied by models onto the end of later replies and then read aloud;
/// a trailing ellipsis is how a cut-off sentence reads in any text.
pub fn as_heard(reply: &str, spoken_chars: u32) -> String {
    let said: String = reply.chars().take(spoken_chars as usize).collect();
    let said = said.trim_end();
    if said.is_empty() {
        CUT_OFF.to_owned()
    } else {
        format!("{said}{CUT_OFF}")
    }
}

/// The mark of a reply cut off while it was spoken.
pub const CUT_OFF: &str = "…";

fn event_line(e: StoredEvent, cut: &std::collections::HashMap<String, u32>) -> EventLine {
    let text = e.payload.map(|p| {
        let full = match (p.get("kind").and_then(|k| k.as_str()), p.get("content").and_then(|c| c.as_str())) {
            (Some("message_added"), Some(content)) => {
                match p.get("message_id").and_then(|m| m.as_str()).and_then(|m| cut.get(m)) {
                    Some(n) => as_heard(content, *n),
                    None => content.to_owned(),
                }
            }
            _ => p.to_string(),
        };
        truncate_chars(&full, EVENT_CHARS)
    });
    EventLine { seq: e.seq, ts: e.ts, kind: e.kind, entity_id: e.entity_id, text }
}

pub(crate) fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// Reads everything the frame holds from the ledger, narrates it, hashes it.
pub async fn build_frame(
    ledger: &Ledger,
    req: FrameRequest<'_>,
    counter: &dyn TokenCounter,
) -> Result<ContextFrame, OfficeError> {
    let budget_cap = req.budget_cap;
    Ok(finish(read_frame(ledger, req).await?, budget_cap, counter))
}

/// Everything the frame holds, read from the ledger, before it is narrated
/// and hashed (see [`finish`]). The reads are independent and run side by
/// side on the ledger's reader connections: one after the other they were
/// most of a reply's preparation.
pub async fn read_frame(ledger: &Ledger, req: FrameRequest<'_>) -> Result<ContextFrame, OfficeError> {
    let id = req.persona_id;
    let now = req.now;
    let handover_and_note = async {
        let handover = ledger.last_handover(id).await?;
        let note = match &handover {
            Some(h) => ledger.governance_note(h.seq).await?.map(|n| n.note),
            None => None,
        };
        Ok::<_, ledger::LedgerError>((handover, note))
    };
    let since = format_ts(now - PERIOD_WINDOW);
    let (
        persona,
        language,
        (handover, sanity_note),
        reminders,
        session_mode,
        public_key,
        constitution,
        conversation_messages,
        recent_events,
        periods,
        bookmarks,
        baseline,
        interrupted,
    ) = tokio::try_join!(
        ledger.persona(id),
        ledger.persona_language(id),
        handover_and_note,
        ledger.reminders(id, false),
        ledger.session_mode(id),
        ledger.entity_public_key(id),
        ledger.constitution(id),
        ledger.message_count(id),
        ledger.persona_events(id, RECENT_EVENTS),
        ledger.periods(id, &since),
        ledger.bookmarks(id, BOOKMARKS),
        ledger.baseline(id),
        ledger.interrupted_replies(id),
    )?;
    let language = Language::parse(&language.unwrap_or_default());
    let obligations: Vec<Obligation> = reminders
        .into_iter()
        .map(|r| {
            let minutes_left = r.due_at.as_deref().and_then(parse_ts).map(|d| (d - now).whole_minutes());
            Obligation {
                id: r.id,
                text: r.text,
                kind: r.obligation,
                due_at: r.due_at,
                minutes_left,
                overdue: minutes_left.is_some_and(|m| m < 0),
            }
        })
        .collect();
    let overdue = obligations.iter().filter(|o| o.overdue).count();
    let next_deadlines = obligations
        .iter()
        .filter(|o| !o.overdue)
        .filter_map(|o| o.due_at.clone().map(|due_at| Deadline { text: o.text.clone(), due_at }))
        .take(3)
        .collect();
    let description = if persona.long_description.trim().is_empty() {
        persona.short_description.trim().to_owned()
    } else {
        persona.long_description.trim().to_owned()
    };
    let roles = if persona.is_system {
        vec!["system persona".to_owned(), "global visibility".to_owned()]
    } else {
        vec!["companion persona".to_owned()]
    };
    // The mode set for this session type, if any; else the type's default.
    let mode = session_mode
        .filter(|(t, _)| SessionType::parse(t) == Some(req.session_type))
        .and_then(|(_, m)| SessionMode::parse(&m))
        .filter(|m| req.session_type.allowed_modes().contains(m))
        .unwrap_or_else(|| req.session_type.default_mode());
    Ok(ContextFrame {
        identity: Identity {
            entity_id: persona.id.clone(),
            name: persona.name.clone(),
            public_key,
            roles,
            guardian: ledger::HUMAN_ENTITY.to_owned(),
            language,
            constitution,
        },
        position: Position {
            description,
            is_system: persona.is_system,
            model: persona.model.clone(),
            conversation_messages,
            created_seq: persona.created_seq,
        },
        state: State {
            session_type: req.session_type,
            mode: mode.as_str().to_owned(),
            ledger_head: ledger.head().await.0,
            unread: persona.unread,
            archived: persona.archived,
            open_obligations: obligations.len(),
            overdue_obligations: overdue,
            sanity_note,
        },
        obligations,
        capabilities: req.capabilities,
        memory: Memory {
            recent_events: recent_events.into_iter().map(|e| event_line(e, &interrupted)).collect(),
            periods,
            bookmarks,
            baseline: baseline.map(|b| b.text),
            retrieved: req.retrieved,
            handover,
        },
        temporal: Temporal { now: format_ts(now), next_deadlines, scheduled: req.scheduled },
        narrative: String::new(),
        frame_hash: String::new(),
        token_budget: NarrativeBudget::default(),
    })
}

/// Narrates a frame and seals it with its hash.
pub fn finish(mut frame: ContextFrame, budget_cap: Option<usize>, counter: &dyn TokenCounter) -> ContextFrame {
    let (narrative, budget) = narrator::narrate(&frame, budget_cap, counter);
    frame.narrative = narrative;
    frame.token_budget = budget;
    frame.frame_hash = frame_hash(&frame);
    frame
}

/// SHA-256 over the canonical JSON of every part but the hash itself. Field
/// order is the struct order and there are no maps, so equal frames hash
/// equally.
pub fn frame_hash(frame: &ContextFrame) -> String {
    let mut h = Sha256::new();
    let parts: [(&str, serde_json::Result<Vec<u8>>); 9] = [
        ("identity", serde_json::to_vec(&frame.identity)),
        ("position", serde_json::to_vec(&frame.position)),
        ("state", serde_json::to_vec(&frame.state)),
        ("obligations", serde_json::to_vec(&frame.obligations)),
        ("capabilities", serde_json::to_vec(&frame.capabilities)),
        ("memory", serde_json::to_vec(&frame.memory)),
        ("temporal", serde_json::to_vec(&frame.temporal)),
        ("narrative", serde_json::to_vec(&frame.narrative)),
        ("token_budget", serde_json::to_vec(&frame.token_budget)),
    ];
    for (name, bytes) in parts {
        // Serialising these plain structs cannot fail; an empty part still
        // changes the hash through its length prefix.
        let bytes = bytes.unwrap_or_default();
        h.update(name.as_bytes());
        h.update((bytes.len() as u64).to_be_bytes());
        h.update(&bytes);
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod heard_tests {
    use super::as_heard;

    #[test]
    fn a_cut_reply_keeps_what_was_said_and_is_marked() {
        assert_eq!(as_heard("Sure. I can speak more slowly.", 5), "Sure.…");
        assert_eq!(as_heard("Olá, Ana. Tudo bem?", 9), "Olá, Ana.…");
        assert_eq!(as_heard("Sure.", 0), "…");
        assert!(!as_heard("Sure. More.", 5).contains('['), "no bracketed marker a model could copy");
    }
}
