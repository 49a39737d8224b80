//! Token counting for narrative budgets.
//!
//! The narrator is called before any model is loaded, so it cannot always
//! ask the model's tokenizer. `Estimate` is the documented fallback: one
//! token per 4 bytes of UTF-8 or per 0.75 words, whichever is larger, plus
//! one per line break. On SmolLM2's BPE it over-counts English prose
//! slightly, which keeps a budget safe rather than exact.

pub trait TokenCounter: Send + Sync {
    fn count(&self, text: &str) -> usize;
    /// Short name reported in the frame (`estimate`, `smollm2` …).
    fn name(&self) -> &str;
}

#[derive(Debug, Default, Clone, Copy)]
pub struct Estimate;

impl TokenCounter for Estimate {
    fn count(&self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        let by_bytes = text.len().div_ceil(4);
        let words = text.split_whitespace().count();
        let by_words = (words * 4).div_ceil(3);
        by_bytes.max(by_words) + text.matches('\n').count()
    }

    fn name(&self) -> &str {
        "estimate"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_grows_with_text_and_is_zero_for_nothing() {
        assert_eq!(Estimate.count(""), 0);
        let short = Estimate.count("You are Ada.");
        let long = Estimate.count("You are Ada. You keep the person's promises in mind and remind them kindly.");
        assert!(short >= 3 && long > short * 3, "{short} {long}");
    }
}
