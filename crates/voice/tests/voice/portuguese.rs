use voice::wav::read_mono;
use voice::wer::{normalize_basic, word_errors};
use voice::whisper::Whisper;
use voice::{Language, LanguageChoice, SpeechToText};

use crate::{librivox_clips, portuguese_dir, whisper_base_dir};

#[test]
fn the_multilingual_model_hears_portuguese_and_detects_the_language() {
    let (Some(model_dir), Some(clips)) = (whisper_base_dir(), portuguese_dir()) else {
        eprintln!("skipped: needs the whisper-base model and the pytest-audioeval clips (scripts/setup.sh)");
        return;
    };
    let mut model = Whisper::load(&model_dir).expect("load");
    assert!(!model.english_only());
    let pcm = read_mono(&clips.join("pangrama.wav"), 16_000).expect("clip");
    let reference = std::fs::read_to_string(clips.join("pangrama.txt")).expect("reference");
    let fixed = model.transcribe(&pcm.samples, LanguageChoice::Fixed(Language::Pt)).expect("pt");
    assert_eq!(fixed.language, "pt");
    let (e, n) = word_errors(&normalize_basic(&reference), &normalize_basic(&fixed.text));
    assert!(e <= 1, "{e}/{n}: {:?}", fixed.text);
    let auto = model.transcribe(&pcm.samples, LanguageChoice::Auto).expect("auto");
    assert_eq!(auto.language, "pt", "{:?}", auto.text);
    if let Some(en_clips) = librivox_clips() {
        let pcm = read_mono(&en_clips[0].0, 16_000).expect("clip");
        let auto = model.transcribe(&pcm.samples, LanguageChoice::Auto).expect("auto en");
        assert_eq!(auto.language, "en", "{:?}", auto.text);
    }
}
