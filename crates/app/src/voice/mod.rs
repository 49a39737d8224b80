//! One spoken turn for the shells (the tray's Talk, the global shortcut):
//! listen until the person stops, transcribe, ask the persona, speak the
//! reply sentence by sentence, and let a Stop or the person's voice cut it
//! short. Every step is told as a typed [`VoiceEvent`], which the desktop
//! turns into the tray icon and the window's voice overlay.
//!
//! Tauri-free: the audio comes through [`Duplex`] (the WAV-file backend of
//! the voice engine on a simulated clock in tests, paced to the wall clock
//! when the app is fed a file), the recogniser, synthesiser and persona
//! behind the voice engine's traits.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use ts_rs::TS;
use voice::audio::{AudioInput, AudioOutput, WavLoopback};
use voice::converse::{speaking_pieces, EndOfTurn, Endpoint, Floor, Responder};
use voice::vad::{GateConfig, GateEvent, SpeechGate, FRAME};
use voice::{Language, LanguageChoice, SpeechSynthesizer, SpeechToText, SynthesisRequest, VoiceError};

mod drafts;
mod persona;
pub use persona::PersonaResponder;

/// What the voice assistant is doing; the tray icon and the overlay show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub enum VoiceState {
    Idle,
    Listening,
    Thinking,
    Speaking,
    Muted,
    Error,
}

/// Everything a voice turn tells the shells, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(tag = "type", rename_all = "snake_case")]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub enum VoiceEvent {
    State { state: VoiceState, persona_id: Option<String> },
    /// The microphone's loudness, 0 (silence, -60 dBFS or less) to 1 (full scale).
    Level { level: f32 },
    /// What the recogniser heard.
    Heard { text: String },
    /// The reply as far as it has been spoken (grows sentence by sentence).
    Spoken { text: String },
    /// The turn is over; `interrupted` when Stop or the person cut the reply.
    TurnEnded { heard: String, reply: String, spoken: String, interrupted: bool },
    /// The turn failed; the app keeps running.
    Failed { code: String, message: String },
}

/// The microphone and the speaker of a turn, on one timeline.
pub trait Duplex {
    /// The next `FRAME` of microphone audio, or `None` once the input ended.
    fn next_frame(&mut self) -> Result<Option<Vec<f32>>, VoiceError>;
    /// Plays `FRAME` of queued speech when there is no more microphone input.
    fn drain(&mut self);
    fn play(&mut self, samples: &[f32]);
    /// Drops queued speech at once; returns how many samples were dropped.
    fn stop_playback(&mut self) -> usize;
    fn queued(&self) -> usize;
    /// Forgets microphone audio captured while nobody listened (while the
    /// persona thought), so the reply is not judged on stale sound.
    fn flush_input(&mut self) {}
}

impl Duplex for WavLoopback {
    fn next_frame(&mut self) -> Result<Option<Vec<f32>>, VoiceError> {
        AudioInput::next_frame(self, FRAME)
    }
    fn drain(&mut self) {
        WavLoopback::drain(self, FRAME);
    }
    fn play(&mut self, samples: &[f32]) {
        self.output.enqueue(samples);
    }
    fn stop_playback(&mut self) -> usize {
        self.output.stop()
    }
    fn queued(&self) -> usize {
        self.output.queued()
    }
}

/// The sound card: the device paces the frames, and plays queued speech
/// on its own.
impl Duplex for voice::live::LiveAudio {
    fn next_frame(&mut self) -> Result<Option<Vec<f32>>, VoiceError> {
        if let Some(reason) = self.output.shared.failure() {
            return Err(VoiceError::Device(format!("the speaker failed: {reason}")));
        }
        AudioInput::next_frame(&mut self.input, FRAME)
    }
    fn drain(&mut self) {
        std::thread::sleep(Duration::from_millis(FRAME_MS));
    }
    fn play(&mut self, samples: &[f32]) {
        self.output.enqueue(samples);
    }
    fn stop_playback(&mut self) -> usize {
        self.output.stop()
    }
    fn queued(&self) -> usize {
        self.output.queued()
    }
    fn flush_input(&mut self) {
        self.input.flush();
    }
}

