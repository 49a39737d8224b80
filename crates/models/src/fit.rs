//! Will a model run here? Weights plus KV cache at our context plus the
//! runtime's working memory, against the memory the kernel says is
//! available (`MemAvailable`, which counts reclaimable page cache; "free"
//! does not, and total ignores what is already in use).

use serde::Serialize;

/// llama.cpp's compute buffers and our process around the weights; a
/// conservative allowance, not a measurement of each model.
pub const RUNTIME_OVERHEAD_BYTES: u64 = 512 * 1024 * 1024;

/// Share of available memory a model may take and still be called a fit;
/// the rest stays for the desktop, the browser and the page cache.
const FITS_SHARE: f64 = 0.60;
/// Up to this share it runs, but other programs will feel it.
const TIGHT_SHARE: f64 = 0.85;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fit {
    Fits,
    Tight,
    TooBig,
}

impl Fit {
    pub fn as_str(self) -> &'static str {
        match self {
            Fit::Fits => "fits",
            Fit::Tight => "tight",
            Fit::TooBig => "too_big",
        }
    }
}

/// The memory a model needs, and the verdict against `available`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FitReport {
    pub fit: Fit,
    pub need_bytes: u64,
    pub available_bytes: u64,
}

pub fn need_bytes(weights: u64, kv_bytes_per_token: u64, context_tokens: u64) -> u64 {
    weights.saturating_add(kv_bytes_per_token.saturating_mul(context_tokens)).saturating_add(RUNTIME_OVERHEAD_BYTES)
}

pub fn judge(need: u64, available: u64) -> FitReport {
    let share = need as f64 / (available.max(1)) as f64;
    let fit = if share <= FITS_SHARE {
        Fit::Fits
    } else if share <= TIGHT_SHARE {
        Fit::Tight
    } else {
        Fit::TooBig
    };
    FitReport { fit, need_bytes: need, available_bytes: available }
}

/// `MemAvailable` from /proc/meminfo, in bytes; `None` where there is no
/// such file (then callers say the fit is unknown rather than guess).
pub fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_meminfo(&text)
}

pub(crate) fn parse_meminfo(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds() {
        const GB: u64 = 1 << 30;
        assert_eq!(judge(4 * GB, 10 * GB).fit, Fit::Fits);
        assert_eq!(judge(6 * GB, 10 * GB).fit, Fit::Fits);
        assert_eq!(judge(7 * GB, 10 * GB).fit, Fit::Tight);
        assert_eq!(judge(9 * GB, 10 * GB).fit, Fit::TooBig);
        assert_eq!(judge(1, 0).fit, Fit::TooBig);
        assert_eq!(Fit::TooBig.as_str(), "too_big");
    }

    #[test]
    fn need_counts_kv_at_context() {
        // The default model: 1.12 GB of weights, 28 KiB a token at 4096 tokens.
        let n = need_bytes(1_117_320_768, 28_672, 4096);
        assert_eq!(n, 1_117_320_768 + 117_440_512 + RUNTIME_OVERHEAD_BYTES);
    }

    #[test]
    fn meminfo() {
        let t = "MemTotal:       32000000 kB\nMemFree:         1000 kB\nMemAvailable:   23084536 kB\n";
        assert_eq!(parse_meminfo(t), Some(23_084_536 * 1024));
        assert_eq!(parse_meminfo("MemTotal: 1 kB\n"), None);
    }
}
