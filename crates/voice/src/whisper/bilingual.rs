//! English or Portuguese told apart at the English-only model's speed.
//!
//! The multilingual model hears Portuguese, but English is what most
//! turns are in, and for English the English-only model is about twice as
//! fast and hears better (espeak-ng's "How many legs does a spider have?"
//! is "How many links does a spider hab?" to the multilingual one). So the
//! multilingual model only says which language an utterance is in (its
//! encoder and one decoder step, on each draft of the growing utterance
//! while the person still speaks) and transcribes the Portuguese ones; the
//! English ones go to the English-only model, drafts and take alike.

use crate::error::VoiceError;
use crate::stt::{Draft, Language, LanguageChoice, SpeechToText, Transcript};

use super::Whisper;

/// Two recognisers behind one: see the module's documentation. A fixed
/// language goes straight to the model for it.
pub struct Bilingual<E = Whisper, M = Whisper> {
    english: E,
    multilingual: M,
    /// The language of the utterance under way as last told.
    utterance: Option<Told>,
}

#[derive(Clone, Copy)]
struct Told {
    language: Language,
    /// The model's probability of it against the other language.
    p: f32,
    /// On how many of the utterance's samples.
    samples: usize,
}

/// Sure enough of an utterance's language to stop telling it again.
const SURE: f32 = 0.99;

/// What a call is in its utterance.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Call {
    /// A whole utterance at once, or the first draft of one.
    Whole,
    /// A draft of the growing utterance.
    Draft,
    /// The take of the whole utterance after its drafts.
    Take,
}

/// What tells the language of an utterance and how sure it is (the
/// multilingual Whisper).
pub trait LanguageOf {
    fn language_of(&mut self, pcm_16k: &[f32]) -> Result<(Language, f32), VoiceError>;
}

impl LanguageOf for Whisper {
    fn language_of(&mut self, pcm_16k: &[f32]) -> Result<(Language, f32), VoiceError> {
        Whisper::language_of(self, pcm_16k)
    }
}

impl<E: SpeechToText, M: SpeechToText + LanguageOf> Bilingual<E, M> {
    pub fn new(english: E, multilingual: M) -> Self {
        Self { english, multilingual, utterance: None }
    }

    /// The language `pcm_16k` is heard in. The first second is not always
    /// enough to tell (a person's Portuguese pangram reads as English on
    /// it at 0.97, and as Portuguese from its second second on), so the
    /// drafts tell it again on the grown utterance until the model is sure,
    /// and the take keeps the last telling when it was sure or heard at
    /// least three quarters of the utterance. Telling on every draft took
    /// the two cores from the persona's model while the person spoke.
    fn language(&mut self, pcm_16k: &[f32], language: LanguageChoice, call: Call) -> Result<Language, VoiceError> {
        if let LanguageChoice::Fixed(l) = language {
            return Ok(l);
        }
        match (call, self.utterance) {
            (Call::Draft | Call::Take, Some(told)) if told.p >= SURE => Ok(told.language),
            (Call::Take, Some(told)) if told.samples * 4 >= pcm_16k.len() * 3 => Ok(told.language),
            _ => {
                let (language, p) = self.multilingual.language_of(pcm_16k)?;
                tracing::debug!(language = language.code(), p, samples = pcm_16k.len(), "voice: language told");
                self.utterance = Some(Told { language, p, samples: pcm_16k.len() });
                Ok(language)
            }
        }
    }

    fn model(&mut self, language: Language) -> &mut dyn SpeechToText {
        match language {
            Language::En => &mut self.english,
            Language::Pt => &mut self.multilingual,
        }
    }
}

impl<E: SpeechToText, M: SpeechToText + LanguageOf> SpeechToText for Bilingual<E, M> {
    fn transcribe(&mut self, pcm_16k: &[f32], language: LanguageChoice) -> Result<Transcript, VoiceError> {
        let l = self.language(pcm_16k, language, Call::Whole)?;
        self.model(l).transcribe(pcm_16k, LanguageChoice::Fixed(l))
    }

    fn transcribe_drafted(
        &mut self,
        pcm_16k: &[f32],
        language: LanguageChoice,
        draft: &mut Draft,
    ) -> Result<Transcript, VoiceError> {
        let call = if draft.is_empty() { Call::Whole } else { Call::Take };
        let l = self.language(pcm_16k, language, call)?;
        self.model(l).transcribe_drafted(pcm_16k, LanguageChoice::Fixed(l), draft)
    }

