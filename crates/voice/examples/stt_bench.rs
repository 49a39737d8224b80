//! Speech-to-text benchmark: word error rate on the five LibriVox clips of
//! Debian's pocketsphinx-testdata (Whisper-style normaliser on both
//! sides), and the real-time factor of our whole path (WAV read, resample,
//! mel, windowed decoding with timestamps, segments) against the raw
//! candle Whisper model run alone on the same samples, in the same run.
//!
//! Then, per precision (f32 and the quantized GGUF when present, with the
//! encoder dequantized as the product loads it and all in q8_0), WER and
//! time again, and the time left at the end of speech when the utterance
//! was recognised while it grew.
//!
//! cargo run --release -p voice --example stt_bench -- [MODEL_DIR] [CLIPS_DIR] [RUNS]
//! MODEL_DIR defaults to $LEDGERMIND_CACHE/models/whisper-tiny.en, CLIPS_DIR
//! to /usr/share/pocketsphinx/test/data/librivox, RUNS (fastest kept) to 3.
//!
//! To weigh one model against another in the same run (a busy machine
//! slows arms that take turns clip by clip alike):
//! - `STT_BENCH_MODELS=DIR,DIR`: more models whose arms run beside
//!   MODEL_DIR's in the precision comparison (English forced on all).
//! - `STT_BENCH_PRECISIONS=f32,q8,q8-encoder,q8-m100,q8-m50`: the arms kept
//!   (all by default).
//! - `STT_BENCH_PART=precisions`: the precision comparison only.
//! - `STT_BENCH_CLIPS=1`: one line per clip and arm with its text.
//!
//! Each arm's times come with the process's CPU time over the same calls,
//! which a busy machine stretches far less than the wall clock.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use voice::wer::{normalize_en, word_errors};
use voice::whisper::{Precision, StageTimes, Whisper, QUANTIZED_FILE};
use voice::{Language, LanguageChoice, SpeechToText, VoiceError};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error [{}]: {e}", e.code());
            ExitCode::from(1)
        }
    }
}

