//! Session handovers: the note one session leaves the next. The persona
//! writes it (empty, or at least 50 characters); when it cannot, Ledgermind
//! writes one from the session's events.

use ledger::{Message, MessageRole, Reminder};
use providers::{ChatMessage, CompletionRequest, Role};
use serde_json::json;

use crate::frame::truncate_chars;
use crate::session::Language;

pub const MIN_CHARS: usize = 50;
pub const MAX_CHARS: usize = 1_200;
/// Tokens the persona may spend writing its handover.
pub const MAX_TOKENS: u32 = 160;

/// The persona's text if it is a valid handover: empty (a deliberate "no
/// note") or at least `MIN_CHARS` characters; longer ones are cut.
pub fn accept(text: &str) -> Option<String> {
    let t = text.trim();
    match t.chars().count() {
        0 => Some(String::new()),
        n if n < MIN_CHARS => None,
        _ if !prose(t) => None,
        _ => Some(truncate_chars(t, MAX_CHARS)),
    }
}

/// Whether the text reads as a note: at least `MIN_WORDS` words with letters
/// (not a timestamp or a string of numbers), and not looping on one sentence.
fn prose(text: &str) -> bool {
    let words = text.split_whitespace().filter(|w| w.chars().filter(|c| c.is_alphabetic()).count() >= 2).count();
    words >= MIN_WORDS && !repetitive(text)
}

const MIN_WORDS: usize = 6;

/// A tiny model sometimes loops on one sentence: a text where fewer than
/// half the sentences are distinct carries no note worth inheriting.
fn repetitive(text: &str) -> bool {
    let sentences: Vec<String> = text
        .split(['.', '!', '?', '\n'])
        .map(|s| s.trim().to_lowercase())
        .filter(|s| s.chars().count() >= 8)
        .collect();
    let distinct: std::collections::HashSet<&String> = sentences.iter().collect();
    sentences.len() >= 3 && distinct.len() * 2 < sentences.len()
}

/// The request that asks the persona for its handover: its narrative, the
/// session's messages, and a JSON schema so even a tiny model answers in shape.
pub fn request(model: &str, narrative: &str, session: &[Message], lang: Language) -> CompletionRequest {
    let ask = match lang {
        Language::En => "Your session is ending. Write a short note to the next instance of yourself: what happened, \
                         what you promised, what is still open. Write at least two full sentences. \
                         Answer as JSON: {\"handover\": \"...\"}",
        Language::PtBr => "Sua sessão está terminando. Escreva uma nota curta para a próxima instância de você: o que \
                           aconteceu, o que você prometeu, o que continua em aberto. Escreva pelo menos duas frases \
                           completas. Responda em JSON: {\"handover\": \"...\"}",
    };
    let mut messages = crate::narrator::reply_prompt(narrative, session);
    messages.push(ChatMessage::new(Role::User, ask.to_owned()));
    let mut req = CompletionRequest::chat(model.to_owned(), messages);
    req.max_tokens = MAX_TOKENS;
    req.json_schema = Some(json!({
        "type": "object",
        "properties": {"handover": {"type": "string", "minLength": MIN_CHARS, "maxLength": 600}},
        "required": ["handover"],
        "additionalProperties": false,
    }));
    req
}

/// The handover text out of the model's JSON answer, if valid.
pub fn parse(answer: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(answer.trim()).ok()?;
    accept(v.get("handover")?.as_str()?)
}

