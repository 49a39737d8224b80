//! A scripted provider for logic tests in other crates: it answers with the
//! replies and errors it was given, in order, and records every request.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Instant;

use async_trait::async_trait;

use crate::{
    Completion, CompletionRequest, FinishReason, Provider, ProviderError, TokenSink, ToolCall,
};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum ScriptStep {
    /// Stream this text in word-sized pieces and finish with `Stop`
    /// (or `Length` when it has more pieces than `max_tokens`).
    Reply(String),
    /// Fail the call with this error.
    Error(ProviderError),
    /// Answer with these native function calls and no text (what an
    /// OpenAI-compatible server does when offered `tools`).
    ToolCalls(Vec<ToolCall>),
    /// Like `Reply`, waiting `gap` before each piece (a slow model; a long
    /// gap is a model that stalls). Stops early when cancelled.
    Paced { text: String, gap: std::time::Duration },
}

/// Answers with its script in order; once the script is used up every call
/// fails with `ProviderError::Unavailable("script exhausted")`.
#[derive(Debug, Default)]
pub struct ScriptedProvider {
    name: String,
    steps: Mutex<VecDeque<ScriptStep>>,
    seen: Mutex<Vec<CompletionRequest>>,
    prefilled: Mutex<Vec<CompletionRequest>>,
}

impl ScriptedProvider {
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }

    /// A provider that gives these replies, in order.
    pub fn with_replies<I, S>(name: impl Into<String>, replies: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let provider = Self::new(name);
        for reply in replies {
            provider.push_reply(reply);
        }
        provider
    }

    pub fn push_reply(&self, text: impl Into<String>) -> &Self {
        self.push(ScriptStep::Reply(text.into()))
    }

    pub fn push_error(&self, error: ProviderError) -> &Self {
        self.push(ScriptStep::Error(error))
    }

    pub fn push(&self, step: ScriptStep) -> &Self {
        lock(&self.steps).push_back(step);
        self
    }

    /// The requests seen so far, oldest first.
    pub fn requests(&self) -> Vec<CompletionRequest> {
        lock(&self.seen).clone()
    }

    /// The prompts read ahead so far (see [`Provider::prefill`]), oldest first.
    pub fn prefills(&self) -> Vec<CompletionRequest> {
        lock(&self.prefilled).clone()
    }

    /// How many calls were made.
    pub fn calls(&self) -> usize {
        lock(&self.seen).len()
    }

    /// How many scripted steps are left.
    pub fn remaining(&self) -> usize {
        lock(&self.steps).len()
    }
}

