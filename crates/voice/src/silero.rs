//! Silero VAD (the `.onnx` inside PyPI `livekit-plugins-silero`) run with
//! ONNX Runtime: 32 ms windows at 16 kHz with the 64 samples before each as
//! context and a recurrent state carried between windows.

use std::path::{Path, PathBuf};

use ort::session::Session;
use ort::value::Tensor;

use crate::error::VoiceError;
use crate::onnx;

/// Samples per window at 16 kHz (32 ms).
pub const WINDOW: usize = 512;
const CONTEXT: usize = 64;
const STATE: usize = 2 * 128;

/// Where the model lives in a models folder.
pub fn model_path(models: &Path) -> PathBuf {
    models.join("silero-vad").join("silero_vad.onnx")
}

pub struct SileroVad {
    session: Session,
    state: Vec<f32>,
    context: Vec<f32>,
    pending: Vec<f32>,
    last: f32,
}

impl SileroVad {
    /// Loads the model and ONNX Runtime from `models`.
    pub fn load(models: &Path) -> Result<Self, VoiceError> {
        let session = onnx::session(models, &model_path(models))?;
        Ok(Self { session, state: vec![0.0; STATE], context: vec![0.0; CONTEXT], pending: Vec::new(), last: 0.0 })
    }

    /// Forgets the audio heard so far.
    pub fn reset(&mut self) {
        self.state.iter_mut().for_each(|s| *s = 0.0);
        self.context.iter_mut().for_each(|s| *s = 0.0);
        self.pending.clear();
        self.last = 0.0;
    }

    /// The speech probability of one 512-sample window.
    pub fn window(&mut self, window: &[f32]) -> Result<f32, VoiceError> {
        let mut input = Vec::with_capacity(CONTEXT + WINDOW);
        input.extend_from_slice(&self.context);
        input.extend(window.iter().take(WINDOW).copied());
        input.resize(CONTEXT + WINDOW, 0.0);
        self.context.copy_from_slice(&input[WINDOW..]);
        let err = |e: ort::Error| onnx::run_error("the Silero VAD failed", e);
        let inputs = ort::inputs![
            "input" => Tensor::from_array(([1usize, CONTEXT + WINDOW], input)).map_err(err)?,
            "state" => Tensor::from_array(([2usize, 1, 128], self.state.clone())).map_err(err)?,
            "sr" => Tensor::from_array(((), vec![crate::SAMPLE_RATE as i64])).map_err(err)?,
        ];
        let outputs = self.session.run(inputs).map_err(err)?;
        let (_, p) = outputs["output"].try_extract_tensor::<f32>().map_err(err)?;
        let p = p.first().copied().unwrap_or(0.0);
        let (_, state) = outputs["stateN"].try_extract_tensor::<f32>().map_err(err)?;
        if state.len() == STATE {
            self.state.copy_from_slice(state);
        }
        self.last = p;
        Ok(p)
    }

    /// Feeds samples of any length; returns the probability of the latest
    /// complete window (the previous one until a window completes).
    pub fn push(&mut self, samples: &[f32]) -> Result<f32, VoiceError> {
        self.pending.extend_from_slice(samples);
        while self.pending.len() >= WINDOW {
            let w: Vec<f32> = self.pending.drain(..WINDOW).collect();
            self.window(&w)?;
        }
        Ok(self.last)
    }
}
