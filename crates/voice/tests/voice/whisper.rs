use voice::wav::{read_mono, Pcm};
use voice::wer::{normalize_en, word_errors};
use voice::whisper::Whisper;
use voice::{Language, LanguageChoice, SpeechToText, VoiceError};

use crate::{librivox_clips, whisper_dir};

fn en() -> LanguageChoice {
    LanguageChoice::Fixed(Language::En)
}

#[test]
fn tiny_en_transcribes_the_librivox_clips_within_eight_percent_wer() {
    let (Some(dir), Some(clips)) = (whisper_dir(), librivox_clips()) else {
        eprintln!("skipped: needs the whisper-tiny.en model and pocketsphinx-testdata (scripts/setup.sh)");
        return;
    };
    let mut model = Whisper::load(&dir).expect("load");
    assert!(model.english_only());
    let (mut errors, mut words) = (0, 0);
    for (path, reference) in clips {
        let pcm = read_mono(&path, 16_000).expect("clip");
        let t = model.transcribe(&pcm.samples, en()).expect("transcribe");
        assert_eq!(t.language, "en");
        assert!(!t.segments.is_empty(), "{}: no segments", path.display());
        for s in &t.segments {
            assert!(
                s.start_ms <= s.end_ms && s.end_ms <= pcm.duration_ms() + 1000,
                "{s:?} past {} ms",
                pcm.duration_ms()
            );
        }
        let (e, n) = word_errors(&normalize_en(&reference), &normalize_en(&t.text));
        eprintln!("{}: {e}/{n} {:?}", path.display(), t.text);
        errors += e;
        words += n;
    }
    assert!(words > 60);
    assert!(errors * 100 <= words * 8, "WER {errors}/{words}");
}

#[test]
fn audio_longer_than_one_window_is_transcribed_across_windows_in_order() {
    let (Some(dir), Some(clips)) = (whisper_dir(), librivox_clips()) else {
        eprintln!("skipped: needs the whisper-tiny.en model and pocketsphinx-testdata (scripts/setup.sh)");
        return;
    };
    let mut model = Whisper::load(&dir).expect("load");
    // All five clips twice with a second of silence between: about 55 s.
    let mut samples = Vec::new();
    let mut reference = String::new();
    for _ in 0..2 {
        for (path, text) in &clips {
            samples.extend(read_mono(path, 16_000).expect("clip").samples);
            samples.extend(std::iter::repeat_n(0.0, 16_000));
            reference.push_str(text);
            reference.push(' ');
        }
    }
    let audio_ms = samples.len() as u64 * 1000 / 16_000;
    assert!(audio_ms > 50_000);
    let t = model.transcribe(&samples, en()).expect("transcribe");
    let mut last_start = 0;
    for s in &t.segments {
        assert!(s.start_ms >= last_start, "segments out of order: {:?}", t.segments);
        last_start = s.start_ms;
    }
    assert!(t.segments.last().is_some_and(|s| s.end_ms > 45_000), "the second window is missing: {:?}", t.segments);
    let (e, n) = word_errors(&normalize_en(&reference), &normalize_en(&t.text));
    assert!(e * 100 <= n * 15, "WER {e}/{n}: {}", t.text);
}

#[test]
fn silence_and_quiet_hiss_yield_no_words() {
    let Some(dir) = whisper_dir() else {
        eprintln!("skipped: needs the whisper-tiny.en model (scripts/setup.sh)");
        return;
    };
    let mut model = Whisper::load(&dir).expect("load");
    let t = model.transcribe(&vec![0.0; 16_000 * 10], en()).expect("transcribe");
    assert!(t.text.trim().is_empty(), "heard {:?} in silence", t.text);
    // Quiet hiss (about -40 dBFS white noise) is not speech either.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let hiss: Vec<f32> = (0..16_000 * 10)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            ((seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.035
        })
        .collect();
    let t = model.transcribe(&hiss, en()).expect("transcribe hiss");
    assert!(t.text.trim().is_empty(), "heard {:?} in hiss", t.text);
    let empty = model.transcribe(&[], en()).expect("transcribe nothing");
    assert!(empty.segments.is_empty());
}

#[test]
fn portuguese_on_the_english_model_is_refused_plainly() {
    let Some(dir) = whisper_dir() else {
        eprintln!("skipped: needs the whisper-tiny.en model (scripts/setup.sh)");
        return;
    };
    let mut model = Whisper::load(&dir).expect("load");
    let e = model.transcribe(&[0.0; 1600], LanguageChoice::Fixed(Language::Pt)).expect_err("pt on tiny.en");
    assert!(matches!(e, VoiceError::LanguageUnavailable { .. }), "{e}");
}

