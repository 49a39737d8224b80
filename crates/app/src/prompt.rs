//! The prompt for a persona's reply: who it is, then the recent conversation.

use ledger::{Message, MessageRole, Persona};
use providers::{ChatMessage, Role};

/// How many past messages go into a reply's prompt.
pub const HISTORY: u32 = 12;

#[cfg_attr(not(test), allow(dead_code))] // callers without recalled memories
pub fn reply_prompt(persona: &Persona, history: &[Message]) -> Vec<ChatMessage> {
    reply_prompt_with_memories(persona, history, &[])
}

/// The reply prompt with recalled past messages and memories (already
/// ranked and trimmed by `crate::memory`) added to the system message.
pub fn reply_prompt_with_memories(persona: &Persona, history: &[Message], memories: &[String]) -> Vec<ChatMessage> {
    let about = if persona.long_description.trim().is_empty() {
        persona.short_description.trim()
    } else {
        persona.long_description.trim()
    };
    let mut system = format!("You are {}, a companion persona in Ledgermind.", persona.name);
    if !about.is_empty() {
        system.push(' ');
        system.push_str(about);
    }
    system.push_str(" Reply in a friendly, concise way, in the language the person writes in.");
    if !memories.is_empty() {
        system.push_str("\n\nFrom earlier conversations (use only if relevant):");
        for m in memories {
            system.push_str("\n- ");
            system.push_str(m);
        }
    }
    let mut out = vec![ChatMessage::new(Role::System, system)];
    for m in history {
        let role = match m.role {
            MessageRole::Human => Role::User,
            MessageRole::Persona => Role::Assistant,
            MessageRole::System => continue,
        };
        out.push(ChatMessage::new(role, m.content.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn persona(long: &str) -> Persona {
        Persona {
            id: "p".into(),
            name: "Ada".into(),
            short_description: "A tutor".into(),
            long_description: long.into(),
            model: "local:m".into(),
            is_system: false,
            archived: false,
            created_seq: 1,
            unread: 0,
        }
    }

    #[test]
    fn the_prompt_names_the_persona_and_keeps_turn_order() {
        let history = vec![
            Message { id: "1".into(), persona_id: "p".into(), role: MessageRole::Human, content: "hi".into(), ts: String::new(), read: true, seq: 1 },
            Message { id: "2".into(), persona_id: "p".into(), role: MessageRole::Persona, content: "hello".into(), ts: String::new(), read: true, seq: 2 },
        ];
        let p = reply_prompt(&persona(""), &history);
        assert_eq!(p.len(), 3);
        assert!(p[0].content.starts_with("You are Ada") && p[0].content.contains("A tutor"));
        assert_eq!(p[1].role, Role::User);
        assert_eq!(p[2].role, Role::Assistant);
        assert!(reply_prompt(&persona("Long text"), &[])[0].content.contains("Long text"));
    }
}
