//! The sound card behind the audio traits (cpal: ALSA on Linux).
//!
//! Capture: the device's frames (any rate, any channel count, any common
//! sample format) are mixed to mono and resampled to 16 kHz in the capture
//! callback, then handed to [`LiveInput`], which gives them out frame by
//! frame as the microphone. A device that stops sending (unplugged) or
//! reports an error is a plain [`VoiceError::Device`], not a hang.
//!
//! Playback: the device pulls from our own [`OutputStage`] through
//! [`OutputRenderer`], which resamples 16 kHz to the device's rate and
//! copies it to every channel. The 16 kHz samples it pulled, silence
//! included, are kept as the echo canceller's reference
//! ([`SharedOutput::take_played`]); `stop` empties the queue and drops
//! what was already resampled, so nothing queued plays after it.
//!
//! The callback logic ([`CaptureSink`], [`OutputRenderer`]) is plain code,
//! tested without a sound card by calling it as a device would.

use std::collections::VecDeque;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use cpal::traits::{DeviceTrait, HostTrait, StreamTrait};
use cpal::{FromSample, SampleFormat, SizedSample};

use crate::audio::{AudioInput, AudioOutput, OutputStage};
use crate::devices::{self, DeviceInfo, Direction};
use crate::error::VoiceError;
use crate::resample::StreamResampler;
use crate::SAMPLE_RATE;

/// How long the microphone may stay silent (no callback at all) before it
/// is taken for gone: far beyond any device's buffer.
pub const CAPTURE_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest echo reference kept when nobody takes it (one second).
const REFERENCE_CAP: usize = SAMPLE_RATE as usize;

/// What the capture callback sends: audio, or the device's error.
type Captured = Result<Vec<f32>, cpal::Error>;

/// Whether a device error ends the stream. A stream that was rerouted to
/// the new default device, or refused real-time scheduling, keeps running:
/// ending the turn for those would cut people off for nothing.
fn ends_the_stream(e: &cpal::Error) -> bool {
    !matches!(e.kind(), cpal::ErrorKind::DeviceChanged | cpal::ErrorKind::RealtimeDenied)
}

/// The capture callback's work: interleaved device samples in, 16 kHz
/// mono out to the microphone's queue.
pub struct CaptureSink {
    channels: usize,
    resampler: StreamResampler,
    tx: Sender<Captured>,
    mono: Vec<f32>,
}

impl CaptureSink {
    pub fn new(device_rate: u32, channels: u16, tx: Sender<Captured>) -> Self {
        Self {
            channels: usize::from(channels.max(1)),
            resampler: StreamResampler::new(device_rate, SAMPLE_RATE),
            tx,
            mono: Vec::new(),
        }
    }

    /// One callback's worth of interleaved samples.
    pub fn push(&mut self, interleaved: &[f32]) {
        self.mono.clear();
        let scale = 1.0 / self.channels as f32;
        self.mono.extend(interleaved.chunks(self.channels).map(|f| f.iter().sum::<f32>() * scale));
        let mut out = Vec::with_capacity(self.mono.len());
        self.resampler.push(&self.mono, &mut out);
        if !out.is_empty() {
            // The receiver gone means the turn is over: nothing to do.
            let _ = self.tx.send(Ok(out));
        }
    }

    /// The device reported an error (unplugged, taken by another program);
    /// one it keeps running through is ignored.
    pub fn failed(&self, error: cpal::Error) {
        if ends_the_stream(&error) {
            let _ = self.tx.send(Err(error));
        }
    }
}

/// The microphone: 16 kHz mono frames from a capture stream (or from a
/// [`CaptureSink`] driven by hand in tests).
pub struct LiveInput {
    rx: Receiver<Captured>,
    buf: VecDeque<f32>,
    timeout: Duration,
    name: String,
    _stream: Option<cpal::Stream>,
}

impl LiveInput {
    /// A microphone fed by the sink returned beside it (no device).
    pub fn detached(device_rate: u32, channels: u16, timeout: Duration) -> (Self, CaptureSink) {
        let (tx, rx) = mpsc::channel();
        let input = Self { rx, buf: VecDeque::new(), timeout, name: "test input".into(), _stream: None };
        (input, CaptureSink::new(device_rate, channels, tx))
    }
}

