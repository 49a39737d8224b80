use std::path::PathBuf;

/// Everything that can go wrong in the voice engine, each with what to do
/// about it where there is something to do.
#[derive(Debug, thiserror::Error)]
pub enum VoiceError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a WAV file we can read ({reason}); expected RIFF/WAVE with PCM (8/16/24/32-bit) or 32-bit float samples")]
    BadWav { path: PathBuf, reason: String },
    #[error("{path} holds no audio samples")]
    EmptyAudio { path: PathBuf },
    #[error("cannot write {path}: {reason}")]
    WriteWav { path: PathBuf, reason: String },
    #[error("the speech model {name} is not installed in {dir}; run scripts/setup.sh, then scripts/install-models.sh DATA_DIR")]
    ModelMissing { name: String, dir: PathBuf },
    #[error("the speech model in {dir} is unusable: {reason}")]
    ModelCorrupt { dir: PathBuf, reason: String },
    #[error("{language} speech needs the multilingual Whisper model (models/{model}), which is not installed; only English works with tiny.en")]
    LanguageUnavailable { language: String, model: String },
    #[error("speech recognition failed: {0}")]
    Inference(String),
    #[error("text to speech failed: {0}")]
    Synthesis(String),
    /// The persona's side of a turn (the model, its provider, the ledger),
    /// not the speech engines: told apart so the person is not sent to
    /// check the microphone when the model's server is down.
    #[error("{0}")]
    Reply(String),
    #[error("{0}")]
    Device(String),
}

impl From<candle_core::Error> for VoiceError {
    fn from(e: candle_core::Error) -> Self {
        VoiceError::Inference(e.to_string())
    }
}

impl VoiceError {
    /// The boundary error code (the `{ code, message }` every shell shows).
    pub fn code(&self) -> &'static str {
        match self {
            VoiceError::Io { .. } | VoiceError::BadWav { .. } | VoiceError::EmptyAudio { .. } => "INVALID_INPUT",
            VoiceError::LanguageUnavailable { .. } => "VOICE_LANGUAGE_UNAVAILABLE",
            VoiceError::WriteWav { .. } => "STORAGE_SAVE_FAILED",
            VoiceError::ModelMissing { .. } => "VOICE_MODEL_MISSING",
            VoiceError::ModelCorrupt { .. } => "VOICE_MODEL_CORRUPT",
            VoiceError::Inference(_) => "STT_FAILED",
            VoiceError::Synthesis(_) => "TTS_FAILED",
            VoiceError::Reply(_) => "REPLY_FAILED",
            VoiceError::Device(_) => "VOICE_DEVICE_UNAVAILABLE",
        }
    }
}
