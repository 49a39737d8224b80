use std::collections::VecDeque;

use voice::audio::{Echo, WavLoopback};
use voice::converse::{converse, ConverseConfig, Responder};
use voice::stt::ScriptedStt;
use voice::tts::ToneSynth;
use voice::wav::{read_mono, Pcm};
use voice::{Transcript, VoiceError};

use voice::tts::EspeakNg;

use crate::{espeak_available, librivox_clips};

struct Echoing(Vec<String>);

impl Responder for Echoing {
    fn reply(&mut self, heard: &str) -> Result<String, VoiceError> {
        self.0.push(heard.to_owned());
        Ok("First sentence of a long answer. Second sentence goes on for a while. Third sentence ends it.".into())
    }
}

fn scripted(texts: &[&str]) -> ScriptedStt {
    ScriptedStt {
        replies: texts
            .iter()
            .map(|t| Transcript { text: (*t).into(), language: "en".into(), segments: vec![] })
            .collect::<VecDeque<_>>(),
        heard: vec![],
    }
}

fn silence(ms: usize) -> Vec<f32> {
    vec![0.0; ms * 16]
}

#[test]
fn speech_during_the_reply_stops_it_at_once_and_only_what_was_heard_counts_as_spoken() {
    let Some(clips) = librivox_clips() else {
        eprintln!("skipped: needs pocketsphinx-testdata (scripts/setup.sh)");
        return;
    };
    let a = read_mono(&clips[1].0, 16_000).expect("clip").samples; // 3.0 s
    let b = read_mono(&clips[4].0, 16_000).expect("clip").samples; // 3.3 s
    let mut input = silence(500);
    input.extend(&a);
    input.extend(silence(2_500));
    let b_start_ms = (input.len() / 16) as u64;
    input.extend(&b);
    input.extend(silence(12_000));
    let mut mic = WavLoopback::new(Pcm { samples: input, rate: 16_000 }, None);
    let mut stt = scripted(&["first question", "second question"]);
    let mut persona = Echoing(vec![]);
    let tts = ToneSynth { rate_hz: 16_000 };
    let turns = converse(&mut mic, &mut stt, &mut persona, &tts, &ConverseConfig::default()).expect("converse");
    assert_eq!(persona.0, vec!["first question", "second question"]);
    assert_eq!(turns.len(), 2, "{turns:#?}");
    let first = &turns[0];
    assert!(first.interrupted, "{first:#?}");
    let barge = first.barge_in_ms.expect("barge-in time");
    assert!(barge >= b_start_ms && barge <= b_start_ms + 600, "barge-in at {barge}, user from {b_start_ms}");
    assert_eq!(first.playback_stopped_ms, Some(barge));
    assert!(first.spoken.len() < first.reply.len() && first.reply.starts_with(&first.spoken), "{first:#?}");
    assert!(first.first_audio_ms >= first.end_of_speech_ms);
    let second = &turns[1];
    assert!(!second.interrupted);
    assert_eq!(second.spoken, second.reply);
    // The speaker's recording is on the input's timeline: silent after the stop until the next reply.
    let played = mic.played();
    let stop = (barge * 16) as usize;
    let next = (second.first_audio_ms * 16) as usize;
    assert!(played[stop + 320..next].iter().all(|s| *s == 0.0), "playback went on after the stop");
    assert!(played[next..next + 1600].iter().any(|s| *s != 0.0));
}

#[test]
fn in_half_duplex_the_persona_never_interrupts_itself_through_the_speaker() {
    let Some(clips) = librivox_clips() else {
        eprintln!("skipped: needs pocketsphinx-testdata (scripts/setup.sh)");
        return;
    };
    // Ten questions, each answered at length, the answer fed back at -6 dB.
    let mut input = Vec::new();
    for i in 0..10 {
        input.extend(silence(300));
        input.extend(read_mono(&clips[i % 5].0, 16_000).expect("clip").samples);
        input.extend(silence(9_000));
    }
    let mut mic = WavLoopback::new(Pcm { samples: input, rate: 16_000 }, Some(Echo::new(-6.0, 60, 16_000)));
    let texts: Vec<String> = (0..10).map(|i| format!("question {i}")).collect();
    let mut stt = scripted(&texts.iter().map(String::as_str).collect::<Vec<_>>());
    let mut persona = Echoing(vec![]);
    let tts = ToneSynth { rate_hz: 16_000 };
    // The stop word is tested on its own; here the scripted recogniser must
    // only hear the questions.
    let config = ConverseConfig { full_duplex: false, stop_word: false, ..ConverseConfig::default() };
    let turns = converse(&mut mic, &mut stt, &mut persona, &tts, &config).expect("converse");
    assert_eq!(turns.len(), 10, "{turns:#?}");
    assert!(turns.iter().all(|t| !t.interrupted && t.barge_in_ms.is_none() && t.spoken == t.reply), "{turns:#?}");
}

/// Ten spoken replies (espeak-ng) fed back at -6 dB, 60 ms late; full
/// duplex with the echo canceller: how many replies interrupt themselves,
/// and how fast a real interruption is still caught.
fn echo_scene(echo_cancel: bool, barge: bool) -> Option<(Vec<voice::converse::TurnReport>, Vec<u64>)> {
    let clips = librivox_clips()?;
    if !espeak_available() {
        return None;
    }
    let mut input = Vec::new();
    let mut user_starts = Vec::new();
    for i in 0..10 {
        input.extend(silence(300));
        input.extend(read_mono(&clips[i % 5].0, 16_000).expect("clip").samples);
        input.extend(silence(if barge { 3_000 } else { 9_000 }));
        if barge {
            user_starts.push((input.len() / 16) as u64);
            input.extend(read_mono(&clips[(i + 1) % 5].0, 16_000).expect("clip").samples);
            input.extend(silence(6_000));
        }
    }
    let mut mic = WavLoopback::new(Pcm { samples: input, rate: 16_000 }, Some(Echo::new(-6.0, 60, 16_000)));
    let texts: Vec<String> = (0..1000).map(|i| format!("question {i}")).collect();
    let mut stt = scripted(&texts.iter().map(String::as_str).collect::<Vec<_>>());
    let mut persona = Echoing(vec![]);
    let config = ConverseConfig { full_duplex: true, echo_cancel, protect_ms: 500, ..ConverseConfig::default() };
    let turns = converse(&mut mic, &mut stt, &mut persona, &EspeakNg::default(), &config).expect("converse");
    Some((turns, user_starts))
}

