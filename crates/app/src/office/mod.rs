//! The office in the app: the one function that frames a reply (used by
//! the reply worker and by `ledgermind frame`), session endings with their
//! handover and sanity check, constitutions, language, obligations, token
//! usage and the dreaming cycle's events.
//!
//! Public surface: [`Office`] and its views. It calls the tools (which
//! tools a frame offers, a proposal's simulation) and the memory (what a
//! reply recalls); the conversation and the personas call it.

use std::time::{Duration, Instant};

use ledger::{Draft, EventBody, HandoverAuthor, Message, Persona, PersonaProfile, EI_PERSONA_ID, HUMAN_ENTITY};
use ::office::dreaming::{dream, DreamInput, DreamReason};
use ::office::sanity::{check, note, Facts};
use ::office::frame::read_frame;
use runtime::ToolSpec;
use ::office::{ContextFrame, Estimate, FrameRequest, Language, Restriction, SessionMode, SessionType};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

pub(crate) mod heard;
pub(crate) mod session;

use std::sync::Arc;

use crate::context::Context;
use crate::error::AppError;
use crate::memory::Memories;
use crate::models::ModelSpec;
use crate::prompt::HISTORY;
use crate::tools::Tools;
use crate::Result;
use session::parse_session;

/// The office capability: frames, sessions and their handovers,
/// constitutions, obligations, token usage and dreams.
pub struct Office {
    ctx: Arc<Context>,
    tools: Arc<Tools>,
    memory: Arc<Memories>,
    /// Dreams that failed recently (not retried for an hour).
    dreams: DreamAttempts,
}

impl Office {
    pub fn new(ctx: Arc<Context>, tools: Arc<Tools>, memory: Arc<Memories>) -> Self {
        Self { ctx, tools, memory, dreams: DreamAttempts::default() }
    }
}

/// Narrative budget for the in-process model: SmolLM2's prompt is read on
/// one thread, so a 4k-token narrative would cost seconds before the first
/// token; this keeps the whole prompt well inside its context.
pub const LOCAL_NARRATIVE_TOKENS: usize = 700;
const MAX_CONSTITUTION: usize = 4_000;
const MAX_OVERRIDES: usize = 20;

/// The frame a reply is generated from, or the minimal narrative used
/// when the frame could not be built.
pub(crate) struct Framed {
    pub narrative: String,
    pub frame_hash: String,
    pub frame_json: String,
}