/// A [`Duplex`] held to the wall clock: each frame takes its 20 ms, as a
/// sound card would, so the overlay can be watched. Used when the app is fed
/// a WAV file instead of a microphone.
pub struct Paced<D> {
    inner: D,
    started: Instant,
    frames: u32,
}

impl<D: Duplex> Paced<D> {
    pub fn new(inner: D) -> Self {
        Self { inner, started: Instant::now(), frames: 0 }
    }
    pub fn into_inner(self) -> D {
        self.inner
    }
    fn wait(&mut self) {
        self.frames += 1;
        let frame = Duration::from_millis(FRAME_MS);
        let due = self.started + frame * self.frames;
        let now = Instant::now();
        match due.checked_duration_since(now) {
            Some(left) => std::thread::sleep(left),
            // Behind by more than a few frames while speech plays: the turn
            // was away (thinking) without reading or playing. A sound card
            // does not play the reply faster to make up for that time; the
            // clock runs on from now. With nothing to play it is behind
            // because the turn recognised speech between frames, and a
            // microphone keeps what it captured meanwhile: those frames come
            // at once (the person did not stop talking while we listened).
            None if now.duration_since(due) > frame * 5 && self.inner.queued() > 0 => {
                self.started = now;
                self.frames = 0;
            }
            None => {}
        }
    }
}

impl<D: Duplex> Duplex for Paced<D> {
    fn next_frame(&mut self) -> Result<Option<Vec<f32>>, VoiceError> {
        self.wait();
        self.inner.next_frame()
    }
    fn drain(&mut self) {
        self.wait();
        self.inner.drain();
    }
    fn play(&mut self, samples: &[f32]) {
        self.inner.play(samples);
    }
    fn stop_playback(&mut self) -> usize {
        self.inner.stop_playback()
    }
    fn queued(&self) -> usize {
        self.inner.queued()
    }
    /// What was captured while nobody listened is dropped: the clock runs on from now.
    fn flush_input(&mut self) {
        self.started = Instant::now();
        self.frames = 0;
        self.inner.flush_input();
    }
}

/// How the person steers a running turn from the shell: Stop ends it
/// (listening, thinking or speaking); Release (letting go of a held
/// shortcut) ends the listening and sends what was heard.
#[derive(Debug, Clone, Default)]
pub struct TurnControl {
    stop: Arc<AtomicBool>,
    release: Arc<AtomicBool>,
}

impl TurnControl {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }
    pub fn release(&self) {
        self.release.store(true, Ordering::SeqCst);
    }
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
    fn released(&self) -> bool {
        self.release.load(Ordering::SeqCst)
    }
}

#[derive(Debug, Clone)]
pub struct TurnConfig {
    pub gate: GateConfig,
    /// Give up when nobody has spoken for this long.
    pub max_wait_ms: u64,
    /// The longest utterance taken: listening ends there.
    pub max_utterance_ms: u64,
    pub listen: LanguageChoice,
    pub speak: Language,
    pub rate: f32,
    /// The person's voice stops the reply (with headphones, or echo cancelled).
    /// Off ("no interruptions"): only Stop, push-to-talk and, with
    /// `stop_word`, the spoken word "stop" cut the reply.
    pub barge_in: bool,
    /// Without barge-in, what is said during the reply is transcribed for
    /// the stop word ("stop", "pare", "chega") alone; nothing else counts.
    pub stop_word: bool,
    /// Speech in the first moments of the reply does not interrupt it.
    pub protect_ms: u64,
    /// The end of the turn, as in a spoken conversation: drafts of the
    /// utterance while it grows, its take as soon as a silence begins, and
    /// an end that comes sooner when the words are finished and later when
    /// they trail off. None: the gate's hold, then recognition.
    pub endpoint: Option<Endpoint>,
    /// The models folder Silero is loaded from to confirm the gate's
    /// verdicts (the early end needs its certainty); None, or a failure to
    /// load it, leaves WebRTC's VAD alone, and the turn ends on the hold.
    pub silero_models: Option<std::path::PathBuf>,
    pub persona_id: Option<String>,
}

