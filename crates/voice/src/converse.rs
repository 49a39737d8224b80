//! A spoken conversation over the audio traits: the voice gate cuts the
//! microphone into utterances, each is transcribed, answered by a
//! [`Responder`] (the persona pipeline, above this crate) and spoken
//! sentence by sentence through the output stage. Runs on the loopback's
//! simulated clock: time spent computing is charged to the timeline by
//! reading that much more microphone audio, so the reported times are
//! what a person at the microphone would live through. A paced loopback
//! ([`WavLoopback::paced`]) runs at the wall clock's speed instead, as the
//! microphone does: a reply starts where the wall clock was when its first
//! piece was ready, and the pauses between turns take their real time for
//! the work done beside the loop (the persona's model reading ahead).
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
use crate::wav::Pcm;

use crate::retry::with_retries;
pub use crate::turn_end::{ending, reads_finished, EndOfTurn, Endpoint, Ending, Floor, Take};

/// What answers the person: the persona pipeline in the app.
pub trait Responder {
    fn reply(&mut self, heard: &str) -> Result<String, VoiceError>;
    /// The same reply, with its text handed to `on_text` piece by piece as
    /// the model writes it (so the first sentence can be spoken before the
    /// reply is whole); returns the whole reply, which has the last word.
    /// By default the reply is waited for whole.
    fn reply_streaming(&mut self, heard: &str, on_text: &mut dyn FnMut(&str)) -> Result<String, VoiceError> {
        let _ = on_text;
        self.reply(heard)
    }
    /// What the person is saying, as read so far while they speak (a
    /// draft: its last words may still change), so work on the reply can
    /// begin before the turn ends. By default nothing.
    fn hearing(&mut self, _so_far: &str) {}
    /// The person began to speak (not heard as a stop word while the
    /// persona speaks): their turn will want the model soon, so other work
    /// may give way. By default nothing.
    fn speech_started(&mut self) {}
    /// Called once per turn when it is over (spoken to the end or cut
    /// off), with what was actually said: where the turn is recorded.
    fn turn_finished(&mut self, _report: &TurnReport) -> Result<(), VoiceError> {
        Ok(())
    }
    /// Replies failed turn after turn: answer with local engines only and
    /// no tools from now on (the voice says so).
    fn enter_safe_mode(&mut self) -> Result<(), VoiceError> {
        Ok(())
    }
}

pub use crate::retry::{BACKOFF_MS, TRIES};

/// Failed turns in a row that put the loop in safe mode.
pub const SAFE_MODE_AFTER: u32 = 2;

fn apology(language: Language, safe_mode_now: bool) -> &'static str {
    match (language, safe_mode_now) {
        (Language::En, false) => "Sorry, I could not answer that. Please say it again.",
        (Language::Pt, false) => "Desculpe, não consegui responder. Pode repetir?",
        (Language::En, true) => "I keep failing, so I switched to safe mode: local engines only, tools off.",
        (Language::Pt, true) => {
            "Estou falhando seguido, então entrei no modo seguro: só motores locais, sem ferramentas."
        }
    }
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
    /// The models folder to load Silero from, to confirm WebRTC's verdicts;
    /// None, or a failure to load it, leaves WebRTC's VAD alone.
    pub silero_models: Option<std::path::PathBuf>,
    /// In half duplex, still listen while the persona speaks, for a stop
    /// word only (each utterance heard then is transcribed: it costs).
    pub stop_word: bool,
    /// Push-to-talk presses on the input's timeline, (down_ms, up_ms): a
    /// press stops the persona at once, whatever the voice gate or the
    /// echo canceller say, and what is said until release is the utterance.
    pub push_to_talk: Vec<(u64, u64)>,
    /// Duck instead of stopping at once: None stops at the gate's start.
    pub ducking: Option<Ducking>,
    /// The person's voice may interrupt a reply. Off is the "headphones /
    /// no interruptions" setting: while the persona speaks only
    /// push-to-talk and the stop word cut it, whatever the gate hears.
    pub barge_in: bool,
    /// Ending a turn before the gate's whole hold: None waits `gate.stop_ms`.
    pub endpoint: Option<Endpoint>,
    /// The reply's first piece is cut short before a phrase (see
    /// [`speaking_pieces`]); off, only at a clause break (the benchmark's
    /// comparison with the rule before).
    pub phrase_first_piece: bool,
}

/// The reply's first piece, synthesised while the reply was still coming.
struct Early {
    text: String,
    pcm: Vec<f32>,
    /// Wall ms from the turn's start to the piece's audio being ready.
    ready_ms: u64,
    ready_at: Instant,
    /// Wall ms the model took to write the piece.
    model_ms: u64,
    tts_ms: u64,
}

/// Speech heard while the persona speaks first lowers its voice; speech
/// held `confirm_ms` stops it; otherwise full voice again after `resume_ms`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ducking {
    pub gain: f32,
    pub confirm_ms: u64,
    pub resume_ms: u64,
}

impl Default for Ducking {
    fn default() -> Self {
        Self { gain: 0.25, confirm_ms: 500, resume_ms: 2_000 }
    }
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
            silero_models: None,
            stop_word: true,
            push_to_talk: Vec::new(),
            ducking: None,
            barge_in: true,
            endpoint: None,
            phrase_first_piece: true,
        }
    }
}

