//! Ledgermind's offline voice engine: it turns speech into text and text
//! into speech on this machine, with no network.
//!
//! It owns: reading and writing WAV audio (any PCM or float WAV, mixed to
//! mono and resampled to the 16 kHz the recogniser wants), Whisper speech to
//! text run in process with candle, espeak-ng text to speech run as a
//! process, the audio input/output traits with a WAV-file backend on a
//! simulated clock, the signal bus (turn-tagged signals on a context and an
//! intervention lane), the motor (the only part that speaks) and locating
//! the voice models in a data directory.
//!
//! It must never: depend on Tauri or on the ledger (turns reach the ledger
//! through the persona pipeline above it), reach the network, or decide
//! what a persona says.

pub mod aec;
pub mod audio;
pub mod bus;
pub mod commands;
pub mod converse;
pub mod devices;
pub mod error;
pub mod live;
pub mod models;
pub mod motor;
pub mod onnx;
pub mod piper;
pub mod resample;
mod retry;
pub mod silero;
pub mod stt;
pub mod tts;
pub mod turn_end;
pub mod vad;
pub mod wav;
pub mod wer;
pub mod whisper;

pub use error::VoiceError;
pub use stt::{Draft, Language, LanguageChoice, Segment, SpeechToText, Transcript};
pub use tts::{EspeakNg, SpeechSynthesizer, SynthesisRequest};

/// The rate every recogniser in this crate works at.
pub const SAMPLE_RATE: u32 = 16_000;
