//! An adapter for OpenAI-compatible chat completion servers: OpenAI,
//! OpenRouter, Ollama, LM Studio, llama.cpp's server (base URLs such as
//! `http://localhost:11434/v1`).
//!
//! Replies are streamed (`stream: true`, server-sent events). The API key is
//! sent as a bearer token and never appears in errors, logs or `Debug`.

use std::fmt;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures_util::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use serde_json::{json, Value};

use crate::{
    CancelFlag, Completion, CompletionRequest, FinishReason, Provider, ProviderError, Role,
    TokenSink, ToolCall,
};

/// Longest server message kept in an error.
const MAX_ERROR_MESSAGE: usize = 200;

/// An OpenAI-compatible HTTP provider.
#[derive(Clone)]
pub struct OpenAiCompatible {
    name: String,
    base_url: String,
    api_key: Option<String>,
    extra_headers: Vec<(String, String)>,
    timeout: Duration,
    client: reqwest::Client,
}

impl fmt::Debug for OpenAiCompatible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiCompatible")
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .field(
                "extra_headers",
                &self
                    .extra_headers
                    .iter()
                    .map(|(k, _)| k)
                    .collect::<Vec<_>>(),
            )
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl OpenAiCompatible {
    /// A provider named `name` talking to `base_url` (the part before
    /// `/chat/completions`, e.g. `https://api.openai.com/v1`). Defaults: no
    /// key, no extra headers, 60 s timeout.
    pub fn new(name: impl Into<String>, base_url: impl Into<String>) -> Self {
        let timeout = Duration::from_secs(60);
        Self {
            name: name.into(),
            base_url: base_url.into().trim_end_matches('/').to_string(),
            api_key: None,
            extra_headers: Vec::new(),
            timeout,
            client: build_client(timeout),
        }
    }

    /// Sends `Authorization: Bearer <key>`. An empty key means none.
    pub fn with_api_key(mut self, key: Option<String>) -> Self {
        self.api_key = key.filter(|k| !k.trim().is_empty());
        self
    }

    /// Adds a header to every request (e.g. OpenRouter's `HTTP-Referer`).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.extra_headers.push((name.into(), value.into()));
        self
    }

    /// How long to wait for the connection, the response headers, and each
    /// streamed chunk after that (an idle timeout: a long reply that keeps
    /// streaming is not cut off).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self.client = build_client(timeout);
        self
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    fn timeout_ms(&self) -> u64 {
        u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX)
    }

    fn headers(&self) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(key) = &self.api_key {
            let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                ProviderError::Http {
                    status: 0,
                    message: "the API key contains characters not allowed in a header".into(),
                }
            })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        for (name, value) in &self.extra_headers {
            let name =
                HeaderName::from_bytes(name.as_bytes()).map_err(|_| ProviderError::Http {
                    status: 0,
                    message: format!("invalid header name {name:?}"),
                })?;
            let value = HeaderValue::from_str(value).map_err(|_| ProviderError::Http {
                status: 0,
                message: format!("invalid value for header {name}"),
            })?;
            headers.insert(name, value);
        }
        Ok(headers)
    }

    /// Removes the API key from text that may echo it.
    fn scrub(&self, text: &str) -> String {
        match &self.api_key {
            Some(key) if key.len() >= 4 => text.replace(key.as_str(), "***"),
            _ => text.to_string(),
        }
    }

    fn map_reqwest(&self, e: &reqwest::Error) -> ProviderError {
        if e.is_timeout() {
            ProviderError::Timeout(self.timeout_ms())
        } else if e.is_connect() {
            ProviderError::Unavailable(format!(
                "could not connect to {}",
                self.scrub(&self.base_url)
            ))
        } else {
            // Display of a reqwest error names the URL but never headers.
            ProviderError::Unavailable(self.scrub(&error_chain(e)))
        }
    }

    /// The JSON body sent to `/chat/completions`.
    pub fn request_body(request: &CompletionRequest) -> Value {
        let messages: Vec<Value> = request
            .messages
            .iter()
            .map(|m| json!({"role": role_name(m.role), "content": m.content}))
            .collect();
        let mut body = json!({
            "model": request.model,
            "messages": messages,
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
        });
        if let Some(schema) = &request.json_schema {
            body["response_format"] = json!({
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": schema},
            });
        }
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| {
                    json!({
                        "type": "function",
                        "function": {
                            "name": t.name,
                            "description": t.description,
                            "parameters": t.parameters,
                        },
                    })
                })
                .collect();
            body["tools"] = Value::Array(tools);
            body["tool_choice"] = json!(if request.tool_required {
                "required"
            } else {
                "auto"
            });
            // One planner action per reply.
            body["parallel_tool_calls"] = json!(false);
        }
        body
    }

    /// Model ids the server offers (`GET {base_url}/models`).
    pub async fn list_models(&self) -> Result<Vec<String>, ProviderError> {
        let url = format!("{}/models", self.base_url);
        let response = self
            .client
            .get(&url)
            .headers(self.headers()?)
            .send()
            .await
            .map_err(|e| self.map_reqwest(&e))?;
        let status = response.status();
        let retry_after = retry_after_ms(response.headers());
        let body = tokio::time::timeout(self.timeout, response.text())
            .await
            .map_err(|_| ProviderError::Timeout(self.timeout_ms()))?
            .map_err(|e| self.map_reqwest(&e))?;
        if !status.is_success() {
            return Err(self.status_error(status.as_u16(), retry_after, &body));
        }
        let value: Value = serde_json::from_str(&body).map_err(|_| ProviderError::Http {
            status: status.as_u16(),
            message: format!("the model list is not JSON: {}", self.snippet(&body)),
        })?;
        let list = value
            .get("data")
            .or_else(|| value.get("models"))
            .and_then(Value::as_array)
            .ok_or_else(|| ProviderError::Http {
                status: status.as_u16(),
                message: "the model list has no `data` array".into(),
            })?;
        Ok(list
            .iter()
            .filter_map(|m| {
                m.get("id")
                    .or_else(|| m.get("name"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .collect())
    }

    fn snippet(&self, body: &str) -> String {
        let cleaned = self.scrub(body.trim());
        truncate_chars(&cleaned, MAX_ERROR_MESSAGE)
    }

    fn status_error(&self, status: u16, retry_after: Option<u64>, body: &str) -> ProviderError {
        match status {
            429 => ProviderError::RateLimited {
                retry_after_ms: retry_after,
            },
            408 => ProviderError::Timeout(self.timeout_ms()),
            _ => {
                let message = server_message(body)
                    .map(|m| self.snippet(&m))
                    .filter(|m| !m.is_empty())
                    .unwrap_or_else(|| {
                        let s = self.snippet(body);
                        if s.is_empty() {
                            http_reason(status).to_string()
                        } else {
                            s
                        }
                    });
                ProviderError::Http { status, message }
            }
        }
    }

    async fn run(
        &self,
        request: &CompletionRequest,
        sink: Option<&TokenSink>,
        started: Instant,
    ) -> Result<Completion, ProviderError> {
        let url = format!("{}/chat/completions", self.base_url);
        let body = Self::request_body(request);
        let send = self
            .client
            .post(&url)
            .headers(self.headers()?)
            .json(&body)
            .send();
        let response = tokio::time::timeout(self.timeout, send)
            .await
            .map_err(|_| ProviderError::Timeout(self.timeout_ms()))?
            .map_err(|e| self.map_reqwest(&e))?;
        let status = response.status();
        if !status.is_success() {
            let retry_after = retry_after_ms(response.headers());
            let body = tokio::time::timeout(self.timeout, response.text())
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            let err = self.status_error(status.as_u16(), retry_after, &body);
            tracing::debug!(provider = %self.name, status = status.as_u16(), code = err.code(), "provider answered with an error");
            return Err(err);
        }

        let mut state = StreamState::new(started);
        let mut stream = response.bytes_stream();
        let mut buf: Vec<u8> = Vec::new();
        // The body as received until the first event, for non-SSE replies.
        let mut raw: Vec<u8> = Vec::new();
        loop {
            let next = tokio::select! {
                next = tokio::time::timeout(self.timeout, stream.next()) => next,
                () = wait_cancelled(&request.cancel) => {
                    state.finish = Some(FinishReason::Cancelled);
                    break;
                }
            };
            let chunk = match next {
                Err(_) => return Err(ProviderError::Timeout(self.timeout_ms())),
                Ok(None) => break,
                Ok(Some(Err(e))) => return Err(self.map_reqwest(&e)),
                Ok(Some(Ok(chunk))) => chunk,
            };
            if state.events == 0 && raw.len() < 8 * 1024 * 1024 {
                raw.extend_from_slice(&chunk);
            }
            buf.extend_from_slice(&chunk);
            while let Some(pos) = buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = buf.drain(..=pos).collect();
                let line = String::from_utf8_lossy(&line);
                self.handle_line(
                    line.trim_end_matches(['\r', '\n']),
                    &mut state,
                    sink,
                    status.as_u16(),
                )?;
                if state.done {
                    break;
                }
            }
            if state.done {
                break;
            }
        }
        if !state.done && !buf.is_empty() {
            let line = String::from_utf8_lossy(&buf).to_string();
            self.handle_line(
                line.trim_end_matches(['\r', '\n']),
                &mut state,
                sink,
                status.as_u16(),
            )?;
        }

        if state.events == 0 && state.finish != Some(FinishReason::Cancelled) {
            // Not an event stream: some servers ignore `stream: true` and
            // answer with one JSON object.
            let raw = String::from_utf8_lossy(&raw).to_string();
            return self.parse_plain(&raw, status.as_u16(), sink, started);
        }
        let finish = match state.finish {
            Some(f) => f,
            None if state.done => FinishReason::Stop,
            None => {
                return Err(ProviderError::Unavailable(
                    "the reply stream ended before the reply was complete".into(),
                ))
            }
        };
        Ok(Completion {
            completion_tokens: state.completion_tokens.unwrap_or(state.pieces),
            prompt_tokens: state.prompt_tokens.unwrap_or(0),
            text: state.text,
            finish,
            first_token_ms: state.first_token_ms,
            tool_calls: state.tool_calls,
        })
    }

    fn handle_line(
        &self,
        line: &str,
        state: &mut StreamState,
        sink: Option<&TokenSink>,
        status: u16,
    ) -> Result<(), ProviderError> {
        let Some(data) = line.strip_prefix("data:") else {
            // Blank separators, `event:`, `id:`, `retry:` and `:` comments.
            return Ok(());
        };
        let data = data.trim();
        state.events += 1;
        if data == "[DONE]" {
            state.done = true;
            return Ok(());
        }
        let value: Value = serde_json::from_str(data).map_err(|_| ProviderError::Http {
            status,
            message: format!(
                "malformed event in the reply stream: {}",
                self.snippet(data)
            ),
        })?;
        if let Some(err) = value.get("error") {
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| err.to_string());
            let code = err
                .get("code")
                .and_then(Value::as_u64)
                .and_then(|c| u16::try_from(c).ok());
            return Err(match code {
                Some(429) => ProviderError::RateLimited {
                    retry_after_ms: None,
                },
                Some(c) => ProviderError::Http {
                    status: c,
                    message: self.snippet(&message),
                },
                None => ProviderError::Http {
                    status: 500,
                    message: self.snippet(&message),
                },
            });
        }
        if let Some(usage) = value.get("usage").filter(|u| !u.is_null()) {
            state.prompt_tokens = usage_field(usage, "prompt_tokens").or(state.prompt_tokens);
            state.completion_tokens =
                usage_field(usage, "completion_tokens").or(state.completion_tokens);
        }
        if let Some(choice) = value.get("choices").and_then(|c| c.get(0)) {
            if let Some(piece) = choice.pointer("/delta/content").and_then(Value::as_str) {
                if !piece.is_empty() {
                    state.push(piece, sink);
                }
            }
            if let Some(calls) = choice.pointer("/delta/tool_calls").and_then(Value::as_array) {
                for call in calls {
                    state.tool_call_delta(call);
                }
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                state.finish = Some(finish_reason(reason));
            }
        }
        Ok(())
    }

    fn parse_plain(
        &self,
        raw: &str,
        status: u16,
        sink: Option<&TokenSink>,
        started: Instant,
    ) -> Result<Completion, ProviderError> {
        let malformed = || ProviderError::Http {
            status,
            message: format!(
                "the reply is not an OpenAI-compatible chat completion: {}",
                if raw.trim().is_empty() {
                    "empty body".to_string()
                } else {
                    self.snippet(raw)
                }
            ),
        };
        let value: Value = serde_json::from_str(raw).map_err(|_| malformed())?;
        if value.get("error").is_some() {
            return Err(self.status_error(500, None, raw));
        }
        let choice = value
            .get("choices")
            .and_then(|c| c.get(0))
            .ok_or_else(malformed)?;
        let tool_calls: Vec<ToolCall> = choice
            .pointer("/message/tool_calls")
            .and_then(Value::as_array)
            .map(|calls| calls.iter().filter_map(whole_tool_call).collect())
            .unwrap_or_default();
        let text = match choice.pointer("/message/content") {
            Some(Value::String(t)) => t.clone(),
            // A reply that only calls functions has no content.
            Some(Value::Null) | None if !tool_calls.is_empty() => String::new(),
            _ => return Err(malformed()),
        };
        let mut state = StreamState::new(started);
        if !text.is_empty() {
            state.push(&text, sink);
        }
        let usage = value.get("usage");
        Ok(Completion {
            prompt_tokens: usage
                .and_then(|u| usage_field(u, "prompt_tokens"))
                .unwrap_or(0),
            completion_tokens: usage
                .and_then(|u| usage_field(u, "completion_tokens"))
                .unwrap_or(state.pieces),
            finish: choice
                .get("finish_reason")
                .and_then(Value::as_str)
                .map(finish_reason)
                .unwrap_or(FinishReason::Stop),
            first_token_ms: state.first_token_ms,
            text: state.text,
            tool_calls,
        })
    }
}

/// A complete `{id, function: {name, arguments}}` (non-streamed reply).
fn whole_tool_call(call: &Value) -> Option<ToolCall> {
    let function = call.get("function")?;
    Some(ToolCall {
        id: call.get("id").and_then(Value::as_str).unwrap_or_default().to_string(),
        name: function.get("name").and_then(Value::as_str)?.to_string(),
        arguments: match function.get("arguments") {
            Some(Value::String(a)) => a.clone(),
            // Some servers send the arguments as an object.
            Some(v @ Value::Object(_)) => v.to_string(),
            _ => String::new(),
        },
    })
}

struct StreamState {
    started: Instant,
    text: String,
    pieces: u32,
    events: u32,
    done: bool,
    finish: Option<FinishReason>,
    prompt_tokens: Option<u32>,
    completion_tokens: Option<u32>,
    first_token_ms: Option<f64>,
    /// Native function calls, assembled from their streamed pieces.
    tool_calls: Vec<ToolCall>,
}

impl StreamState {
    fn new(started: Instant) -> Self {
        Self {
            started,
            text: String::new(),
            pieces: 0,
            events: 0,
            done: false,
            finish: None,
            prompt_tokens: None,
            completion_tokens: None,
            first_token_ms: None,
            tool_calls: Vec::new(),
        }
    }

    /// One streamed piece of a function call: the first names it (`id`,
    /// `function.name`), later ones append to `function.arguments`; pieces
    /// of different calls are told apart by `index`.
    fn tool_call_delta(&mut self, delta: &Value) {
        let index = delta
            .get("index")
            .and_then(Value::as_u64)
            .and_then(|i| usize::try_from(i).ok())
            .unwrap_or(self.tool_calls.len().saturating_sub(1));
        // A server that numbers calls sparsely must not make us allocate.
        if index > self.tool_calls.len() || index >= 64 {
            return;
        }
        if index == self.tool_calls.len() {
            self.tool_calls.push(ToolCall {
                id: String::new(),
                name: String::new(),
                arguments: String::new(),
            });
        }
        let call = &mut self.tool_calls[index];
        if let Some(id) = delta.get("id").and_then(Value::as_str) {
            call.id = id.to_string();
        }
        if let Some(f) = delta.get("function") {
            // Usually whole in the first piece; some servers repeat it.
            if let Some(name) = f.get("name").and_then(Value::as_str) {
                if call.name != name {
                    call.name.push_str(name);
                }
            }
            if let Some(args) = f.get("arguments").and_then(Value::as_str) {
                call.arguments.push_str(args);
            }
        }
        if self.first_token_ms.is_none() {
            self.first_token_ms = Some(self.started.elapsed().as_secs_f64() * 1000.0);
        }
        self.pieces = self.pieces.saturating_add(1);
    }

    fn push(&mut self, piece: &str, sink: Option<&TokenSink>) {
        if self.first_token_ms.is_none() {
            self.first_token_ms = Some(self.started.elapsed().as_secs_f64() * 1000.0);
        }
        self.text.push_str(piece);
        self.pieces = self.pieces.saturating_add(1);
        if let Some(sink) = sink {
            let _ = sink.send(piece.to_string());
        }
    }
}

#[async_trait]
impl Provider for OpenAiCompatible {
    fn name(&self) -> &str {
        &self.name
    }

    async fn complete(
        &self,
        request: CompletionRequest,
        sink: Option<TokenSink>,
    ) -> Result<Completion, ProviderError> {
        let started = Instant::now();
        if request.cancel.is_cancelled() {
            return Ok(cancelled_empty());
        }
        self.run(&request, sink.as_ref(), started).await
    }
}

fn cancelled_empty() -> Completion {
    Completion {
        text: String::new(),
        prompt_tokens: 0,
        completion_tokens: 0,
        finish: FinishReason::Cancelled,
        first_token_ms: None,
        tool_calls: Vec::new(),
    }
}

fn build_client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(timeout)
        .build()
        // Building only fails when the TLS backend cannot initialise; fall
        // back to the default client, which reports the same problem on use.
        .unwrap_or_default()
}

