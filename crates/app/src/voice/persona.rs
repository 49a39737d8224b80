//! The persona pipeline as the voice turn's responder: the heard words are
//! sent as the person's message (so the turn is in the conversation like a
//! typed one) and the finished reply comes back.

use std::sync::Arc;

use voice::converse::Responder;
use voice::VoiceError;

use crate::{AppEvent, Engine};

pub struct PersonaResponder {
    pub engine: Arc<Engine>,
    pub persona: String,
    pub runtime: tokio::runtime::Handle,
}

impl Responder for PersonaResponder {
    fn reply(&mut self, heard: &str) -> Result<String, VoiceError> {
        let engine = self.engine.clone();
        let persona = self.persona.clone();
        let heard = heard.to_owned();
        self.runtime.block_on(async move {
            let mut rx = engine.subscribe();
            let (_, request) = engine
                .send_message(&persona, &heard)
                .await
                .map_err(|e| VoiceError::Inference(format!("[{}] {}", e.code, e.message)))?;
            if request.is_empty() {
                // Answered at once without the model (a deterministic intent).
                let last = engine.list_messages(&persona).await.ok().and_then(|mut m| m.pop());
                return Ok(last.map(|m| m.content).unwrap_or_default());
            }
            loop {
                match rx.recv().await {
                    Ok(AppEvent::ReplyFinished { request_id, message }) if request_id == request => {
                        return Ok(message.content)
                    }
                    Ok(AppEvent::ReplyFailed { request_id, error, .. }) if request_id == request => {
                        return Err(VoiceError::Inference(format!(
                            "the reply failed: [{}] {}",
                            error.code, error.message
                        )))
                    }
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                        return Err(VoiceError::Inference("the engine stopped before the reply finished".into()))
                    }
                }
            }
        })
    }
}
