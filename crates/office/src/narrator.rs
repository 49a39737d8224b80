//! The narrator: turns a context frame into the first-person narrative the
//! model reads ("You are …" / "Você é …"), within the session type's token
//! budget. Sections are written in a fixed order with the constitution
//! last; when the text is too long, items are dropped from the least
//! important sections first (old events before memories before tools …),
//! and the identity, situation, sanity note and constitution are only
//! shortened, never dropped.

use ledger::{Message, MessageRole};
use providers::{ChatMessage, Role};
use serde::Serialize;
use time::{OffsetDateTime, Weekday};

use crate::frame::{parse_ts, truncate_chars, ContextFrame, Restriction};
use crate::session::{Language, SessionType};
use crate::tokens::TokenCounter;

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NarrativeBudget {
    pub session_type: SessionType,
    /// The session type's budget.
    pub budget: usize,
    /// The budget actually applied (a small local model caps it).
    pub effective: usize,
    /// Tokens the narrative uses, by `counter`.
    pub used: usize,
    pub counter: String,
    /// Whether anything was dropped or shortened to fit.
    pub compressed: bool,
    pub sections: Vec<SectionShare>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SectionShare {
    pub name: String,
    pub tokens: usize,
    /// Fraction of the narrative's tokens (0–1).
    pub share: f64,
    pub kept: usize,
    pub dropped: usize,
}

/// One part of the narrative: an opening sentence and items under it.
struct Section {
    name: &'static str,
    /// Lower is dropped first; `None` is never dropped, only shortened.
    drop_rank: Option<u8>,
    lead: String,
    items: Vec<String>,
    /// Drop items from the front (oldest) instead of the back (least urgent).
    drop_front: bool,
    /// The section is written only while it has items.
    needs_items: bool,
    dropped: usize,
}

impl Section {
    fn new(name: &'static str, drop_rank: Option<u8>, lead: String) -> Self {
        Self { name, drop_rank, lead, items: Vec::new(), drop_front: false, needs_items: false, dropped: 0 }
    }
    fn list(mut self, items: Vec<String>, drop_front: bool) -> Self {
        self.needs_items = true;
        self.items = items;
        self.drop_front = drop_front;
        self
    }
    fn visible(&self) -> bool {
        !self.items.is_empty() || (!self.needs_items && !self.lead.is_empty())
    }
    fn text(&self) -> String {
        let mut s = self.lead.clone();
        for i in &self.items {
            if !s.is_empty() {
                s.push('\n');
            }
            s.push_str("- ");
            s.push_str(i);
        }
        s
    }
}

/// The narrative and its accounting. Never fails: the worst case is a
/// heavily shortened text.
pub fn narrate(frame: &ContextFrame, budget_cap: Option<usize>, counter: &dyn TokenCounter) -> (String, NarrativeBudget) {
    let lang = frame.identity.language;
    let session_type = frame.state.session_type;
    let budget = session_type.budget();
    let effective = budget_cap.map_or(budget, |c| c.min(budget)).max(1);
    let mut sections = sections(frame, lang);
    let compressed = fit(&mut sections, effective, counter);
    let text = join(&sections);
    let used = counter.count(&text);
    let shares = sections
        .iter()
        .map(|s| {
            let tokens = if s.visible() { counter.count(&s.text()) } else { 0 };
            SectionShare {
                name: s.name.to_owned(),
                tokens,
                share: if used == 0 { 0.0 } else { tokens as f64 / used as f64 },
                kept: s.items.len(),
                dropped: s.dropped,
            }
        })
        .collect();
    let accounting = NarrativeBudget {
        session_type,
        budget,
        effective,
        used,
        counter: counter.name().to_owned(),
        compressed,
        sections: shares,
    };
    (text, accounting)
}

/// What goes out when the frame cannot be built: who the persona is, and
/// that its memory is unavailable right now.
pub fn minimal(name: &str, lang: Language) -> String {
    match lang {
        Language::En => format!(
            "You are {name}, a companion persona in Ledgermind. Your ledger could not be read just now, so you do \
             not have your usual picture of your obligations and history: say so if it matters, and reply in a \
             friendly, concise way."
        ),
        Language::PtBr => format!(
            "Você é {name}, uma persona companheira no Ledgermind. Seu ledger não pôde ser lido agora, então você \
             não tem o quadro de costume das suas obrigações e da sua história: diga isso se importar, e responda \
             de forma amigável e concisa."
        ),
    }
}

fn join(sections: &[Section]) -> String {
    sections.iter().filter(|s| s.visible()).map(Section::text).collect::<Vec<_>>().join("\n\n")
}

/// Drops and shortens until the text fits; true when anything changed.
fn fit(sections: &mut [Section], budget: usize, counter: &dyn TokenCounter) -> bool {
    let mut changed = false;
    // Per-item counts keep this linear; the final check uses the whole text.
    loop {
        let total = counter.count(&join(sections));
        if total <= budget {
            return changed;
        }
        let mut excess = total - budget;
        // 1. Drop items, least important section first.
        let mut order: Vec<usize> = (0..sections.len()).filter(|&i| sections[i].drop_rank.is_some()).collect();
        order.sort_by_key(|&i| sections[i].drop_rank);
        let mut dropped_any = false;
        for i in order {
            let s = &mut sections[i];
            while excess > 0 && !s.items.is_empty() {
                let item = if s.drop_front { s.items.remove(0) } else { s.items.pop().unwrap_or_default() };
                s.dropped += 1;
                dropped_any = true;
                excess = excess.saturating_sub(counter.count(&item) + 1);
            }
            if s.items.is_empty() && s.needs_items {
                // Its lead goes with its last item (see `visible`).
            } else if excess > 0 && s.items.is_empty() && !s.lead.is_empty() {
                excess = excess.saturating_sub(counter.count(&s.lead));
                s.lead.clear();
                dropped_any = true;
            }
            if excess == 0 {
                break;
            }
        }
        changed |= dropped_any;
        if dropped_any {
            continue;
        }
        // 2. Shorten the longest remaining text (identity, constitution …).
        let longest = sections
            .iter_mut()
            .flat_map(|s| std::iter::once(&mut s.lead).chain(s.items.iter_mut()))
            .max_by_key(|t| t.chars().count());
        match longest {
            Some(t) if t.chars().count() > 24 => {
                let keep = t.chars().count() / 2;
                *t = truncate_chars(t, keep);
                changed = true;
            }
            _ => {
                // Nothing left to shorten: cut the texts outright.
                for s in sections.iter_mut() {
                    s.items.clear();
                    s.lead = truncate_chars(&s.lead, 8);
                }
                return true;
            }
        }
    }
}

fn sections(f: &ContextFrame, lang: Language) -> Vec<Section> {
    let pt = lang == Language::PtBr;
    let now = parse_ts(&f.temporal.now).unwrap_or(OffsetDateTime::UNIX_EPOCH);
    let mut out = Vec::new();

    // Identity.
    let id = &f.identity;
    let mut lead = if pt { format!("Você é {}.", id.name) } else { format!("You are {}.", id.name) };
    if !f.position.description.is_empty() {
        lead.push(' ');
        lead.push_str(&f.position.description);
        // A description is often a noun phrase without a full stop.
        if !f.position.description.ends_with(['.', '!', '?', '…']) {
            lead.push('.');
        }
    }
    let key = id.public_key.as_deref().map(|k| k.chars().take(12).collect::<String>()).unwrap_or_else(|| "?".into());
    lead.push(' ');
    lead.push_str(&if pt {
        format!(
            "Você vive no Ledgermind, um ledger privado no computador desta pessoa: tudo o que você diz é assinado \
             com a sua própria chave ({key}…) e guardado para sempre, então suas palavras têm consequências."
        )
    } else {
        format!(
            "You live in Ledgermind, a private ledger on this person's computer: everything you say is signed with \
             your own key ({key}…) and kept for good, so your words have consequences."
        )
    });
    lead.push(' ');
    lead.push_str(match (f.position.is_system, pt) {
        (true, false) => "You are the system persona: you can see every group, and you answer to the person at the keyboard, your guardian.",
        (true, true) => "Você é a persona do sistema: vê todos os grupos e responde à pessoa ao teclado, sua guardiã.",
        (false, false) => "You answer to the person at the keyboard, your guardian.",
        (false, true) => "Você responde à pessoa ao teclado, sua guardiã.",
    });
    out.push(Section::new("identity", None, lead));

    // Situation: time, session, state.
    let s = &f.state;
    let when = human_time(now, lang);
    let mut lead = match (s.session_type, pt) {
        (t, false) => format!("It is {when}. This is {} session", article_en(t)),
        (t, true) => format!("Agora é {when}. Esta é uma sessão de {}", session_pt(t)),
    };
    let assist = s.session_type == SessionType::Assist;
    lead.push_str(match (s.mode.as_str(), pt) {
        ("deliberation", false) if assist => {
            " in deliberation mode: think aloud; nothing binds you until the person asks you to act, which switches you to commitment."
        }
        ("deliberation", true) if assist => {
            " em modo de deliberação: pense em voz alta; nada compromete você até a pessoa pedir uma ação, que passa você para o modo de compromisso."
        }
        ("deliberation", false) => " in deliberation mode: think aloud, nothing you say binds you yet.",
        ("deliberation", true) => " em modo de deliberação: pense em voz alta, nada do que disser compromete você ainda.",
        (_, false) => " in commitment mode: what you promise here counts.",
        (_, true) => " em modo de compromisso: o que você prometer aqui vale.",
    });
    lead.push(' ');
    let n = f.position.conversation_messages;
    lead.push_str(&match (n, pt) {
        (1, true) => "Sua conversa com a pessoa tem 1 mensagem.".to_owned(),
        (_, true) => format!("Sua conversa com a pessoa tem {n} mensagens."),
        (1, false) => "Your conversation with the person holds 1 message.".to_owned(),
        (_, false) => format!("Your conversation with the person holds {n} messages."),
    });
    out.push(Section::new("situation", None, lead));

    // Obligations, most urgent first.
    let items: Vec<String> = f.obligations.iter().map(|o| obligation_line(o, lang)).collect();
    let lead = match (f.obligations.len(), s.overdue_obligations, pt) {
        (0, _, false) => "You have no open obligations.".to_owned(),
        (0, _, true) => "Você não tem obrigações em aberto.".to_owned(),
        (n, 0, false) => format!("You have {n} open obligation{}; keeping them is how the person learns to trust you:", plural(n)),
        (n, 0, true) => format!("Você tem {n} obrigaç{} em aberto; cumpri-las é como a pessoa aprende a confiar em você:", if n == 1 { "ão" } else { "ões" }),
        (n, o, false) => format!("You have {n} open obligation{}, {o} of them overdue. Missing them costs the person's trust, so say plainly what is late:", plural(n)),
        (n, o, true) => format!("Você tem {n} obrigaç{} em aberto, {o} atrasada{}. Falhar custa a confiança da pessoa, então diga com clareza o que está atrasado:", if n == 1 { "ão" } else { "ões" }, if o == 1 { "" } else { "s" }),
    };
    let mut sec = Section::new("obligations", Some(60), lead);
    sec.items = items;
    out.push(sec);

    // The previous handover, woven in.
    if let Some(h) = &f.memory.handover {
        let text = h.text.trim();
        let when = parse_ts(&h.ts).map(|t| human_time(t, lang)).unwrap_or_else(|| h.ts.clone());
        let reason = reason_text(&h.reason, lang);
        let lead = match (text.is_empty(), h.author, pt) {
            (true, _, false) => format!("Your last session ended {when} ({reason}) and you chose to leave no note."),
            (true, _, true) => format!("Sua última sessão terminou {when} ({reason}) e você preferiu não deixar nota."),
            (false, ledger::HandoverAuthor::Persona, false) => format!("When your last session ended {when} ({reason}), you left yourself this note: “{text}”"),
            (false, ledger::HandoverAuthor::Persona, true) => format!("Quando sua última sessão terminou, {when} ({reason}), você deixou esta nota para si: “{text}”"),
            (false, ledger::HandoverAuthor::System, false) => format!("Your last session ended {when} ({reason}) without a note from you; Ledgermind summarised it from the ledger: “{text}”"),
            (false, ledger::HandoverAuthor::System, true) => format!("Sua última sessão terminou {when} ({reason}) sem uma nota sua; o Ledgermind a resumiu a partir do ledger: “{text}”"),
        };
        out.push(Section::new("handover", Some(70), lead));
    }

    // The sanity note about that handover.
    if let Some(note) = &s.sanity_note {
        out.push(Section::new("sanity_note", None, note.clone()));
    }

    // Capabilities.
    let c = &f.capabilities;
    let mut items = Vec::new();
    if !c.allowed.is_empty() {
        let names = c.allowed.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ");
        items.push(if pt { format!("Você pode usar agora: {names}.") } else { format!("You may use now: {names}.") });
    }
    for (reason, en, ptt) in [
        (Restriction::Role, "only the person may use", "só a pessoa pode usar"),
        (Restriction::NeedsSetting, "need a setting the person has not made yet", "precisam de uma configuração que a pessoa ainda não fez"),
        (Restriction::NotAvailable, "are not available in this version", "não estão disponíveis nesta versão"),
        (Restriction::Session, "not in this type of session", "não neste tipo de sessão"),
    ] {
        let names: Vec<&str> = c.restricted.iter().filter(|r| r.reason == reason).map(|r| r.name.as_str()).collect();
        if !names.is_empty() {
            let names = names.join(", ");
            items.push(if pt { format!("Restritas ({ptt}): {names}.") } else { format!("Restricted ({en}): {names}.") });
        }
    }
    let lead = if pt { "Suas ferramentas:" } else { "Your tools:" }.to_owned();
    out.push(Section::new("capabilities", Some(40), lead).list(items, false));

    // Memory: baseline, periods, bookmarks, retrieved, recent events.
    if let Some(b) = &f.memory.baseline {
        let lead = if pt { format!("Como você se vê, desde a sua última reflexão: {b}") } else { format!("How you see yourself, since your last reflection: {b}") };
        out.push(Section::new("baseline", Some(50), lead));
    }
    let items = f
        .memory
        .periods
        .iter()
        .map(|p| format!("{} – {}: {}", date_of(&p.period_start), date_of(&p.period_end), p.summary))
        .collect();
    let lead = if pt { "As últimas semanas, como você as resumiu:" } else { "The last weeks, as you summarised them:" };
    out.push(Section::new("periods", Some(30), lead.to_owned()).list(items, true));
    let items = f.memory.bookmarks.iter().map(|b| format!("{} ({})", b.label, b.target_id)).collect();
    let lead = if pt { "Você marcou:" } else { "You bookmarked:" };
    out.push(Section::new("bookmarks", Some(20), lead.to_owned()).list(items, false));
    let lead = if pt { "De conversas anteriores (use só se for relevante):" } else { "From earlier conversations (use only if relevant):" };
    out.push(Section::new("retrieved", Some(25), lead.to_owned()).list(f.memory.retrieved.clone(), false));
    let items = f
        .memory
        .recent_events
        .iter()
        .map(|e| {
            let who = match (e.entity_id.as_str(), pt) {
                (ledger::HUMAN_ENTITY, false) => "the person".to_owned(),
                (ledger::HUMAN_ENTITY, true) => "a pessoa".to_owned(),
                (id, false) if id == f.identity.entity_id => "you".to_owned(),
                (id, true) if id == f.identity.entity_id => "você".to_owned(),
                (id, _) => id.to_owned(),
            };
            let text = e.text.as_deref().unwrap_or(if pt { "(apagado)" } else { "(erased)" });
            format!("[{}] {who}, {}: {text}", short_time(&e.ts), e.kind)
        })
        .collect();
    let lead = if pt { "As últimas entradas do seu ledger, literalmente:" } else { "The latest entries in your ledger, verbatim:" };
    out.push(Section::new("recent_events", Some(10), lead.to_owned()).list(items, true));

    // The constitution, last.
    let lead = match (&id.constitution, pt) {
        (Some(c), false) => format!("Your constitution (version {}) comes last and overrides everything above: {}", c.version, c.core_directive.trim()),
        (Some(c), true) => format!("Sua constituição (versão {}) vem por último e prevalece sobre tudo acima: {}", c.version, c.core_directive.trim()),
        (None, false) => "You have no written constitution yet: be honest about what the ledger shows, kind, and brief.".to_owned(),
        (None, true) => "Você ainda não tem uma constituição escrita: seja honesto sobre o que o ledger mostra, gentil e breve.".to_owned(),
    };
    let mut sec = Section::new("constitution", None, lead);
    sec.items = id.constitution.as_ref().map(|c| c.overrides.clone()).unwrap_or_default();
    out.push(sec);
    out
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn article_en(t: SessionType) -> &'static str {
    match t {
        SessionType::Work => "a work",
        SessionType::Assist => "an assist",
        SessionType::Deliberate => "a deliberate",
        SessionType::Research => "a research",
    }
}

fn session_pt(t: SessionType) -> &'static str {
    match t {
        SessionType::Work => "trabalho",
        SessionType::Assist => "assistência",
        SessionType::Deliberate => "deliberação",
        SessionType::Research => "pesquisa",
    }
}

