//! Spoken control, handled here and never sent to the persona: "speak
//! slower / faster / normal", "stop", "be brief", in English and Brazilian
//! Portuguese. Only a short utterance that is the command counts ("I walked
//! slower than you" is a sentence for the persona, not a command).

use crate::stt::Language;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VoiceCommand {
    Slower,
    Faster,
    NormalSpeed,
    Stop,
    Brief,
}

/// At most this many words: a command is said on its own.
const MAX_WORDS: usize = 5;

const PHRASES: &[(&str, VoiceCommand)] = &[
    ("slower", VoiceCommand::Slower),
    ("slow down", VoiceCommand::Slower),
    ("more slowly", VoiceCommand::Slower),
    ("mais devagar", VoiceCommand::Slower),
    ("devagar", VoiceCommand::Slower),
    ("faster", VoiceCommand::Faster),
    ("speed up", VoiceCommand::Faster),
    ("more quickly", VoiceCommand::Faster),
    ("mais rápido", VoiceCommand::Faster),
    ("mais rapido", VoiceCommand::Faster),
    ("normal speed", VoiceCommand::NormalSpeed),
    ("speak normally", VoiceCommand::NormalSpeed),
    ("talk normally", VoiceCommand::NormalSpeed),
    ("velocidade normal", VoiceCommand::NormalSpeed),
    ("fala normal", VoiceCommand::NormalSpeed),
    ("be brief", VoiceCommand::Brief),
    ("shorter answers", VoiceCommand::Brief),
    ("seja breve", VoiceCommand::Brief),
    ("respostas curtas", VoiceCommand::Brief),
    ("stop", VoiceCommand::Stop),
    ("be quiet", VoiceCommand::Stop),
    ("pare", VoiceCommand::Stop),
    ("para", VoiceCommand::Stop),
    ("chega", VoiceCommand::Stop),
    ("silêncio", VoiceCommand::Stop),
];

fn normalise(text: &str) -> String {
    let cleaned: String =
        text.to_lowercase().chars().map(|c| if c.is_alphanumeric() || c.is_whitespace() { c } else { ' ' }).collect();
    cleaned.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The command `heard` is, if it is one.
pub fn parse(heard: &str) -> Option<VoiceCommand> {
    let text = normalise(heard);
    let words: Vec<&str> = text.split(' ').filter(|w| !w.is_empty()).collect();
    if words.is_empty() || words.len() > MAX_WORDS {
        return None;
    }
    let padded = format!(" {text} ");
    PHRASES.iter().find(|(p, _)| padded.contains(&format!(" {p} "))).map(|(_, c)| *c)
}

/// The next speaking rate after `command` (unchanged for the others).
pub fn next_rate(rate: f32, command: VoiceCommand) -> f32 {
    let (lo, hi) = (*crate::tts::RATE_RANGE.start(), *crate::tts::RATE_RANGE.end());
    match command {
        VoiceCommand::Slower => (rate * 0.8).clamp(lo, hi),
        VoiceCommand::Faster => (rate * 1.25).clamp(lo, hi),
        VoiceCommand::NormalSpeed => 1.0,
        VoiceCommand::Stop | VoiceCommand::Brief => rate,
    }
}

/// What the voice says back, in the language it was asked in (None: nothing).
pub fn acknowledgement(command: VoiceCommand, language: Language) -> Option<&'static str> {
    Some(match (command, language) {
        (VoiceCommand::Slower, Language::En) => "Okay, slower.",
        (VoiceCommand::Slower, Language::Pt) => "Tudo bem, mais devagar.",
        (VoiceCommand::Faster, Language::En) => "Okay, faster.",
        (VoiceCommand::Faster, Language::Pt) => "Tudo bem, mais rápido.",
        (VoiceCommand::NormalSpeed, Language::En) => "Okay, normal speed.",
        (VoiceCommand::NormalSpeed, Language::Pt) => "Tudo bem, velocidade normal.",
        (VoiceCommand::Brief, Language::En) => "Okay, I will keep it short.",
        (VoiceCommand::Brief, Language::Pt) => "Tudo bem, vou ser breve.",
        (VoiceCommand::Stop, _) => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_commands_are_understood_in_english_and_portuguese_and_sentences_are_not() {
        assert_eq!(parse("Speak slower, please."), Some(VoiceCommand::Slower));
        assert_eq!(parse("Fala mais devagar!"), Some(VoiceCommand::Slower));
        assert_eq!(parse("Mais rápido"), Some(VoiceCommand::Faster));
        assert_eq!(parse("normal speed"), Some(VoiceCommand::NormalSpeed));
        assert_eq!(parse("Stop."), Some(VoiceCommand::Stop));
        assert_eq!(parse("Pare."), Some(VoiceCommand::Stop));
        assert_eq!(parse("Be brief."), Some(VoiceCommand::Brief));
        assert_eq!(parse("Seja breve"), Some(VoiceCommand::Brief));
        assert_eq!(parse("I walked slower than everyone else on the trail today"), None);
        assert_eq!(parse("What is the capital of France?"), None);
        assert_eq!(parse("stopwatch"), None);
        assert_eq!(parse(""), None);
    }

    #[test]
    fn the_rate_moves_in_steps_within_the_synthesisers_range() {
        assert!((next_rate(1.0, VoiceCommand::Slower) - 0.8).abs() < 1e-6);
        assert!((next_rate(0.5, VoiceCommand::Slower) - 0.5).abs() < 1e-6);
        assert!((next_rate(2.0, VoiceCommand::Faster) - 2.0).abs() < 1e-6);
        assert_eq!(next_rate(0.64, VoiceCommand::NormalSpeed), 1.0);
        assert_eq!(acknowledgement(VoiceCommand::Slower, Language::Pt), Some("Tudo bem, mais devagar."));
    }
}