async fn wait_cancelled(cancel: &CancelFlag) {
    while !cancel.is_cancelled() {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "length" | "max_tokens" => FinishReason::Length,
        _ => FinishReason::Stop,
    }
}

fn usage_field(usage: &Value, key: &str) -> Option<u32> {
    usage
        .get(key)
        .and_then(Value::as_u64)
        .and_then(|v| u32::try_from(v).ok())
}

/// `Retry-After` in seconds (integer or decimal), or `retry-after-ms`.
pub fn retry_after_ms(headers: &HeaderMap) -> Option<u64> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
    {
        return Some(ms.round() as u64);
    }
    headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
        .map(|secs| (secs * 1000.0).round() as u64)
}

/// The `error.message` (or `error` string, or `message`) of an error body.
fn server_message(body: &str) -> Option<String> {
    let value: Value = serde_json::from_str(body).ok()?;
    let err = value.get("error").unwrap_or(&value);
    err.get("message")
        .and_then(Value::as_str)
        .or_else(|| err.as_str())
        .or_else(|| value.get("detail").and_then(Value::as_str))
        .map(str::to_string)
}

fn truncate_chars(s: &str, max: usize) -> String {
    let single_line: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if single_line.chars().count() <= max {
        single_line
    } else {
        let mut out: String = single_line.chars().take(max).collect();
        out.push('…');
        out
    }
}

