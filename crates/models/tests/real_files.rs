//! The catalog's numbers against real model files, when they are on disk:
//! `LEDGERMIND_TEST_MODEL` (SmolLM2-135M, set by scripts/test.sh) and
//! `LEDGERMIND_QWEN_CODER_05B` (the 0.5B GGUF, optional). A missing file
//! is reported as skipped on stderr, never as checked.

use std::path::PathBuf;

fn check(env: &str, id: &str) {
    let Some(path) = std::env::var_os(env).map(PathBuf::from).filter(|p| p.is_file()) else {
        eprintln!("SKIPPED {id}: {env} is not set to a file");
        return;
    };
    let entry = models::find(id).expect("catalog entry");
    let len = std::fs::metadata(&path).expect("stat").len();
    assert_eq!(len, entry.size_bytes, "{id}: size");
    assert_eq!(models::download::sha256_file(&path).expect("hash"), entry.sha256, "{id}: sha256");
    let info = models::gguf::read_file(&path).expect("header");
    info.require_chat().expect("a chat model");
    assert_eq!(info.kv_bytes_per_token(), Some(entry.kv_bytes_per_token), "{id}: KV bytes per token, header {info:?}");
    eprintln!("checked {id}: {} layers, {:?} KV heads, context {:?}", info.block_count.unwrap_or(0), info.head_count_kv, info.context_length);
}

#[test]
fn smollm2_135m_matches_the_catalog() {
    check("LEDGERMIND_TEST_MODEL", "smollm2-135m");
}

#[test]
fn qwen_coder_05b_matches_the_catalog() {
    check("LEDGERMIND_QWEN_CODER_05B", "qwen2.5-coder-0.5b");
}
