//! Voice latency benchmark, on the WAV backend's simulated clock with the
//! real engines (Whisper tiny.en, Piper or espeak-ng, Silero + WebRTC gate,
//! AEC3), questions spoken by espeak-ng and their speech bounds measured
//! with sox (silence trimmed at -40 dB), so "end of speech" is the sound's,
//! not the gate's. It prints, beside each goal, the baseline of the same run:
//!
//! 1. Speech start after the end of the person's speech, split into
//!    end-of-speech detection, recognition, the responder (a fixed reply
//!    here: the model's time is not counted), first-sentence synthesis and
//!    what is left (the loop). Goal: <= 700 ms without the model.
//! 2. Barge-in: decision after the person starts speaking (goal <= 600 ms)
//!    and playback stopped after the decision (goal <= 150 ms); false
//!    barge-ins from the persona's own voice at -6 dB over ten replies
//!    (goal 0); each without and with ducking.
//! 3. STT real-time factor and TTS first-sentence time against the raw
//!    model alone on the same input (goal >= 0.8x of raw speed).
//!
//! cargo run -p voice --example latency_bench -- [MODELS_DIR] [RUNS] [f32|q8|default] [turns]
//! MODELS_DIR defaults to $LEDGERMIND_CACHE/models; RUNS (fastest kept) 3;
//! the weights default to those the product loads (q8 when made);
//! "turns" runs the end-of-turn scenes (1 and 1b) only.
//! LATENCY_BENCH_TRY="SPECULATE_MS,STREAM_EVERY_MS" adds one more end-of-turn
//! setting to every scene, beside the baseline, the old setting and ours.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use voice::audio::{Echo, WavLoopback};
use voice::converse::{converse, ConverseConfig, Ducking, Endpoint, Responder, TurnReport};
use voice::wav::Pcm;
use voice::whisper::{Precision, Whisper};
use voice::{EspeakNg, Language, LanguageChoice, SpeechSynthesizer, SpeechToText, SynthesisRequest, VoiceError};

const RATE: u32 = voice::SAMPLE_RATE;

/// Spoken questions; the first three are tuned on, the last two held out.
const QUESTIONS: [&str; 5] = [
    "What is the capital of France?",
    "How tall is Mount Everest?",
    "Tell me about the river Seine.",
    "Which is the largest lake in Africa?",
    "Is Lisbon older than Rome?",
];
/// The same questions in two halves, for the pause in the middle.
const HALVES: [(&str, &str); 5] = [
    ("What is the capital", "of France?"),
    ("How tall is", "Mount Everest?"),
    ("Tell me about", "the river Seine."),
    ("Which is the largest lake", "in Africa?"),
    ("Is Lisbon older", "than Rome?"),
];
/// Pauses in the middle of a question, ms.
const PAUSES: [u64; 3] = [300, 500, 700];
const INTERRUPTION: &str = "Wait, I have another question.";
const SHORT_REPLY: &str = "Paris is the capital of France. It stands on the Seine.";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error [{}]: {e}", e.code());
            ExitCode::from(1)
        }
    }
}

