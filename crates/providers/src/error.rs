use thiserror::Error;

/// Failures of a model call, mapped one-to-one onto the product's error codes.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ProviderError {
    #[error("the provider is rate limiting requests")]
    RateLimited { retry_after_ms: Option<u64> },
    #[error("the model did not answer within {0} ms")]
    Timeout(u64),
    #[error("the model did not return valid JSON: {0}")]
    InvalidJson(String),
    #[error("the reply was cut off at the token limit")]
    Truncated,
    #[error("the provider is unreachable: {0}")]
    Unavailable(String),
    #[error("the provider answered {status}: {message}")]
    Http { status: u16, message: String },
    #[error("the model could not be loaded: {0}")]
    ModelLoad(String),
    #[error("the request was cancelled")]
    Cancelled,
}

impl ProviderError {
    /// The stable error code shown to users and scripts.
    pub fn code(&self) -> &'static str {
        match self {
            Self::RateLimited { .. } => "LLM_RATE_LIMITED",
            Self::Timeout(_) => "LLM_TIMEOUT",
            Self::InvalidJson(_) => "LLM_INVALID_JSON",
            Self::Truncated => "LLM_TRUNCATED",
            Self::Unavailable(_) | Self::Http { .. } => "LLM_UNAVAILABLE",
            Self::ModelLoad(_) => "MODEL_LOAD_FAILED",
            Self::Cancelled => "LLM_CANCELLED",
        }
    }

    /// Whether retrying the same request may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::RateLimited { .. } | Self::Timeout(_) | Self::Unavailable(_) => true,
            Self::Http { status, .. } => *status >= 500 || *status == 408,
            _ => false,
        }
    }
}