/// One turn, as `voice converse --json` prints it (times on the input's timeline).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnReport {
    pub turn: u64,
    pub heard: String,
    /// The model's reply as written (what `spoken_chars` counts in); shown
    /// (`--json`) as it may be said aloud, without the markers it copied.
    #[serde(serialize_with = "serialize_speakable")]
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
    /// The same, part by part (not printed; the latency benchmark's split).
    #[serde(skip)]
    pub timings: TurnTimings,
}

fn serialize_speakable<S: serde::Serializer>(text: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&speakable(text))
}

/// Where a turn's time to its first audio went, in wall milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TurnTimings {
    /// When the gate decided the utterance had ended (input timeline, ms).
    pub detected_at_ms: u64,
    /// Recognising the utterance (its compute time, wherever it ran).
    pub stt_ms: u64,
    /// How long the turn waited for recognition after the end was
    /// detected: all of `stt_ms` without speculation, what was left of it
    /// with (0 when the speculative transcript was ready).
    pub stt_wait_ms: u64,
    /// The responder's answer (the persona's model): up to the whole
    /// reply, or up to its first piece when that was spoken from the stream.
    pub reply_ms: u64,
    /// Synthesising the first piece (and resampling it).
    pub tts_first_ms: u64,
}

/// The pieces to synthesise one by one: the sentences, with a long first
/// sentence split at its first clause break (a comma, semicolon or colon
/// after at least three words, as soon as a word follows it), and the first
/// piece cut again before the first preposition, conjunction or verb after
/// its subject that has three to five words before it (as soon as it is
/// written), or noun phrase after its verb with as many before it and a
/// word after it, so the first piece is short and
/// speech starts sooner (the listener waits for the first piece's
/// synthesis, and its time grows with its length). Both cuts
/// depend only on the words before them and a few after, so a reply still
/// streaming is cut where the whole reply will be.
pub fn speaking_pieces(text: &str) -> Vec<String> {
    speaking_pieces_as(text, true)
}

/// [`speaking_pieces`], with the first piece cut before a phrase or not.
pub fn speaking_pieces_as(text: &str, phrase_cut: bool) -> Vec<String> {
    let mut parts = sentences(&speakable(text));
    split_first_clause(&mut parts);
    if phrase_cut {
        split_first_phrase(&mut parts);
    }
    parts
}

/// Words a first piece may be cut before: a phrase or clause begins there
/// (these), or the verb after a subject of three words or more ([`VERBS`]:
/// "The capital of Italy | is Rome."), English and Portuguese. A
/// one-sentence answer is then spoken before the model has finished it.
#[rustfmt::skip]
const PHRASE_STARTS: [&str; 40] = [
    "of", "in", "on", "at", "for", "with", "about", "from", "into", "by", "to", "near", "since", "after", "before",
    "through", "and", "but", "or", "because", "which", "where", "when", "while", "than",
    "de", "do", "da", "em", "no", "na", "com", "para", "por", "sobre", "e", "mas", "porque", "onde", "quando",
];

#[rustfmt::skip]
const VERBS: [&str; 8] = ["is", "are", "was", "were", "é", "são", "foi", "era"];

/// Words a noun phrase begins with: where no word of [`PHRASE_STARTS`] or
/// [`VERBS`] allows a cut, a first piece may be cut before one that follows
/// a verb ("Mercury is often called | the red planet", "Be's leg is | a
/// term used…"), never after a preposition or another of these ("I went to
/// | the market" would leave the preposition hanging).
/// Without it, a long first sentence with no comma and no phrase word among
/// its first words was spoken whole, and the person waited for all of it
/// (four to six seconds for twenty words on two cores).
#[rustfmt::skip]
const NOUN_PHRASE_STARTS: [&str; 16] = [
    "the", "a", "an", "this", "that", "these", "those",
    "o", "os", "as", "um", "uma", "uns", "umas", "este", "esta",
];

/// The most words before a cut at a phrase.
const FIRST_PIECE_WORDS: usize = 5;

