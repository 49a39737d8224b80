//! Which prompt a model gets: chosen from what the provider knows of the
//! model (its size and context, read from the GGUF file for local models),
//! unless a per-model setting says otherwise.

use providers::{ModelCapability, Sampling};
use serde::Serialize;

/// Local models below this many parameters get the compact prompt.
pub(crate) const SMALL_MODEL_PARAMETERS: u64 = 2_000_000_000;
/// …and so do local models with a training context below this.
pub(crate) const SMALL_MODEL_CONTEXT: u32 = 4096;
/// Runtime setting (per model) that forces a profile: `compact` or `full`.
pub(crate) const OVERRIDE_PREFIX: &str = "prompt_profile.";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum PromptProfile {
    /// The office's full narrative as the system message.
    Full,
    /// A short plain system prompt for small models (see `compact`).
    Compact,
}

impl PromptProfile {
    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s.trim().to_lowercase().as_str() {
            "full" => Some(Self::Full),
            "compact" => Some(Self::Compact),
            _ => None,
        }
    }

    /// Reply length limit, in tokens.
    pub(crate) fn max_tokens(self) -> u32 {
        match self {
            Self::Full => 176,
            Self::Compact => 96,
        }
    }

    pub(crate) fn temperature(self) -> f32 {
        match self {
            Self::Full => 0.7,
            // A small model drifts at higher temperatures; near-greedy keeps
            // it on the facts it was given.
            Self::Compact => 0.2,
        }
    }

    /// Repetition control and the loop guard, for the local engine.
    pub(crate) fn sampling(self) -> Sampling {
        match self {
            Self::Full => Sampling { top_p: 0.95, repeat_penalty: 1.05, dry_multiplier: 0.8, ..Sampling::CONVERSATION },
            Self::Compact => Sampling::CONVERSATION,
        }
    }
}

/// The profile chosen for one reply and why.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ChosenProfile {
    pub profile: PromptProfile,
    pub reason: String,
    /// What the provider said about the model.
    pub capability: ModelCapability,
}

/// Picks the profile: the override when set, else compact for small local
/// models, full for everything else.
pub(crate) fn choose(capability: &ModelCapability, local: bool, model: &str, forced: Option<&str>) -> ChosenProfile {
    if let Some(profile) = forced.and_then(PromptProfile::parse) {
        return ChosenProfile { profile, reason: format!("setting {OVERRIDE_PREFIX}{model}"), capability: capability.clone() };
    }
    if !local {
        return ChosenProfile { profile: PromptProfile::Full, reason: "remote provider".to_owned(), capability: capability.clone() };
    }
    let size = capability.parameters.map(|p| format!("{:.2}B parameters", p as f64 / 1e9)).unwrap_or_else(|| "size unknown".to_owned());
    let context = capability.context.map(|c| format!("context {c}")).unwrap_or_else(|| "context unknown".to_owned());
    let small = capability.parameters.is_some_and(|p| p < SMALL_MODEL_PARAMETERS)
        || capability.context.is_some_and(|c| c < SMALL_MODEL_CONTEXT);
    let profile = if small { PromptProfile::Compact } else { PromptProfile::Full };
    let template = if capability.chat_template { "" } else { ", no chat template (ChatML used)" };
    ChosenProfile { profile, reason: format!("local model, {size}, {context}{template} (GGUF metadata)"), capability: capability.clone() }
}

/// The line posted once when a persona speaks a language its local model's
/// card does not name (e.g. Portuguese on an English-only model).
pub(crate) fn language_warning(capability: &ModelCapability, language: ::office::Language) -> Option<String> {
    let tag = language.tag();
    let base = tag.split('-').next().unwrap_or(tag);
    if capability.languages.is_empty() || capability.languages.iter().any(|l| l.eq_ignore_ascii_case(base) || l.eq_ignore_ascii_case(tag)) {
        return None;
    }
    Some(match language {
        ::office::Language::PtBr => format!(
            "Aviso: este modelo local só foi treinado em {}; as respostas em português podem sair fracas. Um modelo multilíngue (em Modelos) responde melhor.",
            capability.languages.join(", ")
        ),
        ::office::Language::En => format!(
            "Note: this local model was trained only in {}; replies in English may be poor. A multilingual model (in Models) answers better.",
            capability.languages.join(", ")
        ),
    })
}


#[cfg(test)]
mod tests {
    use super::*;

    fn cap(parameters: u64, context: u32) -> ModelCapability {
        ModelCapability { parameters: Some(parameters), context: Some(context), chat_template: true, local: true, languages: vec![] }
    }

    #[test]
    fn a_small_local_model_gets_the_compact_prompt_and_a_large_one_the_full() {
        assert_eq!(choose(&cap(135_000_000, 8192), true, "m", None).profile, PromptProfile::Compact);
        assert_eq!(choose(&cap(7_000_000_000, 32768), true, "m", None).profile, PromptProfile::Full);
        assert_eq!(choose(&cap(7_000_000_000, 2048), true, "m", None).profile, PromptProfile::Compact);
        assert_eq!(choose(&ModelCapability::default(), false, "gpt", None).profile, PromptProfile::Full);
        let why = choose(&cap(135_000_000, 8192), true, "m", None).reason;
        assert!(why.contains("0.14B parameters") && why.contains("context 8192"), "{why}");
    }

    #[test]
    fn a_portuguese_persona_on_an_english_only_model_gets_a_note() {
        let english = ModelCapability { languages: vec!["en".into()], ..cap(135_000_000, 8192) };
        assert!(language_warning(&english, ::office::Language::PtBr).is_some_and(|w| w.contains("português")));
        assert!(language_warning(&english, ::office::Language::En).is_none());
        assert!(language_warning(&cap(135_000_000, 8192), ::office::Language::PtBr).is_none(), "unknown languages: no note");
    }

    #[test]
    fn the_setting_overrides_the_metadata() {
        let c = choose(&cap(135_000_000, 8192), true, "m", Some("full"));
        assert_eq!(c.profile, PromptProfile::Full);
        assert_eq!(c.reason, "setting prompt_profile.m");
        assert_eq!(choose(&cap(135_000_000, 8192), true, "m", Some("nonsense")).profile, PromptProfile::Compact);
    }
}
