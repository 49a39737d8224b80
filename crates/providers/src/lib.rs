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
pub mod loop_guard;
pub mod openai;
pub mod retry;

pub use error::ProviderError;
pub use fake::{ScriptStep, ScriptedProvider};
pub use gguf::{validate_gguf_file, GgufHeader};
#[cfg(feature = "local")]
pub use local::{default_threads, LocalEngine};
pub use loop_guard::LoopGuard;
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
pub struct CancelFlag(Arc<(AtomicBool, tokio::sync::Notify)>);

impl CancelFlag {
    pub fn cancel(&self) {
        self.0 .0.store(true, Ordering::SeqCst);
        self.0 .1.notify_waiters();
    }
    pub fn is_cancelled(&self) -> bool {
        self.0 .0.load(Ordering::SeqCst)
    }
    /// Whether `other` is this very flag (a clone of it), not another one.
    pub fn is_same(&self, other: &CancelFlag) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
    /// Resolves once the flag is set (at once if it already is).
    pub async fn cancelled(&self) {
        let notified = self.0 .1.notified();
        tokio::pin!(notified);
        // Registered before the check, so a cancel in between is not missed.
        notified.as_mut().enable();
        if self.is_cancelled() {
            return;
        }
        notified.await;
    }
}

/// A function the model may call (native function calling).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// A function call the model made (native function calling).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call (may be empty).
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them: JSON text, not yet validated.
    pub arguments: String,
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
    /// Functions offered through the provider's native function calling
    /// (HTTP adapters send them as `tools`; the local engine uses
    /// `json_schema` instead and ignores them).
    pub tools: Vec<ToolDefinition>,
    /// With `tools`: the model must call one (`tool_choice: "required"`).
    pub tool_required: bool,
    pub cancel: CancelFlag,
    /// Repetition control and the loop guard for a free-text reply (the
    /// local engine; HTTP adapters ignore it). `None`: llama.cpp's default
    /// samplers at `temperature`, nothing more.
    pub sampling: Option<Sampling>,
    /// Words a free-text reply may not begin with (the local engine; HTTP
    /// adapters ignore it). A persona answering the person's question about
    /// themselves starts "You…", not "I…" in the person's voice.
    pub not_first: Vec<String>,
    /// Words a free-text reply may not say at all (the local engine, words
    /// that are one token of the model; HTTP adapters ignore it): answering
    /// the person's question about themselves, "your" and not "my".
    pub never: Vec<String>,
    /// Work nobody waits for (a summary, extraction), which a reply or a
    /// person starting to talk cancels: the local engine reads its prompt
    /// in short chunks, as it does a prompt read ahead, so that a cancel
    /// frees the model soon (it stops only between chunks).
    pub background: bool,
}

/// How a free-text reply is sampled so that a small model does not loop.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    pub top_p: f32,
    /// llama.cpp's repeat penalty over the last `penalty_last_n` tokens (1 = off).
    pub repeat_penalty: f32,
    pub penalty_last_n: i32,
    /// DRY multiplier (0 = off).
    pub dry_multiplier: f32,
    /// End the reply when a sentence or a long run of words repeats, and
    /// trim the repeat (see [`loop_guard`]).
    pub loop_guard: bool,
}

impl Sampling {
    /// Settings for conversation with a small local model.
    pub const CONVERSATION: Sampling = Sampling {
        top_p: 0.9,
        repeat_penalty: 1.1,
        penalty_last_n: 64,
        dry_multiplier: 0.8,
        loop_guard: true,
    };
}

/// What a model can do, as far as the provider knows: the local engine reads
/// it from the GGUF file; remote providers say nothing (`parameters: None`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ModelCapability {
    pub parameters: Option<u64>,
    /// The context the model was trained with, in tokens.
    pub context: Option<u32>,
    /// Whether the model ships a chat template (else ChatML is used).
    pub chat_template: bool,
    pub local: bool,
    /// The languages the model card names (`general.languages`), if any.
    pub languages: Vec<String>,
}

impl CompletionRequest {
    pub fn chat(model: impl Into<String>, messages: Vec<ChatMessage>) -> Self {
        Self {
            messages,
            model: model.into(),
            max_tokens: 256,
            temperature: 0.7,
            json_schema: None,
            tools: Vec::new(),
            tool_required: false,
            cancel: CancelFlag::default(),
            sampling: None,
            not_first: Vec::new(),
            never: Vec::new(),
            background: false,
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
    /// Native function calls, in order (empty unless `tools` were offered).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
}

/// Receives streamed text pieces, in order. Dropped receivers are ignored.
/// An empty piece carries no text: the call is still working (e.g. reading a
/// long prompt before its first token).
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
    /// What `model` can do (see [`ModelCapability`]); unknown by default.
    async fn capability(&self, _model: &str) -> ModelCapability {
        ModelCapability::default()
    }
    /// Reads `request`'s prompt ahead of a call that will start with it,
    /// writing nothing, so that call's first token waits only for what
    /// follows. A provider that keeps nothing between calls does nothing
    /// (`prompt_tokens` 0).
    async fn prefill(&self, _request: CompletionRequest) -> Result<Completion, ProviderError> {
        Ok(Completion {
            text: String::new(),
            prompt_tokens: 0,
            completion_tokens: 0,
            finish: FinishReason::Stop,
            first_token_ms: None,
            tool_calls: Vec::new(),
        })
    }
}
