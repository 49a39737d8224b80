use voice::tts::{EspeakNg, SpeechSynthesizer, SynthesisRequest};
use voice::wer::{normalize_en, word_errors};
use voice::whisper::Whisper;
use voice::{Language, LanguageChoice, SpeechToText};

use crate::{espeak_available, whisper_dir};

#[test]
fn a_slower_rate_gives_longer_speech_at_the_same_sample_rate() {
    if !espeak_available() {
        eprintln!("skipped: espeak-ng is not installed (scripts/setup.sh)");
        return;
    }
    let tts = EspeakNg::default();
    let say = |rate| {
        tts.synthesize(&SynthesisRequest {
            text: "The meeting moved to Thursday afternoon.",
            language: Language::En,
            rate,
        })
        .expect("speech")
    };
    let (slow, normal, fast) = (say(0.6), say(1.0), say(1.6));
    assert_eq!(slow.rate, normal.rate);
    assert_eq!(fast.rate, normal.rate);
    assert!(slow.duration_ms() > normal.duration_ms() * 13 / 10, "{} vs {}", slow.duration_ms(), normal.duration_ms());
    assert!(fast.duration_ms() * 13 / 10 < normal.duration_ms(), "{} vs {}", fast.duration_ms(), normal.duration_ms());
}

#[test]
fn portuguese_speech_is_produced_and_bad_rates_are_refused() {
    if !espeak_available() {
        eprintln!("skipped: espeak-ng is not installed (scripts/setup.sh)");
        return;
    }
    let tts = EspeakNg::default();
    let pt = tts
        .synthesize(&SynthesisRequest { text: "Olá, tudo bem? Vamos conversar.", language: Language::Pt, rate: 1.0 })
        .expect("pt speech");
    assert!(pt.duration_ms() > 1000);
    assert!(pt.samples.iter().any(|s| s.abs() > 0.05), "silent output");
    let e = tts.synthesize(&SynthesisRequest { text: "hi", language: Language::En, rate: 5.0 }).expect_err("rate 5");
    assert!(e.to_string().contains("rate"));
    // Text that looks like an option is spoken, not parsed.
    tts.synthesize(&SynthesisRequest { text: "--help me", language: Language::En, rate: 1.0 }).expect("dash text");
}

#[test]
fn what_espeak_says_whisper_hears() {
    let Some(dir) = whisper_dir() else {
        eprintln!("skipped: needs the whisper-tiny.en model (scripts/setup.sh)");
        return;
    };
    if !espeak_available() {
        eprintln!("skipped: espeak-ng is not installed");
        return;
    }
    let text = "Please remind me to call my sister tomorrow morning.";
    let pcm = EspeakNg::default()
        .synthesize(&SynthesisRequest { text, language: Language::En, rate: 1.0 })
        .expect("speech")
        .resampled(16_000);
    let mut model = Whisper::load(&dir).expect("load");
    let t = model.transcribe(&pcm.samples, LanguageChoice::Fixed(Language::En)).expect("transcribe");
    let (e, n) = word_errors(&normalize_en(text), &normalize_en(&t.text));
    assert!(e <= 2, "{e}/{n} errors: heard {:?}", t.text);
}
