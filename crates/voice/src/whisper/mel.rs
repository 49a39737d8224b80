//! Whisper's log-mel front end: the filter bank (librosa's Slaney mel
//! scale and area normalisation, as `whisper/assets/mel_filters.npz` was
//! made) and the spectrogram: candle's implementation as the reference,
//! and the same transform computed only over the audio and the silence the
//! encoder is shown.

use candle_transformers::models::whisper::{self as m, audio};

/// `n_mels` triangular filters over the `1 + N_FFT / 2` FFT bins, row-major.
pub fn filters(n_mels: usize) -> Vec<f32> {
    let sr = m::SAMPLE_RATE as f64;
    let n_bins = 1 + m::N_FFT / 2;
    let fft_freqs: Vec<f64> = (0..n_bins).map(|i| i as f64 * sr / m::N_FFT as f64).collect();
    let (min_mel, max_mel) = (hz_to_mel(0.0), hz_to_mel(sr / 2.0));
    let mel_f: Vec<f64> =
        (0..n_mels + 2).map(|i| mel_to_hz(min_mel + (max_mel - min_mel) * i as f64 / (n_mels + 1) as f64)).collect();
    let mut out = vec![0f32; n_mels * n_bins];
    for i in 0..n_mels {
        let (lo, mid, hi) = (mel_f[i], mel_f[i + 1], mel_f[i + 2]);
        let enorm = 2.0 / (hi - lo);
        for (k, &f) in fft_freqs.iter().enumerate() {
            let lower = (f - lo) / (mid - lo);
            let upper = (hi - f) / (hi - mid);
            let w = lower.min(upper).max(0.0);
            out[i * n_bins + k] = (w * enorm) as f32;
        }
    }
    out
}

const F_SP: f64 = 200.0 / 3.0;
const MIN_LOG_HZ: f64 = 1000.0;
const MIN_LOG_MEL: f64 = MIN_LOG_HZ / F_SP;

fn logstep() -> f64 {
    (6.4f64).ln() / 27.0
}

fn hz_to_mel(f: f64) -> f64 {
    if f >= MIN_LOG_HZ {
        MIN_LOG_MEL + (f / MIN_LOG_HZ).ln() / logstep()
    } else {
        f / F_SP
    }
}

fn mel_to_hz(mel: f64) -> f64 {
    if mel >= MIN_LOG_MEL {
        MIN_LOG_HZ * (logstep() * (mel - MIN_LOG_MEL)).exp()
    } else {
        F_SP * mel
    }
}

/// The log-mel spectrogram of `pcm` followed by 15 s of silence, row-major
/// `[n_mels][frames]`, by candle's implementation (which pads further to a
/// multiple of 15 s and computes every frame, silence included); returns it
/// with its frame count. Kept as the reference `log_mel` is tested against.
pub fn log_mel_candle(cfg: &m::Config, pcm: &[f32], filters: &[f32]) -> (Vec<f32>, usize) {
    let mut padded = Vec::with_capacity(pcm.len() + m::N_SAMPLES);
    padded.extend_from_slice(pcm);
    padded.extend(std::iter::repeat_n(0f32, m::N_SAMPLES / 2));
    let mel = audio::pcm_to_mel(cfg, &padded, filters);
    let frames = mel.len() / cfg.num_mel_bins;
    (mel, frames)
}

/// The same log-mel spectrogram as candle's (Whisper's framing: a 400-sample
/// Hann window every 160 samples, no centring; power spectrum; mel filters;
/// log10 floored at 1e-10; clamped 8 below the maximum; scaled), computed
/// only where it is needed: the audio's frames and then `pad_frames` frames
/// of silence, whose value is known without a transform. Twiddle factors
/// are tabulated once, not recomputed with sin/cos in every butterfly.
pub struct MelFrontEnd {
    n_mels: usize,
    filters: Vec<f32>,
    hann: Vec<f32>,
    /// cos and sin of 2*pi*k/N_FFT for k in 0..N_FFT.
    cos: Vec<f32>,
    sin: Vec<f32>,
}

const SILENT_LOG: f32 = -10.0; // log10(1e-10)

impl MelFrontEnd {
    pub fn new(n_mels: usize, filters: Vec<f32>) -> Self {
        let n = m::N_FFT;
        let two_pi = std::f32::consts::PI * 2.0;
        let hann = (0..n).map(|i| 0.5 * (1.0 - (two_pi * i as f32 / n as f32).cos())).collect();
        let cos = (0..n).map(|k| (two_pi * k as f32 / n as f32).cos()).collect();
        let sin = (0..n).map(|k| (two_pi * k as f32 / n as f32).sin()).collect();
        Self { n_mels, filters, hann, cos, sin }
    }

