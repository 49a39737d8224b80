//! Session types and their narrative token budgets (seed 000).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SessionType {
    Work,
    /// A conversation with the person: what every chat reply is.
    #[default]
    Assist,
    Deliberate,
    Research,
}

impl SessionType {
    pub const ALL: [SessionType; 4] = [Self::Work, Self::Assist, Self::Deliberate, Self::Research];

    /// Tokens the narrative may use in this kind of session.
    pub fn budget(self) -> usize {
        match self {
            Self::Work => 5_000,
            Self::Assist => 4_000,
            Self::Deliberate => 8_000,
            Self::Research => 6_000,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Work => "work",
            Self::Assist => "assist",
            Self::Deliberate => "deliberate",
            Self::Research => "research",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s.trim().to_lowercase())
    }

    /// The mode a session of this type starts in (seed 000, decision #9):
    /// `work` in commitment, `assist` in deliberation "and may escalate"
    /// (see [`escalates`]), `deliberate` and `research` in deliberation.
    pub fn default_mode(self) -> SessionMode {
        match self {
            Self::Work => SessionMode::Commitment,
            Self::Assist | Self::Deliberate | Self::Research => SessionMode::Deliberation,
        }
    }

    /// The modes a session of this type may be in: `deliberate` is pure
    /// deliberation ("without commitments"), `research` only looks things up.
    pub fn allowed_modes(self) -> &'static [SessionMode] {
        match self {
            Self::Work | Self::Assist => &[SessionMode::Deliberation, SessionMode::Commitment],
            Self::Deliberate | Self::Research => &[SessionMode::Deliberation],
        }
    }

    /// Whether a tool may be used at all in this kind of session: research
    /// sessions have limited actions (reading, notes, questions).
    pub fn permits(self, tool: &str) -> bool {
        self != Self::Research || RESEARCH_TOOLS.contains(&tool)
    }
}

/// What a research session may use.
pub const RESEARCH_TOOLS: &[&str] = &[
    "search_items",
    "search_documents",
    "query",
    "verify",
    "log_reasoning",
    "write_note",
    "request_clarification",
    "simulate",
    "enrich_movie",
    "enrich_tv_show",
    "enrich_video",
];

/// Tools that never commit anything binding: drafts, questions and
/// lookups. Deliberation mode runs them as they are.
pub const DRAFT_TOOLS: &[&str] = &["log_reasoning", "write_note", "request_clarification", "simulate", "query", "verify"];

/// Deliberation: everything is a draft, nothing binds; commitment: acts are
/// signed and binding (seed 000, decision #9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionMode {
    Deliberation,
    Commitment,
}

impl SessionMode {
    pub const ALL: [SessionMode; 2] = [Self::Deliberation, Self::Commitment];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deliberation => "deliberation",
            Self::Commitment => "commitment",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == s.trim().to_lowercase())
    }
}

/// What the session's rules make of one tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionRule {
    /// Run it (confirmation and simulation policy still apply).
    Run,
    /// Deliberation mode: compute what it would change, commit nothing.
    SimulateOnly,
    /// Not allowed in this type of session.
    Refuse,
}

/// The seed's rules for one call: `writes` is whether the tool changes
/// the world (category write, destructive or external-with-effects).
pub fn rule(session: SessionType, mode: SessionMode, tool: &str, writes: bool) -> SessionRule {
    if !session.permits(tool) {
        SessionRule::Refuse
    } else if mode == SessionMode::Deliberation && writes && !DRAFT_TOOLS.contains(&tool) {
        SessionRule::SimulateOnly
    } else {
        SessionRule::Run
    }
}

/// Whether a call escalates an assist session from deliberation to
/// commitment before it runs. The seed starts `assist` in deliberation,
/// "may escalate", and "must switch to commitment before submit()". A
/// persona's tool call always comes from a turn the person started at the
/// keyboard (critical acts still wait for their Confirm), so a binding act
/// there escalates: the switch is recorded as an event signed by the
/// persona, and the next session starts in deliberation again. A mode the
/// person chose themselves (`chosen_by_person`) is never overridden.
pub fn escalates(session: SessionType, mode: SessionMode, tool: &str, writes: bool, chosen_by_person: bool) -> bool {
    session == SessionType::Assist
        && !chosen_by_person
        && rule(session, mode, tool, writes) == SessionRule::SimulateOnly
}

/// The language a persona is narrated in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Language {
    #[default]
    #[serde(rename = "en")]
    En,
    #[serde(rename = "pt-BR")]
    PtBr,
}

impl Language {
    pub fn tag(self) -> &'static str {
        match self {
            Self::En => "en",
            Self::PtBr => "pt-BR",
        }
    }

    /// `pt`, `pt-BR`, `pt_br` … are Portuguese; anything else is English.
    pub fn parse(tag: &str) -> Self {
        if tag.trim().to_lowercase().starts_with("pt") {
            Self::PtBr
        } else {
            Self::En
        }
    }

    /// The language a message is written in, when it says so clearly: a
    /// person who writes Portuguese to a persona set to English is answered
    /// in Portuguese. `None` for text too short or too mixed to tell (a name,
    /// "ok", a link), where the persona's setting decides.
    pub fn detect(text: &str) -> Option<Self> {
        let lower = text.to_lowercase();
        let words: Vec<&str> = lower
            .split(|c: char| !(c.is_alphabetic() || c == '\''))
            .filter(|w| !w.is_empty())
            .collect();
        let pt = words.iter().filter(|w| PT_WORDS.contains(w)).count()
            // Letters English does not use are strong evidence on their own.
            + 2 * words.iter().filter(|w| w.chars().any(|c| "ãõçáéíóúâêôà".contains(c))).count();
        let en = words.iter().filter(|w| EN_WORDS.contains(w)).count();
        match (pt, en) {
            (0, 0) => None,
            (p, e) if p >= 2 * e.max(1) || (e == 0 && p >= 1) => Some(Self::PtBr),
            (p, e) if e >= 2 * p.max(1) || (p == 0 && e >= 1) => Some(Self::En),
            _ => None,
        }
    }
}

