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

/// The polyphase low-pass filter for one rate pair: output sample `n`
/// sits at input position `n * down / up`.
#[derive(Debug, Clone)]
struct Filter {
    up: u64,
    down: u64,
    half: i64,
    table: Vec<Vec<f32>>,
}

impl Filter {
    fn new(from_hz: u32, to_hz: u32) -> Self {
        let g = gcd(u64::from(from_hz), u64::from(to_hz));
        let up = u64::from(to_hz) / g; // phases
        let down = u64::from(from_hz) / g;
        // Cut-off relative to the input rate: the lower of the two Nyquists, a little under.
        let cutoff = 0.97 * f64::min(1.0, f64::from(to_hz) / f64::from(from_hz));
        let half = (ZERO_CROSSINGS as f64 / cutoff).ceil() as i64;
        let taps = (2 * half + 1) as usize;
        // One filter per output phase; phase p is the fractional offset p/up.
        let table = (0..up)
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
        Self { up, down, half, table }
    }

    /// The input index output sample `n` is centred on.
    fn base(&self, n: u64) -> i64 {
        (n * self.down / self.up) as i64
    }

    /// Output sample `n`; `at(i)` is input sample `i` (0 outside the signal).
    fn sample(&self, n: u64, at: impl Fn(i64) -> f32) -> f32 {
        let pos = n * self.down; // in units of 1/up input samples
        let base = (pos / self.up) as i64;
        let row = &self.table[(pos % self.up) as usize];
        row.iter().enumerate().map(|(k, c)| c * at(base + k as i64 - self.half)).sum()
    }
}

/// Resamples `input` (mono) from `from_hz` to `to_hz`.
pub fn resample(input: &[f32], from_hz: u32, to_hz: u32) -> Vec<f32> {
    if from_hz == to_hz || input.is_empty() {
        return input.to_vec();
    }
    let f = Filter::new(from_hz, to_hz);
    let out_len = (input.len() as u64 * f.up).div_ceil(f.down);
    let n_in = input.len() as i64;
    let at = |i: i64| if (0..n_in).contains(&i) { input[i as usize] } else { 0.0 };
    (0..out_len).map(|n| f.sample(n, at)).collect()
}

/// The same resampling over a stream that arrives in pieces of any size
/// (a sound card's callbacks): each output sample is produced once the
/// input it needs has arrived, so the result is [`resample`]'s for the
/// whole stream, `half` input samples late.
#[derive(Debug, Clone)]
pub struct StreamResampler {
    filter: Option<Filter>,
    /// Input not yet fully used, starting at input index `first`.
    pending: std::collections::VecDeque<f32>,
    first: i64,
    /// The next output sample's index.
    next: u64,
}

impl StreamResampler {
    pub fn new(from_hz: u32, to_hz: u32) -> Self {
        let filter = (from_hz != to_hz).then(|| Filter::new(from_hz, to_hz));
        Self { filter, pending: std::collections::VecDeque::new(), first: 0, next: 0 }
    }

    /// Feeds `input`; appends to `out` every output sample now computable.
    pub fn push(&mut self, input: &[f32], out: &mut Vec<f32>) {
        let Some(f) = self.filter.as_ref() else {
            out.extend_from_slice(input);
            return;
        };
        self.pending.extend(input.iter().copied());
        let end = self.first + self.pending.len() as i64; // one past the last input index
        let (first, pending) = (self.first, &self.pending);
        let at = |i: i64| if i < 0 { 0.0 } else { pending.get((i - first) as usize).copied().unwrap_or(0.0) };
        while f.base(self.next) + f.half < end {
            out.push(f.sample(self.next, at));
            self.next += 1;
        }
        // Keep only what the next output sample still reads.
        let keep_from = (f.base(self.next) - f.half).max(self.first);
        let drop = (keep_from - self.first) as usize;
        self.pending.drain(..drop.min(self.pending.len()));
        self.first += drop as i64;
    }

    /// Forgets the stream so far (after a stop: nothing old leaks out).
    pub fn reset(&mut self) {
        self.pending.clear();
        self.first = 0;
        self.next = 0;
    }
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
    fn in_pieces_of_any_size_the_stream_gives_the_whole_buffer_result() {
        let input = tone(700.0, 44_100, 0.3);
        for (from, to) in [(44_100, 16_000), (16_000, 48_000), (16_000, 16_000)] {
            let whole = resample(&input, from, to);
            let mut s = StreamResampler::new(from, to);
            let mut out = Vec::new();
            let mut at = 0;
            // Uneven callback sizes, as devices deliver.
            for size in [1, 441, 7, 1024, 100].iter().cycle() {
                if at >= input.len() {
                    break;
                }
                let end = (at + size).min(input.len());
                s.push(&input[at..end], &mut out);
                at = end;
            }
            assert!(out.len() + 200 >= whole.len() && out.len() <= whole.len(), "{from}->{to}: {} vs {}", out.len(), whole.len());
            let worst = out.iter().zip(&whole).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(worst < 1e-5, "{from}->{to}: differs by {worst}");
        }
    }

    #[test]
    fn upsampling_keeps_a_low_tone() {
        let out = resample(&tone(440.0, 8_000, 0.5), 8_000, 16_000);
        assert_eq!(out.len(), 8_000);
        assert!((rms(&out[500..7500]) - std::f32::consts::FRAC_1_SQRT_2).abs() < 0.01);
    }
}
