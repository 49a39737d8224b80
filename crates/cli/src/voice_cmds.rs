//! `ledgermind voice …`: the offline voice engine driven from audio files
//! and the machine's sound devices. None of these open the ledger.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use app::DataDir;
use clap::Subcommand;
use serde::Serialize;
use voice::models::whisper_for;
use voice::whisper::Whisper;
use voice::{EspeakNg, Language, LanguageChoice, SpeechSynthesizer, SpeechToText, SynthesisRequest, VoiceError};

use crate::common::print_json;

#[derive(Debug, Subcommand)]
pub enum VoiceCmd {
    /// List the sound devices (inputs and outputs); none is an answer (`[]`),
    /// an error only when the sound system cannot be asked.
    Devices {
        #[arg(long)]
        json: bool,
    },
    /// Transcribe FILE.wav (any PCM or float WAV; resampled to 16 kHz mono).
    Transcribe {
        file: PathBuf,
        /// en, pt or auto (auto needs the multilingual model to detect).
        #[arg(long, default_value = "en")]
        language: LanguageChoice,
        #[arg(long)]
        json: bool,
    },
    /// Speak TEXT into a WAV file (espeak-ng; the rate is set in the synthesiser).
    Say {
        text: String,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value = "en")]
        language: Language,
        /// Speaking rate: 1.0 normal, 0.5 to 2.0.
        #[arg(long, default_value_t = 1.0)]
        rate: f32,
    },
    /// Talk to PERSONA with IN.wav as the microphone (simulated clock, or
    /// the wall clock with --realtime); what the speaker plays is written
    /// to OUT.wav on the same timeline.
    Converse {
        persona: String,
        #[arg(long)]
        input: PathBuf,
        #[arg(long)]
        output: PathBuf,
        /// Feed what is played back into the microphone at DB (e.g. -6), 60 ms late.
        #[arg(long, allow_hyphen_values = true)]
        echo_db: Option<f32>,
        /// auto (English or Portuguese, told apart by the multilingual
        /// model, English heard by tiny.en when installed; the reply is
        /// spoken in the language heard), en (Whisper tiny.en, faster, and
        /// it hears English better) or pt.
        #[arg(long, default_value = "auto")]
        language: LanguageChoice,
        /// Feed IN.wav at the wall clock's speed, as a microphone does: the
        /// reading ahead between turns, the drafts and the send take the
        /// time they take in the tray's Talk (the run lasts as long as the file).
        #[arg(long)]
        realtime: bool,
        #[arg(long)]
        json: bool,
    },
}

impl VoiceCmd {
    /// Only `converse` talks to a persona, so only it opens the profile.
    pub fn needs_engine(&self) -> bool {
        matches!(self, VoiceCmd::Converse { .. })
    }
}

fn fail(e: &VoiceError) -> ExitCode {
    eprintln!("error [{}]: {e}", e.code());
    ExitCode::from(1)
}

fn models_dir(home: Option<PathBuf>) -> PathBuf {
    home.map(DataDir::new).unwrap_or_else(DataDir::from_env).models()
}

#[derive(Serialize)]
struct TranscribeOutput {
    text: String,
    language: String,
    segments: Vec<voice::Segment>,
    audio_ms: u64,
    compute_ms: u64,
}

pub fn run(home: Option<PathBuf>, cmd: VoiceCmd) -> ExitCode {
    match cmd {
        VoiceCmd::Devices { json } => devices(json),
        VoiceCmd::Transcribe { file, language, json } => transcribe(&models_dir(home), &file, language, json),
        VoiceCmd::Say { text, out, language, rate } => say(&models_dir(home), &text, &out, language, rate),
        VoiceCmd::Converse { .. } => ExitCode::SUCCESS,
    }
}