fn split_first_phrase(parts: &mut Vec<String>) {
    let Some(first) = parts.first() else { return };
    let words: Vec<&str> = first.split_whitespace().collect();
    // Judged on the words before the cut and the word it is made before
    // (seven words in all before a noun phrase), never on the piece's
    // whole length, which a reply still streaming does not know.
    let bare = |w: &str| w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
    let candidates = || (3..=FIRST_PIECE_WORDS).take_while(|&i| i + 2 <= words.len());
    // Not right after a clause break: that cut is the clause rule's.
    let open = |i: usize| !words[i - 1].ends_with([',', ';', ':', '.', '?', '!']);
    // A phrase word is cut before as soon as it is written: the model
    // writes these words whole (one token each), and the first piece is
    // then spoken a token sooner than once the next word begins. Not
    // before a phrase word that ends the sentence ("thinking of?").
    let phrase_candidates = || (3..=FIRST_PIECE_WORDS).take_while(|&i| i < words.len());
    let phrase = |i: usize| {
        let word = bare(words[i]);
        (PHRASE_STARTS.contains(&word.as_str()) || VERBS.contains(&word.as_str()))
            && !words[i].ends_with(['.', '?', '!'])
    };
    let noun_phrase = |i: usize| {
        let (word, before) = (bare(words[i]), bare(words[i - 1]));
        NOUN_PHRASE_STARTS.contains(&word.as_str())
            && !NOUN_PHRASE_STARTS.contains(&before.as_str())
            && !PHRASE_STARTS.contains(&before.as_str())
    };
    // A noun phrase only where no phrase word is found ("Paris is | the
    // capital" parts the verb from what it says; "the capital | of France"
    // does not), and in a piece longer than the words a phrase cut looks
    // at: a short one is soon written whole, and a reply still streaming
    // is then cut there only once every word a phrase cut could come
    // before is known.
    let long = words.len() >= FIRST_PIECE_WORDS + 2;
    let cut = phrase_candidates()
        .find(|&i| open(i) && phrase(i))
        .or_else(|| candidates().filter(|_| long).find(|&i| open(i) && noun_phrase(i)));
    if let Some(i) = cut {
        let (head, tail) = (words[..i].join(" "), words[i..].join(" "));
        parts.splice(0..1, [head, tail]);
    }
}

fn split_first_clause(parts: &mut Vec<String>) {
    let Some(first) = parts.first().cloned() else { return };
    let mut words = 0;
    let mut prev_space = true;
    for (i, c) in first.char_indices() {
        if !c.is_whitespace() && prev_space {
            words += 1;
        }
        prev_space = c.is_whitespace();
        let next = first[i + c.len_utf8()..].chars().next();
        if matches!(c, ',' | ';' | ':') && next.is_some_and(char::is_whitespace) && words >= 3 {
            let (head, tail) = first.split_at(i + c.len_utf8());
            // One word after the break is enough to know it is one: a
            // streaming reply is cut as soon as that word begins (waiting
            // for three cost the first sound two more tokens, "There are
            // seven continents: Africa, Asia,"), and the head, three words
            // or more, plays while the rest is written.
            if tail.split_whitespace().count() >= 1 {
                parts.splice(0..1, [head.trim().to_owned(), tail.trim().to_owned()]);
            }
            break;
        }
    }
}

/// A piece's synthesised audio as it is played: the synthesiser's silence
/// before the words cut to [`KEPT_LEAD_MS`] (Piper begins 30-60 ms of
/// silence before them: the person would wait that much more for the
/// first sound), and, after a piece cut mid-sentence before a phrase
/// ("The capital of Italy | is Rome."), its silence after the words cut to
/// [`KEPT_JOIN_MS`], so the sentence is not broken by the ~150 ms pause a
/// synthesiser leaves at the end of what it was given. A piece that ends
/// a sentence or a clause keeps its pause.
fn for_playback(pcm: Pcm, text: &str) -> Vec<f32> {
    let ms = |n: u64| (n * u64::from(pcm.rate) / 1000) as usize;
    let mut samples = pcm.samples;
    let peak = samples.iter().fold(0f32, |m, s| m.max(s.abs()));
    // -40 dB of the loudest sample.
    let quiet = peak * 0.01;
    let (Some(first), Some(last)) =
        (samples.iter().position(|s| s.abs() > quiet), samples.iter().rposition(|s| s.abs() > quiet))
    else {
        return samples;
    };
    let mid_sentence = !text.trim_end().ends_with(|c: char| !c.is_alphanumeric());
    if mid_sentence {
        samples.truncate((last + 1 + ms(KEPT_JOIN_MS)).min(samples.len()));
    }
    samples.drain(..first.saturating_sub(ms(KEPT_LEAD_MS)));
    samples
}

/// Silence kept before a piece's words (the onset of a soft first sound
/// lies under the -40 dB the words are found at).
const KEPT_LEAD_MS: u64 = 15;
/// Silence kept after a piece that ends mid-sentence.
const KEPT_JOIN_MS: u64 = 40;

/// The pieces to say of `reply` when at most `max_sentences` of it are
/// said aloud (None: all of it), as [`speaking_pieces`] cuts them.
pub fn spoken_pieces(reply: &str, max_sentences: Option<usize>) -> Vec<String> {
    match max_sentences {
        Some(n) => speaking_pieces(&sentences(&speakable(reply)).into_iter().take(n).collect::<Vec<_>>().join(" ")),
        None => speaking_pieces(reply),
    }
}

/// Words in round brackets that are stage directions, not speech: a
/// model copies them from transcripts and from how cut-off turns are shown.
const PAREN_MARKERS: [&str; 8] =
    ["interrupted", "interrompid", "cut off", "inaudible", "inaudível", "pause", "pausa", "silence"];