#[test]
fn with_echo_cancellation_ten_spoken_replies_do_not_interrupt_themselves() {
    let Some((turns, _)) = echo_scene(true, false) else {
        eprintln!("skipped: needs pocketsphinx-testdata and espeak-ng (scripts/setup.sh)");
        return;
    };
    let false_barges = turns.iter().filter(|t| t.interrupted).count();
    eprintln!("with AEC: {} turns, {false_barges} interrupted", turns.len());
    assert_eq!(turns.len(), 10, "{turns:#?}");
    assert_eq!(false_barges, 0, "{turns:#?}");
}

#[test]
fn without_echo_cancellation_the_same_replies_interrupt_themselves() {
    let Some((turns, _)) = echo_scene(false, false) else {
        eprintln!("skipped: needs pocketsphinx-testdata and espeak-ng (scripts/setup.sh)");
        return;
    };
    let false_barges = turns.iter().filter(|t| t.interrupted).count();
    eprintln!("without AEC: {} turns, {false_barges} interrupted", turns.len());
    assert!(false_barges > 0, "the scene must be hard enough to need the canceller: {turns:#?}");
}

#[test]
fn with_echo_cancellation_a_person_still_interrupts_a_reply() {
    let Some((turns, user_starts)) = echo_scene(true, true) else {
        eprintln!("skipped: needs pocketsphinx-testdata and espeak-ng (scripts/setup.sh)");
        return;
    };
    let mut latencies = Vec::new();
    for start in &user_starts {
        if let Some(t) = turns.iter().find(|t| t.barge_in_ms.is_some_and(|b| b >= *start && b < start + 3_000)) {
            latencies.push(t.barge_in_ms.unwrap_or_default() - start);
        }
    }
    eprintln!("barge-ins caught {}/{}: latencies {latencies:?} ms", latencies.len(), user_starts.len());
    assert!(latencies.len() >= 8, "caught {}/{}: {turns:#?}", latencies.len(), user_starts.len());
}

