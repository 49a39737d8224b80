//! Audio in and out behind traits, and the WAV-file backend on a simulated
//! clock that tests and the CLI use in place of a sound card (or, paced,
//! at the wall clock's speed, as a sound card gives its frames).
//!
//! Playback always goes through [`OutputStage`]: the device (or the file
//! backend) pulls from it, so the samples actually played are known (the
//! echo canceller's reference) and `stop` drops everything queued at once
//! instead of letting buffered speech run on after an interruption.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::error::VoiceError;
use crate::wav::Pcm;

/// A source of microphone audio, 16 kHz mono.
pub trait AudioInput {
    /// The next `len` samples, or `None` once the input has ended.
    fn next_frame(&mut self, len: usize) -> Result<Option<Vec<f32>>, VoiceError>;
}

/// Where speech goes to be played.
pub trait AudioOutput {
    /// Queues samples to play after what is already queued.
    fn enqueue(&mut self, samples: &[f32]);
    /// Drops everything queued; returns how many samples were dropped.
    fn stop(&mut self) -> usize;
    /// Samples still waiting to be played.
    fn queued(&self) -> usize;
    /// Output gain (1.0 normal; lower to duck the voice).
    fn set_gain(&mut self, gain: f32);
}

/// Our output stage: a queue the device pulls from, with a gain.
#[derive(Debug)]
pub struct OutputStage {
    queue: VecDeque<f32>,
    gain: f32,
}

impl Default for OutputStage {
    /// Full gain (a derived default would be silent).
    fn default() -> Self {
        Self::new()
    }
}

impl OutputStage {
    pub fn new() -> Self {
        Self { queue: VecDeque::new(), gain: 1.0 }
    }

    /// The next `len` samples to play (silence once the queue is empty),
    /// with the gain applied: exactly what reaches the speaker.
    pub fn pull(&mut self, len: usize) -> Vec<f32> {
        (0..len).map(|_| self.queue.pop_front().map_or(0.0, |s| s * self.gain)).collect()
    }
}

impl AudioOutput for OutputStage {
    fn enqueue(&mut self, samples: &[f32]) {
        self.queue.extend(samples.iter().copied());
    }
    fn stop(&mut self) -> usize {
        let n = self.queue.len();
        self.queue.clear();
        n
    }
    fn queued(&self) -> usize {
        self.queue.len()
    }
    fn set_gain(&mut self, gain: f32) {
        self.gain = gain.clamp(0.0, 1.0);
    }
}

/// Time measured in samples processed, never the wall clock: a run over a
/// file gives the same timeline on any machine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimClock {
    samples: u64,
    rate: u32,
}

impl SimClock {
    pub fn new(rate: u32) -> Self {
        Self { samples: 0, rate }
    }
    pub fn advance(&mut self, samples: usize) {
        self.samples += samples as u64;
    }
    pub fn samples(&self) -> u64 {
        self.samples
    }
    pub fn now_ms(&self) -> u64 {
        if self.rate == 0 {
            return 0;
        }
        self.samples * 1000 / u64::from(self.rate)
    }
}

/// Played audio fed back into the microphone, as a loudspeaker in a room
/// would: attenuated and late.
#[derive(Debug, Clone)]
pub struct Echo {
    gain: f32,
    line: VecDeque<f32>,
}

impl Echo {
    /// `db` relative to what is played (e.g. -6.0), `delay_ms` room and device latency.
    pub fn new(db: f32, delay_ms: u32, rate: u32) -> Self {
        let delay = (u64::from(delay_ms) * u64::from(rate) / 1000) as usize;
        Self { gain: 10f32.powf(db / 20.0), line: std::iter::repeat_n(0.0, delay).collect() }
    }

    fn pass(&mut self, played: &[f32]) -> Vec<f32> {
        self.line.extend(played.iter().copied());
        (0..played.len()).map(|_| self.line.pop_front().unwrap_or(0.0) * self.gain).collect()
    }
}

/// The file backend: a WAV file is the microphone, the speaker's output is
/// recorded on the same timeline, both driven by a simulated clock.
pub struct WavLoopback {
    input: Vec<f32>,
    pos: usize,
    pub output: OutputStage,
    played: Vec<f32>,
    echo: Option<Echo>,
    clock: SimClock,
    /// Paced: the wall instant the first frame began; frames are given out
    /// no sooner than a microphone would have recorded them.
    pace: Option<Option<Instant>>,
}

impl WavLoopback {
    /// `input` must already be at the working rate (16 kHz).
    pub fn new(input: Pcm, echo: Option<Echo>) -> Self {
        let rate = input.rate;
        Self {
            input: input.samples,
            pos: 0,
            output: OutputStage::new(),
            played: Vec::new(),
            echo,
            clock: SimClock::new(rate),
            pace: None,
        }
    }

    /// The same loopback held to the wall clock: each frame is given out
    /// once its time has passed since the first, as a sound card gives
    /// them, so work done beside the loop (a model reading ahead between
    /// turns) gets the real time a person's pauses give it. Frames whose
    /// time passed while the caller was busy come at once, as a device's
    /// buffer hands over what it captured meanwhile.
    pub fn paced(mut self) -> Self {
        self.pace = Some(None);
        self
    }

    pub fn is_paced(&self) -> bool {
        self.pace.is_some()
    }