#[test]
fn a_corrupt_or_incomplete_model_is_reported_not_panicked_on() {
    let Some(dir) = whisper_dir() else {
        eprintln!("skipped: needs the whisper-tiny.en model (scripts/setup.sh)");
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    for f in ["config.json", "vocabulary.txt"] {
        std::fs::copy(dir.join(f), tmp.path().join(f)).expect("copy");
    }
    // Truncated weights.
    let weights = std::fs::read(dir.join("model.safetensors")).expect("read");
    std::fs::write(tmp.path().join("model.safetensors"), &weights[..weights.len() / 2]).expect("write");
    let e = Whisper::load(tmp.path()).err().expect("truncated weights must fail");
    assert!(matches!(e, VoiceError::ModelCorrupt { .. }), "{e}");
    // A vocabulary that does not fit the model.
    std::fs::write(tmp.path().join("model.safetensors"), &weights).expect("write");
    std::fs::write(tmp.path().join("vocabulary.txt"), "a\nb\n").expect("write");
    let e = Whisper::load(tmp.path()).err().expect("wrong vocabulary must fail");
    assert!(e.to_string().contains("vocabulary.txt has 2 tokens"), "{e}");
}

#[test]
fn resampled_audio_is_recognised_like_the_original() {
    let (Some(dir), Some(clips)) = (whisper_dir(), librivox_clips()) else {
        eprintln!("skipped: needs the whisper-tiny.en model and pocketsphinx-testdata (scripts/setup.sh)");
        return;
    };
    let mut model = Whisper::load(&dir).expect("load");
    let (path, reference) = &clips[0];
    let original = read_mono(path, 16_000).expect("clip");
    // Through 44.1 kHz stereo on disk and back.
    let tmp = tempfile::tempdir().expect("tempdir");
    let up = original.resampled(44_100);
    let file = tmp.path().join("cd.wav");
    let spec = hound::WavSpec {
        channels: 2,
        sample_rate: 44_100,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(&file, spec).expect("create");
    for s in &up.samples {
        let v = (s * 32767.0) as i16;
        w.write_sample(v).expect("l");
        w.write_sample(v).expect("r");
    }
    w.finalize().expect("finalize");
    let back: Pcm = read_mono(&file, 16_000).expect("read");
    let t = model.transcribe(&back.samples, en()).expect("transcribe");
    let (e, n) = word_errors(&normalize_en(reference), &normalize_en(&t.text));
    assert!(e * 100 <= n * 10, "WER {e}/{n}: {}", t.text);
}

#[test]
fn the_cached_decoder_gives_the_logits_of_candles_whole_sequence_decoder() {
    let (Some(dir), Some(clips)) = (whisper_dir(), librivox_clips()) else {
        eprintln!("skipped: needs the whisper-tiny.en model and pocketsphinx-testdata (scripts/setup.sh)");
        return;
    };
    // f32 weights on both sides: the q8_0 weights (when present, what
    // `Whisper::load` picks) run candle's decoder on dequantized matrices,
    // which differ from q8_0 products by the rounding of the activations.
    let mut model = Whisper::load_with(&dir, voice::whisper::Precision::F32).expect("load");
    let pcm = read_mono(&clips[1].0, 16_000).expect("clip");
    let (worst, steps) = model.decoder_difference(&pcm.samples).expect("decode");
    assert!(steps > 10, "{steps} steps");
    assert!(worst < 2e-3, "largest logit difference {worst}");
}

#[test]
fn our_spectrogram_equals_candles_over_the_audio_and_the_silence_after_it() {
    use candle_transformers::models::whisper as m;
    use voice::whisper::mel::{filters, log_mel_candle, MelFrontEnd};
    let cfg: m::Config = serde_json::from_str(
        r#"{"num_mel_bins":80,"max_source_positions":1500,"d_model":384,"encoder_attention_heads":6,
            "encoder_layers":4,"vocab_size":51864,"max_target_positions":448,"decoder_attention_heads":6,
            "decoder_layers":4,"suppress_tokens":[]}"#,
    )
    .unwrap();
    let f = filters(80);
    // 1.3 s of a chirp with a little noise, then nothing.
    let pcm: Vec<f32> = (0..20_800)
        .map(|i| {
            let t = i as f32 / 16_000.0;
            0.3 * (2.0 * std::f32::consts::PI * (200.0 + 900.0 * t) * t).sin()
                + 0.01 * ((i * 7919 % 101) as f32 / 101.0 - 0.5)
        })
        .collect();
    let (reference, ref_frames) = log_mel_candle(&cfg, &pcm, &f);
    let front = MelFrontEnd::new(80, f);
    let (ours, frames) = front.log_mel(&pcm, 300);
    assert_eq!(frames, 130 + 300);
    let mut worst = 0f32;
    for j in 0..80 {
        for i in 0..frames {
            worst = worst.max((ours[j * frames + i] - reference[j * ref_frames + i]).abs());
        }
    }
    assert!(worst < 1e-3, "largest difference {worst}");
}

/// Sentences spoken by espeak-ng, each padded with silence as an utterance
/// cut by the voice gate is. With 1.5 s of silence around them, plain
/// greedy decoding loops on several (the last one: its own sentence over
/// and over); the safeguards must not.
const SPOKEN: [&str; 8] = [
    "The train to Lisbon leaves at seven in the morning.",
    "Please put the green cup on the kitchen table.",
    "My sister reads a book about old ships every night.",
    "We walked along the river until the sun went down.",
    "Could you tell me where the nearest pharmacy is?",
    "The children painted the fence blue last summer.",
    "I would like two tickets for the concert on Friday.",
    "He keeps his old letters in a wooden box under the bed.",
];

fn espeak(text: &str, pad_ms: usize) -> Vec<f32> {
    use voice::{SpeechSynthesizer, SynthesisRequest};
    let pcm = voice::EspeakNg::default()
        .synthesize(&SynthesisRequest { text, language: Language::En, rate: 1.0 })
        .expect("espeak-ng");
    let mut out = vec![0.0; pad_ms * 16];
    out.extend(pcm.resampled(16_000).samples);
    out.extend(std::iter::repeat_n(0.0, pad_ms * 16));
    out
}

/// The longest run of words that comes twice in `words` (a loop shows as a
/// long one).
fn longest_repeat(words: &[String]) -> usize {
    let mut best = 0;
    for i in 0..words.len() {
        for j in i + 1..words.len() {
            let mut n = 0;
            while j + n < words.len() && words[i + n] == words[j + n] && i + n < j {
                n += 1;
            }
            best = best.max(n);
        }
    }
    best
}

#[test]
fn no_transcript_loops_on_spoken_sentences() {
    let (Some(dir), true) = (whisper_dir(), crate::espeak_available()) else {
        eprintln!("skipped: needs the whisper-tiny.en model (scripts/setup.sh) and espeak-ng");
        return;
    };
    let mut model = Whisper::load(&dir).expect("load");
    let (mut errors, mut plain_errors, mut words) = (0, 0, 0);
    for pad in [300, 1_500] {
        for sentence in SPOKEN {
            let audio = espeak(sentence, pad);
            model.set_safeguards(false);
            let plain = model.transcribe(&audio, en()).expect("plain");
            model.set_safeguards(true);
            let t = model.transcribe(&audio, en()).expect("transcribe");
            let reference = normalize_en(sentence);
            let heard = normalize_en(&t.text);
            let (e, n) = word_errors(&reference, &heard);
            let (pe, _) = word_errors(&reference, &normalize_en(&plain.text));
            plain_errors += pe;
            eprintln!("pad {pad}: {e}/{n} {:?} (fallbacks {}; plain {pe}/{n})", t.text, model.last_times().fallbacks);
            let heard_words: Vec<String> = heard.split_whitespace().map(str::to_owned).collect();
            assert!(heard_words.len() <= n + 3, "{} words for {n}: {:?}", heard_words.len(), t.text);
            assert!(longest_repeat(&heard_words) < 4, "a loop: {:?}", t.text);
            errors += e;
            words += n;
        }
    }
    // tiny.en misreads some of espeak-ng's words either way; the bar is
    // the plain decoder's on the same audio.
    eprintln!("WER {errors}/{words}, plain decoding {plain_errors}/{words}");
    assert!(errors <= plain_errors, "WER {errors}/{words} against plain decoding's {plain_errors}/{words}");
}

/// The repeat stop must not take speech said twice for a loop: the
/// sentences back to back, twice over (two windows), are all heard.
#[test]
fn speech_said_twice_is_heard_twice_with_the_repeat_stop_on() {
    let (Some(dir), true) = (whisper_dir(), crate::espeak_available()) else {
        eprintln!("skipped: needs the whisper-tiny.en model (scripts/setup.sh) and espeak-ng");
        return;
    };
    let mut model = Whisper::load(&dir).expect("load");
    let mut audio = Vec::new();
    let mut reference = String::new();
    for s in SPOKEN.iter().chain(SPOKEN.iter()) {
        audio.extend(espeak(s, 100));
        reference.push_str(s);
        reference.push(' ');
    }
    model.set_safeguards(false);
    let plain = model.transcribe(&audio, en()).expect("plain");
    model.set_safeguards(true);
    let ours = model.transcribe(&audio, en()).expect("ours");
    let reference = normalize_en(&reference);
    let (pe, n) = word_errors(&reference, &normalize_en(&plain.text));
    let (oe, _) = word_errors(&reference, &normalize_en(&ours.text));
    eprintln!("plain {pe}/{n}: {:?}\nours {oe}/{n}: {:?}", plain.text, ours.text);
    let heard = normalize_en(&ours.text).split_whitespace().count();
    assert!(heard * 10 >= n * 9, "{heard} words heard of {n}");
    // Where the decoding resumes after the cut, the next window begins
    // elsewhere than the plain decoder's: a word may come out differently.
    assert!(oe <= pe + 2, "WER {oe}/{n} against the plain decoder's {pe}/{n}");
}

#[test]
fn a_drafted_transcript_is_the_one_shot_transcript_with_fewer_decoder_passes() {
    let (Some(dir), Some(clips)) = (whisper_dir(), librivox_clips()) else {
        eprintln!("skipped: needs the whisper-tiny.en model and pocketsphinx-testdata (scripts/setup.sh)");
        return;
    };
    let mut model = Whisper::load(&dir).expect("load");
    let (mut one_shot_passes, mut drafted_passes) = (0, 0);
    for (path, _) in &clips {
        let pcm = read_mono(path, 16_000).expect("clip").samples;
        let whole = model.transcribe(&pcm, en()).expect("one shot");
        one_shot_passes += model.last_times().tokens;
        // Takes of the utterance as it grows, every half second, as while the person speaks.
        let mut draft = voice::Draft::default();
        let mut end = 8_000;
        while end < pcm.len() {
            model.transcribe_partial(&pcm[..end], en(), &mut draft).expect("partial");
            end += 8_000;
        }
        let last = model.transcribe_drafted(&pcm, en(), &mut draft).expect("drafted");
        drafted_passes += model.last_times().tokens;
        assert_eq!(last.text, whole.text, "{}", path.display());
        assert_eq!(last.segments, whole.segments, "{}", path.display());
    }
    eprintln!("decoder passes at the end: one shot {one_shot_passes}, drafted {drafted_passes}");
    assert!(drafted_passes * 2 < one_shot_passes, "{drafted_passes} against {one_shot_passes}");
}

#[test]
fn quantized_weights_are_made_deterministically_and_transcribe_as_well() {
    use voice::whisper::{Precision, QUANTIZED_FILE};
    let (Some(dir), Some(clips)) = (whisper_dir(), librivox_clips()) else {
        eprintln!("skipped: needs the whisper-tiny.en model and pocketsphinx-testdata (scripts/setup.sh)");
        return;
    };
    // Made here from the f32 weights, twice, into a scratch copy of the model directory.
    let tmp = tempfile::tempdir().expect("tempdir");
    for f in ["config.json", "vocabulary.txt", "model.safetensors"] {
        std::os::unix::fs::symlink(dir.join(f), tmp.path().join(f)).expect("link");
    }
    let made = voice::whisper::quantize::quantize_dir(tmp.path()).expect("quantize");
    let first = std::fs::read(&made).expect("read");
    voice::whisper::quantize::quantize_dir(tmp.path()).expect("quantize again");
    assert!(std::fs::read(&made).expect("read") == first, "two runs gave different bytes");
    // The converted weights are stored in f16 (2 bytes a weight); q8_0 is
    // 34 bytes a block of 32 (1.06 a weight), and what stays f32 (the
    // convolutions, positions, norms and biases) is under 4 % of tiny's
    // weights: well under two thirds of the f16 file.
    let f16_size = std::fs::metadata(dir.join("model.safetensors")).expect("size").len();
    assert!((first.len() as u64) * 3 < f16_size * 2, "{} bytes against {f16_size}", first.len());
    if let Ok(setup_made) = std::fs::read(dir.join(QUANTIZED_FILE)) {
        assert!(setup_made == first, "the setup's {QUANTIZED_FILE} differs from one made now");
    }
    let mut q = Whisper::load_with(tmp.path(), Precision::Q8).expect("load q8");
    let mut f = Whisper::load_with(&dir, Precision::F32).expect("load f32");
    assert_eq!(q.precision(), Precision::Q8);
    let (mut qe, mut fe, mut words) = (0, 0, 0);
    for (path, reference) in &clips {
        let pcm = read_mono(path, 16_000).expect("clip").samples;
        let tq = q.transcribe(&pcm, en()).expect("q8");
        let tf = f.transcribe(&pcm, en()).expect("f32");
        let (e, n) = word_errors(&normalize_en(reference), &normalize_en(&tq.text));
        let (e2, _) = word_errors(&normalize_en(reference), &normalize_en(&tf.text));
        eprintln!("{}: q8 {e}/{n} {:?} | f32 {e2}/{n}", path.display(), tq.text);
        qe += e;
        fe += e2;
        words += n;
    }
    assert!(qe <= fe + 1, "q8 WER {qe}/{words} against f32 {fe}/{words}");
}
