//! The compact prompt for small local models: a short plain system message
//! (who the persona is, the reply language, "answer briefly"), the recent
//! turns as real chat messages, and right before the newest message the few
//! things the person said earlier that bear on it. Nothing of the ledger's
//! vocabulary (event kinds, ids, hashes, governance) goes in.
//!
//! Stable parts come first so the local engine can keep them evaluated
//! between turns: the system message never changes within a conversation,
//! the window of turns starts at a message that stays put for several
//! turns (it moves in steps, not one message per turn), and the remembered
//! lines sent before a message are sent again in the same place on later
//! turns. The [`Layout`] that makes this so outlives the process, so one
//! `ledgermind chat` per message reads only what is new, as the app does.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use ledger::{Message, MessageRole, Persona};
use ::office::Language;
use providers::{ChatMessage, Role};

/// The window keeps at most this many messages…
pub(crate) const MAX_TURNS: usize = 12;
/// …and when it must move, starts again with this many.
pub(crate) const MIN_TURNS: usize = 4;
/// Remembered lines sent with a message.
pub(crate) const MAX_FACTS: usize = 3;
const MAX_FACT_CHARS: usize = 200;
const MAX_DESCRIPTION_CHARS: usize = 120;
/// What the person said before the window, kept in the system message.
const MAX_TOLD: usize = 8;

/// What the compact prompt is made of.
pub(crate) struct CompactInput<'a> {
    pub persona: &'a Persona,
    pub language: Language,
    /// The conversation's recent messages, oldest first, the newest last.
    pub history: &'a [Message],
    /// How the last prompt was laid out (empty when not known).
    pub layout: &'a Layout,
    /// What recall found, best first: (line as the memory module wrote it,
    /// whether it is something the person said or a remembered fact).
    pub recalled: Vec<(String, bool)>,
}

/// How a conversation's prompt was laid out, kept for its next turn.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Layout {
    /// The seq of the window's first message.
    pub start: Option<i64>,
    /// What the person said before the window, as the system message told
    /// it: kept while the window stays put, though the oldest messages of
    /// the history read for a prompt drop out of it turn by turn.
    #[serde(default)]
    pub told: Option<String>,
    /// The remembered lines sent right before a message in the window, as
    /// sent, by the message's seq.
    pub facts: BTreeMap<i64, String>,
}

/// The messages to send, and the layout to keep for the next turn.
pub(crate) fn messages(input: &CompactInput<'_>) -> (Vec<ChatMessage>, Layout) {
    let history: Vec<&Message> = input.history.iter().filter(|m| m.role != MessageRole::System).collect();
    let start = window_start(&history, input.layout.start);
    // What the person said before the window stays in the system message:
    // it changes only when the window moves, so the local engine keeps it
    // evaluated with the rest of the stable prefix, and a fact told many
    // turns ago is still in front of the model.
    let start_seq = history.get(start).map(|m| m.seq);
    let told = match &input.layout.told {
        Some(kept) if start_seq.is_some() && input.layout.start == start_seq => Some(kept.clone()),
        _ => {
            let told: Vec<&str> = history[..start].iter().filter(|m| m.role == MessageRole::Human).map(|m| m.content.as_str()).collect();
            let told = &told[told.len().saturating_sub(MAX_TOLD)..];
            (!told.is_empty()).then(|| told_text(told, input.language))
        }
    };
    let mut system = system_text(input.persona, input.language);
    if let Some(told) = &told {
        system.push_str("\n\n");
        system.push_str(told);
    }
    let mut out = vec![ChatMessage::new(Role::System, system)];
    out.extend(example_turns(input.language));
    let question = history.last().filter(|m| m.role == MessageRole::Human).map(|m| m.content.as_str()).unwrap_or("");
    // The person's earlier messages, in the window or not: a small model
    // uses a fact named right before the question far better than one
    // buried a few turns up.
    let earlier: Vec<&str> = history[..history.len().saturating_sub(1)]
        .iter()
        .filter(|m| m.role == MessageRole::Human)
        .map(|m| m.content.as_str())
        .collect();
    let facts = pick_facts(question, &input.recalled, &earlier);
    let last = history.len().saturating_sub(1);
    let switched = language_switched(&history[start..], input.language);
    let mut layout = Layout { start: start_seq, told, facts: BTreeMap::new() };
    for (i, m) in history.iter().enumerate().skip(start) {
        let sent_before = if i == last && m.role == MessageRole::Human {
            let facts = (!facts.is_empty()).then(|| facts_text(&facts, input.language));
            let reminder = switched.then(|| language_reminder(input.language).to_owned());
            match (facts, reminder) {
                (Some(f), Some(r)) => Some(format!("{f}\n{r}")),
                (f, r) => f.or(r),
            }
        } else {
            input.layout.facts.get(&m.seq).cloned()
        };
        if let Some(text) = sent_before {
            out.push(ChatMessage::new(Role::System, text.clone()));
            layout.facts.insert(m.seq, text);
        }
        let role = if m.role == MessageRole::Human { Role::User } else { Role::Assistant };
        out.push(ChatMessage::new(role, m.content.trim().to_owned()));
    }
    (out, layout)
}