    /// Row-major `[n_mels][frames]` with `frames = pcm.len() / HOP + pad_frames`.
    pub fn log_mel(&self, pcm: &[f32], pad_frames: usize) -> (Vec<f32>, usize) {
        let (n_fft, hop) = (m::N_FFT, m::HOP_LENGTH);
        let n_bins = 1 + n_fft / 2;
        let frames = pcm.len() / hop + pad_frames;
        let mut mel = vec![SILENT_LOG; self.n_mels * frames];
        let mut input = vec![0f32; n_fft];
        let mut power = vec![0f32; n_bins];
        for i in 0..frames {
            let offset = i * hop;
            if offset >= pcm.len() {
                break; // only silence from here: SILENT_LOG already
            }
            let take = n_fft.min(pcm.len() - offset);
            for j in 0..take {
                input[j] = self.hann[j] * pcm[offset + j];
            }
            input[take..].fill(0.0);
            self.power_spectrum(&input, &mut power);
            for (j, row) in self.filters.chunks_exact(n_bins).enumerate().take(self.n_mels) {
                let sum: f32 = row.iter().zip(&power).map(|(f, p)| f * p).sum();
                mel[j * frames + i] = sum.max(1e-10).log10();
            }
        }
        let max = mel.iter().copied().fold(f32::NEG_INFINITY, f32::max) - 8.0;
        for v in &mut mel {
            *v = v.max(max) / 4.0 + 1.0;
        }
        (mel, frames)
    }

    /// `|X_k|^2` for k in 0..=N/2, with candle's folding of the mirrored half
    /// (bins 1..N/2 get the mirror's power added, as its implementation does).
    fn power_spectrum(&self, input: &[f32], power: &mut [f32]) {
        let n = input.len();
        let mut out = vec![0f32; 2 * n];
        self.fft(input, 1, &mut out);
        let p = |k: usize| out[2 * k] * out[2 * k] + out[2 * k + 1] * out[2 * k + 1];
        for (k, slot) in power.iter_mut().enumerate() {
            *slot = p(k);
            if k >= 1 && k < n / 2 {
                *slot += p(n - k);
            }
        }
    }

    /// A complex FFT of the real `inp` (length N_FFT / stride) into `out`
    /// (interleaved re, im): radix 2 while the length is even, a direct DFT
    /// for the odd rest (400 = 16 x 25), twiddles from the table.
    fn fft(&self, inp: &[f32], stride: usize, out: &mut [f32]) {
        let n = inp.len();
        if n % 2 == 1 {
            for k in 0..n {
                let (mut re, mut im) = (0f32, 0f32);
                for (j, &x) in inp.iter().enumerate() {
                    let t = (k * j % n) * stride;
                    re += x * self.cos[t];
                    im -= x * self.sin[t];
                }
                out[2 * k] = re;
                out[2 * k + 1] = im;
            }
            return;
        }
        let even: Vec<f32> = inp.iter().step_by(2).copied().collect();
        let odd: Vec<f32> = inp.iter().skip(1).step_by(2).copied().collect();
        let mut e = vec![0f32; n];
        let mut o = vec![0f32; n];
        self.fft(&even, stride * 2, &mut e);
        self.fft(&odd, stride * 2, &mut o);
        for k in 0..n / 2 {
            let (c, s) = (self.cos[k * stride], -self.sin[k * stride]);
            let (ro, io) = (o[2 * k], o[2 * k + 1]);
            let (tr, ti) = (c * ro - s * io, c * io + s * ro);
            out[2 * k] = e[2 * k] + tr;
            out[2 * k + 1] = e[2 * k + 1] + ti;
            out[2 * (k + n / 2)] = e[2 * k] - tr;
            out[2 * (k + n / 2) + 1] = e[2 * k + 1] - ti;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_bank_matches_librosa_at_known_points() {
        let f = filters(80);
        let n_bins = 201;
        assert_eq!(f.len(), 80 * n_bins);
        // Worked by hand: 8 kHz is 45.245 Slaney mels, so filter 0 spans
        // 0..74.48 Hz peaking at 37.24 Hz; bin 1 (40 Hz) is on its falling
        // edge at 0.926, times the area norm 2 / 74.48 = 0.02486.
        assert!((f[1] - 0.024_862).abs() < 2e-4, "{}", f[1]);
        // Every filter has a positive area and the bank covers 0..8 kHz.
        for i in 0..80 {
            assert!(f[i * n_bins..(i + 1) * n_bins].iter().any(|&v| v > 0.0), "filter {i} is empty");
        }
        // Area normalisation: higher, wider filters are lower.
        let peak = |i: usize| f[i * n_bins..(i + 1) * n_bins].iter().cloned().fold(0f32, f32::max);
        assert!(peak(79) < peak(10));
    }
}
