//! Voice activity: WebRTC's VAD as the cheap pre-gate, 20 ms frames, and,
//! when it is installed, Silero's verdict on the same audio (a frame is
//! voiced only when both say so; WebRTC alone is the fallback), with
//! hysteresis so a cough does not start an utterance and a breath does not
//! end one (Pipecat's defaults: speech after 200 ms voiced, the end after
//! 800 ms unvoiced).

use webrtc_vad::{SampleRate, Vad, VadMode};

/// 20 ms at 16 kHz.
pub const FRAME: usize = 320;
const FRAME_MS: u64 = 20;
/// Frames over which Silero must be sure of silence for an early end (100 ms).
const QUIET_FRAMES: usize = 5;
/// Silero's speech probability that counts as voiced (its authors' default).
const SILERO_THRESHOLD: f32 = 0.5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GateConfig {
    /// Voiced time, within the start window, that starts speech.
    pub start_ms: u64,
    /// Unvoiced time that ends it.
    pub stop_ms: u64,
}

impl Default for GateConfig {
    fn default() -> Self {
        Self { start_ms: 200, stop_ms: 800 }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateEvent {
    /// Speech started; the time is where the first voiced frame began.
    SpeechStarted { at_ms: u64 },
    /// Speech ended; the time is the end of the last voiced frame.
    SpeechEnded { at_ms: u64 },
}

pub struct SpeechGate {
    vad: Vad,
    silero: Option<crate::silero::SileroVad>,
    config: GateConfig,
    now_ms: u64,
    speaking: bool,
    voiced_run_ms: u64,
    run_start_ms: u64,
    unvoiced_run_ms: u64,
    last_voiced_end_ms: u64,
    /// Silero's speech probabilities of the last frames of the current
    /// unvoiced run (at most `QUIET_FRAMES`).
    silence_probs: std::collections::VecDeque<f32>,
}

impl SpeechGate {
    pub fn new(config: GateConfig) -> Self {
        Self {
            vad: Vad::new_with_rate_and_mode(SampleRate::Rate16kHz, VadMode::Aggressive),
            silero: None,
            config,
            now_ms: 0,
            speaking: false,
            voiced_run_ms: 0,
            run_start_ms: 0,
            unvoiced_run_ms: 0,
            last_voiced_end_ms: 0,
            silence_probs: std::collections::VecDeque::new(),
        }
    }

    /// The gate with Silero confirming WebRTC's voiced frames.
    pub fn with_silero(config: GateConfig, silero: crate::silero::SileroVad) -> Self {
        let mut gate = Self::new(config);
        gate.silero = Some(silero);
        gate
    }

    /// The gate with Silero loaded from the `models` folder when one is
    /// given; WebRTC alone (said in the log) when it cannot be loaded.
    pub fn with_silero_from(config: GateConfig, models: Option<&std::path::Path>) -> Self {
        match models.map(crate::silero::SileroVad::load) {
            Some(Ok(silero)) => Self::with_silero(config, silero),
            Some(Err(e)) => {
                tracing::warn!("Silero VAD unavailable, WebRTC's VAD alone: {e}");
                Self::new(config)
            }
            None => Self::new(config),
        }
    }

    /// Whether Silero is confirming (false: WebRTC alone, or Silero failed).
    pub fn uses_silero(&self) -> bool {
        self.silero.is_some()
    }

    /// Forgets the current run: speech that goes on is detected afresh.
    pub fn restart(&mut self) {
        self.speaking = false;
        self.voiced_run_ms = 0;
        self.unvoiced_run_ms = 0;
    }

    pub fn is_speaking(&self) -> bool {
        self.speaking
    }

    /// How long the person has been silent inside an utterance (0 while
    /// voiced, and outside speech).
    pub fn silence_ms(&self) -> u64 {
        if self.speaking {
            self.unvoiced_run_ms
        } else {
            0
        }
    }

    /// Silero's highest speech probability over the last 100 ms of the
    /// current silence: how sure it is now that the person stopped (None
    /// without Silero; 1 before 100 ms of silence).
    pub fn silence_peak(&self) -> Option<f32> {
        self.silero.as_ref().map(|_| {
            if self.silence_probs.len() < QUIET_FRAMES {
                1.0
            } else {
                self.silence_probs.iter().copied().fold(0.0, f32::max)
            }
        })
    }

    /// Silero's highest speech probability over the current silence so
    /// far, up to its last 100 ms (None without Silero, or while voiced).
    pub fn silence_peak_so_far(&self) -> Option<f32> {
        self.silero.as_ref()?;
        (self.speaking && !self.silence_probs.is_empty())
            .then(|| self.silence_probs.iter().copied().fold(0.0, f32::max))
    }

    /// Ends the utterance now, before the hold has run out (an early end
    /// of turn decided by the caller); None when no speech is under way.
    pub fn end_now(&mut self) -> Option<GateEvent> {
        if !self.speaking {
            return None;
        }
        self.speaking = false;
        self.voiced_run_ms = 0;
        Some(GateEvent::SpeechEnded { at_ms: self.last_voiced_end_ms })
    }

    /// How long the current run of voiced frames has lasted (gaps up to 40 ms forgiven).
    pub fn voiced_run_ms(&self) -> u64 {
        self.voiced_run_ms
    }

    /// Feeds one 20 ms frame (16 kHz mono, [-1, 1]); returns an event when
    /// the state changes. A frame of another length is zero-padded or cut.
    pub fn push(&mut self, frame: &[f32]) -> Option<GateEvent> {
        let mut pcm: Vec<i16> = frame.iter().take(FRAME).map(|s| (s.clamp(-1.0, 1.0) * 32767.0) as i16).collect();
        pcm.resize(FRAME, 0);
        // The VAD only fails on a wrong frame length, which cannot happen here.
        let mut voiced = self.vad.is_voice_segment(&pcm).unwrap_or(false);
        let mut prob = 0.0;
        // Silero hears every frame (its state follows the audio) and has the last word.
        if let Some(silero) = self.silero.as_mut() {
            match silero.push(frame) {
                Ok(p) => {
                    prob = p;
                    voiced &= p >= SILERO_THRESHOLD;
                }
                Err(e) => {
                    tracing::warn!("Silero VAD failed, WebRTC's VAD alone from now on: {e}");
                    self.silero = None;
                }
            }
        }
        let start = self.now_ms;
        self.now_ms += FRAME_MS;
        if voiced {
            if self.voiced_run_ms == 0 {
                self.run_start_ms = start;
            }
            self.voiced_run_ms += FRAME_MS;
            self.unvoiced_run_ms = 0;
            self.silence_probs.clear();
            self.last_voiced_end_ms = self.now_ms;
            if !self.speaking && self.voiced_run_ms >= self.config.start_ms {
                self.speaking = true;
                return Some(GateEvent::SpeechStarted { at_ms: self.run_start_ms });
            }
        } else {
            self.unvoiced_run_ms += FRAME_MS;
            self.silence_probs.push_back(prob);
            if self.silence_probs.len() > QUIET_FRAMES {
                self.silence_probs.pop_front();
            }
            // Short gaps inside a start run are forgiven; longer ones reset it.
            if self.unvoiced_run_ms > 2 * FRAME_MS {
                self.voiced_run_ms = 0;
            }
            if self.speaking && self.unvoiced_run_ms >= self.config.stop_ms {
                self.speaking = false;
                return Some(GateEvent::SpeechEnded { at_ms: self.last_voiced_end_ms });
            }
        }
        None
    }
}

/// The utterances of a whole recording, as (start_ms, end_ms).
pub fn utterances(pcm_16k: &[f32], config: GateConfig) -> Vec<(u64, u64)> {
    let mut gate = SpeechGate::new(config);
    let mut out = Vec::new();
    let mut open = None;
    for frame in pcm_16k.chunks(FRAME) {
        match gate.push(frame) {
            Some(GateEvent::SpeechStarted { at_ms }) => open = Some(at_ms),
            Some(GateEvent::SpeechEnded { at_ms }) => {
                if let Some(s) = open.take() {
                    out.push((s, at_ms));
                }
            }
            None => {}
        }
    }
    if let Some(s) = open {
        out.push((s, gate.last_voiced_end_ms));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silence_and_a_short_click_are_not_speech() {
        let mut pcm = vec![0.0f32; 16_000 * 3];
        // A 40 ms burst of a loud 300 Hz tone.
        for (i, s) in pcm[16_000..16_640].iter_mut().enumerate() {
            *s = 0.8 * (2.0 * std::f32::consts::PI * 300.0 * i as f32 / 16_000.0).sin();
        }
        assert!(utterances(&pcm, GateConfig::default()).is_empty());
    }
}
