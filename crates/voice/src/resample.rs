//! Band-limited resampling by a rational ratio (windowed sinc, polyphase).
//!
//! Speech for the recogniser only needs up to 8 kHz, but aliasing from a
//! naive linear resampler puts energy where Whisper's mel filters look, so
//! the filter is a proper low-pass at the lower Nyquist.

/// Half-width of the filter, in input samples at the lower rate.
const ZERO_CROSSINGS: usize = 16;

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Resamples `input` (mono) from `from_hz` to `to_hz`.
pub fn resample(input: &[f32], from_hz: u32, to_hz: u32) -> Vec<f32> {
    if from_hz == to_hz || input.is_empty() {
        return input.to_vec();
    }
    let g = gcd(u64::from(from_hz), u64::from(to_hz));
    // Output sample n sits at input position n * step, step = up/down in reduced form.
    let up = u64::from(to_hz) / g; // phases
    let down = u64::from(from_hz) / g;
    // Cut-off relative to the input rate: the lower of the two Nyquists, a little under.
    let cutoff = 0.97 * f64::min(1.0, f64::from(to_hz) / f64::from(from_hz));
    let half = (ZERO_CROSSINGS as f64 / cutoff).ceil() as i64;
    let taps = (2 * half + 1) as usize;
    // One filter per output phase; phase p is the fractional offset p/up.
    let table: Vec<Vec<f32>> = (0..up)
        .map(|p| {
            let frac = p as f64 / up as f64;
            let mut row: Vec<f64> = (0..taps)
                .map(|k| {
                    let x = (k as i64 - half) as f64 - frac;
                    // The low-pass impulse response sin(pi c x) / (pi x); c at x = 0.
                    let sinc = if x.abs() < 1e-12 {
                        cutoff
                    } else {
                        (std::f64::consts::PI * cutoff * x).sin() / (std::f64::consts::PI * x)
                    };
                    // Blackman window over [-half, half].
                    let w = (x + half as f64) / (2 * half) as f64;
                    let win = 0.42 - 0.5 * (2.0 * std::f64::consts::PI * w).cos()
                        + 0.08 * (4.0 * std::f64::consts::PI * w).cos();
                    sinc * win.max(0.0)
                })
                .collect();
            let sum: f64 = row.iter().sum();
            if sum.abs() > 1e-12 {
                row.iter_mut().for_each(|v| *v /= sum);
            }
            row.into_iter().map(|v| v as f32).collect()
        })
        .collect();
    let out_len = (input.len() as u64 * up).div_ceil(down) as usize;
    let mut out = Vec::with_capacity(out_len);
    let n_in = input.len() as i64;
    for n in 0..out_len as u64 {
        let pos = n * down; // in units of 1/up input samples
        let base = (pos / up) as i64;
        let phase = (pos % up) as usize;
        let row = &table[phase];
        let mut acc = 0f32;
        for (k, c) in row.iter().enumerate() {
            let i = base + k as i64 - half;
            if (0..n_in).contains(&i) {
                acc += c * input[i as usize];
            }
        }
        out.push(acc);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(hz: f32, rate: u32, secs: f32) -> Vec<f32> {
        (0..(rate as f32 * secs) as usize)
            .map(|i| (2.0 * std::f32::consts::PI * hz * i as f32 / rate as f32).sin())
            .collect()
    }

    fn rms(x: &[f32]) -> f32 {
        (x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32).sqrt()
    }

    #[test]
    fn a_tone_below_the_new_nyquist_keeps_its_level_and_length() {
        let out = resample(&tone(1000.0, 44_100, 1.0), 44_100, 16_000);
        assert_eq!(out.len(), 16_000);
        let mid = &out[1000..15_000];
        assert!((rms(mid) - std::f32::consts::FRAC_1_SQRT_2).abs() < 0.01, "rms {}", rms(mid));
        // Same frequency: compare with a 1 kHz tone at 16 kHz by correlation.
        let reference = tone(1000.0, 16_000, 1.0);
        let dot: f32 = mid.iter().zip(&reference[1000..15_000]).map(|(a, b)| a * b).sum();
        assert!(dot / (mid.len() as f32) > 0.49, "correlation {dot}");
    }

    #[test]
    fn a_tone_above_the_new_nyquist_is_removed_not_aliased() {
        // 12 kHz at 48 kHz would alias to 4 kHz at 16 kHz without filtering.
        let out = resample(&tone(12_000.0, 48_000, 0.5), 48_000, 16_000);
        assert!(rms(&out[500..7500]) < 0.01, "rms {}", rms(&out[500..7500]));
    }

    #[test]
    fn upsampling_keeps_a_low_tone() {
        let out = resample(&tone(440.0, 8_000, 0.5), 8_000, 16_000);
        assert_eq!(out.len(), 8_000);
        assert!((rms(&out[500..7500]) - std::f32::consts::FRAC_1_SQRT_2).abs() < 0.01);
    }
}