/// The messages the next turn's prompt will start with, read ahead while
/// the person reads the reply and types: what [`messages`] sends once they
/// write again, up to (not including) the facts picked for that message and
/// the message itself. `input.history` ends with the persona's reply; the
/// window is placed as it will be with one more message, and `input.layout`
/// is the one the reply was given with.
pub(crate) fn next_turn_prefix(input: &CompactInput<'_>) -> Vec<ChatMessage> {
    let mut history = input.history.to_vec();
    history.push(Message {
        id: String::new(),
        persona_id: input.persona.id.clone(),
        role: MessageRole::Human,
        content: String::new(),
        ts: String::new(),
        read: false,
        seq: input.history.last().map_or(1, |m| m.seq + 1),
        context_status: ledger::ContextStatus::default(),
    });
    // No recalled lines and an empty message: no facts are picked, so
    // only the placeholder follows the shared start.
    let ahead = CompactInput { history: &history, recalled: Vec::new(), ..*input };
    let (mut out, _) = messages(&ahead);
    out.pop();
    out
}

/// The first message of the window: where it started last turn while that
/// keeps it within `MAX_TURNS`, else the last `MIN_TURNS` messages.
pub(crate) fn window_start(history: &[&Message], kept: Option<i64>) -> usize {
    let n = history.len();
    if let Some(seq) = kept {
        if let Some(i) = history.iter().position(|m| m.seq == seq) {
            if n - i <= MAX_TURNS {
                return i;
            }
        }
    }
    let mut i = n.saturating_sub(MIN_TURNS);
    // Start on the person's turn, as a conversation does.
    while i > 0 && history[i].role != MessageRole::Human {
        i -= 1;
    }
    i
}

fn system_text(persona: &Persona, language: Language) -> String {
    let description = short_description(&persona.short_description);
    // "Chatting with a friend, not serving a customer": told only that it
    // chats with "the user", a small instruction-tuned model falls back on
    // help-desk lines ("How can I help you today?") or says the message back.
    // Asked about itself ("Do you like music?"), the default model opens
    // with "As an AI language model, I don't have personal preferences…"
    // unless told it has tastes of its own.
    match language {
        Language::PtBr => {
            let who = if description.is_empty() { "uma amiga atenciosa".to_owned() } else { description };
            format!(
                "Você é {}, {who}. Você está conversando com um amigo, não atendendo um cliente. Responda em português, em uma ou duas frases curtas: comente com carinho o que ele contou, ou pergunte sobre isso, e responda o que ele perguntar. Ao falar dele, diga \"você\". Se ele perguntar de você, responda como {}, com seus próprios gostos, nunca como um modelo de linguagem.",
                persona.name, persona.name
            )
        }
        Language::En => {
            let who = if description.is_empty() { "a warm friend".to_owned() } else { description };
            format!(
                "You are {}, {who}. You are chatting with a friend, not serving a customer. Reply in English, in one or two short sentences: say something warm about what they told you, or ask about it, and answer what they ask. When you speak about them, say \"you\". If they ask about you, answer as {} would, with your own tastes, never as a language model.",
                persona.name, persona.name
            )
        }
    }
}