impl LiveInput {
    /// Drops what was captured and not yet read.
    pub fn flush(&mut self) {
        self.buf.clear();
        while let Ok(Ok(_)) = self.rx.try_recv() {}
    }
}

impl AudioInput for LiveInput {
    fn next_frame(&mut self, len: usize) -> Result<Option<Vec<f32>>, VoiceError> {
        while self.buf.len() < len {
            match self.rx.recv_timeout(self.timeout) {
                Ok(Ok(samples)) => self.buf.extend(samples),
                Ok(Err(error)) => {
                    return Err(VoiceError::Device(format!("the microphone ({}) failed: {error}", self.name)))
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(VoiceError::Device(format!(
                        "the microphone ({}) stopped sending audio: was it unplugged?",
                        self.name
                    )))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(VoiceError::Device(format!("the microphone ({}) was closed", self.name)))
                }
            }
        }
        Ok(Some(self.buf.drain(..len).collect()))
    }
}

#[derive(Debug, Default)]
struct OutputShared {
    stage: OutputStage,
    /// What was played and not yet taken as the echo reference.
    played: VecDeque<f32>,
    /// Bumped by every stop, so the renderer drops what it resampled.
    stops: u64,
    /// The device reported an error that ended its stream.
    failure: Option<cpal::Error>,
}

/// The output stage shared between the voice loop and the device callback.
#[derive(Debug, Clone, Default)]
pub struct SharedOutput {
    inner: Arc<Mutex<OutputShared>>,
}

impl SharedOutput {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, OutputShared> {
        // A panic elsewhere while holding it leaves plain data behind: keep going.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The oldest `len` samples played (16 kHz) since the last call, zero
    /// padded when fewer were: the echo canceller's reference for the
    /// microphone frame of the same length.
    pub fn take_played(&self, len: usize) -> Vec<f32> {
        let mut s = self.lock();
        let n = len.min(s.played.len());
        let mut out: Vec<f32> = s.played.drain(..n).collect();
        out.resize(len, 0.0);
        out
    }

    /// The device's error, when it reported one.
    pub fn failure(&self) -> Option<cpal::Error> {
        self.lock().failure.clone()
    }
}

impl AudioOutput for SharedOutput {
    fn enqueue(&mut self, samples: &[f32]) {
        self.lock().stage.enqueue(samples);
    }
    fn stop(&mut self) -> usize {
        let mut s = self.lock();
        s.stops += 1;
        s.stage.stop()
    }
    fn queued(&self) -> usize {
        self.lock().stage.queued()
    }
    fn set_gain(&mut self, gain: f32) {
        self.lock().stage.set_gain(gain);
    }
}

/// The playback callback's work: fills the device's interleaved buffer
/// from the output stage.
pub struct OutputRenderer {
    shared: SharedOutput,
    resampler: StreamResampler,
    device_rate: u32,
    channels: usize,
    /// Mono samples at the device's rate, resampled and not yet played.
    ready: VecDeque<f32>,
    stops_seen: u64,
    pulled: Vec<f32>,
    resampled: Vec<f32>,
}

impl OutputRenderer {
    pub fn new(shared: SharedOutput, device_rate: u32, channels: u16) -> Self {
        Self {
            shared,
            resampler: StreamResampler::new(SAMPLE_RATE, device_rate),
            device_rate,
            channels: usize::from(channels.max(1)),
            ready: VecDeque::new(),
            stops_seen: 0,
            pulled: Vec::new(),
            resampled: Vec::new(),
        }
    }

