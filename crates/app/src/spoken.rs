//! Voice turns: a conversation turn that was spoken goes through the same
//! persona pipeline as a typed one (`send_message`, the reply job), and
//! this records afterwards that it was spoken, so the ledger tells the two
//! apart without changing how messages are stored.

use ledger::{EventBody, Message, MessageRole, HUMAN_ENTITY};

use crate::engine::Engine;
use crate::error::AppError;
use crate::Result;

/// One spoken turn, as the voice loop saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoiceTurn {
    /// The person's transcribed message (from `send_message`).
    pub message_id: String,
    /// The persona's reply, when there was one.
    pub reply_id: Option<String>,
    /// The person cut the reply off.
    pub interrupted: bool,
    /// How many characters of the reply were said aloud (only when interrupted).
    pub spoken_chars: Option<u32>,
}

impl Engine {
    /// Marks a turn as spoken (`voice_turn` event, signed by the person's
    /// key). Both messages must belong to `persona`'s conversation.
    pub async fn record_voice_turn(&self, persona: &str, turn: VoiceTurn) -> Result<()> {
        let p = self.ledger.find_persona(persona).await?;
        for id in std::iter::once(&turn.message_id).chain(turn.reply_id.as_ref()) {
            match self.ledger.message(id).await? {
                Some(m) if m.persona_id == p.id => {}
                _ => return Err(AppError::invalid(format!("no message {id} in {}'s conversation", p.name))),
            }
        }
        if turn.spoken_chars.is_some() && !turn.interrupted {
            return Err(AppError::invalid("spoken_chars is only for an interrupted reply"));
        }
        let body = EventBody::VoiceTurn {
            persona_id: p.id,
            message_id: turn.message_id,
            reply_id: turn.reply_id,
            interrupted: turn.interrupted,
            spoken_chars: turn.spoken_chars,
        };
        let receipt = self.ledger.append(HUMAN_ENTITY, body).await?;
        self.emit(crate::AppEvent::LedgerAppended { seq: receipt.seq, kind: receipt.kind });
        Ok(())
    }
}

/// Replaces, in `history`, each reply the person cut off with only what
/// was said aloud. A ledger that cannot be read leaves the history whole.
pub(crate) async fn keep_what_was_heard(engine: &Engine, persona_id: &str, history: &mut [Message]) {
    if !history.iter().any(|m| m.role == MessageRole::Persona) {
        return;
    }
    let cut = match engine.ledger.interrupted_replies(persona_id).await {
        Ok(cut) => cut,
        Err(e) => {
            tracing::warn!("voice turns unreadable, the history keeps whole replies: {e}");
            return;
        }
    };
    for m in history.iter_mut().filter(|m| m.role == MessageRole::Persona) {
        if let Some(n) = cut.get(&m.id) {
            m.content = office::as_heard(&m.content, *n);
        }
    }
}
