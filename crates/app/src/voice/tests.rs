use std::collections::VecDeque;

use voice::audio::WavLoopback;
use voice::stt::ScriptedStt;
use voice::tts::ToneSynth;
use voice::wav::Pcm;
use voice::{EspeakNg, Transcript};

use super::*;

/// What the person says, spoken by espeak-ng (installed by scripts/setup.sh).
fn said(text: &str) -> Vec<f32> {
    let pcm = EspeakNg::default()
        .synthesize(&SynthesisRequest { text, language: Language::En, rate: 1.0 })
        .expect("espeak-ng (scripts/setup.sh installs it)");
    pcm.resampled(voice::SAMPLE_RATE).samples
}

fn silence(ms: usize) -> Vec<f32> {
    vec![0.0; ms * 16]
}

fn mic(parts: &[Vec<f32>]) -> WavLoopback {
    WavLoopback::new(Pcm { samples: parts.concat(), rate: voice::SAMPLE_RATE }, None)
}

fn stt(texts: &[&str]) -> ScriptedStt {
    ScriptedStt {
        replies: texts
            .iter()
            .map(|t| Transcript { text: (*t).into(), language: "en".into(), segments: vec![] })
            .collect::<VecDeque<_>>(),
        heard: vec![],
    }
}

struct Persona {
    heard: Vec<String>,
    reply: Result<String, String>,
}

impl Responder for Persona {
    fn reply(&mut self, heard: &str) -> Result<String, VoiceError> {
        self.heard.push(heard.to_owned());
        self.reply.clone().map_err(VoiceError::Reply)
    }
}

fn persona(reply: &str) -> Persona {
    Persona { heard: vec![], reply: Ok(reply.into()) }
}

const REPLY: &str = "It is a quarter past noon. The trains run late today. Take an umbrella.";
const TONE: ToneSynth = ToneSynth { rate_hz: 16_000 };

fn states(events: &[VoiceEvent]) -> Vec<VoiceState> {
    events
        .iter()
        .filter_map(|e| match e {
            VoiceEvent::State { state, .. } => Some(*state),
            _ => None,
        })
        .collect()
}

#[test]
fn a_turn_listens_thinks_speaks_the_whole_reply_and_tells_each_step() {
    let mut io = mic(&[silence(300), said("what time is it"), silence(9_000)]);
    let mut stt = stt(&["what time is it"]);
    let mut persona = persona(REPLY);
    let mut events = Vec::new();
    let config = TurnConfig { persona_id: Some("p1".into()), ..Default::default() };
    let outcome =
        run_turn(&mut io, &mut stt, &mut persona, &TONE, &config, &TurnControl::new(), &mut |e| events.push(e))
            .expect("turn");
    assert_eq!(
        outcome,
        TurnOutcome::Done { heard: "what time is it".into(), reply: REPLY.into(), spoken: REPLY.into(), interrupted: false }
    );
    assert_eq!(persona.heard, vec!["what time is it"]);
    assert_eq!(states(&events), vec![VoiceState::Listening, VoiceState::Thinking, VoiceState::Speaking, VoiceState::Idle]);
    // The utterance went to the recogniser with its half second of preroll, not the whole file.
    assert_eq!(stt.heard.len(), 1);
    assert!(stt.heard[0] > 16_000 / 2 && stt.heard[0] < 5 * 16_000, "{} samples", stt.heard[0]);
    let spoken: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            VoiceEvent::Spoken { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        spoken,
        vec![
            "It is a quarter past noon.",
            "It is a quarter past noon. The trains run late today.",
            REPLY
        ]
    );
    // The meter moved while the person spoke and rests at zero once listening ended.
    let levels: Vec<f32> = events
        .iter()
        .filter_map(|e| match e {
            VoiceEvent::Level { level } => Some(*level),
            _ => None,
        })
        .collect();
    assert!(levels.iter().any(|l| *l > 0.3), "{levels:?}");
    assert!(events.contains(&VoiceEvent::Level { level: 0.0 }));
    assert!(io.played().iter().any(|s| *s != 0.0), "nothing reached the speaker");
}

