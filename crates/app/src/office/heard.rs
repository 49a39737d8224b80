//! What the person heard of a spoken reply they cut off: the history a
//! model reads keeps only that, so a persona never builds on words that
//! were never said aloud.

use ledger::{Ledger, Message, MessageRole};

/// Replaces, in `history`, each reply the person cut off with only what
/// was said aloud. A ledger that cannot be read leaves the history whole.
pub(crate) async fn keep_what_was_heard(ledger: &Ledger, persona_id: &str, history: &mut [Message]) {
    if !history.iter().any(|m| m.role == MessageRole::Persona) {
        return;
    }
    let cut = match ledger.interrupted_replies(persona_id).await {
        Ok(cut) => cut,
        Err(e) => {
            tracing::warn!("voice turns unreadable, the history keeps whole replies: {e}");
            return;
        }
    };
    for m in history.iter_mut().filter(|m| m.role == MessageRole::Persona) {
        if let Some(n) = cut.get(&m.id) {
            m.content = ::office::as_heard(&m.content, *n);
        }
    }
}