/// A short made-up exchange before the conversation. A small model replies
/// the way the turns before its reply went far more than the way it is
/// told to: one exchange where a friend reacts and asks back does what the
/// instructions alone did not (Portuguese replies were "Como posso ajudar
/// você hoje?" to everything). It tells nothing about the person (no name,
/// place or job a later question could pick up), and it never changes, so
/// the local engine keeps it evaluated with the system message.
fn example_turns(language: Language) -> Vec<ChatMessage> {
    let turns: [&str; 4] = match language {
        Language::PtBr => ["Fui ao cinema ontem.", "Que legal! Que filme você viu?", "Uma comédia. Eu ri muito.", "Adoro comédias! Rir faz muito bem."],
        Language::En => ["I went to the cinema yesterday.", "Oh, nice! What did you see?", "A comedy. I laughed a lot.", "I love comedies! Laughing does you good."],
    };
    turns
        .iter()
        .enumerate()
        .map(|(i, text)| ChatMessage::new(if i % 2 == 0 { Role::User } else { Role::Assistant }, (*text).to_owned()))
        .collect()
}

/// The description's first sentence, short, without its final stop.
fn short_description(text: &str) -> String {
    let text = text.trim();
    let first = text.split_inclusive(['.', '!', '?', '\n']).next().unwrap_or("").trim();
    let mut out: String = first.chars().take(MAX_DESCRIPTION_CHARS).collect();
    while out.ends_with(['.', '!', '?', ' ']) {
        out.pop();
    }
    // "A grumpy chess teacher" reads as "You are Ada, a grumpy chess teacher".
    let first_word = out.split_whitespace().next().unwrap_or("");
    if ["A", "An", "The", "Um", "Uma", "O", "Os", "As"].contains(&first_word) {
        let mut chars = out.chars();
        if let Some(c) = chars.next() {
            return c.to_lowercase().chain(chars).collect();
        }
    }
    out
}

fn told_text(told: &[&str], language: Language) -> String {
    let lines: Vec<String> = told.iter().map(|t| format!("- {}", shorten(t))).collect();
    match language {
        Language::PtBr => format!("Antes, o usuário te disse:\n{}", lines.join("\n")),
        Language::En => format!("Earlier, the user told you:\n{}", lines.join("\n")),
    }
}

/// Whether the persona's last reply in the window is in another language
/// than `language`, the one the newest message is answered in. A small
/// model goes on in the language of its own last turn whatever the system
/// message says (asked "Where do I work?" after a Portuguese exchange, the
/// default model answered "Você trabalha como enfermeira em Porto.").
fn language_switched(window: &[&Message], language: Language) -> bool {
    window
        .iter()
        .rev()
        .find(|m| m.role == MessageRole::Persona)
        .and_then(|m| Language::detect(&m.content))
        .is_some_and(|l| l != language)
}

/// Said right before a message written in another language than the
/// persona's last reply, where the model reads it last.
fn language_reminder(language: Language) -> &'static str {
    match language {
        Language::PtBr => "Ele escreveu em português: responda em português.",
        Language::En => "They wrote in English: reply in English.",
    }
}

/// How the remembered lines before a message open. Everything up to the
/// lines themselves is the same for every message, so it is read ahead
/// with the rest of the next prompt ([`facts_opening`]) and a question that
/// brings remembered lines waits only for the lines and the question: on
/// two cores each token read after the send costs 20–30 ms before the
/// first token of the reply.
fn facts_header(language: Language) -> &'static str {
    match language {
        Language::PtBr => "O usuário te contou antes (use isso para responder):",
        Language::En => "The user told you earlier (use it to answer):",
    }
}