    fn transcribe_partial(
        &mut self,
        pcm_16k: &[f32],
        language: LanguageChoice,
        draft: &mut Draft,
    ) -> Result<Transcript, VoiceError> {
        // An empty draft begins an utterance: its language is told anew.
        let call = if draft.is_empty() { Call::Whole } else { Call::Draft };
        let l = self.language(pcm_16k, language, call)?;
        self.model(l).transcribe_partial(pcm_16k, LanguageChoice::Fixed(l), draft)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recogniser that says which model it is and counts its calls.
    #[derive(Default)]
    struct Named {
        name: &'static str,
        heard: Vec<(usize, LanguageChoice)>,
        told: Vec<Language>,
        next_language: Vec<(Language, f32)>,
    }

    impl SpeechToText for Named {
        fn transcribe(&mut self, pcm_16k: &[f32], language: LanguageChoice) -> Result<Transcript, VoiceError> {
            self.heard.push((pcm_16k.len(), language));
            let code = match language {
                LanguageChoice::Fixed(l) => l.code(),
                LanguageChoice::Auto => "en",
            };
            Ok(Transcript { text: self.name.to_owned(), language: code.to_owned(), segments: Vec::new() })
        }

        fn transcribe_partial(
            &mut self,
            pcm_16k: &[f32],
            language: LanguageChoice,
            draft: &mut Draft,
        ) -> Result<Transcript, VoiceError> {
            // A draft that read something, as Whisper's does.
            draft.tokens = vec![1];
            self.transcribe(pcm_16k, language)
        }
    }

    impl LanguageOf for Named {
        fn language_of(&mut self, _pcm_16k: &[f32]) -> Result<(Language, f32), VoiceError> {
            let (l, p) = self.next_language.remove(0);
            self.told.push(l);
            Ok((l, p))
        }
    }

    fn pair(languages: &[(Language, f32)]) -> Bilingual<Named, Named> {
        Bilingual::new(
            Named { name: "english", ..Named::default() },
            Named { name: "multilingual", next_language: languages.to_vec(), ..Named::default() },
        )
    }

    #[test]
    fn each_draft_tells_the_language_and_the_take_keeps_the_last_when_it_heard_most_of_it() {
        let mut stt = pair(&[(Language::En, 0.95), (Language::En, 0.96)]);
        let mut draft = Draft::default();
        let audio = vec![0.0; 32_000];
        stt.transcribe_partial(&audio[..16_000], LanguageChoice::Auto, &mut draft).expect("draft");
        stt.transcribe_partial(&audio[..24_000], LanguageChoice::Auto, &mut draft).expect("draft");
        let take = stt.transcribe_drafted(&audio, LanguageChoice::Auto, &mut draft).expect("take");
        assert_eq!((take.text.as_str(), take.language.as_str()), ("english", "en"));
        assert_eq!(stt.multilingual.told, [Language::En, Language::En], "unsure: told on each draft, not the take");
        assert!(stt.multilingual.heard.is_empty(), "{:?}", stt.multilingual.heard);
        assert_eq!(stt.english.heard.len(), 3);
    }

    #[test]
    fn a_sure_telling_is_kept_for_the_rest_of_the_utterance() {
        let mut stt = pair(&[(Language::En, 0.999)]);
        let mut draft = Draft::default();
        let audio = vec![0.0; 48_000];
        for end in [16_000, 24_000, 32_000] {
            stt.transcribe_partial(&audio[..end], LanguageChoice::Auto, &mut draft).expect("draft");
        }
        let take = stt.transcribe_drafted(&audio, LanguageChoice::Auto, &mut draft).expect("take");
        assert_eq!(take.text, "english");
        assert_eq!(stt.multilingual.told, [Language::En]);
        // The next utterance's first draft is told anew, sure or not before.
        stt.multilingual.next_language.push((Language::Pt, 0.6));
        let mut next = Draft::default();
        let first = stt.transcribe_partial(&audio[..16_000], LanguageChoice::Auto, &mut next).expect("draft");
        assert_eq!(first.text, "multilingual");
    }

    #[test]
    fn a_language_that_turns_as_the_utterance_grows_is_followed_and_the_next_utterance_told_anew() {
        // The first second of a Portuguese sentence reads as English.
        let languages = [(Language::En, 0.97), (Language::Pt, 0.8), (Language::Pt, 0.98), (Language::En, 0.999)];
        let mut stt = pair(&languages);
        let mut draft = Draft::default();
        let audio = vec![0.0; 48_000];
        let first = stt.transcribe_partial(&audio[..16_000], LanguageChoice::Auto, &mut draft).expect("draft");
        assert_eq!(first.text, "english");
        stt.transcribe_partial(&audio[..24_000], LanguageChoice::Auto, &mut draft).expect("draft");
        // The last draft heard half of it: the take tells it again.
        let take = stt.transcribe_drafted(&audio, LanguageChoice::Auto, &mut draft).expect("take");
        assert_eq!((take.text.as_str(), take.language.as_str()), ("multilingual", "pt"));
        assert_eq!(stt.multilingual.heard.last().map(|h| h.1), Some(LanguageChoice::Fixed(Language::Pt)));
        // The next utterance starts from an empty draft.
        let mut next = Draft::default();
        let take = stt.transcribe_drafted(&audio, LanguageChoice::Auto, &mut next).expect("take");
        assert_eq!((take.text.as_str(), take.language.as_str()), ("english", "en"));
        assert_eq!(stt.multilingual.told, languages.map(|(l, _)| l));
    }

    #[test]
    fn a_fixed_language_is_not_told_at_all() {
        let mut stt = pair(&[]);
        let take = stt.transcribe(&[0.0; 16_000], LanguageChoice::Fixed(Language::Pt)).expect("take");
        assert_eq!(take.text, "multilingual");
        let take = stt.transcribe(&[0.0; 16_000], LanguageChoice::Fixed(Language::En)).expect("take");
        assert_eq!(take.text, "english");
        assert!(stt.multilingual.told.is_empty());
    }
}