fn run() -> Result<(), VoiceError> {
    let mut args = std::env::args().skip(1);
    let cache = std::env::var_os("LEDGERMIND_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/ledgermind"));
    let model_dir =
        args.next().map(PathBuf::from).unwrap_or_else(|| cache.join("models").join(voice::models::WHISPER_TINY_EN));
    let clips =
        args.next().map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/usr/share/pocketsphinx/test/data/librivox"));
    let runs: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(3).max(1);
    let refs_path = clips.join("transcription");
    let refs =
        std::fs::read_to_string(&refs_path).map_err(|source| VoiceError::Io { path: refs_path.clone(), source })?;
    if std::env::var("STT_BENCH_PART").is_ok_and(|p| p == "precisions") {
        return compare_precisions(&model_dir, &refs, &clips, runs);
    }
    let load_started = Instant::now();
    let mut model = Whisper::load_with(&model_dir, Precision::F32)?;
    println!(
        "model {} loaded in {} ms; {runs} runs per clip, fastest kept",
        model_dir.display(),
        load_started.elapsed().as_millis()
    );
    println!("load average at the start: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
    let en = LanguageChoice::Fixed(Language::En);
    let (mut errors, mut words, mut raw_errors) = (0, 0, 0);
    let (mut ours_ms, mut raw_ms, mut audio_ms) = (0f64, 0f64, 0u64);
    let mut stages: Vec<(String, u64, StageTimes, StageTimes)> = Vec::new();
    println!(
        "{:<6} {:>8} {:>8} {:>8} {:>6} {:>7}  hypothesis (ours)",
        "clip", "audio ms", "ours ms", "raw ms", "WER", "raw WER"
    );
    for line in refs.lines() {
        let (Some(a), Some(b)) = (line.rfind('('), line.rfind(')')) else { continue };
        if a > b {
            continue;
        }
        let id = &line[a + 1..b];
        let reference = normalize_en(&line[..a].replace("<s>", "").replace("</s>", ""));
        let file = clips.join(format!("{id}.wav"));
        let (mut best_ours, mut best_raw) = (f64::MAX, f64::MAX);
        let (mut hypothesis, mut raw_text, mut clip_ms) = (String::new(), String::new(), 0);
        let (mut ours_stages, mut raw_stages) = (StageTimes::default(), StageTimes::default());
        for _ in 0..runs {
            // Ours: everything after the model is loaded, from the file on disk.
            let t = Instant::now();
            let pcm = voice::wav::read_mono(&file, voice::SAMPLE_RATE)?;
            let transcript = model.transcribe(&pcm.samples, en)?;
            let took = t.elapsed().as_secs_f64() * 1000.0;
            if took < best_ours {
                best_ours = took;
                ours_stages = model.last_times();
            }
            hypothesis = transcript.text;
            clip_ms = pcm.duration_ms();
            // The raw model on the same samples, already in memory.
            let t = Instant::now();
            let tokens = model.raw_greedy(&pcm.samples)?;
            let took = t.elapsed().as_secs_f64() * 1000.0;
            if took < best_raw {
                best_raw = took;
                raw_stages = model.last_times();
            }
            raw_text = model.text_of(&tokens);
        }
        let (e, n) = word_errors(&reference, &normalize_en(&hypothesis));
        let (re, _) = word_errors(&reference, &normalize_en(&raw_text));
        errors += e;
        raw_errors += re;
        words += n;
        ours_ms += best_ours;
        raw_ms += best_raw;
        audio_ms += clip_ms;
        let short = id.rsplit('-').next().unwrap_or(id);
        stages.push((short.to_owned(), clip_ms, ours_stages, raw_stages));
        let pct = |x: usize| 100.0 * x as f64 / n.max(1) as f64;
        println!(
            "{short:<6} {clip_ms:>8} {best_ours:>8.0} {best_raw:>8.0} {:>5.1}% {:>6.1}%  {hypothesis}",
            pct(e),
            pct(re)
        );
    }
    if words == 0 {
        return Err(VoiceError::Inference(format!("no clips listed in {}", refs_path.display())));
    }
    println!("\nwhere the time goes (fastest run of each): ours | raw model");
    println!(
        "{:<6} {:>8} {:>15} {:>17} {:>22} {:>20}",
        "clip", "audio ms", "mel ms", "encoder ms", "decoder ms (passes)", "decoder ms/pass"
    );
    for (clip, ms, o, r) in &stages {
        let per = |s: &StageTimes| s.decoder_ms / s.tokens.max(1) as f64;
        println!(
            "{clip:<6} {ms:>8} {:>6.0} | {:>6.0} {:>7.0} | {:>7.0} {:>6.0} ({:>3}) | {:>5.0} ({:>3}) {:>8.1} | {:>7.1}",
            o.mel_ms,
            r.mel_ms,
            o.encoder_ms,
            r.encoder_ms,
            o.decoder_ms,
            o.tokens,
            r.decoder_ms,
            r.tokens,
            per(o),
            per(r)
        );
    }
    println!("threads: candle {}", candle_threads());
    let audio = audio_ms as f64;
    println!(
        "WER ours {:.1}% ({errors}/{words} words), raw model {:.1}% ({raw_errors}/{words}); goal <= 8%",
        100.0 * errors as f64 / words as f64,
        100.0 * raw_errors as f64 / words as f64
    );
    println!(
        "RTF ours {:.3} ({ours_ms:.0} ms), raw model {:.3} ({raw_ms:.0} ms) for {audio_ms} ms of audio; speed ours/raw = {:.2}x (goal >= 0.8x)",
        ours_ms / audio,
        raw_ms / audio,
        raw_ms / ours_ms
    );
    compare_precisions(&model_dir, &refs, &clips, runs)?;
    Ok(())
}