fn facts_text(facts: &[String], language: Language) -> String {
    let lines: Vec<String> = facts.iter().map(|f| format!("- {f}")).collect();
    format!("{}\n{}", facts_header(language), lines.join("\n"))
}

/// The start of the remembered lines a message may bring, to read ahead
/// after [`next_turn_prefix`]: when the message brings lines, their
/// message starts with these words and only the lines are new; when it
/// brings none, the engine drops this part unused (it is the prompt's
/// last part, so nothing read before it is lost).
pub(crate) fn facts_opening(language: Language) -> ChatMessage {
    ChatMessage::new(Role::System, facts_header(language).to_owned())
}

/// The few earlier lines that bear on the message: recalled ones that share
/// a word with it (for a question, the best recalled one in any case), and
/// the person's own earlier messages that share a word with it. A statement
/// that shares no word with anything earlier gets none: the lines would only
/// distract, and each costs the local model reading time before the reply
/// (and again on the next turn, whose prompt no longer holds them).
pub(crate) fn pick_facts(question: &str, recalled: &[(String, bool)], earlier: &[&str]) -> Vec<String> {
    let asked = content_words(question);
    let asks = question.trim_end().ends_with('?');
    let mut scored: Vec<(usize, usize, String)> = Vec::new();
    for (rank, (line, said_by_person)) in recalled.iter().enumerate() {
        if !said_by_person {
            continue;
        }
        let text = strip_tag(line);
        let overlap = overlap(&content_words(&text), &asked);
        if overlap > 0 || (asks && scored.is_empty()) {
            scored.push((overlap, rank, text));
        }
    }
    for (i, text) in earlier.iter().enumerate().rev() {
        let overlap = overlap(&content_words(text), &asked);
        if overlap > 0 {
            scored.push((overlap, recalled.len() + i, text.trim().to_owned()));
        }
    }
    // Words cannot be shared across languages: a question asked in English
    // about what was told in Portuguese ("Where do I work?" after "sou
    // enfermeira em Porto") finds nothing above, and the default model,
    // with the Portuguese turn right there in the window, answered "You
    // work at a company called XYZ." The person's latest messages in the
    // other language are offered instead, when the question is about them.
    if scored.is_empty() && crate::prompt::perspective::asks_about_the_person(question) {
        if let Some(language) = Language::detect(question) {
            let other = earlier.iter().enumerate().rev().filter(|(_, t)| Language::detect(t).is_some_and(|l| l != language));
            scored.extend(other.take(MAX_FACTS).map(|(i, t)| (0, recalled.len() + i, t.trim().to_owned())));
        }
    }
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut seen = HashSet::new();
    scored
        .into_iter()
        .filter(|(_, _, t)| !t.is_empty() && seen.insert(t.to_lowercase()))
        .take(MAX_FACTS)
        .map(|(_, _, t)| shorten(&t))
        .collect()
}

/// "[2026-11-25] text" / "[known about them] text" → "text".
fn strip_tag(line: &str) -> String {
    let line = line.trim();
    match line.strip_prefix('[').and_then(|rest| rest.split_once("] ")) {
        Some((_, text)) => text.trim().to_owned(),
        None => line.to_owned(),
    }
}

fn shorten(text: &str) -> String {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() <= MAX_FACT_CHARS {
        return text;
    }
    let mut out: String = text.chars().take(MAX_FACT_CHARS).collect();
    out.push('…');
    out
}

/// Words that carry meaning, compared by their first five letters so "run"
/// meets "running" and "trabalho" meets "trabalhar" (roughly).
fn content_words(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() >= 3 && !STOPWORDS.contains(&w.as_str()))
        .map(|w| w.chars().take(5).collect())
        .collect()
}