/// Always the same reply, at once: the model's time left out.
struct Fixed(&'static str);

impl Responder for Fixed {
    fn reply(&mut self, _heard: &str) -> Result<String, VoiceError> {
        Ok(self.0.to_owned())
    }
}

/// espeak-ng's voice for `text`, trimmed to its speech with sox (so the
/// clip's ends are where the sound starts and stops), at 16 kHz.
fn spoken(dir: &Path, name: &str, text: &str) -> Result<Vec<f32>, VoiceError> {
    let raw = dir.join(format!("{name}.raw.wav"));
    let trimmed = dir.join(format!("{name}.wav"));
    let run = |cmd: &mut Command, what: &str| -> Result<String, VoiceError> {
        let out = cmd.output().map_err(|e| VoiceError::Device(format!("cannot run {what}: {e}")))?;
        if !out.status.success() {
            return Err(VoiceError::Device(format!("{what} failed: {}", String::from_utf8_lossy(&out.stderr))));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    run(Command::new("espeak-ng").arg("-w").arg(&raw).arg(text), "espeak-ng")?;
    run(
        Command::new("sox")
            .arg(&raw)
            .arg(&trimmed)
            .args(["silence", "1", "0.01", "-40d", "reverse", "silence", "1", "0.01", "-40d", "reverse"]),
        "sox",
    )?;
    let secs: f64 = run(Command::new("soxi").arg("-D").arg(&trimmed), "soxi")?
        .parse()
        .map_err(|e| VoiceError::Device(format!("soxi: {e}")))?;
    let pcm = voice::wav::read_mono(&trimmed, RATE)?;
    // sox's measure and ours must agree (one frame of slack).
    let ours = pcm.samples.len() as f64 / f64::from(RATE);
    if (ours - secs).abs() > 0.02 {
        return Err(VoiceError::Device(format!("{name}: sox says {secs:.3} s, we read {ours:.3} s")));
    }
    Ok(pcm.samples)
}

fn silence(ms: u64) -> Vec<f32> {
    vec![0.0; (ms * u64::from(RATE) / 1000) as usize]
}

fn ms_of(samples: usize) -> u64 {
    samples as u64 * 1000 / u64::from(RATE)
}

/// `input` heard through the WAV loopback with the reply's echo at -6 dB,
/// `reply` the persona's every answer.
fn scene(
    input: Vec<f32>,
    stt: &mut Whisper,
    reply: &'static str,
    tts: &dyn SpeechSynthesizer,
    config: &ConverseConfig,
) -> Result<Vec<TurnReport>, VoiceError> {
    let mut mic = WavLoopback::new(Pcm { samples: input, rate: RATE }, Some(Echo::new(-6.0, 60, RATE)));
    converse(&mut mic, stt, &mut Fixed(reply), tts, config)
}

/// The CLI's configuration (full duplex, AEC, 500 ms protected, Silero,
/// the early end of turn), or with `endpoint` None the one before it (the
/// gate's whole 800 ms hold): the baseline. `phrase` cuts the reply's
/// first piece before a phrase as well as at a clause break.
fn cli_config(models: &Path, ducking: Option<Ducking>, endpoint: Option<Endpoint>, phrase: bool) -> ConverseConfig {
    ConverseConfig {
        full_duplex: true,
        echo_cancel: true,
        protect_ms: 500,
        listen: LanguageChoice::Fixed(Language::En),
        silero_models: Some(models.to_path_buf()),
        ducking,
        endpoint,
        phrase_first_piece: phrase,
        ..ConverseConfig::default()
    }
}

/// The end-of-turn rules compared in every scene: the gate's hold; the
/// rule before (drafts while the person speaks, the take after 60 ms of
/// silence Silero hears as silence, a transcript without a closing mark
/// waiting the gate's hold); ours (the defaults: such a transcript waits
/// 500 ms when Silero is sure, unless its words end without their scope).
/// The third field: the recogniser the rule runs on; the last: the first
/// piece cut before a phrase.
fn rules() -> Vec<(&'static str, Option<Endpoint>, Weights, bool)> {
    let before = Endpoint { unmarked_stop_ms: None, ..Endpoint::default() };
    let mut rules = vec![
        ("hold 800 ms (baseline)", None, Weights::Ours, false),
        ("before (an unmarked ending waits the hold)", Some(before), Weights::Ours, true),
        ("ours (an unmarked ending waits 500 ms when Silero is sure)", Some(Endpoint::default()), Weights::Ours, true),
    ];
    // LATENCY_BENCH_MARGIN=N: ours again with N mel frames of encoder padding.
    if let Some(m) = margin_tried() {
        rules.push((
            Box::leak(format!("adaptive end, encoder margin {m} frames (tried)").into_boxed_str()),
            Some(Endpoint::default()),
            Weights::Margin,
            true,
        ));
    }
    // LATENCY_BENCH_TRY="speculate_ms,stream_every_ms": one more setting to try beside them.
    if let Ok(v) = std::env::var("LATENCY_BENCH_TRY") {
        let n: Vec<u64> = v.split(',').filter_map(|x| x.trim().parse().ok()).collect();
        if let [speculate_ms, every] = n[..] {
            let tried = Endpoint { speculate_ms, stream_every_ms: Some(every), ..Endpoint::default() };
            rules.push((
                Box::leak(format!("take after {speculate_ms} ms, drafts every {every} ms (tried)").into_boxed_str()),
                Some(tried),
                Weights::Ours,
                true,
            ));
        }
    }
    rules
}

/// Which loaded recogniser a rule runs on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Weights {
    /// The product's.
    Ours,
    /// The product's with the encoder margin of LATENCY_BENCH_MARGIN.
    Margin,
}

fn margin_tried() -> Option<usize> {
    std::env::var("LATENCY_BENCH_MARGIN").ok()?.trim().parse().ok()
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// The 90th percentile (nearest rank): of five values, the largest.
fn p90(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    let rank = (v.len() * 9).div_ceil(10);
    v.get(rank.saturating_sub(1)).copied().unwrap_or(0)
}

/// The load average now: others' work on the machine slows the compute
/// measured here, so every figure is printed with it.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn pick<'a>(which: Weights, ours: &'a mut Whisper, margin: &'a mut Option<Whisper>) -> &'a mut Whisper {
    match (which, margin) {
        (Weights::Margin, Some(m)) => m,
        _ => ours,
    }
}

fn run() -> Result<(), VoiceError> {
    let mut args = std::env::args().skip(1);
    let cache = std::env::var_os("LEDGERMIND_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/ledgermind"));
    let models = args.next().map(PathBuf::from).unwrap_or_else(|| cache.join("models"));
    let runs: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(3).max(1);
    let tmp = std::env::temp_dir().join(format!("latency-bench-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(|source| VoiceError::Io { path: tmp.clone(), source })?;
    let questions: Vec<Vec<f32>> =
        QUESTIONS.iter().enumerate().map(|(i, q)| spoken(&tmp, &format!("q{i}"), q)).collect::<Result<_, _>>()?;
    let interruption = spoken(&tmp, "interruption", INTERRUPTION)?;
    let choice = voice::models::whisper_for(&models, LanguageChoice::Fixed(Language::En))?;
    // A third argument picks the weights (f32 or q8); by default what the product loads.
    let mut stt = match args.next().as_deref() {
        Some("f32") => Whisper::load_with(&choice.dir, Precision::F32)?,
        Some("q8") => Whisper::load_with(&choice.dir, Precision::Q8)?,
        _ => Whisper::load(&choice.dir)?,
    };
    let mut margin_stt = match margin_tried() {
        Some(m) => {
            let mut w = Whisper::load(&choice.dir)?;
            w.set_context_margin(m);
            Some(w)
        }
        None => None,
    };
    println!("Whisper weights: {:?}, encoder margin {} frames", stt.precision(), stt.context_margin());
    // A fourth argument "turns": the end-of-turn scenes (1 and 1b) only.
    let only_turns = args.next().as_deref() == Some("turns");
    let piper = voice::piper::Piper::load(&models);
    let tts: Box<dyn SpeechSynthesizer> = match voice::piper::Piper::load(&models) {
        Ok(p) => Box::new(p),
        Err(e) => {
            println!("note: espeak-ng speaks ({e})");
            Box::new(EspeakNg::default())
        }
    };
    println!(
        "models {}; Whisper {}; {runs} runs where timed alone, fastest kept",
        models.display(),
        choice.dir.display()
    );
    println!("load average at the start: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());

    // 1. Speech start after the end of speech, fixed reply.
    println!("\n== 1. speech start after the end of the person's speech (fixed reply: no model time) ==");
    let mut input = Vec::new();
    let mut ends = Vec::new();
    for q in &questions {
        input.extend(silence(1_000));
        input.extend(q);
        ends.push(ms_of(input.len()));
        input.extend(silence(8_000));
    }
    for (rule, endpoint, which, phrase) in rules() {
        let stt = pick(which, &mut stt, &mut margin_stt);
        println!("-- {rule} --");
        let config = cli_config(&models, None, endpoint, phrase);
        let turns = scene(input.clone(), &mut *stt, SHORT_REPLY, tts.as_ref(), &config)?;
        println!(
            "{:<4} {:>8} {:>7} {:>6} {:>6} {:>6} {:>6} {:>6} {:>9} {:>11}  heard",
            "turn", "end ms", "detect", "stt", "wait", "reply", "tts1", "loop", "start-end", "w/o model"
        );
        let mut without_model = Vec::new();
        let mut split = [Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        for t in &turns {
            // The question this turn answered: the last sound end before the gate's end.
            let Some(&end) = ends.iter().filter(|e| **e <= t.end_of_speech_ms + 100).next_back() else { continue };
            let tm = t.timings;
            let detect = tm.detected_at_ms.saturating_sub(end);
            let computed = tm.stt_wait_ms + tm.reply_ms + tm.tts_first_ms;
            let rest = t.first_audio_ms.saturating_sub(tm.detected_at_ms).saturating_sub(computed);
            let total = t.first_audio_ms.saturating_sub(end);
            let no_model = total.saturating_sub(tm.reply_ms);
            without_model.push(no_model);
            for (v, x) in split.iter_mut().zip([detect, tm.stt_ms, tm.stt_wait_ms, tm.reply_ms, tm.tts_first_ms, rest])
            {
                v.push(x);
            }
            println!(
                "{:<4} {end:>8} {detect:>7} {:>6} {:>6} {:>6} {:>6} {rest:>6} {total:>9} {no_model:>11}  {}",
                t.turn, tm.stt_ms, tm.stt_wait_ms, tm.reply_ms, tm.tts_first_ms, t.heard
            );
        }
        println!(
        "{rule}, median: detection {} + waiting for stt {} (stt computed {}) + reply {} + tts first piece {} + loop {} ms; speech starts {} ms (p90 {} ms) after the end of speech without the model (goal <= 700, p90 <= 900); {} of {} questions answered; load {}",
        median(split[0].clone()),
        median(split[2].clone()),
        median(split[1].clone()),
        median(split[3].clone()),
        median(split[4].clone()),
        median(split[5].clone()),
        median(without_model.clone()),
        p90(without_model.clone()),
        turns.len(),
        QUESTIONS.len(),
        load(),
    );
    }
    println!(
        "baseline, same run: the gate's end-of-speech hold alone is {} ms (GateConfig::stop_ms)",
        cli_config(&models, None, None, false).gate.stop_ms,
    );

    // 1b. A pause in the middle of a question: answered too early?
    println!(
        "\n== 1b. a pause in the middle of the question (cut off = the reply starts before the question's end) =="
    );
    let mut halves = Vec::new();
    for (i, (a, b)) in HALVES.iter().enumerate() {
        halves.push((spoken(&tmp, &format!("h{i}a"), a)?, spoken(&tmp, &format!("h{i}b"), b)?));
    }
    let mut input = Vec::new();
    let mut questions_at = Vec::new();
    for pause in PAUSES {
        for ((a, b), (_, words)) in halves.iter().zip(HALVES) {
            input.extend(silence(1_000));
            let start = ms_of(input.len());
            input.extend(a);
            input.extend(silence(pause));
            input.extend(b);
            let last = words.split_whitespace().last().unwrap_or("").trim_matches(|c: char| !c.is_alphanumeric());
            questions_at.push((pause, start, ms_of(input.len()), last.to_lowercase()));
            input.extend(silence(8_000));
        }
    }
    for (rule, endpoint, which, phrase) in rules() {
        let stt = pick(which, &mut stt, &mut margin_stt);
        let config = cli_config(&models, None, endpoint, phrase);
        let turns = scene(input.clone(), &mut *stt, SHORT_REPLY, tts.as_ref(), &config)?;
        let mut line = format!("{rule}:");
        for pause in PAUSES {
            let asked: Vec<_> = questions_at.iter().filter(|q| q.0 == pause).collect();
            // A reply whose first audio falls inside a question (after its start, before its end).
            let cut = asked
                .iter()
                .filter(|(_, start, end, _)| turns.iter().any(|t| t.first_audio_ms > *start && t.first_audio_ms < *end))
                .count();
            // Answered after its end, having heard its last word.
            let whole = asked
                .iter()
                .filter(|(_, _, end, last)| {
                    turns.iter().any(|t| {
                        t.first_audio_ms >= *end
                            && t.first_audio_ms < end + 8_000
                            && t.heard.to_lowercase().contains(last.as_str())
                    })
                })
                .count();
            line.push_str(&format!(
                " pause {pause} ms: cut off {cut}/{}, answered whole {whole}/{};",
                asked.len(),
                asked.len()
            ));
        }
        println!("{line} ({} turns; load {})", turns.len(), load());
        for t in &turns {
            println!("    turn {} end {} first audio {}: {}", t.turn, t.end_of_speech_ms, t.first_audio_ms, t.heard);
        }
    }

    if only_turns {
        let _ = std::fs::remove_dir_all(&tmp);
        return Ok(());
    }

    // 2. Barge-in (no ducking: the CLI's choice), under each end-of-turn rule.
    println!("\n== 2. barge-in (-6 dB echo, AEC on, no ducking) ==");
    let medium = "Paris is the capital of France. It has been for a very long time. The river Seine runs through it.";
    let long: &'static str = Box::leak(format!("{medium} ").repeat(4).into_boxed_str());
    for (name, endpoint, which, phrase) in rules() {
        let stt = pick(which, &mut stt, &mut margin_stt);
        let ducking: Option<Ducking> = None;
        // A question, then the person cuts in 14 s later (recognition on this
        // machine takes seconds: the long reply is playing by then).
        let mut input = Vec::new();
        let mut starts = Vec::new();
        for q in questions.iter().take(3) {
            input.extend(silence(1_000));
            input.extend(q);
            input.extend(silence(14_000));
            starts.push(ms_of(input.len()));
            input.extend(&interruption);
            input.extend(silence(40_000));
        }
        let config = cli_config(&models, ducking, endpoint, phrase);
        let turns = scene(input, &mut *stt, long, tts.as_ref(), &config)?;
        let mut decisions = Vec::new();
        let mut stops = Vec::new();
        let mut early = Vec::new();
        for t in turns.iter().filter(|t| t.interrupted) {
            let (Some(b), Some(s)) = (t.barge_in_ms, t.playback_stopped_ms) else { continue };
            match starts.iter().find(|x| b >= **x && b <= **x + 2_000) {
                Some(start) => {
                    decisions.push(b - start);
                    stops.push(s - b);
                }
                None => early.push(b),
            }
        }
        let playing_when_cut_in = turns.iter().filter(|t| starts.iter().any(|s| t.first_audio_ms < *s)).count();
        println!(
            "{name}: {}/{} interruptions caught ({playing_when_cut_in} replies were playing when the person cut in); decision after the person starts {decisions:?} ms (goal <= 600); playback stopped after the decision {stops:?} ms (goal <= 150); self-interruptions before that at {early:?} ms",
            decisions.len(),
            starts.len(),
        );
        // Ten replies that end before the next question, echo only: none may interrupt itself.
        let mut input = Vec::new();
        for q in questions.iter().cycle().take(10) {
            input.extend(silence(1_000));
            input.extend(q);
            input.extend(silence(25_000));
        }
        let config = cli_config(&models, ducking, endpoint, phrase);
        let turns = scene(input, &mut *stt, medium, tts.as_ref(), &config)?;
        let false_cuts = turns.iter().filter(|t| t.interrupted).count();
        println!(
            "{name}: {false_cuts} false barge-ins over {} replies with no user speech during them (goal 0)",
            turns.len()
        );
    }
    println!("(on the WAV backend the stop takes effect in the frame of the decision; the sound card adds its buffer: see voice::live)");

    // 3. STT and TTS against the raw models, same input.
    println!("\n== 3. our path against the raw models alone ==");
    let en = LanguageChoice::Fixed(Language::En);
    let (mut ours, mut raw, mut audio) = (0f64, 0f64, 0u64);
    for (i, q) in questions.iter().enumerate() {
        let mut clip = silence(300);
        clip.extend(q);
        clip.extend(silence(300));
        let (mut best_ours, mut best_raw) = (f64::MAX, f64::MAX);
        let mut text = String::new();
        for _ in 0..runs {
            let t = Instant::now();
            text = stt.transcribe(&clip, en)?.text;
            best_ours = best_ours.min(t.elapsed().as_secs_f64() * 1000.0);
            let t = Instant::now();
            stt.raw_greedy(&clip)?;
            best_raw = best_raw.min(t.elapsed().as_secs_f64() * 1000.0);
        }
        let held = if i >= 3 { " (held out)" } else { "" };
        println!("q{i}{held}: {} ms audio, ours {best_ours:.0} ms, raw {best_raw:.0} ms: {text}", ms_of(clip.len()));
        ours += best_ours;
        raw += best_raw;
        audio += ms_of(clip.len());
    }
    println!(
        "STT RTF ours {:.3}, raw model {:.3}; speed ours/raw = {:.2}x (goal >= 0.8x)",
        ours / audio as f64,
        raw / audio as f64,
        raw / ours
    );
    let first = voice::converse::sentences(SHORT_REPLY).into_iter().next().unwrap_or_default();
    match piper {
        Ok(piper) => {
            let ids = piper.ids_of(&first)?;
            let (mut best_ours, mut best_raw) = (f64::MAX, f64::MAX);
            for _ in 0..runs {
                let t = Instant::now();
                let pcm = tts.synthesize(&SynthesisRequest { text: &first, language: Language::En, rate: 1.0 })?;
                let _ = pcm.resampled(RATE);
                best_ours = best_ours.min(t.elapsed().as_secs_f64() * 1000.0);
                let t = Instant::now();
                piper.run_ids(ids.clone(), 1.0)?;
                best_raw = best_raw.min(t.elapsed().as_secs_f64() * 1000.0);
            }
            println!(
                "TTS first sentence \"{first}\": ours {best_ours:.0} ms (espeak-ng phonemes + Piper + resampling), raw Piper model {best_raw:.0} ms; speed ours/raw = {:.2}x (goal >= 0.8x)",
                best_raw / best_ours
            );
        }
        Err(e) => println!("TTS: no Piper voice to compare with ({e})"),
    }
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(())
}
