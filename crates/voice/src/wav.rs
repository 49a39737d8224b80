//! WAV in and out. Any RIFF/WAVE file with integer PCM or 32-bit float
//! samples is read, mixed down to mono and resampled to what the caller
//! asks for; writing is always 16-bit PCM mono.

use std::io::{Read, Seek};
use std::path::{Path, PathBuf};

use crate::error::VoiceError;
use crate::resample::resample;

/// Mono audio at a known rate, samples in [-1, 1].
#[derive(Debug, Clone, PartialEq)]
pub struct Pcm {
    pub samples: Vec<f32>,
    pub rate: u32,
}

impl Pcm {
    pub fn duration_ms(&self) -> u64 {
        if self.rate == 0 {
            return 0;
        }
        self.samples.len() as u64 * 1000 / u64::from(self.rate)
    }

    pub fn resampled(&self, rate: u32) -> Pcm {
        Pcm { samples: resample(&self.samples, self.rate, rate), rate }
    }
}

/// Reads `path` as mono at `rate` Hz.
pub fn read_mono(path: &Path, rate: u32) -> Result<Pcm, VoiceError> {
    let file = std::fs::File::open(path).map_err(|source| VoiceError::Io { path: path.to_owned(), source })?;
    let pcm = decode(std::io::BufReader::new(file), path)?;
    Ok(pcm.resampled(rate))
}

/// Decodes WAV bytes (e.g. a synthesiser's output) at their own rate, mono.
pub fn decode_bytes(bytes: &[u8], what: &str) -> Result<Pcm, VoiceError> {
    decode(std::io::Cursor::new(bytes), Path::new(what))
}

fn decode<R: Read + Seek>(reader: R, path: &Path) -> Result<Pcm, VoiceError> {
    let bad = |reason: String| VoiceError::BadWav { path: path.to_owned(), reason };
    let mut wav = hound::WavReader::new(reader).map_err(|e| bad(e.to_string()))?;
    let spec = wav.spec();
    if spec.channels == 0 {
        return Err(bad("zero channels".into()));
    }
    if !(1000..=384_000).contains(&spec.sample_rate) {
        return Err(bad(format!("sample rate {} Hz", spec.sample_rate)));
    }
    let interleaved: Vec<f32> = match (spec.sample_format, spec.bits_per_sample) {
        (hound::SampleFormat::Float, 32) => {
            wav.samples::<f32>().collect::<Result<_, _>>().map_err(|e| bad(e.to_string()))?
        }
        (hound::SampleFormat::Int, bits @ 1..=32) => {
            let scale = 1.0 / (1u64 << (bits - 1)) as f32;
            wav.samples::<i32>()
                .map(|s| s.map(|v| v as f32 * scale))
                .collect::<Result<_, _>>()
                .map_err(|e| bad(e.to_string()))?
        }
        (format, bits) => return Err(bad(format!("{bits}-bit {format:?} samples"))),
    };
    let channels = usize::from(spec.channels);
    let samples: Vec<f32> =
        interleaved.chunks_exact(channels).map(|frame| frame.iter().sum::<f32>() / channels as f32).collect();
    if samples.is_empty() {
        return Err(VoiceError::EmptyAudio { path: path.to_owned() });
    }
    if samples.iter().any(|s| !s.is_finite()) {
        return Err(bad("samples that are not finite numbers".into()));
    }
    Ok(Pcm { samples, rate: spec.sample_rate })
}

/// Writes `pcm` as 16-bit mono WAV, through a temporary file renamed into
/// place, so a crash never leaves half a file under the final name.
pub fn write_pcm16(path: &Path, pcm: &Pcm) -> Result<(), VoiceError> {
    let err = |reason: String| VoiceError::WriteWav { path: path.to_owned(), reason };
    let tmp = tmp_path(path);
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: pcm.rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    {
        let mut w = hound::WavWriter::create(&tmp, spec).map_err(|e| err(e.to_string()))?;
        for s in &pcm.samples {
            let v = (s.clamp(-1.0, 1.0) * 32767.0).round() as i16;
            w.write_sample(v).map_err(|e| err(e.to_string()))?;
        }
        w.finalize().map_err(|e| err(e.to_string()))?;
    }
    std::fs::rename(&tmp, path).map_err(|e| err(e.to_string()))
}

fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".part");
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_file_reads_back_the_same_samples() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a.wav");
        let pcm = Pcm { samples: vec![0.0, 0.5, -0.5, 0.25], rate: 16_000 };
        write_pcm16(&path, &pcm).expect("write");
        let back = read_mono(&path, 16_000).expect("read");
        assert_eq!(back.samples.len(), 4);
        for (a, b) in back.samples.iter().zip(&pcm.samples) {
            assert!((a - b).abs() < 1e-4);
        }
        assert!(!dir.path().join("a.wav.part").exists());
    }

    #[test]
    fn stereo_float_is_mixed_to_mono() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.wav");
        let spec = hound::WavSpec {
            channels: 2,
            sample_rate: 16_000,
            bits_per_sample: 32,
            sample_format: hound::SampleFormat::Float,
        };
        let mut w = hound::WavWriter::create(&path, spec).expect("create");
        for _ in 0..10 {
            w.write_sample(0.5f32).expect("l");
            w.write_sample(-0.1f32).expect("r");
        }
        w.finalize().expect("finalize");
        let back = read_mono(&path, 16_000).expect("read");
        assert_eq!(back.samples.len(), 10);
        assert!((back.samples[3] - 0.2).abs() < 1e-6);
    }

    #[test]
    fn a_file_that_is_not_wav_gets_a_message_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("fake.wav");
        std::fs::write(&path, b"ID3\x03\x00 this is an mp3, honest").expect("write");
        let e = read_mono(&path, 16_000).expect_err("must fail");
        let msg = e.to_string();
        assert!(matches!(e, VoiceError::BadWav { .. }), "{msg}");
        assert!(msg.contains("fake.wav") && msg.contains("not a WAV file"), "{msg}");
    }

    #[test]
    fn a_truncated_wav_is_refused_or_read_short_never_garbage() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.wav");
        write_pcm16(&path, &Pcm { samples: vec![0.1; 1000], rate: 16_000 }).expect("write");
        let bytes = std::fs::read(&path).expect("read");
        std::fs::write(&path, &bytes[..30]).expect("truncate");
        assert!(matches!(read_mono(&path, 16_000), Err(VoiceError::BadWav { .. })));
    }

    #[test]
    fn a_wav_with_no_samples_is_empty_audio() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("e.wav");
        write_pcm16(&path, &Pcm { samples: vec![], rate: 16_000 }).expect("write");
        assert!(matches!(read_mono(&path, 16_000), Err(VoiceError::EmptyAudio { .. })));
    }
}
