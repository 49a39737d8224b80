//! The persona pipeline as the voice turn's responder: the heard words are
//! sent as the person's message (so the turn is in the conversation like a
//! typed one) and the reply comes back, streamed as the model writes it. Once the turn is over it
//! is marked as spoken in the ledger (`voice_turn`), with how much of the
//! reply was said aloud when the person cut it off.

use std::sync::Arc;
use std::time::Duration;

use voice::converse::{spoken_chars, Responder, TurnReport};
use voice::VoiceError;

use crate::conversation::{Conversation, VoiceTurn};
use crate::events::AppEvent;

use super::drafts::Drafts;

/// The longest a send waits for the draft read under way. Giving up on it
/// frees nothing: the model finishes the chunk it is reading (a draft's
/// new words are one chunk), and a reply that waits longer than the
/// engine's grace for a cancelled call runs beside it with no warm
/// context, reading the whole conversation again (45-60 s on one busy
/// core, where the draft had seconds left). What the draft reads is the
/// reply's own prompt but for the last words, so it is waited for; the
/// bound only keeps a stuck read from holding the turn. A draft waiting
/// behind background work is not waited for (see `settle`).
const DRAFT_SETTLE: Duration = Duration::from_secs(20);

pub struct PersonaResponder {
    conversation: Arc<Conversation>,
    persona: String,
    runtime: tokio::runtime::Handle,
    /// The person's message and the reply of the turn under way.
    pending: Option<(String, Option<String>)>,
    drafts: Drafts,
}

impl PersonaResponder {
    pub fn new(conversation: Arc<Conversation>, persona: String, runtime: tokio::runtime::Handle) -> Self {
        Self { conversation, persona, runtime, pending: None, drafts: Drafts::default() }
    }
}

impl Responder for PersonaResponder {
    fn reply(&mut self, heard: &str) -> Result<String, VoiceError> {
        self.reply_streaming(heard, &mut |_| {})
    }

    /// The model's text as the chat window streams it (`ReplyDelta`), then
    /// the reply as saved.
    fn reply_streaming(&mut self, heard: &str, on_text: &mut dyn FnMut(&str)) -> Result<String, VoiceError> {
        let conversation = self.conversation.clone();
        let persona = self.persona.clone();
        let heard = heard.to_owned();
        let drafts = self.drafts.clone();
        let (message_id, reply) = self.runtime.block_on(async move {
            // The next prompt read ahead after the last reply is this
            // reply's own start: stopped by the send mid-chunk, it holds the
            // model past the engine's grace and the reply reads the whole
            // conversation again beside it (43 s on one busy core). A draft
            // waiting behind it reads once it is done, and is waited for below.
            let _ = tokio::time::timeout(DRAFT_SETTLE, conversation.until_read_ahead()).await;
            // A draft that waits behind other background work (the summary)
            // is not waited for: the send stops that work.
            let ctx = conversation.ctx.clone();
            drafts.settle(DRAFT_SETTLE, |began| ctx.background_since().is_some_and(|b| b <= began)).await;
            let mut rx = conversation.subscribe();
            let (sent, request) = conversation
                .send_message(&persona, &heard)
                .await
                .map_err(|e| VoiceError::Reply(format!("the reply failed: [{}] {}", e.code, e.message)))?;
            if request.is_empty() {
                // Answered at once without the model (a deterministic intent).
                let last = conversation.list_messages(&persona).await.ok().and_then(|mut m| m.pop());
                let reply = last.filter(|m| m.id != sent.id).map(|m| (m.id, m.content));
                return Ok((sent.id, reply));
            }
            loop {
                match rx.recv().await {
                    Ok(AppEvent::ReplyDelta { request_id, text, .. }) if request_id == request => on_text(&text),
                    Ok(AppEvent::ReplyFinished { request_id, message }) if request_id == request => {
                        return Ok((sent.id, Some((message.id, message.content))))
                    }
                    Ok(AppEvent::ReplyFailed { request_id, error, .. }) if request_id == request => {
                        return Err(VoiceError::Reply(format!(
                            "the reply failed: [{}] {}",
                            error.code, error.message
                        )))
                    }
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                        return Err(VoiceError::Reply("the engine stopped before the reply finished".into()))
                    }
                }
            }
        })?;
        let (reply_id, text) = reply.map_or((None, String::new()), |(id, text)| (Some(id), text));
        self.pending = Some((message_id, reply_id));
        Ok(text)
    }

    /// The words so far are read into the model as a typed draft would be
    /// (the prompt their reply would get, in the background; the send
    /// waits for it), so the reply's first token waits only for the last
    /// words. One draft is read at a time (see [`Drafts`]).
    fn hearing(&mut self, so_far: &str) {
        let (conversation, persona) = (self.conversation.clone(), self.persona.clone());
        self.drafts.offer(so_far.to_owned(), &self.runtime, move |text| {
            let (conversation, persona) = (conversation.clone(), persona.clone());
            async move { conversation.draft_typed(Some(&persona), &text).await }
        });
    }

    fn speech_started(&mut self) {
        self.conversation.person_composing();
    }

    fn turn_finished(&mut self, report: &TurnReport) -> Result<(), VoiceError> {
        let Some((message_id, reply_id)) = self.pending.take() else { return Ok(()) };
        let turn = VoiceTurn {
            message_id,
            reply_id,
            interrupted: report.interrupted,
            spoken_chars: report.interrupted.then(|| spoken_chars(&report.reply, &report.spoken)),
        };
        let conversation = self.conversation.clone();
        let persona = self.persona.clone();
        self.runtime.block_on(async move { conversation.record_voice_turn(&persona, turn).await }).map_err(|e| {
            VoiceError::Reply(format!("cannot record the voice turn: [{}] {}", e.code, e.message))
        })
    }
}