/// A poisoned lock only means another test thread panicked; the data is
/// still usable for a fake.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Splits text into word-sized pieces that concatenate back to the text:
/// "Hello big world" -> ["Hello", " big", " world"].
pub fn word_pieces(text: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    for ch in text.chars() {
        let is_space = ch.is_whitespace();
        if is_space && in_word {
            pieces.push(std::mem::take(&mut current));
        }
        in_word = !is_space;
        current.push(ch);
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

#[async_trait]
impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        &self.name
    }

    /// Recorded, and not counted as a call: no script step is used.
    async fn prefill(&self, request: CompletionRequest) -> Result<Completion, ProviderError> {
        let prompt_tokens = request.messages.iter().map(|m| m.content.split_whitespace().count()).sum::<usize>();
        lock(&self.prefilled).push(request);
        Ok(Completion {
            text: String::new(),
            prompt_tokens: u32::try_from(prompt_tokens).unwrap_or(u32::MAX),
            completion_tokens: 0,
            finish: FinishReason::Stop,
            first_token_ms: None,
            tool_calls: Vec::new(),
        })
    }

    async fn complete(
        &self,
        request: CompletionRequest,
        sink: Option<TokenSink>,
    ) -> Result<Completion, ProviderError> {
        let started = Instant::now();
        let prompt_tokens = request
            .messages
            .iter()
            .map(|m| m.content.split_whitespace().count())
            .sum::<usize>();
        let max_tokens = request.max_tokens as usize;
        let cancel = request.cancel.clone();
        lock(&self.seen).push(request);
        let step = lock(&self.steps).pop_front();
        let mut gap = None;
        let text = match step {
            Some(ScriptStep::Reply(text)) => text,
            Some(ScriptStep::Paced { text, gap: g }) => {
                gap = Some(g);
                text
            }
            Some(ScriptStep::Error(e)) => return Err(e),
            Some(ScriptStep::ToolCalls(tool_calls)) => {
                return Ok(Completion {
                    text: String::new(),
                    prompt_tokens: u32::try_from(prompt_tokens).unwrap_or(u32::MAX),
                    completion_tokens: 1,
                    finish: FinishReason::Stop,
                    first_token_ms: None,
                    tool_calls,
                })
            }
            None => return Err(ProviderError::Unavailable("script exhausted".into())),
        };
        let mut out = String::new();
        let mut finish = FinishReason::Stop;
        let mut first_token_ms = None;
        let mut count = 0usize;
        for piece in word_pieces(&text) {
            if let Some(gap) = gap {
                let until = Instant::now() + gap;
                while Instant::now() < until && !cancel.is_cancelled() {
                    tokio::time::sleep(gap.min(std::time::Duration::from_millis(20))).await;
                }
            }
            if cancel.is_cancelled() {
                finish = FinishReason::Cancelled;
                break;
            }
            if count >= max_tokens {
                finish = FinishReason::Length;
                break;
            }
            first_token_ms.get_or_insert_with(|| started.elapsed().as_secs_f64() * 1000.0);
            if let Some(sink) = &sink {
                let _ = sink.send(piece.clone());
            }
            out.push_str(&piece);
            count += 1;
        }
        Ok(Completion {
            text: out,
            prompt_tokens: u32::try_from(prompt_tokens).unwrap_or(u32::MAX),
            completion_tokens: u32::try_from(count).unwrap_or(u32::MAX),
            finish,
            first_token_ms,
            tool_calls: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ChatMessage, Role};

    #[test]
    fn pieces_concatenate_back() {
        for text in [
            "Hello big world",
            "  lead",
            "trail  ",
            "a\nb  c",
            "",
            "één twee",
        ] {
            assert_eq!(word_pieces(text).concat(), text);
        }
        assert_eq!(
            word_pieces("Hello big world"),
            vec!["Hello", " big", " world"]
        );
    }

    #[tokio::test]
    async fn replies_in_order_and_records_requests() {
        let p = ScriptedProvider::with_replies("fake", ["one two three", "second"]);
        p.push_error(ProviderError::Timeout(5));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let req = CompletionRequest::chat("m", vec![ChatMessage::new(Role::User, "hi there")]);
        let c = p
            .complete(req.clone(), Some(tx))
            .await
            .expect("first reply");
        assert_eq!(c.text, "one two three");
        assert_eq!(c.completion_tokens, 3);
        assert_eq!(c.prompt_tokens, 2);
        let mut streamed = Vec::new();
        while let Ok(piece) = rx.try_recv() {
            streamed.push(piece);
        }
        assert_eq!(streamed, vec!["one", " two", " three"]);
        assert_eq!(
            p.complete(req.clone(), None).await.expect("second").text,
            "second"
        );
        assert_eq!(
            p.complete(req.clone(), None).await,
            Err(ProviderError::Timeout(5))
        );
        assert!(matches!(
            p.complete(req.clone(), None).await,
            Err(ProviderError::Unavailable(_))
        ));
        assert_eq!(p.calls(), 4);
        assert_eq!(p.requests()[0].messages[0].content, "hi there");
    }

    #[tokio::test]
    async fn honours_max_tokens_and_cancel() {
        let p = ScriptedProvider::with_replies("fake", ["a b c d e", "x y"]);
        let mut req = CompletionRequest::chat("m", vec![]);
        req.max_tokens = 2;
        let c = p.complete(req, None).await.expect("reply");
        assert_eq!(c.text, "a b");
        assert_eq!(c.finish, FinishReason::Length);
        let req = CompletionRequest::chat("m", vec![]);
        req.cancel.cancel();
        let c = p.complete(req, None).await.expect("reply");
        assert_eq!(c.finish, FinishReason::Cancelled);
        assert_eq!(c.text, "");
    }
}