    /// Paced: the samples a microphone had recorded by `at` that were not
    /// read yet (0 when `at` is not ahead of the timeline, and always 0 on
    /// the simulated clock).
    pub fn samples_due_by(&self, at: Instant) -> usize {
        let Some(Some(start)) = self.pace else { return 0 };
        let wall = at.saturating_duration_since(start).as_secs_f64() * f64::from(self.clock.rate);
        (wall as u64).saturating_sub(self.clock.samples()) as usize
    }

    pub fn clock(&self) -> SimClock {
        self.clock
    }

    /// Everything the speaker has played so far, sample-aligned with the input.
    pub fn played(&self) -> &[f32] {
        &self.played
    }

    /// Extra frames after the input ended, so queued speech can finish.
    pub fn drain(&mut self, len: usize) -> Vec<f32> {
        let out = self.output.pull(len);
        self.played.extend_from_slice(&out);
        self.clock.advance(len);
        out
    }
}

impl AudioInput for WavLoopback {
    fn next_frame(&mut self, len: usize) -> Result<Option<Vec<f32>>, VoiceError> {
        if self.pos >= self.input.len() {
            return Ok(None);
        }
        if let Some(started) = self.pace.as_mut() {
            let start = *started.get_or_insert_with(Instant::now);
            let due_samples = self.clock.samples() + len as u64;
            let due = start + Duration::from_secs_f64(due_samples as f64 / f64::from(self.clock.rate.max(1)));
            if let Some(left) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(left);
            }
        }
        let end = (self.pos + len).min(self.input.len());
        let mut frame = self.input[self.pos..end].to_vec();
        frame.resize(len, 0.0);
        self.pos = end;
        // The speaker plays this frame's worth while the microphone records it.
        let played = self.output.pull(len);
        if let Some(echo) = self.echo.as_mut() {
            for (m, e) in frame.iter_mut().zip(echo.pass(&played)) {
                *m += e;
            }
        }
        self.played.extend_from_slice(&played);
        self.clock.advance(len);
        Ok(Some(frame))
    }
}

/// No sound device: every call says so plainly.
#[derive(Debug, Default)]
pub struct NoDevice;

impl AudioInput for NoDevice {
    fn next_frame(&mut self, _len: usize) -> Result<Option<Vec<f32>>, VoiceError> {
        Err(VoiceError::Device("no microphone is available".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_drops_queued_speech_at_once() {
        let mut out = OutputStage::new();
        out.enqueue(&[0.5; 1000]);
        assert_eq!(out.pull(10), vec![0.5; 10]);
        assert_eq!(out.stop(), 990);
        assert_eq!(out.pull(5), vec![0.0; 5]);
    }

    #[test]
    fn ducking_scales_what_is_played() {
        let mut out = OutputStage::new();
        out.enqueue(&[0.8; 4]);
        out.set_gain(0.25);
        assert_eq!(out.pull(2), vec![0.2; 2]);
    }

    #[test]
    fn the_loopback_records_playback_on_the_input_timeline_and_echoes_it_late() {
        let input = Pcm { samples: vec![0.0; 1600], rate: 16_000 };
        let mut lb = WavLoopback::new(input, Some(Echo::new(-6.0, 10, 16_000)));
        lb.output.enqueue(&[1.0; 320]);
        let first = lb.next_frame(160).expect("frame").expect("some");
        // 10 ms delay = 160 samples: the first frame hears no echo yet.
        assert!(first.iter().all(|s| *s == 0.0));
        let second = lb.next_frame(160).expect("frame").expect("some");
        assert!(second.iter().all(|s| (*s - 0.501).abs() < 0.01), "{}", second[0]);
        assert_eq!(lb.clock().now_ms(), 20);
        assert_eq!(lb.played().len(), 320);
        for _ in 0..8 {
            lb.next_frame(160).expect("frame");
        }
        assert!(lb.next_frame(160).expect("end").is_none());
    }

    #[test]
    fn a_paced_loopback_gives_frames_no_sooner_than_a_microphone_records_them() {
        let input = Pcm { samples: vec![0.0; 16 * 400], rate: 16_000 };
        let mut lb = WavLoopback::new(input, None).paced();
        let started = Instant::now();
        for _ in 0..10 {
            lb.next_frame(320).expect("frame").expect("some");
        }
        // The first frame's 20 ms too: ten frames take 200 ms of wall time.
        assert!(started.elapsed() >= Duration::from_millis(195), "{:?}", started.elapsed());
        assert_eq!(lb.clock().now_ms(), 200);
        // Busy for 100 ms: that much was recorded meanwhile and comes at once.
        std::thread::sleep(Duration::from_millis(100));
        let due = lb.samples_due_by(Instant::now());
        assert!((1_500..=2_400).contains(&due), "{due}");
        let caught_up = Instant::now();
        for _ in 0..due / 320 {
            lb.next_frame(320).expect("frame").expect("some");
        }
        assert!(caught_up.elapsed() < Duration::from_millis(60), "{:?}", caught_up.elapsed());
        // On the simulated clock nothing is ever due: frames come at once.
        let sim = WavLoopback::new(Pcm { samples: vec![0.0; 1600], rate: 16_000 }, None);
        assert_eq!(sim.samples_due_by(Instant::now() + Duration::from_secs(5)), 0);
    }

    #[test]
    fn without_a_device_the_error_says_so() {
        let e = NoDevice.next_frame(160).expect_err("no device");
        assert!(e.to_string().contains("no microphone"));
    }
}
