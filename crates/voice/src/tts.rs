//! Text to speech: the trait the voice loop speaks through, and espeak-ng
//! run as a process (the only offline Portuguese voice; the fallback for
//! English). The speaking rate is set in the synthesiser itself, never by
//! resampling, so a slower voice keeps its pitch.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::error::VoiceError;
use crate::stt::Language;
use crate::wav::{decode_bytes, Pcm};

/// espeak-ng's default speed, words per minute: rate 1.0.
const ESPEAK_BASE_WPM: f32 = 175.0;

#[derive(Debug, Clone, PartialEq)]
pub struct SynthesisRequest<'a> {
    pub text: &'a str,
    pub language: Language,
    /// 1.0 is the voice's normal speed; 0.5 half as fast, 2.0 twice.
    pub rate: f32,
}

pub trait SpeechSynthesizer {
    fn synthesize(&self, request: &SynthesisRequest<'_>) -> Result<Pcm, VoiceError>;
}

/// The speaking rates we accept (outside them espeak-ng is unintelligible).
pub const RATE_RANGE: std::ops::RangeInclusive<f32> = 0.5..=2.0;

/// espeak-ng as a child process; `program` is its path or name on PATH.
pub struct EspeakNg {
    pub program: String,
}

impl Default for EspeakNg {
    fn default() -> Self {
        Self { program: "espeak-ng".into() }
    }
}

impl EspeakNg {
    fn voice(language: Language) -> &'static str {
        match language {
            Language::En => "en-us",
            Language::Pt => "pt-br",
        }
    }
}

/// What every synthesiser refuses before it starts: a rate outside
/// [`RATE_RANGE`] and nothing to say.
pub(crate) fn check_request(request: &SynthesisRequest<'_>) -> Result<(), VoiceError> {
    if !RATE_RANGE.contains(&request.rate) {
        return Err(VoiceError::Synthesis(format!(
            "rate {} is outside {}..={}",
            request.rate,
            RATE_RANGE.start(),
            RATE_RANGE.end()
        )));
    }
    if request.text.trim().is_empty() {
        return Err(VoiceError::Synthesis("there is no text to say".into()));
    }
    Ok(())
}

impl SpeechSynthesizer for EspeakNg {
    fn synthesize(&self, request: &SynthesisRequest<'_>) -> Result<Pcm, VoiceError> {
        check_request(request)?;
        let wpm = (ESPEAK_BASE_WPM * request.rate).round() as u32;
        // The text goes through stdin, never the command line: it may start
        // with "-" or be longer than an argument may be.
        let mut child = Command::new(&self.program)
            .args(["-v", Self::voice(request.language), "-s", &wpm.to_string(), "--stdout"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| VoiceError::Synthesis(format!("cannot start {}: {e} (install espeak-ng)", self.program)))?;
        // Written from another thread: espeak-ng may fill its stdout pipe
        // before it has read all of a long text.
        let writer = child.stdin.take().map(|mut stdin| {
            let text = request.text.to_owned();
            std::thread::spawn(move || stdin.write_all(text.as_bytes()))
        });
        let out = child
            .wait_with_output()
            .map_err(|e| VoiceError::Synthesis(format!("{} did not finish: {e}", self.program)))?;
        if let Some(w) = writer {
            match w.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(VoiceError::Synthesis(format!("cannot send text to {}: {e}", self.program))),
                Err(_) => return Err(VoiceError::Synthesis("the text writer thread panicked".into())),
            }
        }
        if !out.status.success() {
            return Err(VoiceError::Synthesis(format!(
                "{} failed ({}): {}",
                self.program,
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        // espeak-ng streams a WAV whose header sizes are left at their
        // maximum; fix them so the reader sees exactly the bytes we have.
        let mut bytes = out.stdout;
        patch_stream_header(&mut bytes);
        decode_bytes(&bytes, "espeak-ng output")
    }
}

/// Sets the RIFF and data chunk sizes of a streamed WAV to what is there.
fn patch_stream_header(bytes: &mut [u8]) {
    if bytes.len() < 44 || &bytes[0..4] != b"RIFF" || &bytes[8..12] != b"WAVE" {
        return;
    }
    let riff = (bytes.len() - 8) as u32;
    bytes[4..8].copy_from_slice(&riff.to_le_bytes());
    let mut pos = 12;
    while pos + 8 <= bytes.len() {
        let id = [bytes[pos], bytes[pos + 1], bytes[pos + 2], bytes[pos + 3]];
        if &id == b"data" {
            let size = (bytes.len() - pos - 8) as u32;
            bytes[pos + 4..pos + 8].copy_from_slice(&size.to_le_bytes());
            return;
        }
        let size = u32::from_le_bytes([bytes[pos + 4], bytes[pos + 5], bytes[pos + 6], bytes[pos + 7]]) as usize;
        pos += 8 + size + (size & 1);
    }
}

/// A synthesiser for logic tests: a tone whose length follows the text
/// and the rate (60 ms per character at rate 1).
#[cfg(feature = "test-support")]
pub struct ToneSynth {
    pub rate_hz: u32,
}

#[cfg(feature = "test-support")]
impl SpeechSynthesizer for ToneSynth {
    fn synthesize(&self, request: &SynthesisRequest<'_>) -> Result<Pcm, VoiceError> {
        let secs = request.text.chars().count() as f32 * 0.06 / request.rate;
        let n = (secs * self.rate_hz as f32) as usize;
        let samples =
            (0..n).map(|i| 0.3 * (2.0 * std::f32::consts::PI * 220.0 * i as f32 / self.rate_hz as f32).sin()).collect();
        Ok(Pcm { samples, rate: self.rate_hz })
    }
}
