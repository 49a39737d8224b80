//! A hand-written HTTP/1.1 server on 127.0.0.1:0 that answers each
//! connection with the next scripted reply and records the requests.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub enum Reply {
    /// A whole raw response; the connection closes after it.
    Raw(String),
    /// A head, then body pieces written with a pause between them.
    Stream {
        head: String,
        pieces: Vec<String>,
        delay: Duration,
    },
    /// Reads the request and never answers (until the test ends).
    Hang,
}

pub struct TestServer {
    pub base_url: String,
    requests: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl TestServer {
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().expect("lock").clone()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub async fn serve(replies: Vec<Reply>) -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    let replies = Arc::new(Mutex::new(VecDeque::from(replies)));
    let task = tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let reply = replies.lock().expect("lock").pop_front();
            let seen = seen.clone();
            tokio::spawn(handle(socket, reply, seen));
        }
    });
    TestServer {
        base_url: format!("http://{addr}/v1"),
        requests,
        task,
    }
}

async fn handle(mut socket: TcpStream, reply: Option<Reply>, seen: Arc<Mutex<Vec<String>>>) {
    let request = read_request(&mut socket).await;
    seen.lock().expect("lock").push(request);
    match reply {
        None => {
            let _ = socket
                .write_all(raw(500, "", "no reply scripted").as_bytes())
                .await;
        }
        Some(Reply::Raw(text)) => {
            let _ = socket.write_all(text.as_bytes()).await;
        }
        Some(Reply::Stream {
            head,
            pieces,
            delay,
        }) => {
            if socket.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            for piece in pieces {
                tokio::time::sleep(delay).await;
                if socket.write_all(piece.as_bytes()).await.is_err() {
                    return;
                }
                let _ = socket.flush().await;
            }
        }
        Some(Reply::Hang) => {
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
    }
    let _ = socket.shutdown().await;
}

async fn read_request(socket: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let header_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return String::from_utf8_lossy(&buf).to_string(),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    while buf.len() < header_end + length {
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    String::from_utf8_lossy(&buf).to_string()
}

/// A complete response with a body and extra header lines ("Name: value\r\n").
pub fn raw(status: u16, extra_headers: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n{extra_headers}\r\n{body}",
        body.len()
    )
}

pub const SSE_HEAD: &str =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";

/// An event stream of `data:` events (each a JSON chunk or `[DONE]`),
/// one event per write.
pub fn sse(events: &[String], delay: Duration) -> Reply {
    Reply::Stream {
        head: SSE_HEAD.to_string(),
        pieces: events.iter().map(|e| format!("data: {e}\n\n")).collect(),
        delay,
    }
}

pub fn delta(content: &str) -> String {
    serde_json::json!({"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]})
        .to_string()
}

pub fn finish(reason: &str) -> String {
    serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}).to_string()
}

pub fn usage(prompt: u32, completion: u32) -> String {
    serde_json::json!({"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion}})
        .to_string()
}

/// A normal streamed reply of these pieces.
pub fn ok_stream(pieces: &[&str]) -> Reply {
    let mut events: Vec<String> = pieces.iter().map(|p| delta(p)).collect();
    events.push(finish("stop"));
    events.push(usage(7, pieces.len() as u32));
    events.push("[DONE]".to_string());
    sse(&events, Duration::from_millis(5))
}

/// The body of a recorded request (after the blank line).
pub fn body_of(request: &str) -> serde_json::Value {
    let body = request.split("\r\n\r\n").nth(1).unwrap_or("");
    serde_json::from_str(body).expect("request body is JSON")
}
