//! Whisper's log-mel front end: the filter bank (librosa's Slaney mel
//! scale and area normalisation, as `whisper/assets/mel_filters.npz` was
//! made) and the spectrogram, candle's implementation.

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
/// `[n_mels][frames]`; returns it with its frame count.
pub fn log_mel(cfg: &m::Config, pcm: &[f32], filters: &[f32]) -> (Vec<f32>, usize) {
    let mut padded = Vec::with_capacity(pcm.len() + m::N_SAMPLES);
    padded.extend_from_slice(pcm);
    padded.extend(std::iter::repeat_n(0f32, m::N_SAMPLES / 2));
    // candle pads to a multiple of 15 s and adds 15 s more, so with our
    // 15 s every 30 s window that starts inside the audio is whole.
    let mel = audio::pcm_to_mel(cfg, &padded, filters);
    let frames = mel.len() / cfg.num_mel_bins;
    (mel, frames)
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
