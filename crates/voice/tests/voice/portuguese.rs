use voice::wav::read_mono;
use voice::wer::{normalize_basic, word_errors};
use voice::whisper::Whisper;
use voice::{Language, LanguageChoice, SpeechSynthesizer, SpeechToText};

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

/// `text` said by espeak-ng in `language`, with 0.3 s of silence around it.
fn spoken(text: &str, language: Language) -> Vec<f32> {
    let pcm = voice::EspeakNg::default()
        .synthesize(&voice::SynthesisRequest { text, language, rate: 1.0 })
        .expect("espeak-ng")
        .resampled(16_000)
        .samples;
    let mut audio = vec![0.0; 4_800];
    audio.extend(pcm);
    audio.extend(vec![0.0; 4_800]);
    audio
}

/// Brazilian Portuguese sentences spoken by espeak-ng (pt-BR).
const FALADAS: [&str; 4] = [
    "O trem para Lisboa sai às sete da manhã.",
    "Por favor, coloque o copo verde na mesa da cozinha.",
    "Minha irmã lê um livro sobre navios antigos toda noite.",
    "Ele guarda as cartas antigas numa caixa de madeira debaixo da cama.",
];

#[test]
fn portuguese_speech_is_recognised_while_it_grows_as_in_one_take_without_loops() {
    let (Some(model_dir), true) = (whisper_base_dir(), crate::espeak_available()) else {
        eprintln!("skipped: needs the whisper-base model (scripts/setup.sh) and espeak-ng");
        return;
    };
    let pt = LanguageChoice::Fixed(Language::Pt);
    let mut model = Whisper::load(&model_dir).expect("load");
    let (mut errors, mut plain_errors, mut words) = (0, 0, 0);
    for sentence in FALADAS {
        let audio = spoken(sentence, Language::Pt);
        model.set_safeguards(false);
        let plain = model.transcribe(&audio, pt).expect("plain");
        model.set_safeguards(true);
        let whole = model.transcribe(&audio, pt).expect("one take");
        let mut draft = voice::Draft::default();
        let mut end = 8_000;
        while end < audio.len() {
            model.transcribe_partial(&audio[..end], pt, &mut draft).expect("partial");
            end += 8_000;
        }
        let grown = model.transcribe_drafted(&audio, pt, &mut draft).expect("drafted");
        assert_eq!(grown.text, whole.text);
        assert_eq!(grown.language, "pt");
        let (e, n) = word_errors(&normalize_basic(sentence), &normalize_basic(&whole.text));
        let (pe, _) = word_errors(&normalize_basic(sentence), &normalize_basic(&plain.text));
        eprintln!("{e}/{n}: {:?} (plain decoding {pe}/{n}: {:?})", whole.text, plain.text);
        assert!(whole.text.split_whitespace().count() <= n + 3, "{:?}", whole.text);
        errors += e;
        plain_errors += pe;
        words += n;
    }
    // espeak-ng's Portuguese is robotic and base misreads much of it either
    // way: the bar is the plain decoder's on the same audio, and no loop.
    eprintln!("WER {errors}/{words}, plain decoding {plain_errors}/{words}");
    assert!(errors <= plain_errors, "WER {errors}/{words} against plain decoding's {plain_errors}/{words}");
}

/// Short English questions in espeak-ng's voice, as `voice converse` hears
/// them with the multilingual model: among every language Whisper knows,
/// "What is the capital of Japan?" was once read as Thai and written in
/// Thai script; among the two the product speaks, each is English.
#[test]
fn short_synthetic_questions_are_detected_among_english_and_portuguese_only() {
    let Some(model_dir) = whisper_base_dir() else {
        eprintln!("skipped: needs the whisper-base model (scripts/setup.sh)");
        return;
    };
    let mut model = Whisper::load(&model_dir).expect("load");
    let tts = voice::EspeakNg::default();
    for q in ["What is the capital of Japan?", "Which animal says moo?", "What do bees make?"] {
        let pcm = tts
            .synthesize(&voice::SynthesisRequest { text: q, language: Language::En, rate: 1.0 })
            .expect("espeak-ng")
            .resampled(16_000);
        let mut padded = vec![0.0; 8_000];
        padded.extend(pcm.samples);
        padded.extend(vec![0.0; 8_000]);
        let auto = model.transcribe(&padded, LanguageChoice::Auto).expect("auto");
        assert!(auto.language == "en" || auto.language == "pt", "{q}: {} {:?}", auto.language, auto.text);
        assert!(auto.text.is_ascii(), "{q}: {:?}", auto.text);
    }
}

/// Auto with both models: each utterance's language is told on its drafts
/// until the multilingual model is sure, English is then heard by tiny.en
/// word for word as tiny.en alone hears it, and Portuguese by the
/// multilingual model. (espeak-ng's Portuguese voice reads as English to
/// the multilingual model, whole or in part, so Portuguese is a person's
/// recording here.)
#[test]
fn auto_hears_english_with_tiny_en_and_portuguese_with_the_multilingual_model() {
    use voice::whisper::bilingual::Bilingual;
    let (Some(tiny), Some(base), Some(clips), true) =
        (crate::whisper_dir(), whisper_base_dir(), portuguese_dir(), crate::espeak_available())
    else {
        eprintln!("skipped: needs the whisper-tiny.en and whisper-base models, the pytest-audioeval clips (scripts/setup.sh) and espeak-ng");
        return;
    };
    let english = |text: &str| spoken(text, Language::En);
    let portuguese = read_mono(&clips.join("pangrama.wav"), 16_000).expect("clip").samples;
    let mut alone = Whisper::load(&tiny).expect("tiny.en");
    let mut multilingual = Whisper::load(&base).expect("base");
    let mut both = Bilingual::new(Whisper::load(&tiny).expect("tiny.en"), Whisper::load(&base).expect("base"));
    for (name, audio, language) in [
        ("What is the capital of Italy?", english("What is the capital of Italy?"), Language::En),
        ("pangrama.wav", portuguese, Language::Pt),
        ("Which animal says moo?", english("Which animal says moo?"), Language::En),
    ] {
        // As the turn hears it: drafts every half second from the first second, then the take.
        let mut draft = voice::Draft::default();
        let mut end = 16_000;
        while end < audio.len() {
            both.transcribe_partial(&audio[..end], LanguageChoice::Auto, &mut draft).expect("draft");
            end += 8_000;
        }
        let heard = both.transcribe_drafted(&audio, LanguageChoice::Auto, &mut draft).expect("take");
        let expected = match language {
            Language::En => alone.transcribe(&audio, LanguageChoice::Fixed(Language::En)).expect("tiny.en"),
            Language::Pt => multilingual.transcribe(&audio, LanguageChoice::Fixed(Language::Pt)).expect("base"),
        };
        eprintln!("{name} → {} {:?}", heard.language, heard.text);
        assert_eq!(heard.language, language.code(), "{name}: {:?}", heard.text);
        assert_eq!(heard.text, expected.text, "{name}");
    }
}
