//! Speech to text: the trait the voice loop and the CLI use, and the
//! transcript they get back.

use serde::Serialize;

use crate::error::VoiceError;

/// A language the product speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    En,
    Pt,
}

impl Language {
    pub fn code(self) -> &'static str {
        match self {
            Language::En => "en",
            Language::Pt => "pt",
        }
    }
}

/// What the caller asks the recogniser for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LanguageChoice {
    Fixed(Language),
    Auto,
}

/// A language name that is not one of ours.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown language {0:?}; use {1}")]
pub struct UnknownLanguage(pub String, pub &'static str);

impl std::str::FromStr for Language {
    type Err = UnknownLanguage;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "en" => Ok(Self::En),
            "pt" => Ok(Self::Pt),
            other => Err(UnknownLanguage(other.to_owned(), "en or pt")),
        }
    }
}

impl std::str::FromStr for LanguageChoice {
    type Err = UnknownLanguage;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            other => other.parse().map(Self::Fixed).map_err(|_| UnknownLanguage(other.to_owned(), "en, pt or auto")),
        }
    }
}

/// A stretch of recognised speech, times from the start of the audio.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Segment {
    pub start_ms: u64,
    pub end_ms: u64,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transcript {
    pub text: String,
    /// The language code the text is in ("en", "pt", or another Whisper code under auto).
    pub language: String,
    pub segments: Vec<Segment>,
}

/// What recognising an utterance so far leaves for recognising more of
/// it: the recogniser's own reading of it (opaque to callers), which a
/// later take of the grown utterance checks and reuses where it holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Draft {
    pub(crate) prompt: Vec<u32>,
    pub(crate) tokens: Vec<u32>,
}

impl Draft {
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
}

/// A speech recogniser over 16 kHz mono samples.
pub trait SpeechToText {
    fn transcribe(&mut self, pcm_16k: &[f32], language: LanguageChoice) -> Result<Transcript, VoiceError>;

    /// The same transcript as `transcribe`, made sooner by starting from
    /// `draft` (what an earlier take of the utterance's beginning read)
    /// where it still holds; `draft` becomes this take's. By default the
    /// draft is not used.
    fn transcribe_drafted(
        &mut self,
        pcm_16k: &[f32],
        language: LanguageChoice,
        draft: &mut Draft,
    ) -> Result<Transcript, VoiceError> {
        let _ = draft;
        self.transcribe(pcm_16k, language)
    }

    /// A quick take of an utterance still under way, to make `draft`
    /// for the next take: no retries on doubtful text (its end is cut
    /// mid-word anyway). By default a plain `transcribe`.
    fn transcribe_partial(
        &mut self,
        pcm_16k: &[f32],
        language: LanguageChoice,
        draft: &mut Draft,
    ) -> Result<Transcript, VoiceError> {
        self.transcribe_drafted(pcm_16k, language, draft)
    }
}

/// A scripted recogniser for logic tests: it returns the next prepared
/// transcript, whatever the audio.
#[cfg(feature = "test-support")]
pub struct ScriptedStt {
    pub replies: std::collections::VecDeque<Transcript>,
    pub heard: Vec<usize>,
}

#[cfg(feature = "test-support")]
impl SpeechToText for ScriptedStt {
    fn transcribe(&mut self, pcm_16k: &[f32], _language: LanguageChoice) -> Result<Transcript, VoiceError> {
        self.heard.push(pcm_16k.len());
        self.replies
            .pop_front()
            .ok_or_else(|| VoiceError::Inference("the scripted recogniser ran out of replies".into()))
    }

    /// Drafts while the person speaks are not scripted: they read nothing
    /// and use up no reply.
    fn transcribe_partial(
        &mut self,
        _pcm_16k: &[f32],
        language: LanguageChoice,
        _draft: &mut Draft,
    ) -> Result<Transcript, VoiceError> {
        let language = match language {
            LanguageChoice::Fixed(l) => l.code().to_owned(),
            LanguageChoice::Auto => "en".to_owned(),
        };
        Ok(Transcript { text: String::new(), language, segments: Vec::new() })
    }
}
