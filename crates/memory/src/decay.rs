//! Exposure decay: how present a memory still is. Every memory starts at
//! exposure 1.0 and goes back to 1.0 when a reply uses it; in between it
//! decays exponentially with an explicit half-life:
//!
//! ```text
//! exposure(t) = exposure(t0) · 0.5 ^ ((t − t0) / half_life)
//! ```
//!
//! so after one half-life it is halved, after two quartered. Memories the
//! human confirmed never decay (the ledger's projection skips them).

/// Unused memories fade to half in a week (spec: "decay weekly").
pub const DEFAULT_HALF_LIFE_DAYS: f64 = 7.0;

/// The factor exposure is multiplied by after `elapsed_days`. A half-life
/// that is not positive means no decay; negative elapsed time changes nothing.
pub fn decay_factor(elapsed_days: f64, half_life_days: f64) -> f64 {
    if half_life_days <= 0.0 || elapsed_days <= 0.0 || !elapsed_days.is_finite() {
        return 1.0;
    }
    0.5f64.powf(elapsed_days / half_life_days)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposure_halves_every_half_life() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(close(decay_factor(7.0, 7.0), 0.5));
        assert!(close(decay_factor(14.0, 7.0), 0.25));
        assert!(close(decay_factor(3.5, 7.0), std::f64::consts::FRAC_1_SQRT_2));
        assert!(close(decay_factor(1.0, 7.0), 0.905_723_664_263_906_8));
        assert!(close(decay_factor(30.0, 7.0), 0.051_270_959_750_477_37));
        // Two steps compose into one: 0.5^(a/h) · 0.5^(b/h) = 0.5^((a+b)/h).
        assert!(close(decay_factor(2.0, 7.0) * decay_factor(5.0, 7.0), 0.5));
        assert_eq!(decay_factor(0.0, 7.0), 1.0);
        assert_eq!(decay_factor(-3.0, 7.0), 1.0);
        assert_eq!(decay_factor(10.0, 0.0), 1.0);
    }
}