/// A handover written from the session's events (always ≥ `MIN_CHARS`).
pub fn fallback(session: &[Message], open: &[Reminder], lang: Language) -> String {
    let pt = lang == Language::PtBr;
    let human = session.iter().filter(|m| m.role == MessageRole::Human).count();
    let mine = session.iter().filter(|m| m.role == MessageRole::Persona).count();
    let n = session.len();
    let mut s = if pt {
        let vezes = |k: usize| if k == 1 { "uma vez".to_owned() } else { format!("{k} vezes") };
        format!("Nesta sessão trocamos {n} mensage{}: a pessoa escreveu {} e eu respondi {}.", if n == 1 { "m" } else { "ns" }, vezes(human), vezes(mine))
    } else {
        let times = |k: usize| match k {
            1 => "once".to_owned(),
            2 => "twice".to_owned(),
            k => format!("{k} times"),
        };
        format!("In this session we exchanged {n} message{}: the person wrote {} and I replied {}.", if n == 1 { "" } else { "s" }, times(human), times(mine))
    };
    // Quotes on one line: a handover is read as one paragraph.
    let one_line = |t: &str| truncate_chars(&t.split_whitespace().collect::<Vec<_>>().join(" "), 160);
    if let Some(last) = session.iter().rev().find(|m| m.role == MessageRole::Human) {
        let text = one_line(&last.content);
        s.push_str(&if pt { format!(" A última coisa que a pessoa disse foi: \"{text}\".") } else { format!(" The last thing the person said was: \"{text}\".") });
    }
    if let Some(last) = session.iter().rev().find(|m| m.role == MessageRole::Persona) {
        let text = one_line(&last.content);
        s.push_str(&if pt { format!(" Minha última resposta: \"{text}\".") } else { format!(" My last answer: \"{text}\".") });
    }
    match open.len() {
        0 => s.push_str(if pt { " Não há obrigações em aberto." } else { " No obligations are open." }),
        n => {
            let first = open.iter().take(3).map(|r| r.text.as_str()).collect::<Vec<_>>().join("; ");
            s.push_str(&if pt { format!(" Há {n} obrigações em aberto: {first}.") } else { format!(" {n} obligations are open: {first}.") });
        }
    }
    truncate_chars(&s, MAX_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handover_is_empty_or_at_least_fifty_characters() {
        assert_eq!(accept("  "), Some(String::new()));
        assert_eq!(accept("Too short."), None);
        let ok = "We talked about the trip to Lisbon and I promised a packing list.";
        assert_eq!(accept(ok).as_deref(), Some(ok));
        assert_eq!(parse(&format!("{{\"handover\": \"{ok}\"}}")).as_deref(), Some(ok));
        assert_eq!(parse("{\"handover\": \"short\"}"), None);
        assert_eq!(parse("not json"), None);
    }

    #[test]
    fn a_handover_that_is_not_prose_or_loops_on_one_sentence_is_refused() {
        let looped = "This is a non-functional service. Please remove it when ready. ".to_owned() + &"This is a non-functional service. ".repeat(6);
        assert_eq!(accept(&looped), None);
        let fine = "We planned Porto. The person books the train. I promised a packing list. We planned Porto.";
        assert!(accept(fine).is_some(), "one repeated sentence among distinct ones is fine");
        assert_eq!(accept("2026-11-22 22:29:00.344197-3-12.0.0.0-14.14.17.0.0-14.14.0.1-14.14.0.1-14.14.0.1"), None, "not prose");
    }

    fn msg(role: MessageRole, content: &str) -> Message {
        Message {
            id: "m".into(),
            persona_id: "p".into(),
            role,
            content: content.into(),
            ts: String::new(),
            read: true,
            seq: 1,
            context_status: Default::default(),
        }
    }

    #[test]
    fn the_prompt_starts_with_the_narrative_and_keeps_turn_order() {
        let history = [msg(MessageRole::Human, "hi"), msg(MessageRole::System, "note"), msg(MessageRole::Persona, "hello")];
        let p = crate::reply_prompt("You are Ada.", &history);
        assert_eq!(p.len(), 3);
        assert_eq!((p[0].role, p[0].content.as_str()), (Role::System, "You are Ada."));
        assert_eq!((p[1].role, p[2].role), (Role::User, Role::Assistant));
        // The handover request is the same conversation, then the ask.
        let req = request("m", "You are Ada.", &history, Language::En);
        assert_eq!(req.messages[..3], p[..]);
        assert_eq!((req.messages.len(), req.messages[3].role), (4, Role::User));
    }

    #[test]
    fn the_fallback_reads_naturally_and_quotes_on_one_line() {
        let session = [msg(MessageRole::Human, "Plan Porto?"), msg(MessageRole::Persona, "Sure.\n\nFriday works.")];
        let en = fallback(&session, &[], Language::En);
        assert!(en.starts_with("In this session we exchanged 2 messages: the person wrote once and I replied once."), "{en}");
        assert!(en.contains("\"Sure. Friday works.\""), "{en}");
        let pt = fallback(&session, &[], Language::PtBr);
        assert!(pt.starts_with("Nesta sessão trocamos 2 mensagens: a pessoa escreveu uma vez e eu respondi uma vez."), "{pt}");
    }

    #[test]
    fn the_fallback_is_long_enough_even_for_an_empty_session() {
        assert!(fallback(&[], &[], Language::En).chars().count() >= MIN_CHARS);
        assert!(fallback(&[], &[], Language::PtBr).chars().count() >= MIN_CHARS);
    }
}