#[test]
fn stop_while_speaking_silences_the_speaker_at_once_and_keeps_only_what_was_heard() {
    let mut io = mic(&[silence(300), said("tell me about trains"), silence(9_000)]);
    let mut stt = stt(&["tell me about trains"]);
    let mut persona = persona(REPLY);
    let control = TurnControl::new();
    let mut events = Vec::new();
    let stopper = control.clone();
    let outcome = run_turn(&mut io, &mut stt, &mut persona, &TONE, &TurnConfig::default(), &control, &mut |e| {
        if matches!(e, VoiceEvent::Spoken { .. }) {
            stopper.stop();
        }
        events.push(e);
    })
    .expect("turn");
    let TurnOutcome::Done { spoken, interrupted, .. } = outcome else { panic!("{outcome:?}") };
    assert!(interrupted);
    assert_eq!(spoken, "It is a quarter past noon.");
    assert_eq!(io.queued(), 0, "queued speech must be dropped");
    assert!(events.iter().any(|e| matches!(e, VoiceEvent::TurnEnded { interrupted: true, .. })));
    assert_eq!(states(&events).last(), Some(&VoiceState::Idle));
}

#[test]
fn the_persons_voice_cuts_the_reply_unless_barge_in_is_off() {
    // The person speaks again 1.5 s into the reply.
    let input = [silence(300), said("what is the weather"), silence(2_300), said("no wait stop"), silence(9_000)];
    let with = {
        let mut io = mic(&input);
        run_turn(&mut io, &mut stt(&["what is the weather"]), &mut persona(REPLY), &TONE, &TurnConfig::default(), &TurnControl::new(), &mut |_| {})
            .expect("turn")
    };
    let TurnOutcome::Done { spoken, interrupted, .. } = with else { panic!("{with:?}") };
    assert!(interrupted, "barge-in should have cut the reply");
    assert!(spoken.len() < REPLY.len() && REPLY.starts_with(&spoken), "{spoken}");
    // Barge-in off ("no interruptions"): the same words do not cut it...
    let config = TurnConfig { barge_in: false, ..Default::default() };
    let without = {
        let mut io = mic(&input);
        let mut stt = stt(&["what is the weather", "no wait, I meant tomorrow"]);
        let outcome = run_turn(&mut io, &mut stt, &mut persona(REPLY), &TONE, &config, &TurnControl::new(), &mut |_| {})
            .expect("turn");
        assert_eq!(stt.heard.len(), 2, "the words during the reply were listened to for the stop word");
        outcome
    };
    assert!(matches!(without, TurnOutcome::Done { interrupted: false, .. }), "{without:?}");
    // ...but the stop word does, and the speaker falls silent at once.
    // (A longer reply: the word is known only once the person has finished saying it.)
    let long = [REPLY; 4].join(" ");
    let mut io = mic(&input);
    let mut stt = stt(&["what is the weather", "Stop!"]);
    let stopped = run_turn(&mut io, &mut stt, &mut persona(&long), &TONE, &config, &TurnControl::new(), &mut |_| {})
        .expect("turn");
    let TurnOutcome::Done { spoken, interrupted, .. } = stopped else { panic!("{stopped:?}") };
    assert!(interrupted && spoken.len() < long.len(), "{spoken}");
    assert_eq!(io.queued(), 0);
}

#[test]
fn silence_gives_nothing_heard_without_asking_the_recogniser() {
    let mut io = mic(&[silence(10_000)]);
    let mut stt = stt(&[]);
    let mut persona = persona(REPLY);
    let mut events = Vec::new();
    let config = TurnConfig { max_wait_ms: 3_000, ..Default::default() };
    let outcome = run_turn(&mut io, &mut stt, &mut persona, &TONE, &config, &TurnControl::new(), &mut |e| events.push(e))
        .expect("turn");
    assert_eq!(outcome, TurnOutcome::NothingHeard);
    assert!(stt.heard.is_empty() && persona.heard.is_empty());
    assert_eq!(states(&events), vec![VoiceState::Listening, VoiceState::Idle]);
}