/// What of a model's reply may be said aloud: bracketed markers it copied
/// from its prompt or training ("[interrupted]", "[laughs]", "<|im_end|>",
/// "(interrupted)") are dropped, and so is an unclosed "[" or "<|" at the
/// end, which in a reply still streaming is a marker not yet complete.
/// Asterisks of emphasis go, their words stay; spaces are tidied where
/// something was taken out.
pub fn speakable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let cut = match c {
            '[' => Some(rest.find(']').map_or(rest.len(), |e| e + 1)),
            '<' if rest.starts_with("<|") => Some(rest.find("|>").map_or(rest.len(), |e| e + 2)),
            '(' => rest
                .find(')')
                .filter(|&e| {
                    let inner = rest[1..e].trim().to_lowercase();
                    PAREN_MARKERS.iter().any(|m| inner.starts_with(m))
                })
                .map(|e| e + 1),
            _ => None,
        };
        match cut {
            Some(n) => {
                out.push(' ');
                rest = &rest[n..];
            }
            None => {
                if c != '*' {
                    out.push(c);
                }
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    // Tidy what the cuts left: no space before punctuation, no doubled spaces.
    let mut tidy = String::with_capacity(out.len());
    let mut chars = out.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ' ' || c == '\t' {
            while chars.peek().is_some_and(|n| *n == ' ' || *n == '\t') {
                chars.next();
            }
            if chars.peek().is_some_and(|n| matches!(n, '.' | ',' | '!' | '?' | ';' | ':'))
                || tidy.ends_with([' ', '\n'])
            {
                continue;
            }
        }
        tidy.push(c);
    }
    tidy.trim().to_owned()
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

/// How many characters of `reply` were said aloud when only `spoken` (its
/// first sentences, as [`sentences`] cut them and joined with spaces) was:
/// the length of the reply up to the end of the last sentence spoken.
/// Markers never spoken ([`speakable`]) count for nothing, so `reply` may
/// be the model's text as written.
pub fn spoken_chars(reply: &str, spoken: &str) -> u32 {
    let mut said = String::new();
    let mut cursor = 0;
    for part in sentences(reply) {
        if said.len() >= spoken.len() {
            break;
        }
        let Some(at) = reply[cursor..].find(part.as_str()) else { break };
        cursor += at + part.len();
        let aloud = speakable(&part);
        if aloud.is_empty() {
            continue;
        }
        if !said.is_empty() {
            said.push(' ');
        }
        said.push_str(&aloud);
    }
    reply[..cursor].chars().count() as u32
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

/// The reply being played stops at `now` with `remaining` samples unheard:
/// its report says what was heard, the motor and the bus move past its turn,
/// and the responder learns how it ended.
fn stop_reply(
    mut p: Playing,
    now: u64,
    remaining: usize,
    motor: &mut Motor,
    bus: &mut SignalBus,
    responder: &mut dyn Responder,
    reports: &mut Vec<TurnReport>,
) -> Result<(), VoiceError> {
    p.report.interrupted = true;
    p.report.barge_in_ms = Some(now);
    p.report.playback_stopped_ms = Some(now);
    p.report.spoken = p.spoken(remaining);
    motor.interrupted().map_err(|e| VoiceError::Inference(e.to_string()))?;
    bus.cancel_through(motor.turn());
    responder.turn_finished(&p.report)?;
    reports.push(p.report);
    Ok(())
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
    // With the adaptive end of turn the gate holds as long as a trailing
    // sentence may need; this loop ends the turn sooner (see Endpoint).
    let mut end = EndOfTurn::new(config.endpoint, config.gate);
    let gate_config = end.gate_config(config.gate);
    let mut gate = SpeechGate::with_silero_from(gate_config, config.silero_models.as_deref());
    // Spoken control ("slower", "be brief") changes these for the rest of the conversation.
    let mut rate_now = config.rate;
    // The utterance under way began while the persona spoke in half duplex.
    let mut began_deaf = false;
    let mut brief = false;
    let mut failed_turns = 0u32;
    let mut talk_held = false;
    // When the voice was ducked, while it is; and whether the utterance began ducked.
    let mut ducked_at: Option<u64> = None;
    let mut began_ducked = false;
    let mut safe_mode = false;
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
        // In half duplex the persona's own voice must not interrupt it: the
        // microphone is still heard, but only a stop word ends the reply.
        // Without barge-in the same holds in full duplex: only the stop word
        // (and push-to-talk, below) end a reply.
        let deaf = playing.is_some() && (!config.full_duplex || !config.barge_in);
        let mut event = if deaf && !config.stop_word { None } else { gate.push(&frame) };
        if let (Some(GateEvent::SpeechStarted { .. }), Some(p)) = (event, playing.as_ref()) {
            if !deaf && now < p.started_ms + config.protect_ms {
                // Not taken up, and not left "speaking" either: if it goes
                // on past the protected start it is detected again.
                event = None;
                gate.restart();
            }
        }
        if let (Some(d), Some(at)) = (config.ducking, ducked_at) {
            if playing.is_none() {
                mic.output.set_gain(1.0);
                ducked_at = None;
            } else if gate.is_speaking() && gate.voiced_run_ms() >= d.confirm_ms {
                // Confirmed: the person holds the floor.
                ducked_at = None;
                began_ducked = false;
                if let Some(p) = playing.take() {
                    let remaining = mic.output.stop();
                    mic.output.set_gain(1.0);
                    stop_reply(p, now, remaining, &mut motor, &mut bus, responder, &mut reports)?;
                }
            } else if now >= at + d.resume_ms {
                mic.output.set_gain(1.0);
                ducked_at = None;
            }
        }
        // Push-to-talk overrides the gate: down stops the persona, up ends the utterance.
        let held = config.push_to_talk.iter().any(|(down, up)| now > *down && now <= *up);
        if held && !talk_held {
            event = None;
            gate.restart();
            utterance = Some(Vec::new());
            end.begin();
            began_deaf = false;
            if let Some(p) = playing.take() {
                let remaining = mic.output.stop();
                stop_reply(p, now, remaining, &mut motor, &mut bus, responder, &mut reports)?;
            }
        } else if held {
            event = None;
        } else if talk_held {
            gate.restart();
            event = Some(GateEvent::SpeechEnded { at_ms: now });
        }
        talk_held = held;
        preroll.extend(frame.iter().copied());
        while preroll.len() > preroll_len {
            preroll.pop_front();
        }
        if let Some(u) = utterance.as_mut() {
            u.extend_from_slice(&frame);
        }
        let plain = playing.is_none() && !began_deaf && !began_ducked;
        if let Some(ended) =
            end.frame(&mut gate, event, utterance.as_deref(), now, Floor::of(plain, held), stt, config.listen)
        {
            event = Some(ended);
        }
        if let Some(so_far) = end.new_reading() {
            responder.hearing(&so_far);
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
                end.begin();
                began_deaf = deaf;
                if !deaf {
                    responder.speech_started();
                }
                began_ducked = false;
                if deaf {
                    // Listened to for a stop word only (below, when it ends).
                } else if let (Some(d), true) = (config.ducking, playing.is_some()) {
                    // Lower the voice; it stops only if the speech holds.
                    mic.output.set_gain(d.gain);
                    ducked_at = Some(now);
                    began_ducked = true;
                } else if let Some(p) = playing.take() {
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
                    stop_reply(p, now, remaining, &mut motor, &mut bus, responder, &mut reports)?;
                }
            }
            Some(GateEvent::SpeechEnded { at_ms }) => {
                // Speech that began inside a reply's protected start was not taken up.
                let Some(audio) = utterance.take() else { continue };
                if std::mem::take(&mut began_ducked) && playing.is_some() {
                    // Too short to confirm: a cough, a word to someone else.
                    continue;
                }
                if deaf || std::mem::take(&mut began_deaf) {
                    // Half duplex: while the persona speaks, only "stop" counts.
                    let heard = stt.transcribe(&audio, config.listen)?;
                    if crate::commands::parse(&heard.text) == Some(crate::commands::VoiceCommand::Stop) {
                        if let Some(p) = playing.take() {
                            let now = mic.clock().now_ms();
                            let remaining = mic.output.stop();
                            stop_reply(p, now, remaining, &mut motor, &mut bus, responder, &mut reports)?;
                        }
                    }
                    continue;
                }
                let started = Instant::now();
                let mut timings = TurnTimings { detected_at_ms: now, ..TurnTimings::default() };
                let take = end.transcript(&audio, now, stt, config.listen)?;
                timings.stt_ms = take.stt_ms;
                timings.stt_wait_ms = take.stt_wait_ms;
                // Time the turn waits on the timeline beyond the compute below.
                let waited_ms = if take.speculated { take.stt_wait_ms } else { 0 };
                let transcript = take.transcript;
                let heard = transcript.text.trim().to_owned();
                if heard.is_empty() {
                    continue;
                }
                // Answer in the language the person spoke.
                let speak = if transcript.language == "pt" { Language::Pt } else { config.speak };
                let command = crate::commands::parse(&heard);
                if command == Some(crate::commands::VoiceCommand::Stop) {
                    // Nothing is playing (speech already stopped it): nothing to do.
                    continue;
                }
                let turn = motor.user_spoke().map_err(|e| VoiceError::Inference(e.to_string()))?;
                let asked = Instant::now();
                // The first piece, synthesised while the reply streamed.
                let mut early: Option<Early> = None;
                let reply = match command {
                    Some(c) => {
                        // Handled here, never sent to the persona.
                        rate_now = crate::commands::next_rate(rate_now, c);
                        brief |= c == crate::commands::VoiceCommand::Brief;
                        crate::commands::acknowledgement(c, speak).unwrap_or_default().to_owned()
                    }
                    None => match with_retries(|| {
                        early = None;
                        let mut streamed = String::new();
                        let mut on_text = |delta: &str| {
                            if early.is_some() {
                                return;
                            }
                            streamed.push_str(delta);
                            // The first piece is complete once something follows it.
                            let pieces = speaking_pieces_as(&streamed, config.phrase_first_piece);
                            if pieces.len() < 2 {
                                return;
                            }
                            let model_ms = asked.elapsed().as_millis() as u64;
                            let synth = Instant::now();
                            let request = SynthesisRequest { text: &pieces[0], language: speak, rate: rate_now };
                            if let Ok(pcm) = tts.synthesize(&request) {
                                early = Some(Early {
                                    text: pieces[0].clone(),
                                    pcm: for_playback(pcm.resampled(rate), &pieces[0]),
                                    ready_ms: started.elapsed().as_millis() as u64,
                                    ready_at: Instant::now(),
                                    model_ms,
                                    tts_ms: synth.elapsed().as_millis() as u64,
                                });
                            }
                        };
                        responder.reply_streaming(&heard, &mut on_text)
                    }) {
                        Ok(r) => {
                            failed_turns = 0;
                            r
                        }
                        Err(e) => {
                            early = None;
                            // The loop keeps running: say so instead of stopping.
                            tracing::warn!("voice: the reply failed after {TRIES} tries: {e}");
                            failed_turns += 1;
                            let now_safe = !safe_mode && failed_turns >= SAFE_MODE_AFTER;
                            if now_safe {
                                safe_mode = true;
                                responder.enter_safe_mode()?;
                            }
                            apology(speak, now_safe).to_owned()
                        }
                    },
                };
                timings.reply_ms = asked.elapsed().as_millis() as u64;
                let parts = if brief && command.is_none() {
                    spoken_pieces(&reply, Some(1))
                } else {
                    speaking_pieces_as(&reply, config.phrase_first_piece)
                };
                let mut sentences_pcm = Vec::new();
                if let Some(e) = early.take().filter(|e| parts.first() == Some(&e.text)) {
                    // Spoken from the stream: speech starts when it was ready.
                    timings.reply_ms = e.model_ms;
                    timings.tts_first_ms = e.tts_ms;
                    let charge_ms = e.ready_ms as usize + waited_ms as usize;
                    frames_to_charge = if mic.is_paced() {
                        mic.samples_due_by(e.ready_at).div_ceil(FRAME)
                    } else {
                        (charge_ms * rate as usize / 1000).div_ceil(FRAME)
                    };
                    sentences_pcm.push((e.text, e.pcm));
                }
                for s in parts.iter().skip(sentences_pcm.len()) {
                    let synth = Instant::now();
                    let pcm = tts.synthesize(&SynthesisRequest { text: s, language: speak, rate: rate_now })?;
                    sentences_pcm.push((s.clone(), for_playback(pcm.resampled(rate), s)));
                    if sentences_pcm.len() == 1 {
                        timings.tts_first_ms = synth.elapsed().as_millis() as u64;
                        // The first sentence is ready: this is when speech can start.
                        let charge_ms = started.elapsed().as_millis() as usize + waited_ms as usize;
                        frames_to_charge = if mic.is_paced() {
                            mic.samples_due_by(Instant::now()).div_ceil(FRAME)
                        } else {
                            (charge_ms * rate as usize / 1000).div_ceil(FRAME)
                        };
                    }
                }
                let speculated_ms = if timings.stt_wait_ms < timings.stt_ms { timings.stt_ms } else { 0 };
                let compute_ms = started.elapsed().as_millis() as u64 + speculated_ms;
                // The microphone kept recording while we computed.
                let mut spoke_meanwhile = false;
                for _ in 0..frames_to_charge {
                    let Some(f) = listen(mic)? else { break };
                    if let Some(GateEvent::SpeechStarted { .. }) = gate.push(&f) {
                        utterance = Some(f.clone());
                        spoke_meanwhile = true;
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
                tracing::debug!(
                    end_of_speech_ms = at_ms,
                    detected_at_ms = timings.detected_at_ms,
                    first_audio_ms,
                    stt_ms = timings.stt_ms,
                    stt_wait_ms = timings.stt_wait_ms,
                    reply_ms = timings.reply_ms,
                    tts_first_ms = timings.tts_first_ms,
                    "voice: a reply begins"
                );
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
                        timings,
                    },
                    sentences: lens,
                    queued_total: total,
                });
                // The person took up speaking again while the reply was made
                // (a pause, not the end): they hold the floor, and the reply
                // stops before a word of it is heard, as in a barge-in. (The
                // start of their speech was heard before the reply began, so
                // it is not the reply's echo.) In half duplex or without
                // barge-in, only the stop word counts, as always.
                if spoke_meanwhile && gate.is_speaking() && config.full_duplex && config.barge_in {
                    if let Some(p) = playing.take() {
                        let now = mic.clock().now_ms();
                        let remaining = mic.output.stop();
                        stop_reply(p, now, remaining, &mut motor, &mut bus, responder, &mut reports)?;
                    }
                }
            }
            None => {}
        }
        if playing.is_some() && mic.output.queued() == 0 {
            if let Some(mut p) = playing.take() {
                p.report.spoken = p.spoken(0);
                motor.finished_speaking().map_err(|e| VoiceError::Inference(e.to_string()))?;
                responder.turn_finished(&p.report)?;
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
        responder.turn_finished(&p.report)?;
        reports.push(p.report);
    }
    Ok(reports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_the_model_copies_are_never_spoken() {
        assert_eq!(speakable("It is open for 7 days. [interrupted]"), "It is open for 7 days.");
        assert_eq!(speakable("Sure [interrupted] thing."), "Sure thing.");
        assert_eq!(speakable("[interrupted before saying anything]"), "");
        assert_eq!(speakable("Fine.<|im_end|>"), "Fine.");
        assert_eq!(speakable("Claro, são 7 dias (interrompido)."), "Claro, são 7 dias.");
        assert_eq!(speakable("It is *really* big."), "It is really big.");
        // Round brackets that are speech stay.
        assert_eq!(speakable("Lisbon (the capital) is old."), "Lisbon (the capital) is old.");
        // A reply still streaming: a marker not yet closed is held back.
        assert_eq!(speakable("Sure. [interr"), "Sure.");
        assert_eq!(speakable("Sure. <|im_"), "Sure.");
        assert_eq!(
            speaking_pieces("Paris is the capital of France. [interrupted]"),
            vec!["Paris is the capital", "of France."]
        );
        assert!(speaking_pieces("[interrupted]").is_empty());
        assert!(speaking_pieces("Sure. [interr").iter().all(|p| !p.contains('[')));
    }

    #[test]
    fn a_turn_is_shown_without_the_markers_of_its_reply() {
        let report = TurnReport {
            turn: 1,
            heard: "How long is the trial?".into(),
            reply: "It is 7 days. [interrupted]".into(),
            spoken: "It is 7 days.".into(),
            interrupted: false,
            end_of_speech_ms: 0,
            first_audio_ms: 0,
            barge_in_ms: None,
            playback_stopped_ms: None,
            compute_ms: 0,
            timings: TurnTimings::default(),
        };
        let shown = serde_json::to_value(&report).expect("json");
        assert_eq!(shown["reply"], "It is 7 days.");
        assert!(!shown.to_string().contains('['), "{shown}");
        // The report keeps the text as written: the spoken part is counted in it.
        assert_eq!(spoken_chars(&report.reply, &report.spoken), 13);
    }

    #[test]
    fn the_spoken_part_is_counted_in_the_reply_as_written_markers_and_all() {
        let reply = "Sure. [interrupted] It is 7 days.";
        assert_eq!(spoken_chars(reply, "Sure."), 5);
        assert_eq!(spoken_chars(reply, "Sure. It is 7 days."), reply.chars().count() as u32);
        let ended = "It is 7 days. [interrupted]";
        assert_eq!(spoken_chars(ended, "It is 7 days."), 13);
    }

    #[test]
    fn at_most_the_spoken_sentences_of_a_reply_are_said() {
        let reply = "Paris is the capital of France, on the river Seine. It has two million people. It is old.";
        assert_eq!(
            spoken_pieces(reply, Some(2)),
            vec!["Paris is the capital", "of France,", "on the river Seine.", "It has two million people."]
        );
        assert_eq!(spoken_pieces(reply, Some(1)).len(), 3);
        assert_eq!(spoken_pieces(reply, None), speaking_pieces(reply));
        assert_eq!(spoken_pieces("Sure. [interrupted] It is 7 days. Bye.", Some(2)), vec!["Sure.", "It is 7 days."]);
    }

    #[test]
    fn a_piece_is_played_from_its_first_sound_and_joins_the_rest_of_its_sentence_closely() {
        // 100 ms of silence, 200 ms of a tone with a soft start, 150 ms of silence, at 16 kHz.
        let words = |n: usize| {
            let mut s = vec![0.0f32; 1_600];
            s.extend((0..3_200).map(|i| (i.min(160) as f32 / 160.0) * 0.5 * (i as f32 * 0.2).sin()));
            s.extend(vec![0.0; 2_400]);
            Pcm { samples: s[..n].to_vec(), rate: 16_000 }
        };
        let played = for_playback(words(7_200), "The capital of Italy");
        let first = played.iter().position(|s| s.abs() > 0.005).unwrap();
        let last = played.iter().rposition(|s| s.abs() > 0.005).unwrap();
        assert!(first <= 16 * KEPT_LEAD_MS as usize, "words begin {first} samples in");
        assert!(played.len() - last <= 16 * KEPT_JOIN_MS as usize + 1, "{} samples after the words", played.len() - last);
        // A sentence or a clause keeps the pause after it; only the silence before is cut.
        for end in ["is Rome.", "Yes,", "Is it?"] {
            let played = for_playback(words(7_200), end);
            let first = played.iter().position(|s| s.abs() > 0.005).unwrap();
            let last = played.iter().rposition(|s| s.abs() > 0.005).unwrap();
            assert!(first <= 16 * KEPT_LEAD_MS as usize, "{end}: words begin {first} samples in");
            assert!(played.len() - last > 2_300, "{end}: {} samples after the words", played.len() - last);
        }
        // Silence stays as it is.
        assert_eq!(for_playback(Pcm { samples: vec![0.0; 800], rate: 16_000 }, "Hm").len(), 800);
    }

    #[test]
    fn the_first_piece_is_cut_before_a_phrase_after_three_to_five_words() {
        assert_eq!(
            speaking_pieces("Paris is the capital of France. It is old."),
            vec!["Paris is the capital", "of France.", "It is old."]
        );
        // The rule before: only at a clause break.
        assert_eq!(
            speaking_pieces_as("Paris is the capital of France. It is old.", false),
            vec!["Paris is the capital of France.", "It is old."]
        );
        assert_eq!(speaking_pieces("Go to the shop and buy bread."), vec!["Go to the shop", "and buy bread."]);
        assert_eq!(speaking_pieces("The river runs to Paris."), vec!["The river runs", "to Paris."]);
        // Fewer than three words before, fewer than two after, no phrase: whole.
        assert_eq!(speaking_pieces("It is in Paris."), vec!["It is in Paris."]);
        assert_eq!(speaking_pieces("The river is very long indeed."), vec!["The river is very long indeed."]);
        // Never right after a clause break: that cut is the clause rule's.
        assert_eq!(speaking_pieces("Yes, it is, in town."), vec!["Yes, it is,", "in town."]);
        // Only the first piece; Portuguese too.
        let pt = speaking_pieces("Sim. A capital do Brasil é Brasília.");
        assert_eq!(pt, vec!["Sim.", "A capital do Brasil é Brasília."]);
        let pt = speaking_pieces("Eu moro em Lisboa com a minha irmã.");
        assert_eq!(pt, vec!["Eu moro em Lisboa", "com a minha irmã."]);
        // The verb after a long subject: a one-sentence answer is cut too.
        assert_eq!(speaking_pieces("The capital of Italy is Rome."), vec!["The capital of Italy", "is Rome."]);
        assert_eq!(speaking_pieces("A capital da Itália é Roma."), vec!["A capital da Itália", "é Roma."]);
        assert_eq!(speaking_pieces("My cat is black and white."), vec!["My cat is black", "and white."]);
        // Before a noun phrase after its verb, never after a preposition.
        assert_eq!(
            speaking_pieces("Mercury is often called the hot planet because it is near the Sun."),
            vec!["Mercury is often called", "the hot planet because it is near the Sun."]
        );
        assert_eq!(speaking_pieces("Be's leg is a term used for dogs."), vec!["Be's leg is", "a term used for dogs."]);
        assert_eq!(speaking_pieces("Ele sempre quis uma casa grande perto do mar."), vec!["Ele sempre quis", "uma casa grande perto do mar."]);
        assert_eq!(speaking_pieces("I went to the market yesterday morning."), vec!["I went to the market yesterday morning."]);
        assert_eq!(speaking_pieces("Eu gosto muito da praia nos dias quentes."), vec!["Eu gosto muito", "da praia nos dias quentes."]);
        // A short sentence is soon written whole: not cut there.
        assert_eq!(speaking_pieces("That sounds like a fun idea!"), vec!["That sounds like a fun idea!"]);
        // Streaming: cut as soon as the phrase word is written, never before one that ends the sentence.
        assert_eq!(speaking_pieces("The capital of Italy is"), vec!["The capital of Italy", "is"]);
        assert_eq!(speaking_pieces("The capital of Italy"), vec!["The capital of Italy"]);
        assert_eq!(speaking_pieces("What are you thinking of?"), vec!["What are you thinking of?"]);
    }

    #[test]
    fn the_first_piece_ends_at_a_clause_break_once_a_word_follows_it() {
        assert_eq!(
            speaking_pieces("There are seven continents: Africa, Asia and more."),
            vec!["There are seven continents:", "Africa, Asia and more."]
        );
        assert_eq!(speaking_pieces("I think so, too."), vec!["I think so,", "too."]);
        // Streaming: cut as the first word after the break begins.
        assert_eq!(speaking_pieces("There are seven continents: Af"), vec!["There are seven continents:", "Af"]);
        assert_eq!(speaking_pieces("There are seven continents:"), vec!["There are seven continents:"]);
        // Fewer than three words before the break: not a clause of its own.
        assert_eq!(speaking_pieces("Yes, Paris."), vec!["Yes, Paris."]);
    }

    #[test]
    fn a_streaming_reply_is_cut_where_the_whole_reply_is() {
        for reply in [
            "Paris is the capital of France, and it stands on the Seine. Yes.",
            "The old town of Lisbon, which is big, is by the river.",
            "Well, Paris is the capital of France, truly. Yes.",
            "Yes it is, and in the north of town it rains.",
            "The capital of Italy is Rome.",
            "There are seven continents: Africa, Asia, Europe and the rest.",
            "I think so, too.",
            "Mercury is often called the theory planet.",
            "Mercury is called the hot one because it is near.",
            "Paris is the capital and the largest city.",
        ] {
            let whole = speaking_pieces(reply);
            let mut streamed = String::new();
            for word in reply.split_inclusive(' ') {
                streamed.push_str(word);
                // The first piece is taken once something follows it.
                let pieces = speaking_pieces(&streamed);
                if pieces.len() >= 2 {
                    assert_eq!(pieces[0], whole[0], "{reply:?} streamed as {streamed:?}");
                    break;
                }
            }
        }
    }

    #[test]
    fn replies_are_cut_into_sentences() {
        assert_eq!(sentences("Hi there. How are you? Fine!"), vec!["Hi there.", "How are you?", "Fine!"]);
        assert_eq!(sentences("No stop at the end"), vec!["No stop at the end"]);
        assert_eq!(sentences("Pi is 3.14. Yes."), vec!["Pi is 3.14.", "Yes."]);
    }

    #[test]
    fn what_was_spoken_is_counted_up_to_the_last_sentence_heard() {
        let reply = "Olá, Ana.  Como vai?\nTudo bem!";
        assert_eq!(spoken_chars(reply, ""), 0);
        assert_eq!(spoken_chars(reply, "Olá, Ana."), 9);
        assert_eq!(spoken_chars(reply, "Olá, Ana. Como vai?"), 20);
        assert_eq!(spoken_chars(reply, "Olá, Ana. Como vai? Tudo bem!"), reply.chars().count() as u32);
    }
}
