//! Model specs (`account:model`): which account serves a persona and with which model.

use std::fmt;

use crate::error::AppError;

/// The default chat model: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, Apache-2.0),
/// installed by setup. Of the verified files it is the one that answers
/// questions about what it was just told, in English and Portuguese, within
/// a few seconds on two cores.
pub const DEFAULT_LOCAL_MODEL: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m";
/// The tiny model (SmolLM2-135M-Instruct, 98 MB) used where the default is
/// not installed, and by tests that need a model quickly.
pub const TINY_LOCAL_MODEL: &str = "SmolLM2-135M-Instruct.Q4_1";
pub const LOCAL_ACCOUNT: &str = "local";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSpec {
    pub account: String,
    pub model: String,
}

impl ModelSpec {
    pub fn local(model: &str) -> Self {
        Self { account: LOCAL_ACCOUNT.into(), model: model.into() }
    }

    pub fn parse(spec: &str) -> Result<Self, AppError> {
        match spec.split_once(':') {
            Some((account, model)) if !account.trim().is_empty() && !model.trim().is_empty() => {
                Ok(Self { account: account.trim().into(), model: model.trim().into() })
            }
            _ => Err(AppError::invalid(format!("\"{spec}\" is not a model spec; expected account:model"))),
        }
    }

    pub fn is_local(&self) -> bool {
        self.account == LOCAL_ACCOUNT
    }
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.account, self.model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_split_on_the_first_colon() {
        let s = ModelSpec::parse("ollama:llama3:8b").expect("parse");
        assert_eq!(s.account, "ollama");
        assert_eq!(s.model, "llama3:8b");
        assert!(ModelSpec::parse("nocolon").is_err());
        assert!(ModelSpec::parse(":x").is_err());
        assert_eq!(ModelSpec::local("m").to_string(), "local:m");
    }
}
