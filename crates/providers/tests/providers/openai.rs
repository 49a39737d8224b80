use std::time::{Duration, Instant};

use providers::{
    ChatMessage, CompletionRequest, FinishReason, OpenAiCompatible, Provider, ProviderError,
    RetryPolicy, Retrying, Role,
};
use serde_json::json;

use crate::server::{self, delta, finish, ok_stream, raw, serve, sse, Reply};

fn request() -> CompletionRequest {
    CompletionRequest::chat(
        "test-model",
        vec![ChatMessage::new(Role::User, "Say hello")],
    )
}

fn provider(base_url: &str) -> OpenAiCompatible {
    OpenAiCompatible::new("test", base_url)
        .with_api_key(Some("sk-test-SECRET-KEY".into()))
        .with_header("X-Title", "Ledgermind")
        .with_timeout(Duration::from_secs(5))
}

#[tokio::test]
async fn streams_pieces_and_usage() {
    let srv = serve(vec![ok_stream(&["Hel", "lo", " wor", "ld"])]).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let c = provider(&srv.base_url)
        .complete(request(), Some(tx))
        .await
        .expect("completion");
    assert_eq!(c.text, "Hello world");
    assert_eq!(c.finish, FinishReason::Stop);
    assert_eq!((c.prompt_tokens, c.completion_tokens), (7, 4));
    assert!(c.first_token_ms.is_some());
    let mut pieces = Vec::new();
    while let Ok(p) = rx.try_recv() {
        pieces.push(p);
    }
    assert_eq!(pieces, vec!["Hel", "lo", " wor", "ld"]);

    let requests = srv.requests();
    assert_eq!(requests.len(), 1);
    assert!(
        requests[0].starts_with("POST /v1/chat/completions "),
        "{}",
        requests[0]
    );
    let head = requests[0].to_lowercase();
    assert!(head.contains("authorization: bearer sk-test-secret-key"));
    assert!(head.contains("x-title: ledgermind"));
    let body = server::body_of(&requests[0]);
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["messages"][0]["content"], "Say hello");
    assert!(body.get("response_format").is_none());
}

#[tokio::test]
async fn json_schema_becomes_response_format_and_length_is_reported() {
    let events = vec![
        delta("{\"answer\":"),
        finish("length"),
        "[DONE]".to_string(),
    ];
    let srv = serve(vec![sse(&events, Duration::from_millis(1))]).await;
    let mut req = request();
    req.json_schema = Some(json!({"type": "object", "properties": {"answer": {"type": "string"}}}));
    let c = provider(&srv.base_url)
        .complete(req, None)
        .await
        .expect("completion");
    assert_eq!(c.finish, FinishReason::Length);
    assert_eq!(c.completion_tokens, 1, "no usage: counts pieces");
    let body = server::body_of(&srv.requests()[0]);
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(
        body["response_format"]["json_schema"]["schema"]["properties"]["answer"]["type"],
        "string"
    );
}

#[tokio::test]
async fn rate_limit_with_retry_after() {
    let srv = serve(vec![Reply::Raw(raw(
        429,
        "Retry-After: 2\r\n",
        r#"{"error":{"message":"Rate limit reached"}}"#,
    ))])
    .await;
    let err = provider(&srv.base_url)
        .complete(request(), None)
        .await
        .expect_err("429");
    assert_eq!(
        err,
        ProviderError::RateLimited {
            retry_after_ms: Some(2000)
        }
    );
    assert_eq!(err.code(), "LLM_RATE_LIMITED");
}

#[tokio::test]
async fn server_error_then_success_with_retry() {
    let srv = serve(vec![
        Reply::Raw(raw(
            500,
            "",
            r#"{"error":{"message":"upstream overloaded"}}"#,
        )),
        Reply::Raw(raw(503, "", "")),
        ok_stream(&["fine"]),
    ])
    .await;
    let policy = RetryPolicy::new(3, Duration::from_millis(20), Duration::from_millis(50));
    let p = Retrying::new(provider(&srv.base_url), policy);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let c = p
        .complete(request(), Some(tx))
        .await
        .expect("third attempt succeeds");
    assert_eq!(c.text, "fine");
    assert_eq!(srv.requests().len(), 3);
    assert_eq!(rx.try_recv().ok().as_deref(), Some("fine"));
    assert!(rx.try_recv().is_err(), "failed attempts streamed nothing");

    // Without retries the first error comes back, with a short message.
    let srv = serve(vec![Reply::Raw(raw(
        500,
        "",
        r#"{"error":{"message":"upstream overloaded"}}"#,
    ))])
    .await;
    let err = provider(&srv.base_url)
        .complete(request(), None)
        .await
        .expect_err("500");
    assert_eq!(
        err,
        ProviderError::Http {
            status: 500,
            message: "upstream overloaded".into()
        }
    );
    assert!(err.is_transient());
}

