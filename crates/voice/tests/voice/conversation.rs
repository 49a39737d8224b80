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
    let config = ConverseConfig { full_duplex: false, ..ConverseConfig::default() };
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
