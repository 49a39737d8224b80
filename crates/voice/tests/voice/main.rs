//! The voice engine against real models and real recordings. The Whisper
//! tests need the converted tiny.en model (scripts/setup.sh puts it in
//! $LEDGERMIND_CACHE/models/whisper-tiny.en; LEDGERMIND_TEST_WHISPER
//! overrides) and Debian's pocketsphinx-testdata clips; each says so and is
//! skipped when they are missing.

mod conversation;
mod onnx;
mod portuguese;
mod speech;
mod vad;
mod whisper;

use std::path::PathBuf;

pub fn whisper_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("LEDGERMIND_TEST_WHISPER").map(PathBuf::from).or_else(|| {
        let cache = std::env::var_os("LEDGERMIND_CACHE")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/ledgermind")))?;
        Some(cache.join("models").join(voice::models::WHISPER_TINY_EN))
    })?;
    dir.join("model.safetensors").is_file().then_some(dir)
}

fn cache_dir() -> Option<PathBuf> {
    std::env::var_os("LEDGERMIND_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/ledgermind")))
}

/// The multilingual Whisper base model (scripts/setup.sh).
pub fn whisper_base_dir() -> Option<PathBuf> {
    let dir = cache_dir()?.join("models").join(voice::models::WHISPER_BASE);
    dir.join("model.safetensors").is_file().then_some(dir)
}

/// pytest-audioeval's Portuguese clips (scripts/setup.sh unpacks them).
pub fn portuguese_dir() -> Option<PathBuf> {
    let dir = cache_dir()?.join("voice-fixtures/pt");
    dir.join("pangrama.wav").is_file().then_some(dir)
}

/// The cache's models folder when it holds Silero, the Piper voice and the
/// ONNX Runtime library (scripts/setup.sh).
pub fn onnx_models_dir() -> Option<PathBuf> {
    let models = cache_dir()?.join("models");
    (voice::onnx::runtime_path(&models).is_file()
        && voice::silero::model_path(&models).is_file()
        && voice::piper::model_dir(&models).join(format!("{}.onnx", voice::piper::VOICE)).is_file())
    .then_some(models)
}

pub fn librivox_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("LEDGERMIND_TEST_LIBRIVOX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/share/pocketsphinx/test/data/librivox"));
    dir.join("transcription").is_file().then_some(dir)
}

/// (clip path, reference text) for the five LibriVox utterances.
pub fn librivox_clips() -> Option<Vec<(PathBuf, String)>> {
    let dir = librivox_dir()?;
    let text = std::fs::read_to_string(dir.join("transcription")).ok()?;
    let clips: Vec<_> = text
        .lines()
        .filter_map(|l| {
            let (a, b) = (l.rfind('(')?, l.rfind(')')?);
            let reference = l[..a].replace("<s>", "").replace("</s>", "").trim().to_owned();
            Some((dir.join(format!("{}.wav", &l[a + 1..b])), reference))
        })
        .collect();
    (clips.len() == 5).then_some(clips)
}

pub fn espeak_available() -> bool {
    std::process::Command::new("espeak-ng").arg("--version").output().is_ok_and(|o| o.status.success())
}
