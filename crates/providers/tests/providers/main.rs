//! Integration tests for the providers crate: the OpenAI-compatible adapter
//! against a tiny local HTTP server, retry/backoff/fallback, and the local
//! llama.cpp engine against a real GGUF model (`LEDGERMIND_TEST_MODEL`).

mod fallback;
#[cfg(feature = "local")]
mod local;
mod openai;
mod retry;
mod server;
