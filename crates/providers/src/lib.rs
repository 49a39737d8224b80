//! LLM engines behind one trait: the in-process llama.cpp engine (offline
//! default), an OpenAI-compatible HTTP adapter, and a scripted fake for tests.
//!
//! This crate owns talking to models and nothing else: it never touches the
//! ledger, the keychain or the UI. API keys arrive as arguments and are never
//! logged.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::UnboundedSender;

pub mod error;
pub mod fake;
pub mod gguf;
#[cfg(feature = "local")]
pub mod local;
pub mod openai;
pub mod retry;

pub use error::ProviderError;
pub use fake::{ScriptStep, ScriptedProvider};
pub use gguf::{validate_gguf_file, GgufHeader};
#[cfg(feature = "local")]
pub use local::{default_threads, LocalEngine};
pub use openai::OpenAiCompatible;
pub use retry::{BreakerState, CircuitBreaker, RetryPolicy, Retrying, WithFallback};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
        }
    }
}

/// Cooperative cancellation shared between the caller and the engine.
#[derive(Debug, Clone, Default)]
pub struct CancelFlag(Arc<AtomicBool>);

impl CancelFlag {
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

#[derive(Debug, Clone)]
pub struct CompletionRequest {
    pub messages: Vec<ChatMessage>,
    /// Model name inside the provider (e.g. a GGUF file stem, or "gpt-4o-mini").
    pub model: String,
    pub max_tokens: u32,
    pub temperature: f32,
    /// When set, the reply must be one JSON value matching this schema.
    /// The local engine enforces it with a grammar; HTTP adapters pass it as
    /// `response_format` and the caller validates.
    pub json_schema: Option<serde_json::Value>,
    pub cancel: CancelFlag,
}

impl CompletionRequest {
    pub fn chat(model: impl Into<String>, messages: Vec<ChatMessage>) -> Self {
        Self {
            messages,
            model: model.into(),
            max_tokens: 256,
            temperature: 0.7,
            json_schema: None,
            cancel: CancelFlag::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    Stop,
    Length,
    Cancelled,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    pub text: String,
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub finish: FinishReason,
    /// Milliseconds from the call to the first streamed token, as the engine saw it.
    pub first_token_ms: Option<f64>,
}

/// Receives streamed text pieces, in order. Dropped receivers are ignored.
pub type TokenSink = UnboundedSender<String>;

#[async_trait]
pub trait Provider: Send + Sync {
    /// Short stable name for logs and model specs ("local", an account name).
    fn name(&self) -> &str;
    /// Runs one completion, streaming pieces into `sink` as they arrive.
    async fn complete(
        &self,
        request: CompletionRequest,
        sink: Option<TokenSink>,
    ) -> Result<Completion, ProviderError>;
}