fn reason_text(reason: &str, lang: Language) -> &'static str {
    match (reason, lang) {
        ("idle", Language::En) => "after a quiet spell",
        ("idle", Language::PtBr) => "depois de um tempo em silêncio",
        ("closed", Language::En) => "the window was closed",
        ("closed", Language::PtBr) => "a janela foi fechada",
        (_, Language::En) => "the person started anew",
        (_, Language::PtBr) => "a pessoa recomeçou",
    }
}

fn obligation_line(o: &crate::frame::Obligation, lang: Language) -> String {
    let pt = lang == Language::PtBr;
    let what = match (o.kind, pt) {
        (ledger::ObligationKind::Commitment, false) => format!("you committed to: {}", o.text),
        (ledger::ObligationKind::Commitment, true) => format!("você se comprometeu a: {}", o.text),
        (_, _) => o.text.clone(),
    };
    match (o.minutes_left, o.due_at.as_deref()) {
        (Some(m), _) if m < 0 => {
            let late = span(-m, lang);
            if pt { format!("{what} — atrasada há {late}.") } else { format!("{what} — overdue by {late}.") }
        }
        (Some(m), Some(due)) => {
            let left = span(m, lang);
            let due = date_of(due);
            if pt { format!("{what} — prazo {due}, faltam {left}.") } else { format!("{what} — due {due}, {left} left.") }
        }
        _ => {
            if pt { format!("{what} (sem prazo).") } else { format!("{what} (no deadline).") }
        }
    }
}