impl Default for TurnConfig {
    fn default() -> Self {
        Self {
            gate: GateConfig::default(),
            max_wait_ms: 8_000,
            max_utterance_ms: 30_000,
            listen: LanguageChoice::Fixed(Language::En),
            speak: Language::En,
            rate: 1.0,
            barge_in: true,
            stop_word: true,
            protect_ms: 500,
            endpoint: Some(Endpoint::default()),
            silero_models: None,
            persona_id: None,
        }
    }
}

/// What a turn came to.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnOutcome {
    /// Nobody spoke (or Stop came before anything was said).
    NothingHeard,
    Done { heard: String, reply: String, spoken: String, interrupted: bool },
}

/// 0..1 from the frame's RMS on a -60..0 dBFS scale.
pub fn level_of(frame: &[f32]) -> f32 {
    if frame.is_empty() {
        return 0.0;
    }
    let rms = (frame.iter().map(|s| s * s).sum::<f32>() / frame.len() as f32).sqrt();
    if rms <= 0.0 {
        return 0.0;
    }
    ((20.0 * rms.log10() + 60.0) / 60.0).clamp(0.0, 1.0)
}

const FRAME_MS: u64 = 20;
/// A level event every 100 ms: enough for a meter, not a flood.
const LEVEL_EVERY: u64 = 5;

/// Runs one turn. Errors are returned (and told as `Failed`); the state goes
/// back to idle either way.
pub fn run_turn(
    io: &mut dyn Duplex,
    stt: &mut dyn SpeechToText,
    responder: &mut dyn Responder,
    tts: &dyn SpeechSynthesizer,
    config: &TurnConfig,
    control: &TurnControl,
    emit: &mut dyn FnMut(VoiceEvent),
) -> Result<TurnOutcome, VoiceError> {
    let result = turn(io, stt, responder, tts, config, control, emit);
    match &result {
        Ok(_) => emit(state(VoiceState::Idle, config)),
        Err(e) => {
            emit(VoiceEvent::Failed { code: e.code().to_owned(), message: e.to_string() });
            emit(state(VoiceState::Error, config));
        }
    }
    result
}

fn state(state: VoiceState, config: &TurnConfig) -> VoiceEvent {
    VoiceEvent::State { state, persona_id: config.persona_id.clone() }
}

