//! ONNX Runtime for the Silero VAD and the Piper voice, loaded at run time
//! (`ort` load-dynamic) from the shared library the setup takes out of the
//! PyPI `onnxruntime` wheel into `models/onnxruntime/`. Nothing links
//! against it: without the library the crate still runs, on webrtc-vad and
//! espeak-ng, and says why.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ort::environment::Environment;
use ort::session::Session;

use crate::error::VoiceError;

/// Where the runtime lives in a models folder.
pub const RUNTIME_DIR: &str = "onnxruntime";
pub const RUNTIME_LIB: &str = "libonnxruntime.so";

pub fn runtime_path(models: &Path) -> PathBuf {
    models.join(RUNTIME_DIR).join(RUNTIME_LIB)
}

/// Why the process's runtime could not be loaded.
#[derive(Debug, Clone)]
enum LoadFailure {
    /// The library is not in the models folder.
    Missing,
    /// The library is there but ONNX Runtime refused it (its own message).
    Unusable(String),
}

/// The process's one runtime: the first library loaded wins (a process
/// cannot load two), and a failure is remembered.
static RUNTIME: OnceLock<Result<Environment, LoadFailure>> = OnceLock::new();

/// Loads ONNX Runtime from `models` once per process.
pub fn runtime(models: &Path) -> Result<&'static Environment, VoiceError> {
    let lib = runtime_path(models);
    let loaded = RUNTIME.get_or_init(|| {
        if !lib.is_file() {
            return Err(LoadFailure::Missing);
        }
        fn unusable(e: impl std::fmt::Display) -> LoadFailure {
            LoadFailure::Unusable(e.to_string())
        }
        ort::init_from(&lib)
            .map_err(unusable)?
            .with_name("ledgermind-voice")
            .build()
            .map_err(unusable)
    });
    match loaded {
        Ok(env) => Ok(env),
        Err(LoadFailure::Missing) => Err(VoiceError::ModelMissing {
            name: RUNTIME_LIB.to_owned(),
            dir: models.join(RUNTIME_DIR),
        }),
        Err(LoadFailure::Unusable(reason)) => Err(VoiceError::ModelCorrupt {
            dir: lib,
            reason: reason.clone(),
        }),
    }
}

/// One single-threaded session on `model` (the voice models are small;
/// the cores belong to Whisper and the language model).
pub fn session(models: &Path, model: &Path) -> Result<Session, VoiceError> {
    let env = runtime(models)?;
    if !model.is_file() {
        return Err(VoiceError::ModelMissing {
            name: model
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            dir: model.parent().map(Path::to_path_buf).unwrap_or_default(),
        });
    }
    let corrupt = |e: String| VoiceError::ModelCorrupt {
        dir: model.to_path_buf(),
        reason: e,
    };
    Session::builder(env)
        .map_err(|e| corrupt(e.to_string()))?
        .with_intra_threads(1)
        .map_err(|e| corrupt(e.to_string()))?
        .with_inter_threads(1)
        .map_err(|e| corrupt(e.to_string()))?
        .commit_from_file(model)
        .map_err(|e| corrupt(e.to_string()))
}

/// An inference error from a session run.
pub(crate) fn run_error(what: &str, e: impl std::fmt::Display) -> VoiceError {
    VoiceError::Inference(format!("{what}: {e}"))
}
