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
}