    /// Fills `out` (interleaved, the device's channel count).
    pub fn render(&mut self, out: &mut [f32]) {
        let frames = out.len() / self.channels;
        {
            let mut s = self.shared.lock();
            if s.stops != self.stops_seen {
                // Stopped: what was resampled ahead must not play either.
                self.stops_seen = s.stops;
                self.ready.clear();
                self.resampler.reset();
            }
            while self.ready.len() < frames {
                let missing = frames - self.ready.len();
                let want = (missing as u64 * u64::from(SAMPLE_RATE)).div_ceil(u64::from(self.device_rate)) as usize;
                self.pulled = s.stage.pull(want.max(1));
                s.played.extend(self.pulled.iter().copied());
                self.resampled.clear();
                self.resampler.push(&self.pulled, &mut self.resampled);
                self.ready.extend(self.resampled.iter().copied());
            }
            let excess = s.played.len().saturating_sub(REFERENCE_CAP);
            s.played.drain(..excess);
        }
        for frame in out.chunks_mut(self.channels) {
            let v = self.ready.pop_front().unwrap_or(0.0);
            frame.iter_mut().for_each(|o| *o = v);
        }
    }
}

/// The speaker: the shared output stage and the stream playing it.
pub struct LiveOutput {
    pub shared: SharedOutput,
    _stream: cpal::Stream,
}

impl AudioOutput for LiveOutput {
    fn enqueue(&mut self, samples: &[f32]) {
        self.shared.enqueue(samples);
    }
    fn stop(&mut self) -> usize {
        self.shared.stop()
    }
    fn queued(&self) -> usize {
        self.shared.queued()
    }
    fn set_gain(&mut self, gain: f32) {
        self.shared.set_gain(gain);
    }
}

/// A microphone and a speaker, open and running.
pub struct LiveAudio {
    pub input: LiveInput,
    pub output: LiveOutput,
}

fn device_error(what: &str, e: impl std::fmt::Display) -> VoiceError {
    VoiceError::Device(format!("cannot open the {what}: {e}"))
}

/// The cpal device for a chosen entry of the device list.
fn find(host: &cpal::Host, info: &DeviceInfo, what: &str) -> Result<cpal::Device, VoiceError> {
    let id: cpal::DeviceId = info.id.parse().map_err(|e| device_error(what, e))?;
    host.device_by_id(&id)
        .ok_or_else(|| VoiceError::Device(format!("the {what} {} is gone: was it unplugged?", info.name)))
}

/// Opens the microphone and the speaker: the ones named by id (as
/// `voice devices` lists them), else the defaults. A machine without one
/// gets the error that says so, before any stream is tried.
pub fn open(input_id: Option<&str>, output_id: Option<&str>) -> Result<LiveAudio, VoiceError> {
    open_from(&devices::available()?, input_id, output_id)
}

/// [`open`] over a given device list.
pub fn open_from(list: &[DeviceInfo], input_id: Option<&str>, output_id: Option<&str>) -> Result<LiveAudio, VoiceError> {
    let mic = devices::choose(list, input_id, Direction::Input)?;
    let speaker = devices::choose(list, output_id, Direction::Output)?;
    let host = cpal::default_host();
    let input = open_input(&find(&host, &mic, "microphone")?, &mic.name)?;
    let output = open_output(&find(&host, &speaker, "speaker")?)?;
    Ok(LiveAudio { input, output })
}

fn open_input(device: &cpal::Device, name: &str) -> Result<LiveInput, VoiceError> {
    let what = "microphone";
    let supported = device.default_input_config().map_err(|e| device_error(what, e))?;
    let config = supported.config();
    let (tx, rx) = mpsc::channel();
    let sink = CaptureSink::new(config.sample_rate, config.channels, tx);
    let stream = match supported.sample_format() {
        SampleFormat::F32 => input_stream::<f32>(device, &config, sink),
        SampleFormat::I16 => input_stream::<i16>(device, &config, sink),
        SampleFormat::U16 => input_stream::<u16>(device, &config, sink),
        SampleFormat::I32 => input_stream::<i32>(device, &config, sink),
        SampleFormat::U8 => input_stream::<u8>(device, &config, sink),
        SampleFormat::I8 => input_stream::<i8>(device, &config, sink),
        SampleFormat::F64 => input_stream::<f64>(device, &config, sink),
        other => return Err(device_error(what, format!("its sample format {other} is not supported"))),
    }
    .map_err(|e| device_error(what, e))?;
    stream.play().map_err(|e| device_error(what, e))?;
    Ok(LiveInput { rx, buf: VecDeque::new(), timeout: CAPTURE_TIMEOUT, name: name.to_owned(), _stream: Some(stream) })
}

fn input_stream<T>(device: &cpal::Device, config: &cpal::StreamConfig, mut sink: CaptureSink) -> Result<cpal::Stream, cpal::Error>
where
    T: SizedSample,
    f32: FromSample<T>,
{
    let errors = sink.tx.clone();
    let mut buf = Vec::new();
    device.build_input_stream::<T, _, _>(
        config.clone(),
        move |data: &[T], _| {
            buf.clear();
            buf.extend(data.iter().map(|s| f32::from_sample_(*s)));
            sink.push(&buf);
        },
        move |e| {
            if ends_the_stream(&e) {
                let _ = errors.send(Err(e));
            }
        },
        None,
    )
}

fn open_output(device: &cpal::Device) -> Result<LiveOutput, VoiceError> {
    let what = "speaker";
    let supported = device.default_output_config().map_err(|e| device_error(what, e))?;
    let config = supported.config();
    let shared = SharedOutput::new();
    let renderer = OutputRenderer::new(shared.clone(), config.sample_rate, config.channels);
    let stream = match supported.sample_format() {
        SampleFormat::F32 => output_stream::<f32>(device, &config, renderer),
        SampleFormat::I16 => output_stream::<i16>(device, &config, renderer),
        SampleFormat::U16 => output_stream::<u16>(device, &config, renderer),
        SampleFormat::I32 => output_stream::<i32>(device, &config, renderer),
        SampleFormat::U8 => output_stream::<u8>(device, &config, renderer),
        SampleFormat::I8 => output_stream::<i8>(device, &config, renderer),
        SampleFormat::F64 => output_stream::<f64>(device, &config, renderer),
        other => return Err(device_error(what, format!("its sample format {other} is not supported"))),
    }
    .map_err(|e| device_error(what, e))?;
    stream.play().map_err(|e| device_error(what, e))?;
    Ok(LiveOutput { shared, _stream: stream })
}

fn output_stream<T>(
    device: &cpal::Device,
    config: &cpal::StreamConfig,
    mut renderer: OutputRenderer,
) -> Result<cpal::Stream, cpal::Error>
where
    T: SizedSample + FromSample<f32>,
{
    let shared = renderer.shared.clone();
    let mut buf = Vec::new();
    device.build_output_stream::<T, _, _>(
        config.clone(),
        move |data: &mut [T], _| {
            buf.resize(data.len(), 0.0);
            renderer.render(&mut buf);
            for (o, s) in data.iter_mut().zip(&buf) {
                *o = T::from_sample_(*s);
            }
        },
        move |e| {
            if ends_the_stream(&e) {
                shared.lock().failure = Some(e);
            }
        },
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(hz: f32, rate: u32, n: usize) -> Vec<f32> {
        (0..n).map(|i| 0.5 * (2.0 * std::f32::consts::PI * hz * i as f32 / rate as f32).sin()).collect()
    }

    #[test]
    fn stereo_48k_capture_comes_out_as_16k_mono_frames() {
        let (mut mic, mut sink) = LiveInput::detached(48_000, 2, Duration::from_millis(200));
        // Left and right differ: the mix is their mean.
        let left = tone(500.0, 48_000, 48_000);
        let interleaved: Vec<f32> = left.iter().flat_map(|l| [*l, 0.0]).collect();
        for chunk in interleaved.chunks(960) {
            sink.push(chunk);
        }
        let mut got = Vec::new();
        while got.len() < 15_000 {
            got.extend(mic.next_frame(320).expect("audio").expect("frame"));
        }
        let expect = crate::resample::resample(&left.iter().map(|l| l * 0.5).collect::<Vec<_>>(), 48_000, 16_000);
        let worst = got.iter().zip(&expect).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(worst < 1e-4, "differs by {worst}");
    }

    #[test]
    fn a_microphone_that_stops_sending_or_fails_is_a_clear_error_not_a_hang() {
        let (mut mic, mut sink) = LiveInput::detached(16_000, 1, Duration::from_millis(50));
        let e = mic.next_frame(320).expect_err("nothing came");
        assert!(e.to_string().contains("stopped sending audio"), "{e}");
        assert_eq!(e.code(), "VOICE_DEVICE_UNAVAILABLE");
        // A stream rerouted to the new default device goes on.
        sink.failed(cpal::Error::new(cpal::ErrorKind::DeviceChanged));
        sink.push(&[0.0; 320]);
        assert_eq!(mic.next_frame(320).expect("audio after a reroute").map(|f| f.len()), Some(320));
        sink.failed(cpal::Error::with_message(cpal::ErrorKind::DeviceNotAvailable, "device unplugged"));
        let e = mic.next_frame(320).expect_err("failed");
        assert!(e.to_string().contains("device unplugged"), "{e}");
        drop(sink);
        assert!(mic.next_frame(320).expect_err("closed").to_string().contains("closed"));
    }

    #[test]
    fn the_renderer_plays_the_queue_on_every_channel_and_keeps_what_it_played_as_reference() {
        let mut out = SharedOutput::new();
        let mut device = OutputRenderer::new(out.clone(), 16_000, 2);
        out.enqueue(&[0.25; 100]);
        let mut buf = vec![9.0; 2 * 60];
        device.render(&mut buf);
        assert!(buf.iter().all(|s| *s == 0.25), "{buf:?}");
        assert_eq!(out.queued(), 40);
        let reference = out.take_played(80);
        assert_eq!(&reference[..60], &[0.25; 60]);
        assert_eq!(&reference[60..], &[0.0; 20], "padded: only 60 were played");
    }

    #[test]
    fn at_the_device_rate_a_stop_silences_the_next_callback_even_what_was_resampled_ahead() {
        let mut out = SharedOutput::new();
        // 44.1 kHz: the renderer resamples ahead of what it writes.
        let mut device = OutputRenderer::new(out.clone(), 44_100, 1);
        out.enqueue(&tone(300.0, 16_000, 16_000));
        let mut buf = vec![0.0; 441];
        for _ in 0..5 {
            device.render(&mut buf);
        }
        assert!(buf.iter().map(|s| s.abs()).fold(0f32, f32::max) > 0.3, "speech plays");
        assert!(out.stop() > 10_000, "most of the second was still queued");
        assert_eq!(out.queued(), 0);
        device.render(&mut buf);
        assert!(buf.iter().all(|s| *s == 0.0), "nothing plays after the stop");
        // The queue works again after a stop.
        out.enqueue(&[0.5; 4000]);
        for _ in 0..2 {
            device.render(&mut buf);
        }
        assert!(buf.iter().map(|s| s.abs()).fold(0f32, f32::max) > 0.4);
    }

    #[test]
    fn ducking_reaches_the_device() {
        let mut out = SharedOutput::new();
        let mut device = OutputRenderer::new(out.clone(), 16_000, 1);
        out.enqueue(&[0.8; 100]);
        out.set_gain(0.25);
        let mut buf = vec![0.0; 10];
        device.render(&mut buf);
        assert!(buf.iter().all(|s| (*s - 0.2).abs() < 1e-6));
    }

    #[test]
    fn without_devices_opening_says_there_is_no_microphone() {
        let e = open_from(&[], None, None).err().expect("no device");
        assert!(e.to_string().contains("no microphone found"), "{e}");
        assert_eq!(e.code(), "VOICE_DEVICE_UNAVAILABLE");
        let only_speaker = [DeviceInfo {
            id: "alsa:default".into(),
            name: "Speaker".into(),
            input: false,
            output: true,
            default_input: false,
            default_output: true,
        }];
        let e = open_from(&only_speaker, None, None).err().expect("no microphone");
        assert!(e.to_string().contains("no microphone found"), "{e}");
    }

    #[test]
    fn on_this_machine_opening_the_sound_card_works_or_says_why() {
        // A machine without a sound card (CI) must get the plain error;
        // one with a card must get running streams.
        match (devices::available(), open(None, None)) {
            (Ok(list), Err(e)) if list.iter().all(|d| !d.input) => {
                assert!(e.to_string().contains("no microphone"), "{e}");
            }
            (Ok(_), Ok(mut audio)) => {
                audio.output.enqueue(&[0.0; 320]);
                assert!(audio.input.next_frame(320).is_ok());
            }
            (Ok(_), Err(e)) => assert_eq!(e.code(), "VOICE_DEVICE_UNAVAILABLE", "{e}"),
            (Err(e), _) => assert_eq!(e.code(), "VOICE_DEVICE_UNAVAILABLE", "{e}"),
        }
    }
}
