//! The prompt for a persona's reply, rendered for the model that reads it.
//!
//! The office's narrative (who the persona is, its obligations, its memory,
//! its constitution last) stays what the ledger records and "Why did it say
//! that?" shows. What is *sent* depends on the model: a large or remote model
//! gets that narrative as its system message and the recent conversation
//! (`Full`); a small local model gets a short plain prompt (`Compact`, see
//! [`compact`]), since it continues a long narrative instead of using it.

pub(crate) mod compact;
pub(crate) mod profile;

pub(crate) use profile::{ChosenProfile, PromptProfile};

/// How many past messages go into a reply's prompt.
pub const HISTORY: u32 = 12;

/// One implementation for replies and handovers: the office's.
pub use ::office::reply_prompt;

/// The frame's JSON with what was sent added under `"sent"`: the profile,
/// why it was chosen and the messages exactly as the provider got them.
pub(crate) fn record_sent(frame_json: &str, chosen: &ChosenProfile, messages: &[providers::ChatMessage]) -> String {
    let mut value: serde_json::Value = serde_json::from_str(frame_json).unwrap_or_else(|_| serde_json::json!({}));
    if let Some(map) = value.as_object_mut() {
        map.insert(
            "sent".to_owned(),
            serde_json::json!({
                "profile": chosen.profile,
                "reason": chosen.reason,
                "messages": messages,
            }),
        );
    }
    serde_json::to_string(&value).unwrap_or_else(|_| frame_json.to_owned())
}

/// Recorded messages as "Why did it say that?" shows them: `[role]` then
/// the text, one block per message.
pub(crate) fn shown_messages(messages: &[serde_json::Value]) -> String {
    messages
        .iter()
        .map(|m| format!("[{}]\n{}", m["role"].as_str().unwrap_or("?"), m["content"].as_str().unwrap_or("")))
        .collect::<Vec<_>>()
        .join("\n\n")
}

impl crate::engine::Engine {
    /// The compact prompt of `persona`'s next reply (see [`compact`]); keeps
    /// where its window of turns starts for the next turn.
    pub(crate) async fn compact_messages(
        &self,
        persona: &ledger::Persona,
        history: &[ledger::Message],
        memories: &crate::memory::ReplyMemories,
    ) -> Vec<providers::ChatMessage> {
        let (language, said) = tokio::join!(self.ledger.persona_language(&persona.id), self.ledger.messages(&persona.id, Some(SAID_LOOKUP)));
        let setting = language.ok().flatten().map(|l| ::office::Language::parse(&l)).unwrap_or_default();
        // People are answered in the language they write in; the persona's
        // setting decides only when the message does not tell.
        let newest = history.iter().rev().find(|m| m.role == ledger::MessageRole::Human);
        let language = newest.and_then(|m| ::office::Language::detect(&m.content)).unwrap_or(setting);
        // Recall also finds the persona's own past replies; only what the
        // person said (or a remembered fact about them) is offered as a fact.
        let said: std::collections::HashSet<String> = said
            .unwrap_or_default()
            .into_iter()
            .filter(|m| m.role == ledger::MessageRole::Human)
            .map(|m| m.id)
            .collect();
        let recalled = memories
            .lines
            .iter()
            .zip(&memories.item_ids)
            .map(|(line, id)| (line.clone(), line.starts_with("[known about them]") || said.contains(id)))
            .collect();
        let kept = self.prompt_windows.lock().ok().and_then(|w| w.get(&persona.id).copied());
        let input = compact::CompactInput { persona, language, history, window_start: kept, recalled };
        let (messages, start) = compact::messages(&input);
        if let (Ok(mut w), Some(start)) = (self.prompt_windows.lock(), start) {
            w.insert(persona.id.clone(), start);
        }
        messages
    }
}

/// How many of the persona's latest messages are looked at to tell the
/// person's words from the persona's among recalled lines.
const SAID_LOOKUP: u32 = 1_000;