/// "2 days 3 h", "45 min".
fn span(minutes: i64, lang: Language) -> String {
    let (d, h, m) = (minutes / 1440, (minutes % 1440) / 60, minutes % 60);
    let pt = lang == Language::PtBr;
    match (d, h) {
        (0, 0) => format!("{m} min"),
        (0, h) => format!("{h} h {m} min"),
        (d, h) => {
            if pt { format!("{d} dia{} e {h} h", if d == 1 { "" } else { "s" }) } else { format!("{d} day{} {h} h", plural(d as usize)) }
        }
    }
}

fn date_of(ts: &str) -> String {
    ts.get(..10).unwrap_or(ts).to_owned()
}

fn short_time(ts: &str) -> String {
    ts.get(..16).map(|s| s.replace('T', " ")).unwrap_or_else(|| ts.to_owned())
}

fn human_time(t: OffsetDateTime, lang: Language) -> String {
    let day = match (t.weekday(), lang) {
        (Weekday::Monday, Language::En) => "Monday",
        (Weekday::Tuesday, Language::En) => "Tuesday",
        (Weekday::Wednesday, Language::En) => "Wednesday",
        (Weekday::Thursday, Language::En) => "Thursday",
        (Weekday::Friday, Language::En) => "Friday",
        (Weekday::Saturday, Language::En) => "Saturday",
        (Weekday::Sunday, Language::En) => "Sunday",
        (Weekday::Monday, Language::PtBr) => "segunda-feira",
        (Weekday::Tuesday, Language::PtBr) => "terça-feira",
        (Weekday::Wednesday, Language::PtBr) => "quarta-feira",
        (Weekday::Thursday, Language::PtBr) => "quinta-feira",
        (Weekday::Friday, Language::PtBr) => "sexta-feira",
        (Weekday::Saturday, Language::PtBr) => "sábado",
        (Weekday::Sunday, Language::PtBr) => "domingo",
    };
    let date = t.date();
    match lang {
        Language::En => format!("{day}, {date} at {:02}:{:02} UTC", t.hour(), t.minute()),
        Language::PtBr => format!("{day}, {date}, às {:02}:{:02} UTC", t.hour(), t.minute()),
    }
}

/// The messages an LLM call of the persona starts with: the narrative as
/// the system message, then the conversation in turn order (system lines,
/// which the person saw but the persona did not say, are left out). Used
/// for replies and for the handover request.
pub fn reply_prompt(narrative: &str, history: &[Message]) -> Vec<ChatMessage> {
    let mut out = vec![ChatMessage::new(Role::System, narrative.to_owned())];
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
