//! Echo cancellation on the microphone, with what the output stage played
//! as the reference: WebRTC's AEC3 (the `sonora` port), 10 ms at a time.
//! No noise suppression: it eats the user's voice during double talk, which
//! is exactly when barge-in must hear it.

use sonora::config::EchoCanceller as Aec3;
use sonora::{AudioProcessing, Config, StreamConfig};

use crate::error::VoiceError;

pub struct EchoCanceller {
    apm: AudioProcessing,
    chunk: usize,
}

impl EchoCanceller {
    pub fn new(rate: u32) -> Self {
        let config = Config { echo_canceller: Some(Aec3::default()), ..Default::default() };
        let stream = StreamConfig::new(rate, 1);
        let apm = AudioProcessing::builder().config(config).capture_config(stream).render_config(stream).build();
        Self { apm, chunk: (rate / 100) as usize }
    }

    /// Cleans `mic` in place given `played`, the same span of what the
    /// speaker played (both a whole number of 10 ms chunks).
    pub fn process(&mut self, mic: &mut [f32], played: &[f32]) -> Result<(), VoiceError> {
        let fail = |e: sonora::Error| VoiceError::Device(format!("echo canceller: {e:?}"));
        for (m, p) in mic.chunks_mut(self.chunk).zip(played.chunks(self.chunk)) {
            if m.len() != self.chunk || p.len() != self.chunk {
                break;
            }
            let mut render_out = vec![0f32; self.chunk];
            self.apm.process_render_f32(&[p], &mut [&mut render_out]).map_err(fail)?;
            let input = m.to_vec();
            self.apm.process_capture_f32(&[&input], &mut [m]).map_err(fail)?;
        }
        Ok(())
    }
}