/// What the "Why did it say that?" view shows for one reply.
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct WhyView {
    pub message_id: String,
    pub frame_hash: String,
    pub narrative: String,
    pub session_type: String,
    #[ts(type = "number")]
    pub budget: u32,
    #[ts(type = "number")]
    pub effective_budget: u32,
    #[ts(type = "number")]
    pub narrative_tokens: u32,
    pub counter: String,
    pub sections: Vec<SectionView>,
    pub handover: Option<String>,
    pub sanity_note: Option<String>,
    pub constitution: Option<String>,
    /// Which prompt profile was sent (`full`, `compact`) and why; None for
    /// replies recorded before profiles existed.
    pub sent_profile: Option<String>,
    pub sent_reason: Option<String>,
    /// The messages exactly as the model got them, one block per message.
    pub sent_prompt: Option<String>,
    /// The whole frame, pretty JSON.
    pub frame_json: String,
    /// Set when the frame could not be built and a minimal narrative went out.
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct SectionView {
    pub name: String,
    #[ts(type = "number")]
    pub tokens: u32,
    pub share: f64,
    #[ts(type = "number")]
    pub dropped: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct ConstitutionView {
    pub persona_id: String,
    #[ts(type = "number")]
    pub version: u32,
    pub core_directive: String,
    pub overrides: Vec<String>,
    pub ts: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct ObligationView {
    pub id: String,
    pub persona_id: String,
    pub text: String,
    /// `reminder` or `commitment`.
    pub kind: String,
    pub due_at: Option<String>,
    /// Minutes to the deadline; negative when overdue.
    #[ts(type = "number | null")]
    pub minutes_left: Option<i64>,
    pub overdue: bool,
    pub done: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct HandoverView {
    /// The handover's event: the session it ends holds the messages before it.
    #[ts(type = "number")]
    pub seq: i64,
    pub persona_id: String,
    pub text: String,
    /// `persona` or `system`.
    pub author: String,
    pub reason: String,
    pub ts: String,
    pub sanity_note: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct TokenUsageView {
    pub entity_id: String,
    pub name: String,
    pub day: String,
    #[ts(type = "number")]
    pub prompt_tokens: u64,
    #[ts(type = "number")]
    pub completion_tokens: u64,
    /// 0: no limit.
    #[ts(type = "number")]
    pub daily_limit: u32,
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEnd {
    Idle,
    Closed,
    New,
}

impl SessionEnd {
    fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Closed => "closed",
            Self::New => "new",
        }
    }
}

pub(crate) fn quota_exceeded(persona: &Persona, daily_limit: u32) -> AppError {
    AppError::new(
        "TOKEN_QUOTA_EXCEEDED",
        format!("{} has used its {daily_limit} tokens for today; raise the quota in Settings", persona.name),
    )
}

fn today(now: time::OffsetDateTime) -> String {
    now.date().to_string()
}

/// What a reply is prepared from (see [`Office::reply_context`]).
pub(crate) struct ReplyContext {
    /// The conversation the prompt shows verbatim.
    pub history: Vec<Message>,
    pub memories: crate::memory::ReplyMemories,
    /// The frame, or why it could not be built (see [`Office::framed`]).
    pub frame: Result<ContextFrame>,
    /// The tools offered to the persona now (its frame's capabilities).
    pub offered: Vec<ToolSpec>,
    /// Reading the history, then ranking the memories; beside them,
    /// reading the frame; then narrating it.
    pub reads: Duration,
    pub retrieval: Duration,
    pub framing: Duration,
}

/// Drops the oldest message a prompt counts when `history` is full, as the
/// history read once one more message is sent will not hold it.
pub(crate) fn make_room_for_one(history: &mut Vec<ledger::Message>) {
    let counted = |m: &ledger::Message| m.context_status == ledger::ContextStatus::Default;
    if history.iter().filter(|m| counted(m)).count() >= HISTORY as usize {
        if let Some(oldest) = history.iter().position(counted) {
            history.remove(oldest);
        }
    }
}

/// `history` (what [`Office::prompt_history`] read) as the reply to `text`
/// will read it once `text` is sent: the newest messages up to the same
/// cap, the sent one among them.
pub(crate) fn with_sent(mut history: Vec<ledger::Message>, persona_id: &str, text: &str) -> Vec<ledger::Message> {
    make_room_for_one(&mut history);
    let seq = history.last().map_or(1, |m| m.seq + 1);
    history.push(ledger::Message {
        id: String::new(),
        persona_id: persona_id.to_owned(),
        role: ledger::MessageRole::Human,
        content: text.to_owned(),
        ts: String::new(),
        read: true,
        seq,
        context_status: ledger::ContextStatus::Default,
    });
    history
}

impl Office {
    /// The frame the next reply of `persona` would use: the same
    /// [`Office::reply_context`] the reply worker calls.
    pub async fn frame(&self, persona: &str, session_type: SessionType) -> Result<ContextFrame> {
        let persona = self.ctx.ledger.find_persona(persona).await?;
        let profile = self.ctx.ledger.persona_profile(&persona.id).await?;
        self.reply_context(&persona, &profile, session_type).await?.frame
    }

    /// The messages a reply of `persona` reads: those of the current session
    /// within the context window, as the person heard them.
    pub(crate) async fn prompt_history(&self, persona: &Persona, profile: &PersonaProfile) -> Result<Vec<ledger::Message>> {
        let window = match profile.context_window_hours {
            0 => time::Duration::days(365 * 100),
            h => time::Duration::hours(i64::from(h)),
        };
        let (mut history, handover) = tokio::try_join!(
            self.ctx.ledger.prompt_messages(&persona.id, HISTORY, window),
            self.ctx.ledger.last_handover(&persona.id),
        )?;
        let start = handover.map_or(0, |h| h.seq);
        history.retain(|m| m.seq > start);
        crate::office::heard::keep_what_was_heard(&self.ctx.ledger, &persona.id, &mut history).await;
        Ok(history)
    }

    /// The history, memories and frame of `persona`'s next reply; the reply
    /// worker and `ledgermind frame` both call it, so the frame printed is the
    /// one the next reply sends. The history is the context window's messages
    /// (each message's context status decides) of the current session: a
    /// session ends with its handover ("New", idle timeout, window closed),
    /// and what came before reaches the reply only through the handover and
    /// memory. The frame's reads run beside the ranking of memories.
    pub(crate) async fn reply_context(&self, persona: &Persona, profile: &PersonaProfile, session_type: SessionType) -> Result<ReplyContext> {
        let history_then_ranking = async {
            let started = Instant::now();
            let history = self.prompt_history(persona, profile).await?;
            let reads = started.elapsed();
            let ranked = Instant::now();
            let memories = crate::memory::recall::memories_for_reply(&self.memory, persona, &history).await;
            Ok::<_, AppError>((history, memories, reads, ranked.elapsed()))
        };
        let reading = async {
            let started = Instant::now();
            let offered = self.tools.offered_tools(persona).await;
            let frame = self.read_reply_frame(persona, session_type, &offered).await;
            (frame, offered, started.elapsed())
        };
        let (ranked, (frame, offered, read), summary) = tokio::join!(history_then_ranking, reading, self.ctx.ledger.summary(&persona.id));
        let (history, memories, reads, retrieval) = ranked?;
        // Who the persona is (traits, topics) and the
        // conversation's summary go beside what retrieval found.
        let mut lines = crate::personas::rules::profile_lines(profile);
        if let Ok(Some(summary)) = summary {
            lines.push(format!("Summary of your conversation so far: {}", summary.text));
        }
        lines.extend(memories.lines.iter().cloned());
        let narrating = Instant::now();
        let frame = frame.map(|f| self.finish_reply_frame(persona, f, lines));
        Ok(ReplyContext { history, memories, frame, offered, reads, retrieval, framing: read + narrating.elapsed() })
    }

    /// The frame and narrative alone, with `retrieved` given instead of
    /// recalled: what `ledgermind bench office` times.
    pub async fn frame_with(&self, persona: &str, session_type: SessionType, retrieved: Vec<String>) -> Result<ContextFrame> {
        let persona = self.ctx.ledger.find_persona(persona).await?;
        let offered = self.tools.offered_tools(&persona).await;
        let frame = self.read_reply_frame(&persona, session_type, &offered).await?;
        Ok(self.finish_reply_frame(&persona, frame, retrieved))
    }

    /// The session type a call of `persona` runs in now.
    pub(crate) async fn current_session_type(&self, persona_id: &str) -> SessionType {
        parse_session(self.ctx.ledger.session_mode(persona_id).await.ok().flatten()).0
    }

    /// Everything the frame reads from the ledger (see
    /// `office::frame::read_frame`), before the retrieved lines are known.
    async fn read_reply_frame(&self, persona: &Persona, session_type: SessionType, executable: &[ToolSpec]) -> Result<ContextFrame> {
        let role = if persona.is_system { runtime::Role::Ei } else { runtime::Role::Persona };
        let capabilities = ::office::capabilities(&runtime::ToolRegistry::builtin(), role, &|name| {
            if !session_type.permits(name) {
                Some(Restriction::Session)
            } else if executable.iter().any(|t| t.name == name) {
                None
            } else if name.starts_with("enrich_") {
                Some(Restriction::NeedsSetting)
            } else {
                Some(Restriction::NotAvailable)
            }
        });
        let req = FrameRequest {
            persona_id: &persona.id,
            session_type,
            now: self.ctx.ledger.now(),
            capabilities,
            retrieved: Vec::new(),
            scheduled: Vec::new(),
            budget_cap: None,
        };
        Ok(read_frame(&self.ctx.ledger, req).await?)
    }

    /// Adds the retrieved lines to a frame read by `read_reply_frame`, then
    /// narrates and hashes it.
    fn finish_reply_frame(&self, persona: &Persona, mut frame: ContextFrame, retrieved: Vec<String>) -> ContextFrame {
        frame.memory.retrieved = retrieved;
        let local = ModelSpec::parse(&persona.model).map(|s| s.is_local()).unwrap_or(true);
        ::office::frame::finish(frame, local.then_some(LOCAL_NARRATIVE_TOKENS), &Estimate)
    }

    /// Frames a call of `persona` in its current session type; never fails
    /// (see [`Office::framed`]).
    /// `retrieved`: the memories recall found for this call (see `crate::memory`).
    pub(crate) async fn frame_reply(&self, persona: &Persona, retrieved: Vec<String>) -> Framed {
        let session_type = self.current_session_type(&persona.id).await;
        let offered = self.tools.offered_tools(persona).await;
        let frame = self.read_reply_frame(persona, session_type, &offered).await;
        self.framed(persona, frame.map(|f| self.finish_reply_frame(persona, f, retrieved))).await
    }

    /// The narrative and record of a frame; when the frame could not be
    /// built, a minimal narrative goes out instead and the failure is logged.
    pub(crate) async fn framed(&self, persona: &Persona, frame: Result<ContextFrame>) -> Framed {
        match frame {
            Ok(frame) => Framed {
                frame_json: serde_json::to_string(&frame).unwrap_or_default(),
                narrative: frame.narrative,
                frame_hash: frame.frame_hash,
            },
            Err(e) => {
                tracing::error!(code = e.code, persona = %persona.id, "the context frame failed; sending a minimal narrative: {}", e.message);
                let lang = self.language_of(&persona.id).await;
                let narrative = ::office::minimal(&persona.name, lang);
                let frame_json = serde_json::json!({ "error": format!("{}: {}", e.code, e.message), "narrative": narrative }).to_string();
                let frame_hash = sha256_hex(frame_json.as_bytes());
                Framed { narrative, frame_hash, frame_json }
            }
        }
    }

    /// The events recorded beside a reply: its frame and the tokens it cost.
    pub(crate) fn reply_records(&self, persona: &Persona, message_id: &str, framed: Framed, prompt_tokens: u32, completion_tokens: u32) -> Vec<Draft> {
        vec![
            Draft::by(
                &persona.id,
                EventBody::ReplyFramed {
                    persona_id: persona.id.clone(),
                    message_id: message_id.to_owned(),
                    frame_hash: framed.frame_hash,
                    frame: framed.frame_json,
                },
            ),
            Draft::by(
                &persona.id,
                EventBody::TokensUsed { entity_id: persona.id.clone(), day: today(self.ctx.ledger.now()), prompt_tokens, completion_tokens },
            ),
        ]
    }

    /// The persona's daily token quota when it is spent: a reply is then
    /// refused with [`quota_exceeded`].
    pub(crate) async fn spent_quota(&self, persona_id: &str) -> Result<Option<u32>> {
        let day = self.ctx.ledger.token_day(persona_id, &today(self.ctx.ledger.now())).await?;
        let spent = day.daily_limit > 0 && day.prompt_tokens + day.completion_tokens >= u64::from(day.daily_limit);
        Ok(spent.then_some(day.daily_limit))
    }

    async fn language_of(&self, persona_id: &str) -> Language {
        self.ctx.ledger.persona_language(persona_id).await.ok().flatten().map(|l| Language::parse(&l)).unwrap_or_default()
    }

    /// What "Why did it say that?" shows for a reply.
    pub async fn why(&self, message_id: &str) -> Result<WhyView> {
        let rec = self
            .ctx.ledger
            .reply_frame(message_id)
            .await?
            .ok_or_else(|| AppError::new("FRAME_NOT_FOUND", "this reply has no recorded context frame"))?;
        let value: serde_json::Value = serde_json::from_str(&rec.frame)
            .map_err(|e| AppError::new("STORAGE_LOAD_FAILED", format!("the recorded frame is unreadable: {e}")))?;
        let str_at = |v: &serde_json::Value| v.as_str().map(str::to_owned);
        let num = |v: &serde_json::Value| v.as_u64().unwrap_or(0).min(u64::from(u32::MAX)) as u32;
        let budget = &value["token_budget"];
        let sections = budget["sections"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|s| SectionView {
                        name: str_at(&s["name"]).unwrap_or_default(),
                        tokens: num(&s["tokens"]),
                        share: s["share"].as_f64().unwrap_or(0.0),
                        dropped: num(&s["dropped"]),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let constitution = value["identity"]["constitution"].as_object().map(|c| {
            let mut s = c.get("core_directive").and_then(|v| v.as_str()).unwrap_or_default().to_owned();
            for o in c.get("overrides").and_then(|v| v.as_array()).into_iter().flatten() {
                s.push_str("\n- ");
                s.push_str(o.as_str().unwrap_or_default());
            }
            s
        });
        Ok(WhyView {
            message_id: rec.message_id,
            frame_hash: rec.frame_hash,
            narrative: str_at(&value["narrative"]).unwrap_or_default(),
            session_type: str_at(&budget["session_type"]).unwrap_or_default(),
            budget: num(&budget["budget"]),
            effective_budget: num(&budget["effective"]),
            narrative_tokens: num(&budget["used"]),
            counter: str_at(&budget["counter"]).unwrap_or_default(),
            sections,
            handover: str_at(&value["memory"]["handover"]["text"]),
            sanity_note: str_at(&value["state"]["sanity_note"]),
            constitution,
            sent_profile: str_at(&value["sent"]["profile"]),
            sent_reason: str_at(&value["sent"]["reason"]),
            sent_prompt: value["sent"]["messages"].as_array().map(Vec::as_slice).map(crate::prompt::shown_messages),
            frame_json: serde_json::to_string_pretty(&value).unwrap_or_default(),
            error: str_at(&value["error"]),
        })
    }

    /// Ends `persona`'s session: the persona writes its handover (or the
    /// system writes one from the session's events), then the handover's
    /// claims are checked against the ledger. None when the session was empty.
    pub async fn end_session(&self, persona: &str, reason: SessionEnd) -> Result<Option<HandoverView>> {
        let persona = self.ctx.ledger.find_persona(persona).await?;
        let start = self.ctx.ledger.last_handover(&persona.id).await?.map(|h| h.seq).unwrap_or(0);
        let session = self.ctx.ledger.messages_since(&persona.id, start, 200).await?;
        if session.is_empty() {
            return Ok(None);
        }
        let lang = self.language_of(&persona.id).await;
        // Closing the window must not wait for a model.
        let written = if reason == SessionEnd::Closed { None } else { self.persona_handover(&persona, &session, lang).await };
        let (text, author) = match written {
            Some(text) => (text, HandoverAuthor::Persona),
            None => {
                let open = self.ctx.ledger.reminders(&persona.id, false).await?;
                (::office::handover::fallback(&session, &open, lang), HandoverAuthor::System)
            }
        };
        let receipt = self
            .ctx.ledger
            .append(
                &persona.id,
                EventBody::HandoverWritten {
                    persona_id: persona.id.clone(),
                    session_id: format!("s{}", start + 1),
                    text: text.clone(),
                    author,
                    reason: reason.as_str().to_owned(),
                },
            )
            .await?;
        let facts = Facts::read(&self.ctx.ledger, &persona.id, start, self.ctx.ledger.now()).await?;
        let findings = check(&text, &facts, lang);
        let sanity_note = if findings.is_empty() {
            None
        } else {
            let note = note(&findings, lang);
            self.ctx.ledger
                .append_drafts(vec![Draft {
                    entity_id: persona.id.clone(),
                    signer: EI_PERSONA_ID.into(),
                    body: EventBody::GovernanceNoteAdded {
                        persona_id: persona.id.clone(),
                        handover_seq: receipt.seq,
                        note: note.clone(),
                        findings,
                    },
                }])
                .await?;
            Some(note)
        };
        self.reset_escalation(&persona.id).await?;
        let h = self.ctx.ledger.last_handover(&persona.id).await?;
        Ok(h.map(|h| handover_view(h, sanity_note)))
    }

    /// An assist session the persona escalated to commitment ends there:
    /// the next one starts in deliberation again (seed 000, decision #9).
    /// A mode the person chose stays as they set it.
    async fn reset_escalation(&self, persona_id: &str) -> Result<()> {
        let current = parse_session(self.ctx.ledger.session_mode(persona_id).await?);
        let escalated = self.ctx.ledger.session_mode_signer(persona_id).await?.is_some_and(|s| s == persona_id);
        if escalated && current == (SessionType::Assist, SessionMode::Commitment) {
            let body = session::session_mode_body(persona_id, SessionType::Assist, SessionType::Assist.default_mode());
            let receipt = self.ctx.ledger.append(persona_id, body).await?;
            self.ctx.emit(crate::events::AppEvent::LedgerAppended { seq: receipt.seq, kind: receipt.kind });
        }
        Ok(())
    }

    /// A persona's handovers, oldest first (the last `limit`), each with its
    /// sanity note: the chat shows them as session boundaries.
    pub async fn handovers(&self, persona: &str, limit: u32) -> Result<Vec<HandoverView>> {
        let persona = self.ctx.ledger.find_persona(persona).await?;
        let mut out = Vec::new();
        for h in self.ctx.ledger.handovers(&persona.id, limit).await?.into_iter().rev() {
            let note = self.ctx.ledger.governance_note(h.seq).await?.map(|n| n.note);
            out.push(handover_view(h, note));
        }
        Ok(out)
    }

    /// The persona's own handover, or None when its model could not write a valid one.
    async fn persona_handover(&self, persona: &Persona, session: &[Message], lang: Language) -> Option<String> {
        let spec = ModelSpec::parse(&persona.model).ok()?;
        let served = self.ctx.serving(&spec).await.ok()?;
        let (spec, provider) = (served.spec, served.provider);
        let framed = self.frame_reply(persona, Vec::new()).await;
        let tail = &session[session.len().saturating_sub(HISTORY as usize)..];
        let req = ::office::handover::request(&spec.model, &framed.narrative, tail, lang);
        match provider.complete(req, None).await {
            Ok(done) => {
                let text = ::office::handover::parse(&done.text);
                if text.is_none() {
                    tracing::warn!(persona = %persona.id, "the persona's handover was not usable; writing one from the session");
                }
                let usage = EventBody::TokensUsed {
                    entity_id: persona.id.clone(),
                    day: today(self.ctx.ledger.now()),
                    prompt_tokens: done.prompt_tokens,
                    completion_tokens: done.completion_tokens,
                };
                if let Err(e) = self.ctx.ledger.append(&persona.id, usage).await {
                    tracing::warn!(error = %e, "could not record the handover's token usage");
                }
                text
            }
            Err(e) => {
                tracing::warn!(error = %e, persona = %persona.id, "the persona could not write its handover");
                None
            }
        }
    }

    /// Ends every open session without calling a model (the window is closing).
    pub async fn close_sessions(&self) {
        let Ok(personas) = self.ctx.ledger.personas(false).await else { return };
        for p in personas {
            if let Err(e) = self.end_session(&p.id, SessionEnd::Closed).await {
                tracing::warn!(code = e.code, persona = %p.id, "could not write the closing handover: {}", e.message);
            }
        }
    }

    /// Ends idle sessions in the background: every minute, sessions quiet
    /// for `LEDGERMIND_SESSION_IDLE_SECS` (default 30 minutes) get their handover.
    pub fn spawn_session_timer(self: &std::sync::Arc<Self>) -> tokio::task::JoinHandle<()> {
        let idle_secs = std::env::var("LEDGERMIND_SESSION_IDLE_SECS").ok().and_then(|s| s.parse::<u64>().ok()).unwrap_or(1_800);
        let idle = time::Duration::seconds(i64::try_from(idle_secs).unwrap_or(1_800));
        let period = std::time::Duration::from_secs(idle_secs.clamp(1, 60));
        self.ctx.spawn_timer(self, period, true, move |office| async move {
            // Never during an invocation: wait for the reply worker to be idle.
            if office.ctx.busy.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            if let Err(e) = office.end_idle_sessions(idle).await {
                tracing::warn!(code = e.code, "ending idle sessions failed: {}", e.message);
            }
        })
    }

    /// Ends sessions idle for longer than `idle` (the idle-timeout trigger).
    pub async fn end_idle_sessions(&self, idle: time::Duration) -> Result<u32> {
        let now = self.ctx.ledger.now();
        let mut ended = 0;
        for p in self.ctx.ledger.personas(false).await? {
            let Some(last) = self.ctx.ledger.messages(&p.id, Some(1)).await?.pop() else { continue };
            let start = self.ctx.ledger.last_handover(&p.id).await?.map(|h| h.seq).unwrap_or(0);
            let quiet = time::OffsetDateTime::parse(&last.ts, &time::format_description::well_known::Rfc3339)
                .is_ok_and(|t| now - t >= idle);
            if last.seq > start && quiet && self.end_session(&p.id, SessionEnd::Idle).await?.is_some() {
                ended += 1;
            }
        }
        Ok(ended)
    }

    pub async fn constitution(&self, persona: &str) -> Result<Option<ConstitutionView>> {
        let persona = self.ctx.ledger.find_persona(persona).await?;
        Ok(self.ctx.ledger.constitution(&persona.id).await?.map(constitution_view))
    }

    /// Writes the next version of a persona's constitution.
    pub async fn set_constitution(&self, persona: &str, core_directive: &str, overrides: &[String]) -> Result<ConstitutionView> {
        let persona = self.ctx.ledger.find_persona(persona).await?;
        let overrides: Vec<String> =
            overrides.iter().map(|o| o.trim().replace('\n', " ")).filter(|o| !o.is_empty()).collect();
        let size = core_directive.chars().count() + overrides.iter().map(|o| o.chars().count()).sum::<usize>();
        if core_directive.trim().is_empty() || size > MAX_CONSTITUTION || overrides.len() > MAX_OVERRIDES {
            return Err(AppError::invalid(format!(
                "a constitution needs a core directive; at most {MAX_OVERRIDES} overrides and {MAX_CONSTITUTION} characters"
            )));
        }
        let version = self.ctx.ledger.constitution(&persona.id).await?.map_or(1, |c| c.version + 1);
        self.ctx.ledger
            .append_drafts(vec![Draft {
                entity_id: persona.id.clone(),
                signer: HUMAN_ENTITY.into(),
                body: EventBody::ConstitutionSet {
                    persona_id: persona.id.clone(),
                    version,
                    core_directive: core_directive.trim().to_owned(),
                    overrides,
                },
            }])
            .await?;
        self.ctx.ledger
            .constitution(&persona.id)
            .await?
            .map(constitution_view)
            .ok_or_else(|| AppError::new("STORAGE_LOAD_FAILED", "the constitution was not found after saving"))
    }

    /// `en` or `pt-BR`.
    pub async fn persona_language(&self, persona: &str) -> Result<String> {
        let persona = self.ctx.ledger.find_persona(persona).await?;
        Ok(self.language_of(&persona.id).await.tag().to_owned())
    }

    pub async fn set_persona_language(&self, persona: &str, language: &str) -> Result<String> {
        let persona = self.ctx.ledger.find_persona(persona).await?;
        if !matches!(language, "en" | "pt-BR") {
            return Err(AppError::invalid("the language must be en or pt-BR"));
        }
        self.ctx.ledger
            .append_drafts(vec![Draft {
                entity_id: persona.id.clone(),
                signer: HUMAN_ENTITY.into(),
                body: EventBody::PersonaLanguageSet { persona_id: persona.id.clone(), language: language.to_owned() },
            }])
            .await?;
        Ok(language.to_owned())
    }

    /// A persona's obligations, most urgent first, then the finished ones.
    pub async fn obligations(&self, persona: &str) -> Result<Vec<ObligationView>> {
        let persona = self.ctx.ledger.find_persona(persona).await?;
        let now = self.ctx.ledger.now();
        Ok(self
            .ctx.ledger
            .reminders(&persona.id, true)
            .await?
            .into_iter()
            .map(|r| {
                let minutes_left = r
                    .due_at
                    .as_deref()
                    .and_then(|d| time::OffsetDateTime::parse(d, &time::format_description::well_known::Rfc3339).ok())
                    .map(|d| (d - now).whole_minutes());
                let done = r.done_ts.is_some();
                ObligationView {
                    id: r.id,
                    persona_id: r.persona_id,
                    text: r.text,
                    kind: if r.obligation == ledger::ObligationKind::Commitment { "commitment" } else { "reminder" }.into(),
                    due_at: r.due_at,
                    minutes_left,
                    overdue: !done && minutes_left.is_some_and(|m| m < 0),
                    done,
                }
            })
            .collect())
    }

    /// Marks an obligation done (by the person).
    pub async fn complete_obligation(&self, id: &str) -> Result<()> {
        let r = self.ctx.ledger.reminder(id).await?.ok_or_else(|| AppError::invalid(format!("no obligation {id}")))?;
        self.ctx.ledger
            .append_drafts(vec![Draft {
                entity_id: r.persona_id,
                signer: HUMAN_ENTITY.into(),
                body: EventBody::ReminderDone { reminder_id: r.id },
            }])
            .await?;
        Ok(())
    }

    /// Today's token usage and quota of every persona.
    pub async fn token_usage(&self) -> Result<Vec<TokenUsageView>> {
        let day = today(self.ctx.ledger.now());
        let mut out = Vec::new();
        for p in self.ctx.ledger.personas(true).await? {
            let d = self.ctx.ledger.token_day(&p.id, &day).await?;
            out.push(TokenUsageView {
                entity_id: p.id,
                name: p.name,
                day: day.clone(),
                prompt_tokens: d.prompt_tokens,
                completion_tokens: d.completion_tokens,
                daily_limit: d.daily_limit,
            });
        }
        Ok(out)
    }

    /// Sets a persona's daily token quota (0: no limit).
    pub async fn set_token_quota(&self, persona: &str, daily_limit: u32) -> Result<()> {
        let persona = self.ctx.ledger.find_persona(persona).await?;
        self.ctx.ledger
            .append_drafts(vec![Draft {
                entity_id: persona.id.clone(),
                signer: HUMAN_ENTITY.into(),
                body: EventBody::TokenQuotaSet { entity_id: persona.id, daily_limit },
            }])
            .await?;
        Ok(())
    }

    /// The dreaming schedule, merged with the nightly ceremony (called from
    /// its loop with the same clock and time of day): a persona dreams once
    /// a day after `daily_at`, after every `SESSIONS_PER_DREAM` sessions,
    /// and right after a critical event — only when there is something new
    /// to dream about, never while the queue is working (no invocation
    /// runs meanwhile), and a failed dream is not retried for an hour.
    /// Returns the personas that dreamt, with why.
    pub async fn dream_if_due(&self, now: time::OffsetDateTime, daily_at: time::Time) -> Result<Vec<(String, DreamReason)>> {
        let mut dreamt = Vec::new();
        for p in self.ctx.ledger.personas(false).await? {
            if !self.ctx.queue_idle().await? {
                break;
            }
            let baseline = self.ctx.ledger.baseline(&p.id).await?;
            let since = baseline.as_ref().map_or(0, |b| b.seq);
            let state = self.ctx.ledger.dream_state(&p.id, since).await?;
            if state.last_message_seq <= since {
                continue;
            }
            // Never dreamt: the first daily slot after its first session ended.
            let last = baseline.map(|b| b.ts).or(state.first_session_ts).and_then(|ts| parse_rfc3339(&ts));
            let Some(reason) = ::office::dreaming::due(last, now, daily_at, state.sessions, state.critical > 0) else { continue };
            if self.dreams.recently_failed(&p.id, now) {
                continue;
            }
            match self.dream(&p.id).await {
                Ok(true) => {
                    tracing::info!(persona = %p.id, ?reason, "dreaming: period and baseline written");
                    dreamt.push((p.id, reason));
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(code = e.code, persona = %p.id, "dreaming failed; retrying in an hour: {}", e.message);
                    self.dreams.failed(&p.id, now);
                }
            }
        }
        Ok(dreamt)
    }

    /// Runs one dreaming cycle for a persona: synthesizes the period since
    /// the last baseline and writes a new baseline narrative, as events.
    /// Returns false when there was nothing new to dream about.
    pub async fn dream(&self, persona: &str) -> Result<bool> {
        let persona = self.ctx.ledger.find_persona(persona).await?;
        let previous = self.ctx.ledger.baseline(&persona.id).await?;
        let since_seq = previous.as_ref().map_or(0, |b| b.seq);
        let messages = self.ctx.ledger.messages_since(&persona.id, since_seq, 200).await?;
        if messages.is_empty() {
            return Ok(false);
        }
        let handovers: Vec<_> =
            self.ctx.ledger.handovers(&persona.id, 20).await?.into_iter().filter(|h| h.seq > since_seq).collect();
        let spec = ModelSpec::parse(&persona.model)?;
        let served = self.ctx.serving(&spec).await?;
        let (spec, provider) = (served.spec, served.provider);
        let lang = self.language_of(&persona.id).await;
        let input = DreamInput {
            persona_name: &persona.name,
            language: lang,
            messages: &messages,
            handovers: &handovers,
            previous_baseline: previous.as_ref().map(|b| b.text.as_str()),
        };
        let out = dream(provider.as_ref(), &spec.model, input).await.map_err(|e| AppError::new(e.code(), e.to_string()))?;
        let period_start = messages.first().map(|m| m.ts.clone()).unwrap_or_default();
        let period_end = messages.last().map(|m| m.ts.clone()).unwrap_or_default();
        self.ctx.ledger
            .append_drafts(vec![
                Draft::by(&persona.id, EventBody::PeriodSynthesized { persona_id: persona.id.clone(), period_start, period_end, summary: out.summary }),
                Draft::by(&persona.id, EventBody::BaselineNarrativeSet { persona_id: persona.id.clone(), text: out.baseline }),
            ])
            .await?;
        Ok(true)
    }
}

/// Dreams that failed recently, by persona: not retried for `DREAM_RETRY`.
#[derive(Default)]
pub(crate) struct DreamAttempts(std::sync::Mutex<std::collections::HashMap<String, time::OffsetDateTime>>);

const DREAM_RETRY: time::Duration = time::Duration::hours(1);

impl DreamAttempts {
    fn recently_failed(&self, persona_id: &str, now: time::OffsetDateTime) -> bool {
        self.0.lock().map(|m| m.get(persona_id).is_some_and(|t| now - *t < DREAM_RETRY)).unwrap_or(false)
    }
    fn failed(&self, persona_id: &str, now: time::OffsetDateTime) {
        if let Ok(mut m) = self.0.lock() {
            m.insert(persona_id.to_owned(), now);
        }
    }
}

fn parse_rfc3339(ts: &str) -> Option<time::OffsetDateTime> {
    time::OffsetDateTime::parse(ts, &time::format_description::well_known::Rfc3339).ok()
}

fn handover_view(h: ledger::Handover, sanity_note: Option<String>) -> HandoverView {
    HandoverView {
        seq: h.seq,
        persona_id: h.persona_id,
        text: h.text,
        author: if h.author == HandoverAuthor::Persona { "persona" } else { "system" }.into(),
        reason: h.reason,
        ts: h.ts,
        sanity_note,
    }
}

fn constitution_view(c: ledger::Constitution) -> ConstitutionView {
    ConstitutionView { persona_id: c.persona_id, version: c.version, core_directive: c.core_directive, overrides: c.overrides, ts: c.ts }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

impl From<::office::OfficeError> for AppError {
    fn from(e: ::office::OfficeError) -> Self {
        match e {
            ::office::OfficeError::Ledger(e) => e.into(),
            ::office::OfficeError::Provider(e) => e.into(),
            e => AppError::new(e.code(), e.to_string()),
        }
    }
}

// ----- session types and modes, simulations, obligations added by the person (session 4) -----

/// The session a persona works in, and what it may switch to.
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct SessionModeView {
    pub persona_id: String,
    /// `work`, `assist`, `deliberate` or `research`.
    pub session_type: String,
    /// `deliberation` or `commitment`.
    pub mode: String,
    /// The modes this session type allows.
    pub allowed_modes: Vec<String>,
}

/// What a simulation of a pending proposal found, shown on its card
/// before Confirm.
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct SimulationView {
    pub nonce: String,
    pub tool: String,
    /// `tool`, or `submit:<intent>`.
    pub kind: String,
    pub risk: f64,
    pub critical: bool,
    /// The persona has never carried out an action of this kind: a
    /// simulation is recommended (seed 000, decision #6).
    pub first_time: bool,
    /// `required`, `recommended`, `optional` or `skipped`.
    pub level: String,
    /// Whether the simulation ran (required and recommended ones do).
    pub ran: bool,
    /// The session's mode: in deliberation, confirming only simulates.
    pub mode: String,
    pub items_added: Vec<String>,
    pub items_removed: Vec<String>,
    pub obligations_added: Vec<String>,
    pub obligations_closed: Vec<String>,
    pub bookmarks_added: Vec<String>,
    /// Why the action would be rejected, if it would.
    pub rejected: Option<String>,
    /// `proceed`, `modify` or `abandon`.
    pub recommendation: Option<String>,
}

fn session_view(persona_id: String, (t, m): (SessionType, SessionMode)) -> SessionModeView {
    SessionModeView {
        persona_id,
        session_type: t.as_str().to_owned(),
        mode: m.as_str().to_owned(),
        allowed_modes: t.allowed_modes().iter().map(|m| m.as_str().to_owned()).collect(),
    }
}

fn utc_rfc3339(s: &str) -> Result<String> {
    use time::format_description::well_known::Rfc3339;
    time::OffsetDateTime::parse(s.trim(), &Rfc3339)
        .ok()
        .and_then(|t| t.to_offset(time::UtcOffset::UTC).format(&Rfc3339).ok())
        .ok_or_else(|| AppError::invalid(format!("“{s}” is not an RFC 3339 date and time")))
}

impl Office {
    pub async fn session_mode(&self, persona: &str) -> Result<SessionModeView> {
        let persona = self.ctx.ledger.find_persona(persona).await?;
        Ok(session_view(persona.id.clone(), parse_session(self.ctx.ledger.session_mode(&persona.id).await?)))
    }

    /// Switches the persona's session type and mode (a `session_mode_set`
    /// event, signed by the person); the next reply's frame and narrative
    /// follow it. A mode the type does not allow is refused.
    pub async fn set_session_mode(&self, persona: &str, session_type: &str, mode: &str) -> Result<SessionModeView> {
        let persona = self.ctx.ledger.find_persona(persona).await?;
        let t = SessionType::parse(session_type)
            .ok_or_else(|| AppError::invalid(format!("unknown session type “{session_type}”")))?;
        let m = SessionMode::parse(mode).ok_or_else(|| AppError::invalid(format!("unknown session mode “{mode}”")))?;
        if !t.allowed_modes().contains(&m) {
            return Err(AppError::invalid(format!("a {} session cannot be in {} mode", t.as_str(), m.as_str())));
        }
        let receipts = self
            .ctx.ledger
            .append_drafts(vec![Draft {
                entity_id: persona.id.clone(),
                signer: HUMAN_ENTITY.into(),
                body: session::session_mode_body(&persona.id, t, m),
            }])
            .await?;
        for r in receipts {
            self.ctx.emit(crate::events::AppEvent::LedgerAppended { seq: r.seq, kind: r.kind });
        }
        Ok(session_view(persona.id, (t, m)))
    }

    /// An obligation added by the person: the same `reminder_set` event the
    /// `set_reminder` tool writes (or a commitment), signed by the person.
    pub async fn add_obligation(&self, persona: &str, text: &str, due_at: Option<&str>, kind: &str) -> Result<ObligationView> {
        let persona = self.ctx.ledger.find_persona(persona).await?;
        let text = text.trim();
        if text.is_empty() || text.chars().count() > 500 {
            return Err(AppError::invalid("an obligation needs a text of 1 to 500 characters"));
        }
        let obligation = match kind {
            "reminder" => ledger::ObligationKind::Reminder,
            "commitment" => ledger::ObligationKind::Commitment,
            other => return Err(AppError::invalid(format!("unknown obligation kind “{other}”"))),
        };
        let due_at = due_at.filter(|d| !d.trim().is_empty()).map(utc_rfc3339).transpose()?;
        let reminder_id = uuid::Uuid::now_v7().to_string();
        let receipts = self
            .ctx.ledger
            .append_drafts(vec![Draft {
                entity_id: persona.id.clone(),
                signer: HUMAN_ENTITY.into(),
                body: EventBody::ReminderSet {
                    reminder_id: reminder_id.clone(),
                    persona_id: persona.id.clone(),
                    text: text.to_owned(),
                    due_at,
                    obligation,
                },
            }])
            .await?;
        for r in receipts {
            self.ctx.emit(crate::events::AppEvent::LedgerAppended { seq: r.seq, kind: r.kind });
        }
        self.obligations(&persona.id)
            .await?
            .into_iter()
            .find(|o| o.id == reminder_id)
            .ok_or_else(|| AppError::new("STORAGE_LOAD_FAILED", "the obligation was not found after saving"))
    }

    /// Assesses the pending proposal's risk and, when the policy requires
    /// or recommends it, simulates it against a scratch copy of the state
    /// (recorded as `simulation_run`; nothing else is committed). A
    /// required simulation must have run before Confirm executes.
    pub async fn simulate_proposal(&self, persona: &str, nonce: &str) -> Result<SimulationView> {
        use ::office::simulation::{assess, SimulationLevel, ToolFacts};
        let persona = self.ctx.ledger.find_persona(persona).await?;
        let proposal = self
            .tools.assistant
            .pipeline
            .confirmations()
            .pending(&persona.id)
            .filter(|p| p.nonce == nonce)
            .ok_or_else(|| AppError::new("CONFIRMATION_UNKNOWN", "no pending proposal has this nonce"))?;
        let spec = self
            .tools.assistant
            .pipeline
            .registry()
            .get(&proposal.tool)
            .cloned()
            .ok_or_else(|| AppError::new("TOOL_UNKNOWN", format!("unknown tool `{}`", proposal.tool)))?;
        let kind = ::office::simulation::kind_of(&proposal.tool, &proposal.args);
        let first_time = self.ctx.ledger.action_executions(&persona.id, &kind).await? == 0;
        let risk = assess(ToolFacts { name: &spec.name, category: spec.category, base_risk: spec.risk }, &proposal.args, first_time);
        let (_, mode) = parse_session(self.ctx.ledger.session_mode(&persona.id).await?);
        let mut view = SimulationView {
            nonce: nonce.to_owned(),
            tool: proposal.tool.clone(),
            kind: risk.kind.clone(),
            risk: f64::from((risk.score * 100.0).round() / 100.0),
            critical: risk.critical,
            first_time: risk.first_time,
            level: serde_json::to_value(risk.level).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default(),
            ran: false,
            mode: mode.as_str().to_owned(),
            items_added: Vec::new(),
            items_removed: Vec::new(),
            obligations_added: Vec::new(),
            obligations_closed: Vec::new(),
            bookmarks_added: Vec::new(),
            rejected: None,
            recommendation: None,
        };
        if !matches!(risk.level, SimulationLevel::Required | SimulationLevel::Recommended) {
            return Ok(view);
        }
        let tools = self.tools.assistant.tools.clone();
        let (pid, tool, args) = (persona.id.clone(), proposal.tool.clone(), proposal.args.clone());
        let result = tokio::task::spawn_blocking(move || tools.simulate_call(&pid, &tool, &args))
            .await
            .map_err(|e| AppError::new("TOOL_FAILED", format!("the simulation stopped: {e}")))?
            .map_err(|e| AppError::new("TOOL_FAILED", e.to_string()))?;
        let effects: ledger::SimulatedChanges = serde_json::from_value(result["effects"].clone()).unwrap_or_default();
        view.ran = true;
        view.items_added = effects.items_added;
        view.items_removed = effects.items_removed;
        view.obligations_added = effects.obligations_added;
        view.obligations_closed = effects.obligations_closed;
        view.bookmarks_added = effects.bookmarks_added;
        view.rejected = result["rejected"]["message"].as_str().map(str::to_owned);
        view.recommendation = result["recommendation"].as_str().map(str::to_owned);
        Ok(view)
    }
}

#[cfg(test)]
mod tests {
    use super::{with_sent, HISTORY};

    fn message(seq: i64, status: ledger::ContextStatus) -> ledger::Message {
        ledger::Message {
            id: format!("m{seq}"),
            persona_id: "p".into(),
            role: ledger::MessageRole::Human,
            content: format!("message {seq}"),
            ts: String::new(),
            read: true,
            seq,
            context_status: status,
        }
    }

    #[test]
    fn a_sent_draft_pushes_the_oldest_counted_message_out_of_a_full_history() {
        let cap = HISTORY as i64;
        let mut full: Vec<_> = vec![message(1, ledger::ContextStatus::Always)];
        full.extend((2..cap + 2).map(|s| message(s, ledger::ContextStatus::Default)));
        let sent = with_sent(full, "p", "Where do I live?");
        assert_eq!(sent.len(), HISTORY as usize + 1);
        assert_eq!(sent[0].seq, 1, "a message kept always stays");
        assert_eq!(sent[1].seq, 3, "the oldest counted message dropped out");
        assert_eq!((sent.last().map(|m| m.content.as_str()), sent.last().map(|m| m.seq)), (Some("Where do I live?"), Some(cap + 2)));

        let short: Vec<_> = (1..4).map(|s| message(s, ledger::ContextStatus::Default)).collect();
        assert_eq!(with_sent(short, "p", "Hi").len(), 4, "under the cap nothing drops out");
    }
}