/// How many asked words the text has: the same stem, or one a prefix of the
/// other ("fly" and "flying" are kept as "fly" and "flyin").
fn overlap(text: &HashSet<String>, asked: &HashSet<String>) -> usize {
    asked.iter().filter(|a| text.iter().any(|t| t.starts_with(a.as_str()) || a.starts_with(t.as_str()))).count()
}

/// Question words and fillers in both languages: they match everything.
const STOPWORDS: &[&str] = &[
    "the", "and", "you", "your", "are", "was", "were", "what", "which", "who", "whom", "where", "when", "why", "how", "does",
    "did", "have", "has", "had", "for", "with", "that", "this", "these", "those", "from", "about", "can", "could", "would",
    "should", "will", "tell", "know", "remember", "again", "please", "there", "their", "them", "they", "our", "its", "not",
    "but", "all", "any", "some", "into", "out", "just", "also", "then", "than", "now", "one", "too", "very", "much", "many",
    "que", "qual", "quais", "quem", "onde", "quando", "como", "por", "porque", "para", "com", "uma", "umas", "uns", "meu",
    "minha", "meus", "minhas", "seu", "sua", "você", "voce", "vocês", "tem", "tenho", "ter", "foi", "era", "são", "sou",
    "está", "estou", "isso", "isto", "esse", "essa", "este", "esta", "ele", "ela", "eles", "elas", "dos", "das", "nos",
    "nas", "pelo", "pela", "mais", "muito", "muita", "lembra", "sabe", "disse", "contei", "falei", "mesmo", "também", "não",
    "sim", "aqui", "lá", "então", "agora", "ainda",
];

#[cfg(test)]
mod tests {
    use super::*;
    use ledger::ContextStatus;

    fn msg(seq: i64, role: MessageRole, content: &str) -> Message {
        Message {
            id: format!("m{seq}"),
            persona_id: "p".into(),
            role,
            content: content.into(),
            ts: String::new(),
            read: false,
            seq,
            context_status: ContextStatus::default(),
        }
    }

    fn persona() -> Persona {
        Persona {
            id: "p".into(),
            name: "Lia".into(),
            short_description: "A warm friend who loves books. Likes tea.".into(),
            long_description: String::new(),
            model: "local:SmolLM2".into(),
            is_system: false,
            archived: false,
            created_seq: 0,
            unread: 0,
            paused_until: None,
        }
    }

    fn conversation(turns: usize) -> Vec<Message> {
        (0..turns * 2)
            .map(|i| {
                let role = if i % 2 == 0 { MessageRole::Human } else { MessageRole::Persona };
                msg(i as i64 * 3 + 1, role, &format!("message {i}"))
            })
            .collect()
    }

    #[test]
    fn the_system_message_is_short_plain_and_in_the_persona_language() {
        let p = persona();
        assert_eq!(
            system_text(&p, Language::En),
            "You are Lia, a warm friend who loves books. You are chatting with a friend, not serving a customer. Reply in English, in one or two short sentences: say something warm about what they told you, or ask about it, and answer what they ask. When you speak about them, say \"you\". If they ask about you, answer as Lia would, with your own tastes, never as a language model."
        );
        assert!(system_text(&p, Language::PtBr).contains("Responda em português"));
    }

    #[test]
    fn the_example_exchange_comes_after_the_system_message_in_the_persona_language_and_before_the_conversation() {
        let history = vec![msg(1, MessageRole::Human, "Oi! Meu nome é Joana.")];
        let input = CompactInput { persona: &persona(), language: Language::PtBr, history: &history, layout: &Layout::default(), recalled: vec![] };
        let (sent, _) = messages(&input);
        let roles: Vec<Role> = sent.iter().map(|m| m.role).collect();
        assert_eq!(roles, [Role::System, Role::User, Role::Assistant, Role::User, Role::Assistant, Role::User]);
        assert_eq!(sent[1].content, "Fui ao cinema ontem.");
        assert_eq!(sent[5].content, "Oi! Meu nome é Joana.");
    }