fn turn(
    io: &mut dyn Duplex,
    stt: &mut dyn SpeechToText,
    responder: &mut dyn Responder,
    tts: &dyn SpeechSynthesizer,
    config: &TurnConfig,
    control: &TurnControl,
    emit: &mut dyn FnMut(VoiceEvent),
) -> Result<TurnOutcome, VoiceError> {
    emit(state(VoiceState::Listening, config));
    let stage = Instant::now();
    let Some(mut utterance) = listen(io, stt, responder, config, control, emit)? else {
        tracing::info!(ms = ms(stage), "voice turn: nothing heard");
        return Ok(TurnOutcome::NothingHeard);
    };
    tracing::info!(
        ms = ms(stage),
        audio_ms = utterance.audio.len() as u64 * 1000 / u64::from(voice::SAMPLE_RATE),
        silence_ms = utterance.silence_ms,
        "voice turn: listened"
    );
    emit(state(VoiceState::Thinking, config));
    // From here to the first sound is what the person waits, on top of the silence above.
    let decided = Instant::now();
    let take = utterance.end.transcript(&utterance.audio, utterance.ended_ms, stt, config.listen)?;
    let transcript = take.transcript;
    let heard = transcript.text.trim().to_owned();
    tracing::info!(ms = ms(decided), stt_ms = take.stt_ms, speculated = take.speculated, chars = heard.len(), "voice turn: transcribed");
    if heard.is_empty() || control.stopped() {
        return Ok(TurnOutcome::NothingHeard);
    }
    emit(VoiceEvent::Heard { text: heard.clone() });
    let speak = if transcript.language == "pt" { Language::Pt } else { config.speak };
    let stage = Instant::now();
    // The reply's first piece starts playing as soon as the model has
    // written it; the rest waits for the whole reply.
    let mut early: Option<(String, usize)> = None;
    let mut streamed = String::new();
    let reply = responder.reply_streaming(&heard, &mut |delta| {
        if early.is_some() || control.stopped() {
            return;
        }
        streamed.push_str(delta);
        let pieces = speaking_pieces(&streamed);
        if pieces.len() < 2 {
            return;
        }
        match tts.synthesize(&SynthesisRequest { text: &pieces[0], language: speak, rate: config.rate }) {
            Ok(pcm) => {
                let pcm = pcm.resampled(voice::SAMPLE_RATE).samples;
                io.flush_input();
                io.play(&pcm);
                emit(state(VoiceState::Speaking, config));
                tracing::info!(
                    ms = ms(stage),
                    since_end_ms = ms(decided),
                    "voice turn: first piece playing while the reply streams"
                );
                early = Some((pieces[0].clone(), pcm.len()));
            }
            // Tried again with the whole reply.
            Err(e) => tracing::warn!("voice turn: the first piece could not be synthesised: {e}"),
        }
    })?;
    tracing::info!(ms = ms(stage), chars = reply.len(), "voice turn: persona replied");
    if control.stopped() {
        // Stopped while the persona thought: the reply is kept (it is in the
        // conversation); only a first piece already playing was heard.
        let spoken = match early.take() {
            Some((text, _)) => {
                io.stop_playback();
                text
            }
            None => String::new(),
        };
        finished(responder, &heard, &reply, &spoken, true)?;
        let done = TurnOutcome::Done { heard: heard.clone(), reply: reply.clone(), spoken: spoken.clone(), interrupted: true };
        emit(VoiceEvent::TurnEnded { heard, reply, spoken, interrupted: true });
        return Ok(done);
    }
    let stage = Instant::now();
    let (spoken, interrupted) = speak_reply(io, stt, tts, &reply, early, speak, config, control, decided, emit)?;
    tracing::info!(ms = ms(stage), interrupted, "voice turn: spoken");
    finished(responder, &heard, &reply, &spoken, interrupted)?;
    emit(VoiceEvent::TurnEnded {
        heard: heard.clone(),
        reply: reply.clone(),
        spoken: spoken.clone(),
        interrupted,
    });
    Ok(TurnOutcome::Done { heard, reply, spoken, interrupted })
}

/// Tells the responder the turn is over, with what was said aloud (where
/// the persona pipeline records it). Times are not tracked in a desktop turn.
fn finished(responder: &mut dyn Responder, heard: &str, reply: &str, spoken: &str, interrupted: bool) -> Result<(), VoiceError> {
    responder.turn_finished(&voice::converse::TurnReport {
        turn: 0,
        heard: heard.to_owned(),
        reply: reply.to_owned(),
        spoken: spoken.to_owned(),
        interrupted,
        end_of_speech_ms: 0,
        first_audio_ms: 0,
        barge_in_ms: None,
        playback_stopped_ms: None,
        compute_ms: 0,
        timings: Default::default(),
    })
}

/// What the person said, and the end of turn that ended it (which holds
/// what was recognised of it so far).
struct Utterance {
    audio: Vec<f32>,
    end: EndOfTurn,
    /// When it ended on the input's timeline.
    ended_ms: u64,
    /// The silence the turn waited after the last voiced frame (0 when a
    /// release, the length limit or the input's end cut it).
    silence_ms: u64,
}

