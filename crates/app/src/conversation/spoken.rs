//! Voice turns: a conversation turn that was spoken goes through the same
//! persona pipeline as a typed one (`send_message`, the reply job), and
//! this records afterwards that it was spoken, so the ledger tells the two
//! apart without changing how messages are stored.

use ledger::{EventBody, HUMAN_ENTITY};

use super::Conversation;
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

impl Conversation {
    /// Marks a turn as spoken (`voice_turn` event, signed by the person's
    /// key). Both messages must belong to `persona`'s conversation.
    pub async fn record_voice_turn(&self, persona: &str, turn: VoiceTurn) -> Result<()> {
        let p = self.ctx.ledger.find_persona(persona).await?;
        for id in std::iter::once(&turn.message_id).chain(turn.reply_id.as_ref()) {
            match self.ctx.ledger.message(id).await? {
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
        let receipt = self.ctx.ledger.append(HUMAN_ENTITY, body).await?;
        self.ctx.emit(crate::events::AppEvent::LedgerAppended { seq: receipt.seq, kind: receipt.kind });
        Ok(())
    }
}