/// Everyday function words only one of the two languages has (lower case,
/// accents kept). Words both share ("a", "no", "me", "do", "for") are left
/// out: they would count for either.
const PT_WORDS: &[&str] = &[
    "o", "os", "as", "um", "uma", "uns", "umas", "de", "da", "das", "dos", "em", "na", "nas", "nos", "ao", "aos",
    "que", "qual", "quais", "quem", "onde", "quando", "como", "porque", "por", "para", "pra", "com", "sem", "eu",
    "tu", "você", "voce", "vocês", "ele", "ela", "eles", "elas", "nós", "meu", "minha", "meus", "minhas", "seu",
    "sua", "teu", "tua", "isso", "isto", "esse", "essa", "este", "esta", "aquele", "aquela", "é", "são", "foi",
    "era", "estou", "está", "estava", "tenho", "tem", "tinha", "sou", "vou", "vai", "não", "nao", "sim", "mas",
    "ou", "muito", "muita", "também", "tambem", "já", "ainda", "agora", "hoje", "amanhã", "ontem", "mim", "comigo",
    "lembra", "sabe", "gosto", "gosta", "moro", "mora", "trabalho", "chamo", "nome", "obrigado", "obrigada", "olá",
    "oi", "tudo", "bem", "ano", "mês", "semana", "dia", "coisa", "lá", "aqui", "quanto", "quantos", "quantas",
];
const EN_WORDS: &[&str] = &[
    "the", "an", "of", "and", "or", "is", "are", "was", "were", "be", "been", "am", "i", "i'm", "you", "you're",
    "he", "she", "it", "it's", "we", "they", "my", "your", "his", "her", "our", "their", "what", "which", "who",
    "where", "when", "why", "how", "that", "this", "these", "those", "with", "without", "to", "from", "in", "on",
    "at", "by", "about", "do", "does", "did", "have", "has", "had", "not", "don't", "can", "will", "would",
    "should", "could", "yes", "but", "very", "also", "already", "still", "now", "today", "tomorrow", "yesterday",
    "me", "remember", "know", "like", "live", "work", "name", "thanks", "thank", "hello", "hi", "all", "well",
    "year", "month", "week", "day", "thing", "there", "here", "many", "much",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_tells_its_language_when_it_clearly_can() {
        assert_eq!(Language::detect("Em que cidade eu moro?"), Some(Language::PtBr));
        assert_eq!(Language::detect("Qual é o nome do meu irmão?"), Some(Language::PtBr));
        assert_eq!(Language::detect("Você lembra do meu cachorro"), Some(Language::PtBr));
        assert_eq!(Language::detect("Which city do I live in?"), Some(Language::En));
        assert_eq!(Language::detect("What is my brother's job?"), Some(Language::En));
        assert_eq!(Language::detect("Lisboa"), None);
        assert_eq!(Language::detect("ok"), None);
        assert_eq!(Language::detect(""), None);
    }

    #[test]
    fn each_type_has_its_default_and_allowed_modes() {
        for t in SessionType::ALL {
            assert!(t.allowed_modes().contains(&t.default_mode()), "{t:?}");
        }
        assert_eq!(SessionType::Work.default_mode(), SessionMode::Commitment);
        assert_eq!(SessionType::Assist.default_mode(), SessionMode::Deliberation);
        assert_eq!(SessionType::Deliberate.allowed_modes(), &[SessionMode::Deliberation]);
        assert_eq!(SessionType::Research.allowed_modes(), &[SessionMode::Deliberation]);
        assert_eq!(SessionMode::parse(" Commitment "), Some(SessionMode::Commitment));
        assert_eq!(SessionMode::parse("binding"), None);
    }

    #[test]
    fn deliberation_only_simulates_writes_and_research_limits_tools() {
        use SessionRule::*;
        let (a, d, c) = (SessionType::Assist, SessionMode::Deliberation, SessionMode::Commitment);
        assert_eq!(rule(a, d, "save_movie", true), SimulateOnly);
        assert_eq!(rule(a, d, "submit", true), SimulateOnly);
        assert_eq!(rule(a, d, "write_note", true), Run);
        assert_eq!(rule(a, d, "search_items", false), Run);
        assert_eq!(rule(a, c, "save_movie", true), Run);
        assert_eq!(rule(SessionType::Research, d, "save_movie", true), Refuse);
        assert_eq!(rule(SessionType::Research, d, "query", false), Run);
        assert_eq!(rule(SessionType::Work, c, "delete_memory", true), Run);
    }

    #[test]
    fn an_assist_session_escalates_for_a_binding_act_unless_the_person_chose_deliberation() {
        let (a, d, c) = (SessionType::Assist, SessionMode::Deliberation, SessionMode::Commitment);
        assert!(escalates(a, d, "save_movie", true, false));
        assert!(escalates(a, d, "delete_all_memories", true, false));
        // Drafts, reads and lookups need no commitment.
        assert!(!escalates(a, d, "write_note", true, false));
        assert!(!escalates(a, d, "search_items", false, false));
        // Already committed, chosen by the person, or another session type.
        assert!(!escalates(a, c, "save_movie", true, false));
        assert!(!escalates(a, d, "save_movie", true, true));
        assert!(!escalates(SessionType::Deliberate, d, "save_movie", true, false));
        assert!(!escalates(SessionType::Research, d, "save_movie", true, false));
    }
}