/// The utterance, or `None` when nothing was said. The turn ends as a
/// spoken conversation's does ([`EndOfTurn`]): the recogniser runs here,
/// between frames; a sound card keeps the frames meanwhile.
fn listen(
    io: &mut dyn Duplex,
    stt: &mut dyn SpeechToText,
    responder: &mut dyn Responder,
    config: &TurnConfig,
    control: &TurnControl,
    emit: &mut dyn FnMut(VoiceEvent),
) -> Result<Option<Utterance>, VoiceError> {
    let mut end = EndOfTurn::new(config.endpoint, config.gate);
    let mut gate = SpeechGate::with_silero_from(end.gate_config(config.gate), config.silero_models.as_deref());
    let preroll_len = FRAME * 25; // half a second before the gate opened
    let mut preroll = std::collections::VecDeque::with_capacity(preroll_len + FRAME);
    let mut utterance: Option<Vec<f32>> = None;
    let mut frames = 0u64;
    loop {
        if control.stopped() {
            return Ok(None);
        }
        if control.released() {
            break;
        }
        let Some(frame) = io.next_frame()? else { break };
        frames += 1;
        let now = frames * FRAME_MS;
        if frames % LEVEL_EVERY == 0 {
            emit(VoiceEvent::Level { level: level_of(&frame) });
        }
        preroll.extend(frame.iter().copied());
        while preroll.len() > preroll_len {
            preroll.pop_front();
        }
        if let Some(u) = utterance.as_mut() {
            u.extend_from_slice(&frame);
            if u.len() as u64 * 1000 / u64::from(voice::SAMPLE_RATE) >= config.max_utterance_ms {
                break;
            }
        }
        let mut event = gate.push(&frame);
        if let Some(ended) = end.frame(&mut gate, event, utterance.as_deref(), now, Floor::Open, stt, config.listen) {
            event = Some(ended);
        }
        if let Some(so_far) = end.new_reading() {
            responder.hearing(&so_far);
        }
        match event {
            Some(GateEvent::SpeechStarted { .. }) if utterance.is_none() => {
                utterance = Some(preroll.iter().copied().collect());
                end.begin();
                responder.speech_started();
            }
            Some(GateEvent::SpeechEnded { at_ms }) if utterance.is_some() => {
                emit(VoiceEvent::Level { level: 0.0 });
                let silence_ms = now.saturating_sub(at_ms);
                return Ok(utterance.map(|audio| Utterance { audio, end, ended_ms: now, silence_ms }));
            }
            _ => {}
        }
        if utterance.is_none() && frames * FRAME_MS >= config.max_wait_ms {
            break;
        }
    }
    emit(VoiceEvent::Level { level: 0.0 });
    // Released, cut at the longest utterance or the input ended: recognised whole.
    end.forget_take();
    Ok(utterance.map(|audio| Utterance { audio, end, ended_ms: frames * FRAME_MS, silence_ms: 0 }))
}

/// Audio of speech queued ahead of what plays before the next piece is
/// synthesised: a second.
const AHEAD: usize = voice::SAMPLE_RATE as usize;