    #[test]
    fn a_message_in_another_language_than_the_last_reply_is_told_to_be_answered_in_its_own() {
        let history = vec![
            msg(1, MessageRole::Human, "Oi! Eu sou enfermeira em Porto."),
            msg(2, MessageRole::Persona, "Que legal! Você gosta do seu trabalho?"),
            msg(3, MessageRole::Human, "Where do I work?"),
        ];
        let input = CompactInput { persona: &persona(), language: Language::En, history: &history, layout: &Layout::default(), recalled: vec![] };
        let (sent, layout) = messages(&input);
        let before = &sent[sent.len() - 2];
        assert_eq!(before.role, Role::System);
        assert!(before.content.ends_with("They wrote in English: reply in English."), "{}", before.content);
        assert_eq!(layout.facts.get(&3), Some(&before.content), "sent again in its place on the next turn");
        // The same language as the last reply: nothing is added.
        let english = vec![msg(1, MessageRole::Human, "I am a nurse in Porto."), msg(2, MessageRole::Persona, "That is lovely! Do you like it?"), msg(3, MessageRole::Human, "Yes, I love it.")];
        let input = CompactInput { history: &english, ..input };
        let (sent, _) = messages(&input);
        assert!(sent.iter().all(|m| !m.content.contains("reply in English")), "{sent:?}");
        // Back to Portuguese after an English reply.
        let back = vec![english[0].clone(), english[1].clone(), msg(3, MessageRole::Human, "Qual é a minha profissão?")];
        let input = CompactInput { language: Language::PtBr, history: &back, ..input };
        let (sent, _) = messages(&input);
        assert!(sent[sent.len() - 2].content.ends_with("responda em português."), "{sent:?}");
    }

    #[test]
    fn a_question_in_another_language_than_what_was_told_is_given_the_latest_of_it() {
        let told = ["Oi Ada! Eu me chamo Joana e sou enfermeira em Porto.", "Minha irmã Rita teve uma menina chamada Luna."];
        assert_eq!(pick_facts("Where do I work?", &[], &told), vec![told[0].to_owned(), told[1].to_owned()]);
        // In the same language, a question sharing no word still gets nothing.
        assert!(pick_facts("Where do I work?", &[], &["I have a cat called Nino."]).is_empty());
        assert!(pick_facts("Onde eu trabalho?", &[], &["Eu tenho um gato chamado Nino."]).is_empty());
        // A statement, or a question about the persona, in the other language: nothing.
        assert!(pick_facts("I am tired today.", &[], &told).is_empty());
        assert!(pick_facts("Do you like babies?", &[], &told).is_empty());
    }

    #[test]
    fn the_window_stays_put_for_several_turns_then_moves_in_a_step() {
        let mut kept = None;
        let mut starts = Vec::new();
        for turns in 1..=12 {
            let mut history = conversation(turns);
            history.pop(); // the reply is not written yet
            let refs: Vec<&Message> = history.iter().collect();
            let start = window_start(&refs, kept);
            kept = refs.get(start).map(|m| m.seq);
            assert!(refs.len() - start <= MAX_TURNS);
            assert_eq!(refs[start].role, MessageRole::Human);
            starts.push(kept.unwrap_or_default());
        }
        let moves = starts.windows(2).filter(|w| w[0] != w[1]).count();
        assert!(moves <= 3, "the window moved {moves} times in 12 turns: {starts:?}");
    }

    #[test]
    fn earlier_facts_that_share_a_word_with_the_question_come_first() {
        let facts = pick_facts(
            "Where do I live?",
            &[("[2026-11-25] I love green tea.".into(), true), ("[2026-11-25] You are welcome!".into(), false)],
            &["Hi! My name is Marta and I live in Lisbon.", "I have a dog."],
        );
        assert_eq!(facts, vec!["Hi! My name is Marta and I live in Lisbon.".to_owned(), "I love green tea.".to_owned()]);
    }

