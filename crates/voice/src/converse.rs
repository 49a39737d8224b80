//! A spoken conversation over the audio traits: the voice gate cuts the
//! microphone into utterances, each is transcribed, answered by a
//! [`Responder`] (the persona pipeline, above this crate) and spoken
//! sentence by sentence through the output stage. Runs on the loopback's
//! simulated clock: time spent computing is charged to the timeline by
//! reading that much more microphone audio, so the reported times are
//! what a person at the microphone would live through.
//!
//! Barge-in: in full duplex, user speech held while the persona speaks
//! (the gate's 200 ms start, after the echo canceller) stops playback at
//! once and ends the turn; only the sentences heard (wholly or in part)
//! count as spoken. The first moments of each reply are protected while the
//! canceller converges. Without a canceller on open speakers the persona
//! hears itself, so the choice there is half duplex: the microphone is not
//! listened to while the persona speaks.

use std::time::Instant;

use serde::Serialize;

use crate::aec::EchoCanceller;
use crate::audio::{AudioInput, AudioOutput, WavLoopback};
use crate::bus::{Lane, Priority, Signal, SignalBus, SignalKind, Source};
use crate::error::VoiceError;
use crate::motor::Motor;
use crate::stt::{Language, LanguageChoice, SpeechToText};
use crate::tts::{SpeechSynthesizer, SynthesisRequest};
use crate::vad::{GateConfig, GateEvent, SpeechGate, FRAME};

/// What answers the person: the persona pipeline in the app.
pub trait Responder {
    fn reply(&mut self, heard: &str) -> Result<String, VoiceError>;
}

#[derive(Debug, Clone)]
pub struct ConverseConfig {
    pub gate: GateConfig,
    pub full_duplex: bool,
    /// Cancel the speaker's echo on the microphone (AEC3).
    pub echo_cancel: bool,
    /// Speech in the first moments of each reply does not interrupt it:
    /// the echo canceller is still converging on the new audio.
    pub protect_ms: u64,
    pub listen: LanguageChoice,
    pub speak: Language,
    pub rate: f32,
}

impl Default for ConverseConfig {
    fn default() -> Self {
        Self {
            gate: GateConfig::default(),
            full_duplex: true,
            echo_cancel: false,
            protect_ms: 0,
            listen: LanguageChoice::Fixed(Language::En),
            speak: Language::En,
            rate: 1.0,
        }
    }
}

/// One turn, as `voice converse --json` prints it (times on the input's timeline).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnReport {
    pub turn: u64,
    pub heard: String,
    pub reply: String,
    pub spoken: String,
    pub interrupted: bool,
    pub end_of_speech_ms: u64,
    pub first_audio_ms: u64,
    pub barge_in_ms: Option<u64>,
    pub playback_stopped_ms: Option<u64>,
    /// Wall time of recognition, reply and first sentence (not printed).
    #[serde(skip)]
    pub compute_ms: u64,
}

/// Splits a reply into sentences to speak one by one.
pub fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        cur.push(c);
        // A stop ends a sentence only before a space or the end ("3.5" stays whole).
        let at_break = chars.peek().is_none_or(|n| n.is_whitespace());
        if matches!(c, '.' | '!' | '?' | '\n') && at_break && cur.trim().chars().count() > 1 {
            out.push(cur.trim().to_owned());
            cur.clear();
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_owned());
    }
    out
}

struct Playing {
    report: TurnReport,
    started_ms: u64,
    /// Each sentence with its length in samples, in playing order.
    sentences: Vec<(String, usize)>,
    queued_total: usize,
}

impl Playing {
    /// The sentences the listener heard at least part of.
    fn spoken(&self, remaining: usize) -> String {
        let played = self.queued_total.saturating_sub(remaining);
        let mut acc = 0;
        let mut heard = Vec::new();
        for (s, len) in &self.sentences {
            if acc >= played {
                break;
            }
            heard.push(s.as_str());
            acc += len;
        }
        heard.join(" ")
    }
}

