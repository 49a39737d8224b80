//! Silero and Piper through ONNX Runtime loaded at run time (`ort`
//! load-dynamic), with the library from the PyPI onnxruntime wheel.

use voice::silero::{SileroVad, WINDOW};
use voice::vad::{GateConfig, GateEvent, SpeechGate, FRAME};
use voice::wav::read_mono;
use voice::{Language, SpeechSynthesizer, SynthesisRequest};

use crate::{espeak_available, librivox_clips, onnx_models_dir};

#[test]
fn silero_hears_the_recorded_voice_and_not_the_silence_around_it() {
    let (Some(models), Some(clips)) = (onnx_models_dir(), librivox_clips()) else {
        eprintln!("skipped: needs the ONNX models and pocketsphinx-testdata (scripts/setup.sh)");
        return;
    };
    let mut vad = SileroVad::load(&models).expect("silero");
    let speech = read_mono(&clips[0].0, 16_000).expect("clip").samples;
    let silent: Vec<f32> = (0..32).map(|_| vad.window(&[0.0; WINDOW]).expect("run")).collect();
    assert!(silent.iter().all(|p| *p < 0.1), "{silent:?}");
    vad.reset();
    let probs: Vec<f32> = speech.chunks(WINDOW).map(|w| vad.window(w).expect("run")).collect();
    let voiced = probs.iter().filter(|p| **p >= 0.5).count() as f32 / probs.len() as f32;
    assert!(voiced > 0.4, "only {:.0} % of the clip's windows voiced", voiced * 100.0);
    // In the gate: one utterance, found where the clip is.
    let mut gate = SpeechGate::with_silero(GateConfig::default(), SileroVad::load(&models).expect("silero"));
    assert!(gate.uses_silero());
    let mut pcm = vec![0.0f32; 32_000];
    pcm.extend(&speech);
    pcm.extend(vec![0.0f32; 32_000]);
    let events: Vec<GateEvent> = pcm.chunks(FRAME).filter_map(|f| gate.push(f)).collect();
    assert!(gate.uses_silero(), "Silero failed during the run");
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(matches!(events[0], GateEvent::SpeechStarted { at_ms } if (2_000..2_800).contains(&at_ms)), "{events:?}");
}

#[test]
fn piper_speaks_english_at_the_rate_asked_and_portuguese_goes_to_espeak() {
    let Some(models) = onnx_models_dir() else {
        eprintln!("skipped: needs the ONNX models (scripts/setup.sh)");
        return;
    };
    if !espeak_available() {
        eprintln!("skipped: needs espeak-ng for the phonemes");
        return;
    }
    let piper = voice::piper::Piper::load(&models).expect("piper");
    let text = "The train to Lisbon leaves at nine.";
    let normal = piper.synthesize(&SynthesisRequest { text, language: Language::En, rate: 1.0 }).expect("say");
    let slow = piper.synthesize(&SynthesisRequest { text, language: Language::En, rate: 0.5 }).expect("say");
    assert_eq!(normal.rate, 22_050, "Piper's own rate, not espeak-ng's");
    let (a, b) = (normal.duration_ms() as f64, slow.duration_ms() as f64);
    assert!(a > 1_000.0 && b / a > 1.6, "rate 1: {a} ms, rate 0.5: {b} ms");
    // Portuguese goes to the fallback (here a missing program, to see it is asked).
    let mut piper = piper;
    piper.fallback = voice::EspeakNg { program: "/nonexistent/espeak-ng".into() };
    let e = piper
        .synthesize(&SynthesisRequest { text: "Olá, tudo bem?", language: Language::Pt, rate: 1.0 })
        .expect_err("pt is espeak-ng's");
    assert!(e.to_string().contains("/nonexistent/espeak-ng"), "{e}");
    assert!(piper.synthesize(&SynthesisRequest { text, language: Language::En, rate: 1.0 }).is_ok());
}