/// Per model and precision (f32, and q8_0 when its GGUF is there), in this
/// run: WER and time of the one-shot transcript, then the time left at the
/// end of speech when the utterance was recognised as it grew (a draft
/// every 500 ms), and whether that final text is the one-shot text. The
/// arms take turns clip by clip and run by run, so a change in the
/// machine's load falls on all alike.
fn compare_precisions(
    model_dir: &std::path::Path,
    refs: &str,
    clips: &std::path::Path,
    runs: usize,
) -> Result<(), VoiceError> {
    let en = LanguageChoice::Fixed(Language::En);
    let mut dirs = vec![model_dir.to_path_buf()];
    if let Ok(more) = std::env::var("STT_BENCH_MODELS") {
        dirs.extend(more.split(',').filter(|d| !d.is_empty()).map(PathBuf::from));
    }
    let keep = std::env::var("STT_BENCH_PRECISIONS").ok();
    // (model, weights, mel frames of padding encoded after a short window's audio; None: the product's).
    let mut arms: Vec<(PathBuf, Precision, Option<usize>)> = Vec::new();
    for dir in &dirs {
        let mut precisions: Vec<(Precision, Option<usize>)> = vec![(Precision::F32, None)];
        if dir.join(QUANTIZED_FILE).is_file() {
            precisions.extend([(Precision::Q8, None), (Precision::Q8Encoder, None)]);
            // Shorter encoder margins on the product's weights: faster, is WER held?
            precisions.extend(MARGINS.iter().map(|&m| (Precision::Q8, Some(m))));
        } else {
            println!("\nno {QUANTIZED_FILE} in {} (examples/whisper_quantize makes it): f32 only", dir.display());
        }
        let kept = |&(p, m): &(Precision, Option<usize>)| {
            keep.as_deref().is_none_or(|k| k.split(',').any(|name| name == arm_name(p, m)))
        };
        arms.extend(precisions.into_iter().filter(kept).map(|(p, m)| (dir.clone(), p, m)));
    }
    println!("\n== precision and recognition while speaking (same clips, same run; {runs} runs, fastest kept) ==");
    let mut models = arms
        .iter()
        .map(|(dir, p, margin)| {
            let mut w = Whisper::load_with(dir, *p)?;
            if let Some(m) = margin {
                w.set_context_margin(*m);
            }
            Ok(w)
        })
        .collect::<Result<Vec<_>, VoiceError>>()?;
    let margins: Vec<usize> = models.iter().map(Whisper::context_margin).collect();
    let per_clip = std::env::var_os("STT_BENCH_CLIPS").is_some();
    // Per arm: errors, words, one-shot ms, end-of-speech ms, same text, clips.
    let mut totals = vec![(0usize, 0usize, 0f64, 0f64, 0usize, 0usize); models.len()];
    // Per arm: the one-shot's encoder and decoder ms (of its fastest runs).
    let mut split = vec![(0f64, 0f64); models.len()];
    // Per arm and clip: one-shot ms, end-of-speech ms, and their CPU ms (all runs).
    let mut times: Vec<Vec<(f64, f64, f64, f64)>> = vec![Vec::new(); models.len()];
    for line in refs.lines() {
        let (Some(a), Some(b)) = (line.rfind('('), line.rfind(')')) else { continue };
        if a > b {
            continue;
        }
        let id = &line[a + 1..b];
        let reference = normalize_en(&line[..a].replace("<s>", "").replace("</s>", ""));
        let pcm = voice::wav::read_mono(&clips.join(format!("{id}.wav")), voice::SAMPLE_RATE)?;
        let mut best = vec![(f64::MAX, f64::MAX, String::new(), String::new()); models.len()];
        let mut cpu = vec![(0f64, 0f64); models.len()];
        let mut stages = vec![StageTimes::default(); models.len()];
        for _ in 0..runs {
            for (((model, best), stage), cpu) in
                models.iter_mut().zip(best.iter_mut()).zip(stages.iter_mut()).zip(cpu.iter_mut())
            {
                let (t, c) = (Instant::now(), cpu_ms());
                best.2 = model.transcribe(&pcm.samples, en)?.text;
                let took = t.elapsed().as_secs_f64() * 1000.0;
                cpu.0 += cpu_ms() - c;
                if took < best.0 {
                    best.0 = took;
                    *stage = model.last_times();
                }
                let mut draft = voice::Draft::default();
                let mut end = 8_000;
                while end < pcm.samples.len() {
                    model.transcribe_partial(&pcm.samples[..end], en, &mut draft)?;
                    end += 8_000;
                }
                let (t, c) = (Instant::now(), cpu_ms());
                best.3 = model.transcribe_drafted(&pcm.samples, en, &mut draft)?.text;
                best.1 = best.1.min(t.elapsed().as_secs_f64() * 1000.0);
                cpu.1 += cpu_ms() - c;
            }
        }
        for (sum, stage) in split.iter_mut().zip(&stages) {
            sum.0 += stage.encoder_ms;
            sum.1 += stage.decoder_ms;
        }
        for (k, (total, (one_ms, end_ms, one_text, end_text))) in totals.iter_mut().zip(best).enumerate() {
            let (e, n) = word_errors(&reference, &normalize_en(&one_text));
            total.0 += e;
            total.1 += n;
            total.2 += one_ms;
            total.3 += end_ms;
            total.4 += usize::from(one_text == end_text);
            total.5 += 1;
            let (one_cpu, end_cpu) = (cpu[k].0 / runs as f64, cpu[k].1 / runs as f64);
            times[k].push((one_ms, end_ms, one_cpu, end_cpu));
            if per_clip {
                let (dir, p, _) = &arms[k];
                let st = &stages[k];
                println!(
                    "{id:<10} {:<22} {:<10} WER {:>5.1}% one-shot {one_ms:>6.0} ms (cpu {one_cpu:>6.0}; encoder {:>5.0}, decoder {:>5.0} in {:>3} passes) end of speech {end_ms:>6.0} ms (cpu {end_cpu:>6.0})  {one_text}",
                    model_name(dir),
                    arm_name(*p, Some(margins[k])),
                    100.0 * e as f64 / n.max(1) as f64,
                    st.encoder_ms,
                    st.decoder_ms,
                    st.tokens
                );
            }
        }
    }
    for (k, ((((dir, precision, _), (errors, words, one_ms, end_ms, same, clips_n)), (enc, dec)), margin)) in
        arms.iter().zip(totals).zip(split).zip(margins).enumerate()
    {
        let col = |f: fn(&(f64, f64, f64, f64)) -> f64| median(times[k].iter().map(f).collect());
        println!(
            "{} {precision:?}, encoder margin {margin} frames: WER {:.1}% ({errors}/{words}); one-shot {one_ms:.0} ms for the {clips_n} clips (encoder {enc:.0}, decoder {dec:.0}); at the end of speech with drafts {end_ms:.0} ms ({:.2}x sooner); drafted text = one-shot text for {same}/{clips_n}; per clip median one-shot {:.0} ms (cpu {:.0}), end of speech {:.0} ms (cpu {:.0})",
            model_name(dir),
            100.0 * errors as f64 / words.max(1) as f64,
            one_ms / end_ms.max(1.0),
            col(|t| t.0),
            col(|t| t.2),
            col(|t| t.1),
            col(|t| t.3),
        );
    }
    println!("load average at the end: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
    Ok(())
}

/// The arm's name as `STT_BENCH_PRECISIONS` spells it (a margin equal to
/// the product's is no margin of its own).
fn arm_name(p: Precision, margin: Option<usize>) -> String {
    match (p, margin) {
        (Precision::F32, _) => "f32".into(),
        (Precision::Q8Encoder, _) => "q8-encoder".into(),
        (Precision::Q8, Some(m)) if MARGINS.contains(&m) => format!("q8-m{m}"),
        (Precision::Q8, _) => "q8".into(),
    }
}

fn model_name(dir: &std::path::Path) -> String {
    dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The process's CPU time (user + system, all threads) in ms, from
/// /proc/self/stat (clock ticks of 10 ms); 0 where it cannot be read.
fn cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command's closing parenthesis; utime and stime
    // are the 14th and 15th of the line, the 12th and 13th after it.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let ticks: f64 = rest.split_whitespace().skip(11).take(2).filter_map(|t| t.parse::<f64>().ok()).sum();
    ticks * 10.0
}

/// Encoder margins (mel frames after a short window's audio) compared
/// with the product's on the quantized weights.
const MARGINS: [usize; 2] = [100, 50];

/// The thread count candle's CPU kernels use.
fn candle_threads() -> usize {
    voice::whisper::compute_threads()
}
