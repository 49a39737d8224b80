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
pub(crate) mod perspective;

pub(crate) use profile::{ChosenProfile, PromptProfile};

/// How many past messages a reply's prompt is made from: the compact prompt
/// shows the newest as turns and keeps what the person said in the older
/// ones as lines it was told (see `compact`).
pub const HISTORY: u32 = 24;

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