    #[test]
    fn a_statement_sharing_no_word_with_anything_earlier_gets_no_facts() {
        let recalled = [("[2026-11-25] I love green tea.".to_owned(), true)];
        assert!(pick_facts("My sister is visiting next week.", &recalled, &["I have a dog."]).is_empty());
        assert_eq!(pick_facts("What is my sister's name?", &recalled, &["I have a dog."]), vec!["I love green tea.".to_owned()]);
        assert_eq!(pick_facts("The tea was cold today.", &recalled, &[]), vec!["I love green tea.".to_owned()]);
    }

    #[test]
    fn what_the_person_said_before_the_window_stays_in_the_system_message() {
        let mut history = vec![msg(1, MessageRole::Human, "Next month I fly to Osaka.")];
        for i in 0..9 {
            history.push(msg(2 + i * 2, MessageRole::Persona, &format!("reply {i}")));
            history.push(msg(3 + i * 2, MessageRole::Human, &format!("small talk {i}")));
        }
        history.push(msg(40, MessageRole::Persona, "Nice."));
        history.push(msg(41, MessageRole::Human, "Which city am I flying to?"));
        let input = CompactInput { persona: &persona(), language: Language::En, history: &history, layout: &Layout::default(), recalled: vec![] };
        let (sent, layout) = messages(&input);
        assert!(layout.start.is_some_and(|s| s > 1), "the first message is outside the window");
        assert!(sent[0].content.contains("Earlier, the user told you:\n- Next month I fly to Osaka."), "{}", sent[0].content);
        assert_eq!(sent.iter().filter(|m| m.content.contains("Osaka")).count(), 2, "told, and picked for the question");
    }

    #[test]
    fn the_next_turn_starts_with_the_prefix_read_ahead_even_when_the_window_moves() {
        let mut kept = Layout::default();
        let mut moved = 0;
        for turns in 1..=14 {
            // After the reply of turn `turns`: what is read ahead…
            let history = conversation(turns);
            let input = CompactInput { persona: &persona(), language: Language::En, history: &history, layout: &kept, recalled: vec![] };
            let ahead = next_turn_prefix(&input);
            // …and what the next turn sends, with facts picked for it.
            let mut next = history.clone();
            next.push(msg(next.last().map_or(1, |m| m.seq + 1), MessageRole::Human, "Do you remember message 0?"));
            let recalled = vec![("[2026-11-25] message 0".to_owned(), true)];
            let input = CompactInput { persona: &persona(), language: Language::En, history: &next, layout: &kept, recalled };
            let (sent, layout) = messages(&input);
            if layout.start != kept.start && kept.start.is_some() {
                moved += 1;
            }
            kept = layout;
            assert!(ahead.len() < sent.len());
            assert_eq!(sent[..ahead.len()], ahead[..], "turn {turns}: the next prompt does not start with what was read ahead");
            // The opening of the remembered lines is read ahead too: the
            // lines' message must start with it, or that reading is lost.
            let opening = facts_opening(Language::En);
            assert_eq!(sent[ahead.len()].role, opening.role);
            assert!(sent[ahead.len()].content.starts_with(&format!("{}\n- ", opening.content)), "turn {turns}: {}", sent[ahead.len()].content);
            assert_eq!(sent.last().map(|m| m.content.as_str()), Some("Do you remember message 0?"));
        }
        assert!(moved >= 2, "the window never moved in 14 turns: the test checks nothing about moving");
    }