fn transcribe(models: &Path, file: &Path, language: LanguageChoice, json: bool) -> ExitCode {
    // The audio is checked before the model is loaded: a bad file fails fast.
    let started = Instant::now();
    let pcm = match voice::wav::read_mono(file, voice::SAMPLE_RATE) {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    let choice = match whisper_for(models, language) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    if choice.english_only && language == LanguageChoice::Auto {
        eprintln!("note: only the English model (tiny.en) is installed; transcribing as English");
    }
    let mut model = match Whisper::load(&choice.dir) {
        Ok(m) => m,
        Err(e) => return fail(&e),
    };
    let transcript = match model.transcribe(&pcm.samples, language) {
        Ok(t) => t,
        Err(e) => return fail(&e),
    };
    let out = TranscribeOutput {
        text: transcript.text,
        language: transcript.language,
        segments: transcript.segments,
        audio_ms: pcm.duration_ms(),
        compute_ms: started.elapsed().as_millis() as u64,
    };
    if json {
        return print_json(&out);
    }
    for s in &out.segments {
        println!("[{} → {}] {}", clock(s.start_ms), clock(s.end_ms), s.text);
    }
    eprintln!("{} of {} audio in {} ms", out.language, clock(out.audio_ms), out.compute_ms);
    ExitCode::SUCCESS
}

fn devices(json: bool) -> ExitCode {
    let list = match voice::devices::available() {
        Ok(l) => l,
        Err(e) => return fail(&e),
    };
    if json {
        return print_json(&list);
    }
    if list.is_empty() {
        // An answer, not a failure: say plainly what that means.
        println!("{}", voice::devices::no_device());
        return ExitCode::SUCCESS;
    }
    for d in &list {
        let dir = match (d.input, d.output) {
            (true, true) => "in/out",
            (true, false) => "in",
            (false, true) => "out",
            (false, false) => "-",
        };
        let default = match (d.default_input, d.default_output) {
            (true, true) => " (default in/out)",
            (true, false) => " (default in)",
            (false, true) => " (default out)",
            (false, false) => "",
        };
        println!("{dir:<7} {}{default}  [{}]", d.name, d.id);
    }
    ExitCode::SUCCESS
}

fn clock(ms: u64) -> String {
    format!("{:02}:{:02}.{:03}", ms / 60_000, (ms / 1000) % 60, ms % 1000)
}

/// Piper for English when it is installed, espeak-ng otherwise (and for Portuguese).
fn synthesizer(models: &Path) -> Box<dyn SpeechSynthesizer + Send> {
    match voice::piper::Piper::load(models) {
        Ok(p) => Box::new(p),
        Err(e) => {
            eprintln!("note: espeak-ng speaks (the Piper voice is unavailable: {e})");
            Box::new(EspeakNg::default())
        }
    }
}

fn say(models: &Path, text: &str, out: &Path, language: Language, rate: f32) -> ExitCode {
    let tts = synthesizer(models);
    let pcm = match tts.synthesize(&SynthesisRequest { text, language, rate }) {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    if let Err(e) = voice::wav::write_pcm16(out, &pcm) {
        return fail(&e);
    }
    eprintln!("wrote {} ({} ms at {} Hz)", out.display(), pcm.duration_ms(), pcm.rate);
    ExitCode::SUCCESS
}

pub async fn converse(ctx: &crate::common::Ctx, home: Option<PathBuf>, cmd: VoiceCmd) -> ExitCode {
    let VoiceCmd::Converse { persona, input, output, echo_db, language, realtime, json } = cmd else {
        return ExitCode::SUCCESS;
    };
    let pcm = match voice::wav::read_mono(&input, voice::SAMPLE_RATE) {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    let models = models_dir(home);
    // Auto listens in English or Portuguese and answers in the one heard;
    // with only tiny.en installed it listens in English.
    let listen = match (language, whisper_for(&models, LanguageChoice::Auto)) {
        (LanguageChoice::Auto, Ok(c)) if c.english_only => {
            eprintln!("note: only the English model (tiny.en) is installed; listening in English");
            LanguageChoice::Fixed(Language::En)
        }
        (_, Err(e)) => return fail(&e),
        (l, Ok(_)) => l,
    };
    // Auto with both models installed hears English with tiny.en and tells
    // Portuguese with the multilingual model (voice::whisper::bilingual).
    if let Err(e) = voice::models::recogniser_name(&models, listen) {
        return fail(&e);
    }
    // A spoken conversation stays between turns, as the window does: the
    // persona's model loads and the start of its prompt is read while
    // Whisper loads, and the next prompt while a reply is heard; a message
    // sent meanwhile stops the reading, keeping what it read.
    let conversation = ctx.engine.conversation().clone();
    conversation.read_ahead_between_turns(true);
    let warming = {
        let (conversation, persona) = (conversation.clone(), persona.clone());
        tokio::spawn(async move { conversation.open(&persona).await })
    };
    let responder = app::voice::PersonaResponder::new(conversation, persona, tokio::runtime::Handle::current());
    let result = tokio::task::spawn_blocking(move || -> Result<_, VoiceError> {
        let (mut stt, _) = voice::models::recogniser_for(&models, listen)?;
        let mut responder = responder;
        let mut mic =
            voice::audio::WavLoopback::new(pcm, echo_db.map(|db| voice::audio::Echo::new(db, 60, voice::SAMPLE_RATE)));
        if realtime {
            mic = mic.paced();
        }
        // Full duplex with the echo canceller on the microphone, the first
        // half second of each reply protected while it converges. No
        // ducking: in the latency benchmark (crates/voice/examples) it made
        // no false barge-in fewer (0 of 10 either way at -6 dB) and put the
        // barge-in decision about 1 s after the person starts instead of
        // under 300 ms (goal 600).
        let config = voice::converse::ConverseConfig {
            full_duplex: true,
            echo_cancel: true,
            protect_ms: 500,
            listen,
            silero_models: Some(models.clone()),
            // The utterance is recognised while it is spoken (a draft every
            // 500 ms), so little is left at its end; the turn ends after
            // 300 ms of silence when the words end a sentence and Silero is
            // sure, after 1.3 s when they trail off ("I was thinking
            // that"), else after the gate's 800 ms hold (latency_bench
            // measures each against the hold alone).
            endpoint: Some(voice::converse::Endpoint::default()),
            ..Default::default()
        };
        let tts = synthesizer(&models);
        let turns = voice::converse::converse(&mut mic, stt.as_mut(), &mut responder, tts.as_ref(), &config)?;
        let played = voice::wav::Pcm { samples: mic.played().to_vec(), rate: voice::SAMPLE_RATE };
        Ok((turns, played))
    })
    .await;
    warming.abort();
    let (turns, played) = match result {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return fail(&e),
        Err(e) => {
            eprintln!("error: the voice loop stopped: {e}");
            return ExitCode::from(1);
        }
    };
    if let Err(e) = voice::wav::write_pcm16(&output, &played) {
        return fail(&e);
    }
    for t in &turns {
        if json {
            match serde_json::to_string(t) {
                Ok(line) => println!("{line}"),
                Err(e) => {
                    eprintln!("error: cannot encode JSON: {e}");
                    return ExitCode::from(1);
                }
            }
        } else {
            println!(
                "turn {} [{} → first audio {}]{} heard: {}\n  reply: {}",
                t.turn,
                clock(t.end_of_speech_ms),
                clock(t.first_audio_ms),
                if t.interrupted { " (interrupted)" } else { "" },
                t.heard,
                t.spoken
            );
        }
        let w = &t.timings;
        eprintln!(
            "turn {}: speech started {} ms after the end of speech; recognition + reply + first sentence took {} ms \
             (end decided {} ms after the speech; waited {} ms for recognition of {} ms; reply to its first piece {} ms; \
             first piece synthesised in {} ms)",
            t.turn,
            t.first_audio_ms.saturating_sub(t.end_of_speech_ms),
            t.compute_ms,
            w.detected_at_ms.saturating_sub(t.end_of_speech_ms),
            w.stt_wait_ms,
            w.stt_ms,
            w.reply_ms,
            w.tts_first_ms
        );
    }
    ExitCode::SUCCESS
}
