//! The prompt for a persona's reply: the office's narrative (who it is, its
//! obligations, its memory, its constitution last) as the system message,
//! then the recent conversation.

/// How many past messages go into a reply's prompt.
pub const HISTORY: u32 = 12;

/// One implementation for replies and handovers: the office's.
pub use ::office::reply_prompt;

#[cfg(test)]
mod tests {
    use super::*;
    use ledger::{Message, MessageRole};
    use providers::Role;

    #[test]
    fn the_prompt_starts_with_the_narrative_and_keeps_turn_order() {
        let msg = |id: &str, role, content: &str| Message {
            id: id.into(),
            persona_id: "p".into(),
            role,
            content: content.into(),
            ts: String::new(),
            read: true,
            seq: 1,
            context_status: Default::default(),
        };
        let history = vec![
            msg("1", MessageRole::Human, "hi"),
            msg("2", MessageRole::System, "note"),
            msg("3", MessageRole::Persona, "hello"),
        ];
        let p = reply_prompt("You are Ada.", &history);
        assert_eq!(p.len(), 3);
        assert_eq!((p[0].role, p[0].content.as_str()), (Role::System, "You are Ada."));
        assert_eq!(p[1].role, Role::User);
        assert_eq!(p[2].role, Role::Assistant);
    }
}