    #[test]
    fn the_compact_prompt_has_no_ledger_vocabulary_and_ends_with_the_question() {
        let mut history = vec![msg(1, MessageRole::Human, "Hi! My name is Marta and I live in Lisbon.")];
        history.push(msg(2, MessageRole::Persona, "Nice to meet you, Marta!"));
        history.push(msg(3, MessageRole::System, "message_added: governance note"));
        history.push(msg(4, MessageRole::Human, "Where do I live?"));
        let input = CompactInput { persona: &persona(), language: Language::En, history: &history, layout: &Layout::default(), recalled: vec![] };
        let (sent, layout) = messages(&input);
        assert_eq!(layout.start, Some(1));
        assert_eq!(sent.last().map(|m| m.content.as_str()), Some("Where do I live?"));
        let all: String = sent.iter().map(|m| m.content.as_str()).collect::<Vec<_>>().join("\n");
        for word in ["message_added", "governance", "ledger", "hash", "event"] {
            assert!(!all.contains(word), "{word} in {all}");
        }
    }

    #[test]
    fn each_turn_starts_with_the_whole_prompt_of_the_turn_before_its_remembered_lines_included() {
        let said = ["My name is Owen and I play the cello.", "My daughter Emma plays the cello too.", "Who plays the cello?"];
        let recalled = vec![("[2026-11-25] I play the cello in an orchestra.".to_owned(), true)];
        let mut history = Vec::new();
        let mut layout = Layout::default();
        let mut before: Option<Vec<ChatMessage>> = None;
        for (turn, text) in said.iter().enumerate() {
            history.push(msg(turn as i64 * 2 + 1, MessageRole::Human, text));
            let input = CompactInput { persona: &persona(), language: Language::En, history: &history, layout: &layout, recalled: recalled.clone() };
            let (sent, next) = messages(&input);
            if let Some(before) = before.take() {
                assert_eq!(sent[..before.len()], before[..], "turn {turn} does not start with the prompt of the turn before");
            }
            assert!(sent[sent.len() - 2].content.contains("cello in an orchestra"), "turn {turn} got no remembered line");
            layout = next;
            history.push(msg(turn as i64 * 2 + 2, MessageRole::Persona, "Lovely."));
            let mut answered = sent;
            answered.push(ChatMessage::new(Role::Assistant, "Lovely.".to_owned()));
            before = Some(answered);
        }
        assert_eq!(layout.facts.len(), 3, "{layout:?}");
        // A layout from another conversation (its seqs are not here) adds nothing.
        let stranger = Layout { start: Some(999), told: Some("x".into()), facts: BTreeMap::from([(999, "- x".to_owned())]) };
        let input = CompactInput { persona: &persona(), language: Language::En, history: &history[..1], layout: &stranger, recalled: vec![] };
        assert_eq!(messages(&input).0.len(), 2 + example_turns(Language::En).len());
    }

    #[test]
    fn what_was_told_before_the_window_stays_while_the_oldest_messages_drop_out_of_the_history() {
        let mut all = vec![msg(1, MessageRole::Human, "Next month I fly to Osaka.")];
        for i in 0..12 {
            all.push(msg(2 + i * 2, MessageRole::Persona, &format!("reply {i}")));
            all.push(msg(3 + i * 2, MessageRole::Human, &format!("small talk {i}")));
        }
        // The history read for a prompt is its last 20 messages.
        let tail = |all: &[Message]| all[all.len().saturating_sub(20)..].to_vec();
        let input = CompactInput { persona: &persona(), language: Language::En, history: &tail(&all), layout: &Layout::default(), recalled: vec![] };
        let (sent, layout) = messages(&input);
        assert!(sent[0].content.contains("told you:\n- small talk 2\n"), "{}", sent[0].content);
        all.push(msg(40, MessageRole::Persona, "Nice."));
        all.push(msg(41, MessageRole::Human, "And then?"));
        let input = CompactInput { persona: &persona(), language: Language::En, history: &tail(&all), layout: &layout, recalled: vec![] };
        let (next, kept) = messages(&input);
        assert_eq!(kept.start, layout.start, "the window did not move");
        assert_eq!(next[0], sent[0], "the system message changed although the window stayed put");
    }
}