struct Counting(Vec<String>, &'static str);

impl Responder for Counting {
    fn reply(&mut self, heard: &str) -> Result<String, VoiceError> {
        self.0.push(heard.to_owned());
        Ok(self.1.into())
    }
}

/// Where the speaker is silent again after `from_ms` (the end of a reply), in ms.
fn playback_end_ms(played: &[f32], from_ms: u64) -> u64 {
    // The first 100 ms of silence after `from` ends the reply.
    let from = (from_ms * 16) as usize;
    let mut zeros = 0;
    for (i, s) in played.iter().enumerate().skip(from) {
        zeros = if *s == 0.0 { zeros + 1 } else { 0 };
        if zeros == 1_600 {
            return ((i + 1 - zeros) / 16) as u64;
        }
    }
    (played.len() / 16) as u64
}

#[test]
fn spoken_rate_commands_are_handled_here_and_slow_the_next_reply() {
    let Some(clips) = librivox_clips() else {
        eprintln!("skipped: needs pocketsphinx-testdata (scripts/setup.sh)");
        return;
    };
    let clip = |i: usize| read_mono(&clips[i].0, 16_000).expect("clip").samples;
    let mut input = silence(300);
    for i in 0..3 {
        input.extend(clip(i));
        input.extend(silence(8_000));
    }
    let mut mic = WavLoopback::new(Pcm { samples: input, rate: 16_000 }, None);
    let mut stt = scripted(&["What time is it?", "Mais devagar, por favor.", "And the date?"]);
    let answer = "It is nine in the morning, on a quiet day.";
    let mut persona = Counting(vec![], answer);
    let tts = ToneSynth { rate_hz: 16_000 };
    let turns = converse(&mut mic, &mut stt, &mut persona, &tts, &ConverseConfig::default()).expect("converse");
    // The command never reached the persona; it was acknowledged.
    assert_eq!(persona.0, vec!["What time is it?", "And the date?"]);
    assert_eq!(turns.len(), 3, "{turns:#?}");
    // Acknowledged in the language the recogniser reported (the script says English).
    assert_eq!(turns[1].reply, "Okay, slower.");
    // The same answer, spoken at 0.8: 1.25 times as long (60 ms a character
    // at rate 1, over the pieces it is spoken in, without the spaces
    // between them: "It is nine", "in the morning,", "on a quiet day.").
    let before = playback_end_ms(mic.played(), turns[0].first_audio_ms) - turns[0].first_audio_ms;
    let after = playback_end_ms(mic.played(), turns[2].first_audio_ms) - turns[2].first_audio_ms;
    let pieces = voice::converse::speaking_pieces(answer);
    assert_eq!(pieces.len(), 3, "{pieces:?}");
    let expected = pieces.iter().map(|p| p.chars().count()).sum::<usize>() as f64 * 60.0;
    assert!((before as f64 - expected).abs() < 40.0, "rate 1: {before} ms, expected {expected}");
    assert!((after as f64 - expected / 0.8).abs() < 40.0, "rate 0.8: {after} ms, expected {}", expected / 0.8);
}

#[test]
fn be_brief_keeps_later_replies_to_their_first_sentence() {
    let Some(clips) = librivox_clips() else {
        eprintln!("skipped: needs pocketsphinx-testdata (scripts/setup.sh)");
        return;
    };
    let clip = |i: usize| read_mono(&clips[i].0, 16_000).expect("clip").samples;
    let mut input = silence(300);
    for i in 0..2 {
        input.extend(clip(i));
        input.extend(silence(9_000));
    }
    let mut mic = WavLoopback::new(Pcm { samples: input, rate: 16_000 }, None);
    let mut stt = scripted(&["Be brief.", "Tell me about Lisbon."]);
    let mut persona = Counting(vec![], "Lisbon is by the sea. It has seven hills. Trams climb them.");
    let turns = converse(&mut mic, &mut stt, &mut persona, &ToneSynth { rate_hz: 16_000 }, &ConverseConfig::default())
        .expect("converse");
    assert_eq!(persona.0, vec!["Tell me about Lisbon."]);
    assert_eq!(turns.len(), 2, "{turns:#?}");
    assert_eq!(turns[1].spoken, "Lisbon is by the sea.");
}

#[test]
fn in_half_duplex_the_stop_word_still_stops_the_reply_and_other_speech_does_not() {
    let Some(clips) = librivox_clips() else {
        eprintln!("skipped: needs pocketsphinx-testdata (scripts/setup.sh)");
        return;
    };
    let clip = |i: usize| read_mono(&clips[i].0, 16_000).expect("clip").samples;
    // A long reply (about 16 s); two utterances during it: a remark, then "stop".
    let long = "This is a long answer. ".repeat(12);
    let mut input = silence(300);
    input.extend(clip(0));
    input.extend(silence(1_500));
    input.extend(clip(1));
    input.extend(silence(1_500));
    let stop_start_ms = (input.len() / 16) as u64;
    input.extend(clip(2));
    input.extend(silence(12_000));
    let mut mic = WavLoopback::new(Pcm { samples: input, rate: 16_000 }, None);
    let mut stt = scripted(&["Tell me everything.", "hmm interesting", "Stop!"]);
    let mut persona = Counting(vec![], Box::leak(long.into_boxed_str()));
    let config = ConverseConfig { full_duplex: false, ..ConverseConfig::default() };
    let turns = converse(&mut mic, &mut stt, &mut persona, &ToneSynth { rate_hz: 16_000 }, &config).expect("converse");
    assert_eq!(persona.0, vec!["Tell me everything."], "nothing said during the reply went to the persona");
    assert_eq!(turns.len(), 1, "{turns:#?}");
    let t = &turns[0];
    assert!(t.interrupted, "{t:#?}");
    let stopped = t.playback_stopped_ms.expect("stopped");
    assert!(stopped > stop_start_ms, "stopped at {stopped}, stop word from {stop_start_ms}");
    assert!(t.spoken.len() < t.reply.trim().len(), "{t:#?}");
    let at = (stopped * 16) as usize;
    assert!(mic.played()[at + 320..].iter().all(|s| *s == 0.0), "playback went on after the stop word");
}

/// Fails its first `fail` calls, then answers.
struct Flaky {
    calls: u32,
    fail: u32,
    safe: bool,
}

impl Responder for Flaky {
    fn reply(&mut self, _heard: &str) -> Result<String, VoiceError> {
        self.calls += 1;
        if self.calls <= self.fail {
            return Err(VoiceError::Inference("the model is not answering".into()));
        }
        Ok("Here I am.".into())
    }
    fn enter_safe_mode(&mut self) -> Result<(), VoiceError> {
        self.safe = true;
        Ok(())
    }
}

#[test]
fn a_failing_reply_is_retried_then_apologised_for_and_repeated_failures_enter_safe_mode() {
    let Some(clips) = librivox_clips() else {
        eprintln!("skipped: needs pocketsphinx-testdata (scripts/setup.sh)");
        return;
    };
    let clip = |i: usize| read_mono(&clips[i].0, 16_000).expect("clip").samples;
    let mut input = silence(300);
    for i in 0..3 {
        input.extend(clip(i));
        input.extend(silence(8_000));
    }
    let tts = ToneSynth { rate_hz: 16_000 };
    // One failure: retried within the turn, answered.
    let mut mic = WavLoopback::new(Pcm { samples: input.clone(), rate: 16_000 }, None);
    let mut persona = Flaky { calls: 0, fail: 1, safe: false };
    let turns = converse(&mut mic, &mut scripted(&["a", "b", "c"]), &mut persona, &tts, &ConverseConfig::default())
        .expect("converse");
    assert_eq!(turns.iter().map(|t| t.reply.as_str()).collect::<Vec<_>>(), vec!["Here I am."; 3]);
    assert_eq!(persona.calls, 4);
    // Every try of two turns fails: an apology, then safe mode said aloud; the loop goes on.
    let mut mic = WavLoopback::new(Pcm { samples: input, rate: 16_000 }, None);
    let mut persona = Flaky { calls: 0, fail: 2 * voice::converse::TRIES, safe: false };
    let turns = converse(&mut mic, &mut scripted(&["a", "b", "c"]), &mut persona, &tts, &ConverseConfig::default())
        .expect("the loop keeps running");
    assert_eq!(turns.len(), 3, "{turns:#?}");
    assert!(turns[0].reply.starts_with("Sorry, I could not answer"), "{turns:#?}");
    assert!(turns[1].reply.contains("safe mode"), "{turns:#?}");
    assert!(persona.safe);
    assert_eq!(turns[2].reply, "Here I am.");
}

#[test]
fn push_to_talk_stops_the_reply_at_once_and_the_press_is_the_utterance_even_in_half_duplex() {
    let Some(clips) = librivox_clips() else {
        eprintln!("skipped: needs pocketsphinx-testdata (scripts/setup.sh)");
        return;
    };
    let clip = |i: usize| read_mono(&clips[i].0, 16_000).expect("clip").samples;
    let mut input = silence(300);
    input.extend(clip(0));
    input.extend(silence(3_000));
    let down = (input.len() / 16) as u64;
    input.extend(clip(1));
    let up = (input.len() / 16) as u64 + 200;
    input.extend(silence(15_000));
    let mut mic = WavLoopback::new(Pcm { samples: input, rate: 16_000 }, None);
    let mut persona = Counting(vec![], Box::leak("A long answer goes on and on. ".repeat(10).into_boxed_str()));
    // Half duplex and no stop word: only the button can interrupt.
    let config = ConverseConfig {
        full_duplex: false,
        stop_word: false,
        push_to_talk: vec![(down, up)],
        ..ConverseConfig::default()
    };
    let mut stt = scripted(&["first", "pressed"]);
    let turns = converse(&mut mic, &mut stt, &mut persona, &ToneSynth { rate_hz: 16_000 }, &config).expect("converse");
    assert_eq!(persona.0, vec!["first", "pressed"]);
    assert_eq!(turns.len(), 2, "{turns:#?}");
    assert!(turns[0].interrupted, "{turns:#?}");
    let stopped = turns[0].playback_stopped_ms.expect("stopped");
    assert!(stopped >= down && stopped <= down + 20, "stopped at {stopped}, pressed at {down}");
    assert!(turns[1].end_of_speech_ms >= up && turns[1].end_of_speech_ms <= up + 20, "{turns:#?}");
    // The whole press went to the recogniser: the clip and the 200 ms after it.
    assert!(stt.heard[1] as u64 >= (up - down - 20) * 16, "{:?}", stt.heard);
}

#[test]
fn with_ducking_a_short_sound_lowers_the_voice_which_resumes_and_held_speech_stops_it() {
    let Some(clips) = librivox_clips() else {
        eprintln!("skipped: needs pocketsphinx-testdata (scripts/setup.sh)");
        return;
    };
    let clip = |i: usize| read_mono(&clips[i].0, 16_000).expect("clip").samples;
    let long = Box::leak("A long answer goes on and on. ".repeat(12).into_boxed_str());
    let ducking = voice::converse::Ducking::default();
    let config = ConverseConfig { ducking: Some(ducking), ..ConverseConfig::default() };
    let tts = ToneSynth { rate_hz: 16_000 };
    // A 250 ms piece of speech during the reply: ducked, then full voice again, never stopped.
    let voice_part: Vec<f32> = clip(1)[16_000..16_000 + 4_000].to_vec();
    let mut input = silence(300);
    input.extend(clip(0));
    input.extend(silence(3_000));
    let burst = (input.len() / 16) as u64;
    input.extend(&voice_part);
    input.extend(silence(25_000));
    let mut mic = WavLoopback::new(Pcm { samples: input, rate: 16_000 }, None);
    let mut persona = Counting(vec![], long);
    let mut stt = scripted(&["first"]);
    let turns = converse(&mut mic, &mut stt, &mut persona, &tts, &config).expect("converse");
    assert_eq!(turns.len(), 1, "{turns:#?} {:?} burst {burst}", stt.heard);
    assert!(!turns[0].interrupted, "a short sound must not stop the reply: {turns:#?}");
    let peak = |from_ms: u64, to_ms: u64| {
        mic.played()[(from_ms * 16) as usize..(to_ms * 16) as usize].iter().fold(0.0f32, |m, s| m.max(s.abs()))
    };
    let full = peak(burst - 1_000, burst - 500);
    let ducked = peak(burst + 400, burst + 900);
    let resumed = peak(burst + 3_000, burst + 3_500);
    eprintln!("peaks: before {full}, ducked {ducked}, after {resumed}");
    assert!(ducked < full * 0.5 && ducked > 0.0, "ducked {ducked} vs {full}");
    assert!((resumed - full).abs() < 0.01, "resumed {resumed} vs {full}");
    // Held speech: stopped, the decision within 600 ms of the person's start.
    let mut input = silence(300);
    input.extend(clip(0));
    input.extend(silence(3_000));
    let user = (input.len() / 16) as u64;
    input.extend(clip(2));
    input.extend(silence(8_000));
    let mut mic = WavLoopback::new(Pcm { samples: input, rate: 16_000 }, None);
    let mut persona = Counting(vec![], long);
    let turns = converse(&mut mic, &mut scripted(&["first", "second"]), &mut persona, &tts, &config).expect("converse");
    assert!(turns[0].interrupted, "{turns:#?}");
    let barge = turns[0].barge_in_ms.expect("barge-in");
    eprintln!("barge-in decision {} ms after the clip starts", barge - user);
    assert!(barge > user && barge <= user + 600, "decided at {barge}, clip from {user}");
    assert_eq!(persona.0, vec!["first", "second"]);
}

#[test]
fn with_barge_in_off_speech_does_not_interrupt_but_the_stop_word_and_push_to_talk_do() {
    let Some(clips) = librivox_clips() else {
        eprintln!("skipped: needs pocketsphinx-testdata (scripts/setup.sh)");
        return;
    };
    let clip = |i: usize| read_mono(&clips[i].0, 16_000).expect("clip").samples;
    let long: &'static str = Box::leak("This is a long answer. ".repeat(12).into_boxed_str());
    // Full duplex, barge-in off ("headphones / no interruptions").
    let config = ConverseConfig { barge_in: false, ..ConverseConfig::default() };
    let tts = ToneSynth { rate_hz: 16_000 };
    // A remark during the reply, then "stop".
    let mut input = silence(300);
    input.extend(clip(0));
    input.extend(silence(1_500));
    let remark_ms = (input.len() / 16) as u64;
    input.extend(clip(1));
    input.extend(silence(1_500));
    let stop_start_ms = (input.len() / 16) as u64;
    input.extend(clip(2));
    input.extend(silence(12_000));
    let mut mic = WavLoopback::new(Pcm { samples: input.clone(), rate: 16_000 }, None);
    let mut persona = Counting(vec![], long);
    let mut stt = scripted(&["Tell me everything.", "hmm interesting", "Stop!"]);
    let turns = converse(&mut mic, &mut stt, &mut persona, &tts, &config).expect("converse");
    assert_eq!(persona.0, vec!["Tell me everything."], "{turns:#?}");
    assert_eq!(turns.len(), 1, "{turns:#?}");
    let stopped = turns[0].playback_stopped_ms.expect("the stop word stopped it");
    assert!(stopped > stop_start_ms, "stopped at {stopped}: the remark at {remark_ms} must not have");
    // Baseline, same input with barge-in on: the remark itself interrupts.
    let mut mic = WavLoopback::new(Pcm { samples: input, rate: 16_000 }, None);
    let mut persona = Counting(vec![], long);
    let mut stt = scripted(&["Tell me everything.", "hmm interesting", "Stop!"]);
    let turns = converse(&mut mic, &mut stt, &mut persona, &tts, &ConverseConfig::default()).expect("converse");
    let cut = turns[0].barge_in_ms.expect("barge-in");
    assert!(cut >= remark_ms && cut < stop_start_ms, "barge-in at {cut}, remark at {remark_ms}");
    // Push-to-talk still cuts the reply with barge-in off.
    let mut input = silence(300);
    input.extend(clip(0));
    input.extend(silence(3_000));
    let down = (input.len() / 16) as u64;
    input.extend(clip(1));
    let up = (input.len() / 16) as u64 + 200;
    input.extend(silence(15_000));
    let mut mic = WavLoopback::new(Pcm { samples: input, rate: 16_000 }, None);
    let mut persona = Counting(vec![], long);
    let config = ConverseConfig { barge_in: false, stop_word: false, push_to_talk: vec![(down, up)], ..config };
    let turns =
        converse(&mut mic, &mut scripted(&["first", "pressed"]), &mut persona, &tts, &config).expect("converse");
    let stopped = turns[0].playback_stopped_ms.expect("stopped by the press");
    assert!(stopped >= down && stopped <= down + 20, "stopped at {stopped}, pressed at {down}");
}

/// Two halves of a question with a pause between, spoken by espeak-ng.
fn question_with_pause(pause_ms: usize) -> Vec<f32> {
    let tts = EspeakNg::default();
    let say = |text: &str| {
        use voice::{Language, SpeechSynthesizer, SynthesisRequest};
        let pcm = tts.synthesize(&SynthesisRequest { text, language: Language::En, rate: 1.0 }).expect("espeak-ng");
        pcm.resampled(16_000).samples
    };
    let mut input = silence(500);
    input.extend(say("What is the capital"));
    input.extend(silence(pause_ms));
    input.extend(say("of France?"));
    input.extend(silence(6_000));
    input
}

#[test]
fn the_early_end_of_turn_waits_out_an_unfinished_sentence_and_ends_a_finished_one_early() {
    let (Some(models), true) = (crate::onnx_models_dir(), espeak_available()) else {
        eprintln!("skipped: needs Silero (scripts/setup.sh) and espeak-ng");
        return;
    };
    let endpoint = voice::converse::Endpoint::default();
    let config = ConverseConfig { silero_models: Some(models), endpoint: Some(endpoint), ..ConverseConfig::default() };
    // The recogniser hears the first half in the pause (not a finished
    // sentence: no early end), then the whole question at its end.
    let mut stt = scripted(&["What is the capital", "What is the capital of France?"]);
    let mut mic = WavLoopback::new(Pcm { samples: question_with_pause(500), rate: 16_000 }, None);
    let mut persona = Echoing(vec![]);
    let tts = ToneSynth { rate_hz: 16_000 };
    let turns = converse(&mut mic, &mut stt, &mut persona, &tts, &config).expect("converse");
    assert_eq!(persona.0, vec!["What is the capital of France?"], "{turns:#?}");
    assert_eq!(turns.len(), 1);
    // Two transcriptions, both speculative (in the pause, then after the
    // question): nothing was recognised again after the end was decided.
    assert_eq!(stt.heard.len(), 2, "{:?}", stt.heard);
    assert!(stt.heard[0] < stt.heard[1]);
    let t = &turns[0];
    let detected_after = t.timings.detected_at_ms - t.end_of_speech_ms;
    assert!(
        detected_after >= endpoint.quick_stop_ms && detected_after < 600,
        "ended {detected_after} ms after the last voiced frame (the hold is 800)"
    );

    // Baseline: the same audio without the early end waits the whole hold.
    let mut stt = scripted(&["What is the capital of France?"]);
    let mut mic = WavLoopback::new(Pcm { samples: question_with_pause(500), rate: 16_000 }, None);
    let config = ConverseConfig { endpoint: None, ..config };
    let turns = converse(&mut mic, &mut stt, &mut Echoing(vec![]), &tts, &config).expect("converse");
    assert_eq!(turns.len(), 1);
    assert!(turns[0].timings.detected_at_ms - turns[0].end_of_speech_ms >= 800);
}

/// A responder that writes its first sentence at once and the rest after a while.
struct SlowStreaming;

impl Responder for SlowStreaming {
    fn reply(&mut self, _heard: &str) -> Result<String, VoiceError> {
        std::thread::sleep(std::time::Duration::from_millis(400));
        Ok("Paris is the capital. It stands on the Seine.".into())
    }
    fn reply_streaming(&mut self, heard: &str, on_text: &mut dyn FnMut(&str)) -> Result<String, VoiceError> {
        on_text("Paris is the capital. It");
        self.reply(heard)
    }
}

#[test]
fn the_first_sentence_is_spoken_from_the_stream_before_the_reply_is_whole() {
    let mut input = silence(300);
    let Some(clips) = librivox_clips() else {
        eprintln!("skipped: needs pocketsphinx-testdata (scripts/setup.sh)");
        return;
    };
    input.extend(read_mono(&clips[1].0, 16_000).expect("clip").samples);
    input.extend(silence(8_000));
    let mut stt = scripted(&["where is paris"]);
    let mut mic = WavLoopback::new(Pcm { samples: input, rate: 16_000 }, None);
    let tts = ToneSynth { rate_hz: 16_000 };
    let turns = converse(&mut mic, &mut stt, &mut SlowStreaming, &tts, &ConverseConfig::default()).expect("converse");
    assert_eq!(turns.len(), 1);
    let t = &turns[0];
    assert_eq!(t.spoken, "Paris is the capital. It stands on the Seine.");
    // The model's time counted to the first sentence, not to the whole reply (400 ms).
    assert!(t.timings.reply_ms < 200, "{:?}", t.timings);
    assert!(t.first_audio_ms - t.timings.detected_at_ms < 300, "{t:#?}");
}

#[test]
fn a_long_first_sentence_is_spoken_from_its_first_clause() {
    assert_eq!(
        voice::converse::speaking_pieces("Well, Paris is the capital of France, and it stands on the Seine. Yes."),
        vec!["Well, Paris is the capital", "of France,", "and it stands on the Seine.", "Yes."]
    );
    // Too short before the break: whole. A word after it is enough.
    assert_eq!(voice::converse::speaking_pieces("Yes, it is. Fine."), vec!["Yes, it is.", "Fine."]);
    assert_eq!(voice::converse::speaking_pieces("Paris is lovely, truly."), vec!["Paris is lovely,", "truly."]);
    // Only the first sentence is split; "3,000" is not a clause break.
    assert_eq!(
        voice::converse::speaking_pieces("It is 3,000 metres high. Later, we can talk about the other one."),
        vec!["It is 3,000 metres high.", "Later, we can talk about the other one."]
    );
}

/// Said by espeak-ng: `first`, a pause, then `second`. espeak-ng ends
/// each phrase with ~300 ms of its own silence; it is trimmed (at -40 dB)
/// so the pause is `pause_ms` and no longer.
fn said_with_pause(first: &str, pause_ms: usize, second: &str) -> Vec<f32> {
    let tts = EspeakNg::default();
    let say = |text: &str| {
        use voice::{Language, SpeechSynthesizer, SynthesisRequest};
        let pcm = tts.synthesize(&SynthesisRequest { text, language: Language::En, rate: 1.0 }).expect("espeak-ng");
        let s = pcm.resampled(16_000).samples;
        let loud = |x: &f32| x.abs() > 0.01;
        let (a, b) = (s.iter().position(loud).unwrap_or(0), s.iter().rposition(loud).map_or(0, |i| i + 1));
        s[a..b.max(a)].to_vec()
    };
    let mut input = silence(500);
    input.extend(say(first));
    input.extend(silence(pause_ms));
    input.extend(say(second));
    input.extend(silence(6_000));
    input
}

#[test]
fn words_that_trail_off_are_waited_for_longer_than_the_hold() {
    let (Some(models), true) = (crate::onnx_models_dir(), espeak_available()) else {
        eprintln!("skipped: needs Silero (scripts/setup.sh) and espeak-ng");
        return;
    };
    // The take after 200 ms of silence: the scripted recogniser answers
    // every take with the next reading, and shorter gaps inside espeak-ng's
    // phrase would take (and use up) one.
    let endpoint = voice::converse::Endpoint { speculate_ms: 200, ..voice::converse::Endpoint::default() };
    let config = ConverseConfig { silero_models: Some(models), endpoint: Some(endpoint), ..ConverseConfig::default() };
    let tts = ToneSynth { rate_hz: 16_000 };
    // A second's pause after "that": longer than the gate's 800 ms hold.
    let audio = said_with_pause("I was thinking that", 1_000, "we could go to Lisbon.");
    let mut stt = scripted(&["I was thinking that", "I was thinking that we could go to Lisbon."]);
    let mut mic = WavLoopback::new(Pcm { samples: audio.clone(), rate: 16_000 }, None);
    let mut persona = Echoing(vec![]);
    let turns = converse(&mut mic, &mut stt, &mut persona, &tts, &config).expect("converse");
    assert_eq!(persona.0, vec!["I was thinking that we could go to Lisbon."], "{turns:#?}");

    // Baseline: the gate's hold alone cuts the person off in the pause.
    let mut stt = scripted(&["I was thinking that", "we could go to Lisbon."]);
    let mut mic = WavLoopback::new(Pcm { samples: audio, rate: 16_000 }, None);
    let mut persona = Echoing(vec![]);
    let config = ConverseConfig { endpoint: None, ..config };
    converse(&mut mic, &mut stt, &mut persona, &tts, &config).expect("converse");
    assert_eq!(persona.0.len(), 2, "{:?}", persona.0);
}

#[test]
fn how_a_transcript_ends_finished_trailing_or_open_in_english_and_portuguese() {
    use voice::converse::{ending, Ending};
    assert_eq!(ending("What is the capital of France?"), Ending::Finished);
    assert_eq!(ending("Qual é a capital da França?"), Ending::Finished);
    assert_eq!(ending("I was thinking that"), Ending::Trailing);
    assert_eq!(ending("I was thinking that..."), Ending::Trailing);
    assert_eq!(ending("Tell me about."), Ending::Trailing, "a stop after a preposition is Whisper's guess");
    assert_eq!(ending("Eu estava pensando que"), Ending::Trailing);
    assert_eq!(ending("Então, eu queria saber se"), Ending::Trailing);
    assert_eq!(ending("So,"), Ending::Trailing);
    assert_eq!(ending("What is the capital"), Ending::Open);
    // A relational noun after "the" at the end waits for its complement;
    // the same noun with an owner, or with its complement, is finished.
    assert_eq!(ending("What is the capital?"), Ending::Open);
    assert_eq!(ending("Qual é a capital?"), Ending::Open);
    assert_eq!(ending("What is the population."), Ending::Open);
    assert_eq!(ending("What is your name?"), Ending::Finished);
    assert_eq!(ending("What is the capital of Peru?"), Ending::Finished);
    assert_eq!(ending("Where is the river?"), Ending::Finished);
    assert_eq!(ending(""), Ending::Open);
    // No closing mark: on a word that may end a sentence it is unmarked;
    // on a bare relational noun it stays open.
    assert_eq!(ending("which is the largest lake in Africa"), Ending::Unmarked);
    assert_eq!(ending("qual é a capital da França"), Ending::Unmarked);
    assert_eq!(ending("what is the capital"), Ending::Open);
    assert_eq!(ending("which is the largest..."), Ending::Trailing);
    // Words that wait for a comparison's "than" or a superlative's scope
    // are open, marked or not; with their scope they are not.
    assert_eq!(ending("which is the largest lake"), Ending::Open);
    assert_eq!(ending("Which is the largest lake?"), Ending::Open);
    assert_eq!(ending("Who is the tallest"), Ending::Open);
    assert_eq!(ending("What is the most famous painting"), Ending::Open);
    assert_eq!(ending("Is Lisbon older"), Ending::Open);
    assert_eq!(ending("is this an older?"), Ending::Open);
    assert_eq!(ending("Is gold more expensive"), Ending::Open);
    assert_eq!(ending("Qual é o maior lago"), Ending::Open);
    assert_eq!(ending("Lisboa é mais antiga"), Ending::Open);
    assert_eq!(ending("Is Lisbon older than Rome?"), Ending::Finished);
    assert_eq!(ending("is Lisbon older than Rome"), Ending::Unmarked);
    assert_eq!(ending("Where is the forest"), Ending::Unmarked, "not every word in -est is a superlative");
    assert_eq!(ending("What did you do at least"), Ending::Unmarked);
    assert_eq!(ending("Qual é o maior lago da África"), Ending::Unmarked);
}

#[test]
fn an_unmarked_question_ends_sooner_than_the_hold_when_silero_is_sure() {
    let (Some(models), true) = (crate::onnx_models_dir(), espeak_available()) else {
        eprintln!("skipped: needs Silero (scripts/setup.sh) and espeak-ng");
        return;
    };
    // The take after 200 ms of silence (as above: no scripted reading used up in the phrase).
    let unmarked = 500;
    let endpoint = voice::converse::Endpoint {
        speculate_ms: 200,
        unmarked_stop_ms: Some(unmarked),
        ..voice::converse::Endpoint::default()
    };
    let config = ConverseConfig { silero_models: Some(models), endpoint: Some(endpoint), ..ConverseConfig::default() };
    let tts = ToneSynth { rate_hz: 16_000 };
    let audio = said_with_pause("Which is the largest lake", 0, "in Africa");
    let detected_after = |config: &ConverseConfig| {
        let mut stt = scripted(&["which is the largest lake in Africa"]);
        let mut mic = WavLoopback::new(Pcm { samples: audio.clone(), rate: 16_000 }, None);
        let turns = converse(&mut mic, &mut stt, &mut Echoing(vec![]), &tts, config).expect("converse");
        assert_eq!(turns.len(), 1, "{turns:#?}");
        turns[0].timings.detected_at_ms - turns[0].end_of_speech_ms
    };
    let ours = detected_after(&config);
    assert!((unmarked..800).contains(&ours), "ended {ours} ms after the last voiced frame (the hold is 800)");
    // Without the rule the unmarked ending waits the whole hold.
    let before = voice::converse::Endpoint { unmarked_stop_ms: None, ..endpoint };
    let held = detected_after(&ConverseConfig { endpoint: Some(before), ..config.clone() });
    assert!(held >= 800, "ended {held} ms after the last voiced frame");
}

#[test]
fn a_pause_after_words_without_their_scope_is_waited_out() {
    let (Some(models), true) = (crate::onnx_models_dir(), espeak_available()) else {
        eprintln!("skipped: needs Silero (scripts/setup.sh) and espeak-ng");
        return;
    };
    // The defaults (an unmarked ending waits 500 ms), with the take after
    // 200 ms of silence as above.
    let endpoint = voice::converse::Endpoint { speculate_ms: 200, ..voice::converse::Endpoint::default() };
    assert_eq!(endpoint.unmarked_stop_ms, Some(500));
    let config = ConverseConfig { silero_models: Some(models), endpoint: Some(endpoint), ..ConverseConfig::default() };
    let tts = ToneSynth { rate_hz: 16_000 };
    let audio = said_with_pause("Which is the largest lake", 700, "in Africa?");
    let heard = |config: &ConverseConfig, readings: &[&str]| {
        let mut stt = scripted(readings);
        let mut mic = WavLoopback::new(Pcm { samples: audio.clone(), rate: 16_000 }, None);
        let mut persona = Echoing(vec![]);
        converse(&mut mic, &mut stt, &mut persona, &tts, config).expect("converse");
        persona.0
    };
    let whole = heard(&config, &["which is the largest lake", "which is the largest lake in Africa"]);
    assert_eq!(whole, vec!["which is the largest lake in Africa"]);
    // Read as an unmarked ending, the pause ends the turn and cuts the person off.
    let unscoped = voice::converse::Endpoint { relations_wait: false, ..endpoint };
    let cut = heard(
        &ConverseConfig { endpoint: Some(unscoped), ..config.clone() },
        &["which is the largest lake", "in Africa?"],
    );
    assert_eq!(cut.len(), 2, "{cut:?}");
}

#[test]
fn a_transcript_reads_finished_when_it_ends_a_sentence() {
    assert!(voice::converse::reads_finished("What is the capital of France?"));
    assert!(voice::converse::reads_finished("Tell me about the river Seine. "));
    assert!(!voice::converse::reads_finished("What is the capital of"));
    assert!(!voice::converse::reads_finished("Which is the largest..."));
    assert!(!voice::converse::reads_finished(""));
}

/// A responder that takes `ms` of wall time to answer (the model, thinking).
struct Slow(u64, Vec<String>);

impl Responder for Slow {
    fn reply(&mut self, heard: &str) -> Result<String, VoiceError> {
        std::thread::sleep(std::time::Duration::from_millis(self.0));
        self.1.push(heard.to_owned());
        Ok("Paris.".into())
    }
}

#[test]
fn speech_taken_up_again_while_the_reply_is_made_stops_the_reply_before_it_is_heard() {
    let (Some(models), true) = (crate::onnx_models_dir(), espeak_available()) else {
        eprintln!("skipped: needs Silero (scripts/setup.sh) and espeak-ng");
        return;
    };
    // The take after 200 ms of silence (as above: no scripted reading used up in the phrase).
    let endpoint = voice::converse::Endpoint { speculate_ms: 200, ..voice::converse::Endpoint::default() };
    let config = ConverseConfig { silero_models: Some(models), endpoint: Some(endpoint), ..ConverseConfig::default() };
    // The first half reads as a finished question, so the turn ends early
    // in the pause; the reply then takes 900 ms, during which the person
    // goes on ("or Rome?" starts 600 ms into the pause).
    let audio = said_with_pause("Do you like Lisbon", 600, "or Rome?");
    let mut stt = scripted(&["Do you like Lisbon?", "or Rome?"]);
    let mut mic = WavLoopback::new(Pcm { samples: audio, rate: 16_000 }, None);
    let mut persona = Slow(900, vec![]);
    let tts = ToneSynth { rate_hz: 16_000 };
    let turns = converse(&mut mic, &mut stt, &mut persona, &tts, &config).expect("converse");
    assert_eq!(persona.1, vec!["Do you like Lisbon?", "or Rome?"], "{turns:#?}");
    assert_eq!(turns.len(), 2, "{turns:#?}");
    let cut = &turns[0];
    assert!(cut.interrupted, "{cut:#?}");
    assert_eq!(cut.spoken, "", "nothing of the first reply was heard: {cut:#?}");
    assert_eq!(cut.playback_stopped_ms, Some(cut.first_audio_ms));
    assert!(!turns[1].interrupted);
    assert_eq!(turns[1].spoken, "Paris.");
}

/// A persona that reads the next prompt ahead when a turn is over (for
/// `read_ahead`, on its own thread, as the app's model does) and cannot
/// answer before that reading is done.
struct ReadingAhead {
    read_ahead: std::time::Duration,
    done: Option<std::thread::JoinHandle<()>>,
}

impl Responder for ReadingAhead {
    fn reply(&mut self, _heard: &str) -> Result<String, VoiceError> {
        if let Some(reading) = self.done.take() {
            reading.join().map_err(|_| VoiceError::Inference("the reading ahead failed".into()))?;
        }
        Ok("Yes.".into())
    }
    fn turn_finished(&mut self, _report: &voice::converse::TurnReport) -> Result<(), VoiceError> {
        let read_ahead = self.read_ahead;
        self.done = Some(std::thread::spawn(move || std::thread::sleep(read_ahead)));
        Ok(())
    }
}

/// A 3-second LibriVox clip said twice, 4 s apart, after 300 ms of silence
/// and with 4 s of room after it to charge the last wait to (the timeline
/// ends with the input). None without the clips.
fn the_clip_twice() -> Option<Vec<f32>> {
    let Some(clips) = librivox_clips() else {
        eprintln!("skipped: needs pocketsphinx-testdata (scripts/setup.sh)");
        return None;
    };
    let clip = read_mono(&clips[1].0, 16_000).expect("clip").samples; // 3.0 s
    let mut input = silence(300);
    input.extend(&clip);
    input.extend(silence(4_000));
    input.extend(&clip);
    input.extend(silence(4_000));
    Some(input)
}

#[test]
fn paced_to_the_wall_clock_the_pause_between_turns_gives_the_reading_ahead_its_time() {
    // After the first reply: a pause of about 3.7 s, the second question
    // (3 s) and the gate's hold, more than the reading's 3.5 s of wall
    // time; the simulated clock runs through them in far less.
    let Some(input) = the_clip_twice() else { return };
    let run = |paced: bool| {
        let mic = WavLoopback::new(Pcm { samples: input.clone(), rate: 16_000 }, None);
        let mut mic = if paced { mic.paced() } else { mic };
        let mut stt = scripted(&["first question", "second question"]);
        let mut persona = ReadingAhead { read_ahead: std::time::Duration::from_millis(3_500), done: None };
        let started = std::time::Instant::now();
        let turns = converse(&mut mic, &mut stt, &mut persona, &ToneSynth { rate_hz: 16_000 }, &ConverseConfig::default())
            .expect("converse");
        assert_eq!(turns.len(), 2, "{turns:#?}");
        let wait = |t: &voice::converse::TurnReport| t.first_audio_ms - t.end_of_speech_ms;
        (wait(&turns[0]), wait(&turns[1]), started.elapsed())
    };
    let (sim_first, sim_second, sim_wall) = run(false);
    let (paced_first, paced_second, paced_wall) = run(true);
    // On the simulated clock the pause passes in less wall time than the
    // reading takes: the second answer waits for the rest of it.
    assert!(sim_second >= sim_first + 1_000, "simulated: {sim_first} then {sim_second} ms ({sim_wall:?})");
    // Paced, the pause is lived through: the reading is done by then.
    assert!(paced_second < paced_first + 300, "paced: {paced_first} then {paced_second} ms");
    let input_ms = (input.len() / 16) as u128;
    assert!(paced_wall.as_millis() + 50 >= input_ms, "paced run took {paced_wall:?} for {input_ms} ms of input");
}

/// Records, in order, when the person was heard to begin and what was
/// answered, to see that a turn's start is announced before its reply.
#[derive(Default)]
struct Announced(Vec<String>);

impl Responder for Announced {
    fn reply(&mut self, heard: &str) -> Result<String, VoiceError> {
        self.0.push(format!("reply to {heard}"));
        Ok("Yes.".into())
    }
    fn speech_started(&mut self) {
        self.0.push("speech".into());
    }
}

/// Other work on the persona's model gives way when the person starts to
/// speak, not only once the turn is over: the loop says so at the start of
/// each utterance, seconds before its reply is asked for.
#[test]
fn the_start_of_each_utterance_is_announced_before_its_reply() {
    let Some(input) = the_clip_twice() else { return };
    let mut mic = WavLoopback::new(Pcm { samples: input, rate: 16_000 }, None);
    let mut stt = scripted(&["first question", "second question"]);
    let mut persona = Announced::default();
    let turns = converse(&mut mic, &mut stt, &mut persona, &ToneSynth { rate_hz: 16_000 }, &ConverseConfig::default())
        .expect("converse");
    assert_eq!(turns.len(), 2, "{turns:#?}");
    assert_eq!(persona.0, ["speech", "reply to first question", "speech", "reply to second question"]);
}