#[test]
fn releasing_the_shortcut_sends_what_was_said_so_far() {
    let mut io = mic(&[silence(300), said("remind me to call my sister tomorrow morning"), silence(9_000)]);
    let mut stt = stt(&["remind me to call"]);
    let mut persona = persona("I will.");
    let control = TurnControl::new();
    let releaser = control.clone();
    let mut levels = 0;
    let outcome = run_turn(&mut io, &mut stt, &mut persona, &TONE, &TurnConfig::default(), &control, &mut |e| {
        if matches!(e, VoiceEvent::Level { .. }) {
            levels += 1;
            if levels == 10 {
                releaser.release(); // one second in, mid-sentence
            }
        }
    })
    .expect("turn");
    assert!(matches!(outcome, TurnOutcome::Done { interrupted: false, .. }), "{outcome:?}");
    assert!(stt.heard[0] <= 16_000 + 320, "took {} samples after the release", stt.heard[0]);
}

#[test]
fn an_engine_failing_mid_turn_is_told_and_the_state_shows_the_error() {
    let mut io = mic(&[silence(300), said("hello there"), silence(3_000)]);
    let mut persona = Persona { heard: vec![], reply: Err("the model crashed".into()) };
    let mut events = Vec::new();
    let e = run_turn(&mut io, &mut stt(&["hello there"]), &mut persona, &TONE, &TurnConfig::default(), &TurnControl::new(), &mut |e| {
        events.push(e)
    })
    .expect_err("the reply failed");
    assert!(e.to_string().contains("the model crashed"));
    assert!(events.iter().any(|e| matches!(e, VoiceEvent::Failed { code, .. } if code == "REPLY_FAILED")));
    assert_eq!(states(&events).last(), Some(&VoiceState::Error));
}

#[test]
fn the_level_is_a_decibel_scale() {
    assert_eq!(level_of(&[0.0; 320]), 0.0);
    assert!((level_of(&[1.0; 320]) - 1.0).abs() < 1e-6);
    assert!((level_of(&[0.001; 320]) - 0.0).abs() < 1e-6); // -60 dBFS
    assert!((level_of(&[0.031_622_8; 320]) - 0.5).abs() < 0.01); // -30 dBFS
}

#[test]
fn the_paced_device_plays_at_the_wall_clock_after_a_pause() {
    // The turn thinks (no frame read or played) for a while, then speaks:
    // the reply must take its real time, not catch up on the pause.
    let mut io = Paced::new(mic(&[silence(100)]));
    io.play(&vec![0.0; FRAME * 15]);
    std::thread::sleep(std::time::Duration::from_millis(400));
    let started = std::time::Instant::now();
    while io.queued() > 0 {
        io.drain();
    }
    let took = started.elapsed();
    assert!(took >= std::time::Duration::from_millis(200), "15 frames of 20 ms played in {took:?}");
}

#[test]
fn the_paced_microphone_keeps_what_it_captured_while_the_turn_recognised() {
    // The turn listens, is away recognising for 400 ms, then reads on: the
    // frames of those 400 ms come at once, as a sound card's buffer gives them.
    let mut io = Paced::new(mic(&[silence(2_000)]));
    io.next_frame().expect("frame");
    std::thread::sleep(std::time::Duration::from_millis(400));
    let started = std::time::Instant::now();
    for _ in 0..15 {
        io.next_frame().expect("frame");
    }
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_millis(150), "15 frames captured meanwhile came in {took:?}");
    // Once the input is flushed (the reply is about to play), it is paced again.
    io.flush_input();
    let started = std::time::Instant::now();
    for _ in 0..10 {
        io.next_frame().expect("frame");
    }
    assert!(started.elapsed() >= std::time::Duration::from_millis(150), "{:?}", started.elapsed());
}