/// Runs the conversation until the input ends and playback has finished.
pub fn converse(
    mic: &mut WavLoopback,
    stt: &mut dyn SpeechToText,
    responder: &mut dyn Responder,
    tts: &dyn SpeechSynthesizer,
    config: &ConverseConfig,
) -> Result<Vec<TurnReport>, VoiceError> {
    let rate = crate::SAMPLE_RATE;
    let mut gate = SpeechGate::new(config.gate);
    let mut bus = SignalBus::new();
    let mut motor = Motor::new();
    let mut reports = Vec::new();
    let mut preroll: std::collections::VecDeque<f32> = std::collections::VecDeque::new();
    let preroll_len = (rate / 2) as usize;
    let mut utterance: Option<Vec<f32>> = None;
    let mut playing: Option<Playing> = None;
    let mut frames_to_charge = 0usize;
    let mut aec = config.echo_cancel.then(|| EchoCanceller::new(rate));
    // The next microphone frame, echo-cancelled against what was played meanwhile.
    let mut listen = |mic: &mut WavLoopback| -> Result<Option<Vec<f32>>, VoiceError> {
        let Some(mut f) = mic.next_frame(FRAME)? else { return Ok(None) };
        if let Some(aec) = aec.as_mut() {
            let played = mic.played();
            aec.process(&mut f, &played[played.len() - FRAME..])?;
        }
        Ok(Some(f))
    };
    loop {
        let frame = match listen(mic)? {
            Some(f) => f,
            None => break,
        };
        let now = mic.clock().now_ms();
        let deaf = playing.is_some() && !config.full_duplex;
        let mut event = if deaf { None } else { gate.push(&frame) };
        if let (Some(GateEvent::SpeechStarted { .. }), Some(p)) = (event, playing.as_ref()) {
            if now < p.started_ms + config.protect_ms {
                // Not taken up, and not left "speaking" either: if it goes
                // on past the protected start it is detected again.
                event = None;
                gate.restart();
            }
        }
        preroll.extend(frame.iter().copied());
        while preroll.len() > preroll_len {
            preroll.pop_front();
        }
        if let Some(u) = utterance.as_mut() {
            u.extend_from_slice(&frame);
        }
        match event {
            Some(GateEvent::SpeechStarted { at_ms }) => {
                bus.publish(Signal {
                    source: Source::Vad,
                    kind: SignalKind::SpeechStarted,
                    at_ms,
                    turn: motor.turn(),
                    priority: Priority::High,
                    lane: Lane::Context,
                });
                utterance = Some(preroll.iter().copied().collect());
                if let Some(mut p) = playing.take() {
                    // Barge-in: the person holds the floor; stop at once.
                    bus.publish(Signal {
                        source: Source::Vad,
                        kind: SignalKind::BargeIn,
                        at_ms: now,
                        turn: motor.turn(),
                        priority: Priority::Critical,
                        lane: Lane::Intervention,
                    });
                    let remaining = mic.output.stop();
                    p.report.interrupted = true;
                    p.report.barge_in_ms = Some(now);
                    p.report.playback_stopped_ms = Some(now);
                    p.report.spoken = p.spoken(remaining);
                    motor.interrupted().map_err(|e| VoiceError::Inference(e.to_string()))?;
                    bus.cancel_through(motor.turn());
                    reports.push(p.report);
                }
            }
            Some(GateEvent::SpeechEnded { at_ms }) => {
                // Speech that began inside a reply's protected start was not taken up.
                let Some(audio) = utterance.take() else { continue };
                let started = Instant::now();
                let transcript = stt.transcribe(&audio, config.listen)?;
                let heard = transcript.text.trim().to_owned();
                if heard.is_empty() {
                    continue;
                }
                let turn = motor.user_spoke().map_err(|e| VoiceError::Inference(e.to_string()))?;
                let reply = responder.reply(&heard)?;
                // Answer in the language the person spoke.
                let speak = if transcript.language == "pt" { Language::Pt } else { config.speak };
                let parts = sentences(&reply);
                let mut sentences_pcm = Vec::new();
                for s in &parts {
                    let pcm = tts.synthesize(&SynthesisRequest { text: s, language: speak, rate: config.rate })?;
                    sentences_pcm.push((s.clone(), pcm.resampled(rate).samples));
                    if sentences_pcm.len() == 1 {
                        // The first sentence is ready: this is when speech can start.
                        frames_to_charge =
                            (started.elapsed().as_millis() as usize * rate as usize / 1000).div_ceil(FRAME);
                    }
                }
                let compute_ms = started.elapsed().as_millis() as u64;
                // The microphone kept recording while we computed.
                for _ in 0..frames_to_charge {
                    let Some(f) = listen(mic)? else { break };
                    if let Some(GateEvent::SpeechStarted { .. }) = gate.push(&f) {
                        utterance = Some(f.clone());
                    }
                    preroll.extend(f.iter().copied());
                    while preroll.len() > preroll_len {
                        preroll.pop_front();
                    }
                }
                let first_audio_ms = mic.clock().now_ms();
                if sentences_pcm.is_empty() {
                    continue;
                }
                motor.start_speaking().map_err(|e| VoiceError::Inference(e.to_string()))?;
                let mut total = 0;
                let mut lens = Vec::new();
                for (s, pcm) in &sentences_pcm {
                    if motor.may_speak() {
                        mic.output.enqueue(pcm);
                        total += pcm.len();
                        lens.push((s.clone(), pcm.len()));
                    }
                }
                playing = Some(Playing {
                    started_ms: first_audio_ms,
                    report: TurnReport {
                        turn,
                        heard,
                        reply,
                        spoken: String::new(),
                        interrupted: false,
                        end_of_speech_ms: at_ms,
                        first_audio_ms,
                        barge_in_ms: None,
                        playback_stopped_ms: None,
                        compute_ms,
                    },
                    sentences: lens,
                    queued_total: total,
                });
            }
            None => {}
        }
        if playing.is_some() && mic.output.queued() == 0 {
            if let Some(mut p) = playing.take() {
                p.report.spoken = p.spoken(0);
                motor.finished_speaking().map_err(|e| VoiceError::Inference(e.to_string()))?;
                reports.push(p.report);
            }
        }
    }
    // The input ended: let the speaker finish what it was saying.
    while mic.output.queued() > 0 {
        mic.drain(FRAME);
    }
    if let Some(mut p) = playing.take() {
        p.report.spoken = p.spoken(0);
        reports.push(p.report);
    }
    Ok(reports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_cut_into_sentences() {
        assert_eq!(sentences("Hi there. How are you? Fine!"), vec!["Hi there.", "How are you?", "Fine!"]);
        assert_eq!(sentences("No stop at the end"), vec!["No stop at the end"]);
        assert_eq!(sentences("Pi is 3.14. Yes."), vec!["Pi is 3.14.", "Yes."]);
    }
}