/// Speaks `reply` piece by piece, each synthesised while the one before it
/// plays (`early`: the first piece, already playing from the stream, with
/// its length); returns what was heard of it and whether it was cut.
#[allow(clippy::too_many_arguments)]
fn speak_reply(
    io: &mut dyn Duplex,
    stt: &mut dyn SpeechToText,
    tts: &dyn SpeechSynthesizer,
    reply: &str,
    early: Option<(String, usize)>,
    language: Language,
    config: &TurnConfig,
    control: &TurnControl,
    decided: Instant,
    emit: &mut dyn FnMut(VoiceEvent),
) -> Result<(String, bool), VoiceError> {
    let parts = speaking_pieces(reply);
    // Each piece with the sample at which it starts playing.
    let mut starts = Vec::new();
    let mut total = 0usize;
    match early {
        Some((text, len)) if parts.first() == Some(&text) => {
            starts.push((text, 0));
            total = len;
        }
        Some(_) => {
            // The saved reply does not begin as the stream did: it has the last word.
            io.stop_playback();
            io.flush_input();
        }
        None => io.flush_input(),
    }
    if parts.is_empty() {
        return Ok((String::new(), false));
    }
    let mut next = starts.len();
    let speak_next = |io: &mut dyn Duplex, starts: &mut Vec<(String, usize)>, total: &mut usize, next: &mut usize| {
        let synthesis = Instant::now();
        let s = &parts[*next];
        let pcm = tts.synthesize(&SynthesisRequest { text: s, language, rate: config.rate })?;
        let pcm = pcm.resampled(voice::SAMPLE_RATE).samples;
        starts.push((s.clone(), *total));
        *total += pcm.len();
        io.play(&pcm);
        tracing::info!(ms = ms(synthesis), piece = *next, "voice turn: synthesised");
        *next += 1;
        Ok::<(), VoiceError>(())
    };
    if next == 0 {
        speak_next(io, &mut starts, &mut total, &mut next)?;
        tracing::info!(since_end_ms = ms(decided), "voice turn: first piece playing");
        emit(state(VoiceState::Speaking, config));
    }
    let mut gate = SpeechGate::new(config.gate);
    let mut input_ended = false;
    let mut told = 0usize;
    let mut frames = 0u64;
    let mut interrupted = false;
    // Without barge-in: what is said during the reply, for the stop word.
    let listens_for_stop = !config.barge_in && config.stop_word;
    let mut utterance: Option<Vec<f32>> = None;
    let mut recent = std::collections::VecDeque::new();
    while io.queued() > 0 || next < parts.len() {
        if next < parts.len() && io.queued() < AHEAD {
            speak_next(io, &mut starts, &mut total, &mut next)?;
        }
        let played = total - io.queued();
        // A sentence counts as spoken once its first sample has played.
        let begun = starts.iter().filter(|(_, at)| *at < played).count();
        if begun > told {
            told = begun;
            emit(VoiceEvent::Spoken { text: joined(&starts[..told]) });
        }
        if control.stopped() {
            interrupted = true;
            break;
        }
        if input_ended {
            io.drain();
            continue;
        }
        match io.next_frame()? {
            None => input_ended = true,
            Some(frame) => {
                frames += 1;
                if frames % LEVEL_EVERY == 0 {
                    emit(VoiceEvent::Level { level: level_of(&frame) });
                }
                let event = gate.push(&frame);
                if config.barge_in
                    && frames * FRAME_MS >= config.protect_ms
                    && matches!(event, Some(GateEvent::SpeechStarted { .. }))
                {
                    interrupted = true;
                    break;
                }
                if !listens_for_stop {
                    continue;
                }
                // Half a second before the gate opened, as when listening.
                recent.extend(frame.iter().copied());
                while recent.len() > FRAME * 25 {
                    recent.pop_front();
                }
                if let Some(u) = utterance.as_mut() {
                    u.extend_from_slice(&frame);
                }
                match event {
                    Some(GateEvent::SpeechStarted { .. }) => utterance = Some(recent.iter().copied().collect()),
                    Some(GateEvent::SpeechEnded { .. }) => {
                        let Some(audio) = utterance.take() else { continue };
                        let heard = stt.transcribe(&audio, config.listen)?;
                        if voice::commands::parse(&heard.text) == Some(voice::commands::VoiceCommand::Stop) {
                            interrupted = true;
                            break;
                        }
                    }
                    None => {}
                }
            }
        }
    }
    if interrupted {
        io.stop_playback();
    }
    let heard_of = if interrupted { told } else { starts.len() };
    let spoken = joined(&starts[..heard_of]);
    if heard_of > told {
        emit(VoiceEvent::Spoken { text: spoken.clone() });
    }
    Ok((spoken, interrupted))
}

fn ms(since: Instant) -> u64 {
    since.elapsed().as_millis() as u64
}

fn joined(parts: &[(String, usize)]) -> String {
    parts.iter().map(|(s, _)| s.as_str()).collect::<Vec<_>>().join(" ")
}

/// A sound device as Settings lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct VoiceDeviceView {
    pub id: String,
    pub name: String,
    pub input: bool,
    pub output: bool,
    pub default_input: bool,
    pub default_output: bool,
}

/// The machine's sound devices; an error (with what to do) when there is none.
pub fn devices() -> Result<Vec<VoiceDeviceView>, crate::AppError> {
    let list = voice::devices::list().map_err(|e| crate::AppError::new(e.code(), e.to_string()))?;
    Ok(list
        .into_iter()
        .map(|d| VoiceDeviceView {
            id: d.id,
            name: d.name,
            input: d.input,
            output: d.output,
            default_input: d.default_input,
            default_output: d.default_output,
        })
        .collect())
}

#[cfg(test)]
mod tests;