fn http_reason(status: u16) -> &'static str {
    reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("unexpected status")
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ChatMessage;

    #[test]
    fn body_has_stream_and_response_format() {
        let mut req = CompletionRequest::chat("gpt", vec![ChatMessage::new(Role::User, "hi")]);
        req.json_schema = Some(json!({"type": "object"}));
        let body = OpenAiCompatible::request_body(&req);
        assert_eq!(body["stream"], json!(true));
        assert_eq!(body["messages"][0]["role"], "user");
        assert_eq!(body["response_format"]["type"], "json_schema");
        assert_eq!(
            body["response_format"]["json_schema"]["schema"]["type"],
            "object"
        );
        assert_eq!(body["response_format"]["json_schema"]["name"], "response");
    }

    #[test]
    fn debug_hides_key() {
        let p = OpenAiCompatible::new("x", "http://localhost/v1/")
            .with_api_key(Some("sk-secret-123".into()))
            .with_header("X-Title", "Ledgermind");
        let dbg = format!("{p:?}");
        assert!(!dbg.contains("sk-secret-123"));
        assert_eq!(p.base_url(), "http://localhost/v1");
        assert_eq!(p.scrub("echo sk-secret-123 back"), "echo *** back");
    }

    #[test]
    fn retry_after_parsing() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after_ms(&h), Some(2000));
        h.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(retry_after_ms(&h), Some(150));
        let mut h = HeaderMap::new();
        h.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after_ms(&h), None);
    }

    #[test]
    fn error_messages_are_short() {
        let p = OpenAiCompatible::new("x", "http://h/v1");
        let e = p.status_error(401, None, r#"{"error":{"message":"Incorrect API key"}}"#);
        assert_eq!(
            e,
            ProviderError::Http {
                status: 401,
                message: "Incorrect API key".into()
            }
        );
        let long = "x".repeat(5000);
        match p.status_error(500, None, &long) {
            ProviderError::Http { message, .. } => assert!(message.chars().count() <= 201),
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(
            p.status_error(429, Some(1000), ""),
            ProviderError::RateLimited {
                retry_after_ms: Some(1000)
            }
        );
        assert!(matches!(
            p.status_error(408, None, ""),
            ProviderError::Timeout(_)
        ));
        assert_eq!(
            p.status_error(503, None, ""),
            ProviderError::Http {
                status: 503,
                message: "Service Unavailable".into()
            }
        );
    }
}