#[tokio::test]
async fn client_errors_are_not_retried_and_never_leak_the_key() {
    let srv = serve(vec![
        Reply::Raw(raw(
            401,
            "",
            r#"{"error":{"message":"Incorrect API key provided: sk-test-SECRET-KEY"}}"#,
        )),
        ok_stream(&["never"]),
    ])
    .await;
    let p = Retrying::new(
        provider(&srv.base_url),
        RetryPolicy::new(3, Duration::from_millis(1), Duration::from_millis(1)),
    );
    let err = p.complete(request(), None).await.expect_err("401");
    match &err {
        ProviderError::Http {
            status: 401,
            message,
        } => {
            assert!(!message.contains("SECRET"), "{message}");
            assert!(message.contains("Incorrect API key"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(!err.to_string().contains("SECRET"));
    assert_eq!(srv.requests().len(), 1, "401 is not retried");
}

#[tokio::test]
async fn timeout_when_the_server_never_answers() {
    let srv = serve(vec![Reply::Hang]).await;
    let p = provider(&srv.base_url).with_timeout(Duration::from_millis(300));
    let started = Instant::now();
    let err = p.complete(request(), None).await.expect_err("timeout");
    assert_eq!(err, ProviderError::Timeout(300));
    assert_eq!(err.code(), "LLM_TIMEOUT");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn timeout_when_the_stream_stalls() {
    let events = [delta("a"), delta("b")];
    let srv = serve(vec![Reply::Stream {
        head: server::SSE_HEAD.to_string(),
        pieces: events
            .iter()
            .map(|e| format!("data: {e}\n\n"))
            .chain(["".to_string()])
            .collect(),
        delay: Duration::from_millis(800),
    }])
    .await;
    let p = provider(&srv.base_url).with_timeout(Duration::from_millis(300));
    assert_eq!(
        p.complete(request(), None).await,
        Err(ProviderError::Timeout(300))
    );
}

#[tokio::test]
async fn http_408_is_a_timeout() {
    let srv = serve(vec![Reply::Raw(raw(408, "", ""))]).await;
    let err = provider(&srv.base_url)
        .complete(request(), None)
        .await
        .expect_err("408");
    assert!(matches!(err, ProviderError::Timeout(_)), "{err:?}");
}

#[tokio::test]
async fn garbage_body_gives_a_clear_error() {
    let html = "<html><body>Welcome to nginx!</body></html>";
    let srv = serve(vec![Reply::Raw(format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{html}",
        html.len()
    ))])
    .await;
    let err = provider(&srv.base_url)
        .complete(request(), None)
        .await
        .expect_err("garbage");
    match &err {
        ProviderError::Http {
            status: 200,
            message,
        } => {
            assert!(
                message.contains("not an OpenAI-compatible chat completion"),
                "{message}"
            );
            assert!(message.contains("nginx"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(!err.is_transient());

    // A malformed event inside a real event stream.
    let srv = serve(vec![sse(
        &[delta("ok"), "{not json".to_string()],
        Duration::from_millis(1),
    )])
    .await;
    let err = provider(&srv.base_url)
        .complete(request(), None)
        .await
        .expect_err("bad event");
    assert!(
        matches!(&err, ProviderError::Http { message, .. } if message.contains("malformed event")),
        "{err:?}"
    );

    // An empty 200.
    let srv = serve(vec![Reply::Raw(raw(200, "", ""))]).await;
    let err = provider(&srv.base_url)
        .complete(request(), None)
        .await
        .expect_err("empty");
    assert!(
        matches!(&err, ProviderError::Http { message, .. } if message.contains("empty body")),
        "{err:?}"
    );
}

#[tokio::test]
async fn plain_json_reply_is_accepted() {
    let body = json!({
        "choices": [{"message": {"role": "assistant", "content": "not streamed"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2}
    })
    .to_string();
    let srv = serve(vec![Reply::Raw(raw(200, "", &body))]).await;
    let c = provider(&srv.base_url)
        .complete(request(), None)
        .await
        .expect("plain");
    assert_eq!(c.text, "not streamed");
    assert_eq!((c.prompt_tokens, c.completion_tokens), (3, 2));
}

#[tokio::test]
async fn error_event_mid_stream() {
    let events =
        vec![json!({"error": {"message": "provider overloaded", "code": 502}}).to_string()];
    let srv = serve(vec![sse(&events, Duration::from_millis(1))]).await;
    let err = provider(&srv.base_url)
        .complete(request(), None)
        .await
        .expect_err("error event");
    assert_eq!(
        err,
        ProviderError::Http {
            status: 502,
            message: "provider overloaded".into()
        }
    );
}

#[tokio::test]
async fn stream_cut_before_the_end_is_unavailable() {
    let srv = serve(vec![sse(&[delta("half")], Duration::from_millis(1))]).await;
    let err = provider(&srv.base_url)
        .complete(request(), None)
        .await
        .expect_err("cut");
    assert!(matches!(err, ProviderError::Unavailable(_)), "{err:?}");
}

#[tokio::test]
async fn connection_refused_is_unavailable() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let err = provider(&format!("http://{addr}/v1"))
        .complete(request(), None)
        .await
        .expect_err("refused");
    match &err {
        ProviderError::Unavailable(m) => assert!(m.contains("could not connect"), "{m}"),
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.is_transient());
}

#[tokio::test]
async fn cancel_stops_the_stream() {
    let mut events: Vec<String> = (0..20).map(|i| delta(&format!("w{i} "))).collect();
    events.push(finish("stop"));
    events.push("[DONE]".into());
    let srv = serve(vec![sse(&events, Duration::from_millis(50))]).await;
    let req = request();
    let cancel = req.cancel.clone();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let p = provider(&srv.base_url);
    let call = tokio::spawn(async move { p.complete(req, Some(tx)).await });
    let first = rx.recv().await.expect("a first piece");
    assert_eq!(first, "w0 ");
    cancel.cancel();
    let c = call.await.expect("join").expect("completion");
    assert_eq!(c.finish, FinishReason::Cancelled);
    assert!(c.text.starts_with("w0 "));
    assert!(c.text.len() < "w0 ".len() * 20);
}

#[tokio::test]
async fn lists_models() {
    let body = json!({"object": "list", "data": [{"id": "llama3.2:1b"}, {"id": "qwen2.5:0.5b"}]})
        .to_string();
    let srv = serve(vec![Reply::Raw(raw(200, "", &body))]).await;
    let models = provider(&srv.base_url).list_models().await.expect("models");
    assert_eq!(models, vec!["llama3.2:1b", "qwen2.5:0.5b"]);
    assert!(srv.requests()[0].starts_with("GET /v1/models "));
}

// ----- native function calling (runtime) -----

fn save_movie_tool() -> providers::ToolDefinition {
    providers::ToolDefinition {
        name: "save_movie".into(),
        description: "Save a movie".into(),
        parameters: json!({
            "type": "object",
            "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
            "required": ["title"],
            "additionalProperties": false,
        }),
    }
}

fn tool_delta(index: u64, id: Option<&str>, name: Option<&str>, args: &str) -> String {
    let mut call = json!({"index": index, "function": {"arguments": args}});
    if let Some(id) = id {
        call["id"] = json!(id);
        call["type"] = json!("function");
    }
    if let Some(name) = name {
        call["function"]["name"] = json!(name);
    }
    json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": null}]}).to_string()
}

#[tokio::test]
async fn tools_are_offered_and_streamed_tool_call_deltas_are_assembled() {
    let events = vec![
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": null}, "finish_reason": null}]})
            .to_string(),
        tool_delta(0, Some("call_1"), Some("save_movie"), ""),
        tool_delta(0, None, None, "{\"title\":"),
        tool_delta(0, None, None, "\"Heat\",\"ye"),
        tool_delta(0, None, None, "ar\":1995}"),
        finish("tool_calls"),
        server::usage(30, 12),
        "[DONE]".to_string(),
    ];
    let srv = serve(vec![sse(&events, Duration::from_millis(2))]).await;
    let mut req = request();
    req.tools = vec![save_movie_tool()];
    req.tool_required = true;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let c = provider(&srv.base_url)
        .complete(req, Some(tx))
        .await
        .expect("completion");
    assert_eq!(c.text, "", "a tool call is not text");
    assert!(rx.try_recv().is_err(), "nothing streamed as text");
    assert_eq!(c.finish, FinishReason::Stop);
    assert_eq!(
        c.tool_calls,
        vec![providers::ToolCall {
            id: "call_1".into(),
            name: "save_movie".into(),
            arguments: "{\"title\":\"Heat\",\"year\":1995}".into(),
        }]
    );
    let body = server::body_of(&srv.requests()[0]);
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "save_movie");
    assert_eq!(
        body["tools"][0]["function"]["parameters"]["required"],
        json!(["title"])
    );
    assert_eq!(body["tool_choice"], "required");
    assert_eq!(body["parallel_tool_calls"], json!(false));
    assert!(body.get("response_format").is_none());
}

#[tokio::test]
async fn interleaved_calls_are_kept_apart_and_text_still_streams() {
    let events = vec![
        delta("Sure. "),
        tool_delta(0, Some("a"), Some("save_movie"), "{\"title\":\"Heat\"}"),
        tool_delta(1, Some("b"), Some("save_movie"), "{\"title\":"),
        tool_delta(1, None, Some("save_movie"), "\"Ronin\"}"),
        finish("tool_calls"),
        "[DONE]".to_string(),
    ];
    let srv = serve(vec![sse(&events, Duration::from_millis(1))]).await;
    let mut req = request();
    req.tools = vec![save_movie_tool()];
    let c = provider(&srv.base_url).complete(req, None).await.expect("completion");
    assert_eq!(c.text, "Sure. ");
    let calls: Vec<(&str, &str, &str)> = c
        .tool_calls
        .iter()
        .map(|t| (t.id.as_str(), t.name.as_str(), t.arguments.as_str()))
        .collect();
    assert_eq!(
        calls,
        [
            ("a", "save_movie", "{\"title\":\"Heat\"}"),
            ("b", "save_movie", "{\"title\":\"Ronin\"}"),
        ],
        "a repeated name is not doubled"
    );
    let body = server::body_of(&srv.requests()[0]);
    assert_eq!(body["tool_choice"], "auto");
}

#[tokio::test]
async fn a_non_streamed_reply_with_tool_calls_and_null_content_is_parsed() {
    let body = json!({
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "c9", "type": "function",
                "function": {"name": "save_movie", "arguments": "{\"title\":\"Heat\"}"}}]
        }}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3}
    })
    .to_string();
    let srv = serve(vec![Reply::Raw(raw(200, "", &body))]).await;
    let mut req = request();
    req.tools = vec![save_movie_tool()];
    let c = provider(&srv.base_url).complete(req, None).await.expect("completion");
    assert_eq!(c.text, "");
    assert_eq!(c.tool_calls.len(), 1);
    assert_eq!(c.tool_calls[0].name, "save_movie");
    assert_eq!(c.tool_calls[0].arguments, "{\"title\":\"Heat\"}");
    // Without tools or content the reply is still malformed.
    let bad = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": null}}]}).to_string();
    let srv = serve(vec![Reply::Raw(raw(200, "", &bad))]).await;
    assert!(matches!(
        provider(&srv.base_url).complete(request(), None).await,
        Err(ProviderError::Http { .. })
    ));
}

#[tokio::test]
async fn no_tools_means_no_tools_field() {
    let srv = serve(vec![ok_stream(&["hi"])]).await;
    let c = provider(&srv.base_url).complete(request(), None).await.expect("completion");
    assert!(c.tool_calls.is_empty());
    let body = server::body_of(&srv.requests()[0]);
    assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
}