/// A persona that streams its reply in pieces and logs when it does.
struct Streaming {
    deltas: Vec<&'static str>,
    saved: &'static str,
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Responder for Streaming {
    fn reply(&mut self, _heard: &str) -> Result<String, VoiceError> {
        Ok(self.saved.into())
    }
    fn reply_streaming(&mut self, _heard: &str, on_text: &mut dyn FnMut(&str)) -> Result<String, VoiceError> {
        for d in &self.deltas {
            self.log.lock().unwrap().push(format!("delta {d}"));
            on_text(d);
        }
        self.log.lock().unwrap().push("saved".into());
        Ok(self.saved.into())
    }
}

fn streamed_turn(deltas: Vec<&'static str>, saved: &'static str) -> (TurnOutcome, Vec<String>) {
    let mut io = mic(&[silence(300), said("what time is it"), silence(9_000)]);
    let mut stt = stt(&["what time is it"]);
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut persona = Streaming { deltas, saved, log: log.clone() };
    let config = TurnConfig::default();
    let events = log.clone();
    let outcome = run_turn(&mut io, &mut stt, &mut persona, &TONE, &config, &TurnControl::new(), &mut |e| {
        if let VoiceEvent::State { state, .. } = e {
            events.lock().unwrap().push(format!("{state:?}"));
        }
    })
    .expect("turn");
    let log = log.lock().unwrap().clone();
    (outcome, log)
}

#[test]
fn the_first_sentence_plays_while_the_reply_still_streams() {
    let (outcome, log) = streamed_turn(vec!["It is a quarter ", "past noon. The", " trains run late today. Take an umbrella."], REPLY);
    // Speaking began once the first sentence was complete, before the rest came.
    let speaking = log.iter().position(|l| l == "Speaking").expect("spoke");
    assert_eq!(log[speaking - 1], "delta past noon. The", "{log:?}");
    assert_eq!(log.iter().filter(|l| *l == "Speaking").count(), 1, "{log:?}");
    assert_eq!(
        outcome,
        TurnOutcome::Done { heard: "what time is it".into(), reply: REPLY.into(), spoken: REPLY.into(), interrupted: false }
    );
}

#[test]
fn a_saved_reply_that_differs_from_its_stream_is_spoken_as_saved() {
    let saved = "It is noon. Take an umbrella.";
    let (outcome, log) = streamed_turn(vec!["It is a quarter past noon. The", " trains run late."], saved);
    assert!(log.iter().position(|l| l == "Speaking") < log.iter().position(|l| l == "saved"), "{log:?}");
    assert_eq!(
        outcome,
        TurnOutcome::Done { heard: "what time is it".into(), reply: saved.into(), spoken: saved.into(), interrupted: false }
    );
}

/// The cache's models folder when it holds Silero and the ONNX Runtime
/// library (scripts/setup.sh puts them there).
fn silero_models() -> Option<std::path::PathBuf> {
    let cache = std::env::var_os("LEDGERMIND_CACHE")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache/ledgermind")))?;
    let models = cache.join("models");
    (voice::onnx::runtime_path(&models).is_file() && voice::silero::model_path(&models).is_file()).then_some(models)
}

/// espeak-ng's words without the silence it puts around them, so the
/// pauses in a test are the ones it asks for.
fn said_trimmed(text: &str) -> Vec<f32> {
    let s = said(text);
    let loud = |x: &f32| x.abs() > 0.01;
    let (a, b) = (s.iter().position(loud).unwrap_or(0), s.iter().rposition(loud).map_or(0, |i| i + 1));
    s[a..b.max(a)].to_vec()
}

/// A recogniser that reads `short` in audio up to `cut` samples long and
/// `long` in anything longer, however often it is asked (each take in a
/// pause, each draft); it counts the drafts.
struct ByLength {
    cut: usize,
    short: &'static str,
    long: &'static str,
    drafts: usize,
    takes: Vec<usize>,
}

impl SpeechToText for ByLength {
    fn transcribe(&mut self, pcm: &[f32], _language: LanguageChoice) -> Result<Transcript, VoiceError> {
        self.takes.push(pcm.len());
        let text = if pcm.len() <= self.cut { self.short } else { self.long };
        Ok(Transcript { text: text.into(), language: "en".into(), segments: vec![] })
    }
    fn transcribe_partial(
        &mut self,
        pcm: &[f32],
        language: LanguageChoice,
        _draft: &mut voice::Draft,
    ) -> Result<Transcript, VoiceError> {
        self.drafts += 1;
        let t = self.transcribe(pcm, language);
        self.takes.pop();
        t
    }
}

/// A persona that answers "Paris." and keeps what it was told while the person spoke.
struct Hearing {
    heard: Vec<String>,
    so_far: Vec<String>,
}

impl Responder for Hearing {
    fn reply(&mut self, heard: &str) -> Result<String, VoiceError> {
        self.heard.push(heard.to_owned());
        Ok("Paris.".into())
    }
    fn hearing(&mut self, so_far: &str) {
        self.so_far.push(so_far.to_owned());
    }
}

/// Where the first sound of the reply is on the input's timeline (ms).
fn first_sound_ms(io: &WavLoopback) -> u64 {
    io.played().iter().position(|s| *s != 0.0).expect("the reply was played") as u64 / 16
}

#[test]
fn a_finished_question_ends_the_turn_sooner_than_the_hold_as_in_a_conversation() {
    let Some(models) = silero_models() else {
        panic!("needs Silero and the ONNX Runtime in the cache's models (scripts/setup.sh)");
    };
    let question = said_trimmed("What is the capital of France?");
    let ends_ms = 500 + question.len() as u64 / 16;
    let input = [silence(500), question, silence(6_000)];
    let heard = |config: &TurnConfig| {
        let mut io = mic(&input);
        let mut stt = ByLength { cut: usize::MAX, short: "What is the capital of France?", long: "", drafts: 0, takes: vec![] };
        let mut persona = Hearing { heard: vec![], so_far: vec![] };
        let outcome =
            run_turn(&mut io, &mut stt, &mut persona, &TONE, config, &TurnControl::new(), &mut |_| {}).expect("turn");
        assert!(matches!(outcome, TurnOutcome::Done { interrupted: false, .. }), "{outcome:?}");
        assert_eq!(persona.heard, vec!["What is the capital of France?"]);
        (first_sound_ms(&io) - ends_ms, stt, persona.so_far)
    };
    let config = TurnConfig { silero_models: Some(models), ..TurnConfig::default() };
    let (after, stt, so_far) = heard(&config);
    // Silero sure of the silence (100 ms) and the quick end (300 ms) after
    // the last voiced frame, with a frame or two of the gate's own lag.
    assert!(after >= 200 && after < 600, "the reply began {after} ms after the question ended");
    // The question was read while it was spoken, and taken whole in its silence.
    assert!(stt.drafts >= 1, "no draft while the person spoke");
    assert!(!stt.takes.is_empty());
    // The persona was told the words while they were read, once each.
    assert_eq!(so_far, vec!["What is the capital of France?"]);

    // Baseline: the gate's hold alone (as the tray's Talk did) waits 800 ms.
    let (after, _, so_far) = heard(&TurnConfig { endpoint: None, ..config.clone() });
    assert!(so_far.is_empty(), "nothing is read before the end without the adaptive end");
    assert!(after >= 700, "without the adaptive end the reply began {after} ms after the question");
    // Without Silero the end is not trusted early: the hold again.
    let (after, _, _) = heard(&TurnConfig { silero_models: None, ..config });
    assert!(after >= 700, "without Silero the reply began {after} ms after the question");
}

#[test]
fn words_that_trail_off_are_waited_for_past_the_hold_in_the_tray_turn() {
    let Some(models) = silero_models() else {
        panic!("needs Silero and the ONNX Runtime in the cache's models (scripts/setup.sh)");
    };
    let first = said_trimmed("I was thinking that");
    // The utterance begins with the half second before the gate opened
    // (200 ms into the words), so beside the words it holds about 400 ms
    // at a take 100 ms into the pause, 1 100 ms at the hold's end, and
    // the second half from 1 300 ms on.
    let cut = first.len() + 1_200 * 16;
    // A second's pause: longer than the gate's 800 ms hold.
    let input = [silence(500), first, silence(1_000), said_trimmed("we could go to Lisbon."), silence(6_000)];
    let run = |config: &TurnConfig| {
        let mut io = mic(&input);
        let mut stt = ByLength {
            cut,
            short: "I was thinking that",
            long: "I was thinking that we could go to Lisbon.",
            drafts: 0,
            takes: vec![],
        };
        let mut persona = persona("Lisbon is lovely.");
        run_turn(&mut io, &mut stt, &mut persona, &TONE, config, &TurnControl::new(), &mut |_| {}).expect("turn");
        persona.heard
    };
    let config = TurnConfig { silero_models: Some(models), ..TurnConfig::default() };
    assert_eq!(run(&config), vec!["I was thinking that we could go to Lisbon."]);
    // Baseline: the hold alone cuts the person off in the pause.
    assert_eq!(run(&TurnConfig { endpoint: None, ..config }), vec!["I was thinking that"]);
}
