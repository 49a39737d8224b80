//! `ledgermind models` against local servers: a fake Ollama found by
//! `models servers --json` and answering through the OpenAI-compatible
//! provider, and `models pull` from a Hugging Face-shaped server
//! (`HF_ENDPOINT`) that survives a SIGKILL half way.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use models::testkit::{FakeKind, FakeServer, HfServer};
use providers::{ChatMessage, CompletionRequest, OpenAiCompatible, Provider, Role};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn ledgermind(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ledgermind"));
    c.arg("--home")
        .arg(home)
        .env_remove("HF_ENDPOINT")
        .env_remove("OLLAMA_HOST");
    c
}

fn json_lines(out: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

/// Real Ollama cannot be installed on this machine, so this fake answers
/// the way Ollama's documentation says it does (`/` "Ollama is running",
/// `/api/tags`, the OpenAI-compatible `/v1`). It is found through
/// `OLLAMA_HOST` by the real command, and the reply comes back through the
/// provider the app uses for OpenAI-compatible accounts.
#[test]
fn fake_ollama_is_discovered_and_answers_through_the_openai_provider() {
    let rt = runtime();
    let models = vec!["qwen2.5-coder:1.5b".to_owned(), "llama3.2:1b".to_owned()];
    let ollama = rt
        .block_on(FakeServer::start(FakeKind::Ollama, models.clone()))
        .expect("fake ollama");
    let home = tempfile::tempdir().expect("home");
    let out = ledgermind(home.path())
        .args(["models", "servers", "--json"])
        .env("OLLAMA_HOST", ollama.addr.to_string())
        .output()
        .expect("run ledgermind");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let found = json_lines(&out.stdout);
    // Other servers on the default ports of this machine may be listed too.
    let o = found
        .iter()
        .find(|s| s["kind"] == "ollama")
        .unwrap_or_else(|| panic!("no ollama in {found:?}"));
    let url = format!("{}/v1", ollama.url());
    assert_eq!(o["url"], url.as_str());
    assert_eq!(o["models"], serde_json::json!(models));
    assert_eq!(o["needs_key"], false);
    let mut keys: Vec<_> = o.as_object().expect("object").keys().cloned().collect();
    keys.sort();
    assert_eq!(keys, ["kind", "models", "needs_key", "url"]);

    let provider = OpenAiCompatible::new("ollama", &url).with_timeout(Duration::from_secs(5));
    let model = o["models"][0].as_str().expect("model id").to_owned();
    let ask = |model: &str| {
        CompletionRequest::chat(
            model,
            vec![ChatMessage::new(Role::User, "Which city do I live in?")],
        )
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let reply = rt
        .block_on(provider.complete(ask(&model), Some(tx)))
        .expect("reply from the fake Ollama");
    assert_eq!(
        reply.text,
        "Fake Ollama (qwen2.5-coder:1.5b) heard: Which city do I live in?"
    );
    let mut pieces = 0;
    while rx.try_recv().is_ok() {
        pieces += 1;
    }
    assert_eq!(pieces, 3, "streamed piece by piece");
    // A model Ollama has not pulled is an error, not an empty reply.
    assert!(rt
        .block_on(provider.complete(ask("not-pulled:7b"), None))
        .is_err());
}

/// The default catalog model's real file, served read-only.
fn qwen_file() -> PathBuf {
    let p = std::env::var_os("LEDGERMIND_QWEN_GGUF")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let cache = std::env::var_os("LEDGERMIND_CACHE")
                .filter(|c| !c.is_empty())
                .map(PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME")
                        .map(|h| Path::new(&h).join(".cache").join("ledgermind"))
                })
                .expect("HOME");
            cache
                .join("models")
                .join("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
        });
    assert!(
        p.is_file(),
        "{} is missing: this test serves the real Qwen2.5-Coder-1.5B file (setup puts it there; or set LEDGERMIND_QWEN_GGUF)",
        p.display()
    );
    p
}

/// `models pull` through `HF_ENDPOINT`: killed with SIGKILL at about half,
/// run again, it resumes with Range (at most 1 % of the file fetched
/// twice) and installs the verified file. Needs the 1.1 GB model file, so
/// it is left out of the default run: `cargo test -p cli --test cli -- --ignored pull`.
#[test]
#[ignore = "serves the 1.1 GB Qwen2.5-Coder-1.5B file; run with --ignored"]
fn pull_through_hf_endpoint_survives_sigkill_and_installs_verified() {
    const SHA: &str = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046";
    const NAME: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
    let file = qwen_file();
    let size = std::fs::metadata(&file).expect("size").len();
    let rt = runtime();
    let server = rt.block_on(HfServer::start(0)).expect("server");
    server.add_file(NAME, file, SHA).expect("serve");
    let home = tempfile::tempdir().expect("home");
    let part = home.path().join("models").join(format!("{NAME}.part"));
    let pull = || {
        let mut c = ledgermind(home.path());
        c.args(["models", "pull", "qwen2.5-coder-1.5b", "--json"])
            .env("HF_ENDPOINT", server.endpoint());
        c
    };

    let mut first = pull()
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("first pull");
    let t0 = Instant::now();
    let killed_at = loop {
        if std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0) >= size / 2 {
            first.kill().expect("SIGKILL");
            let _ = first.wait();
            break std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
        }
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "the first pull never reached half"
        );
        assert!(
            first.try_wait().expect("wait").is_none(),
            "the first pull ended before half"
        );
        std::thread::sleep(Duration::from_millis(1));
    };
    assert!(killed_at < size, "killed before the end");
    let mut first_out = Vec::new();
    std::io::Read::read_to_end(&mut first.stdout.take().expect("stdout"), &mut first_out)
        .expect("first output");
    let first_lines = json_lines(&first_out);

    let out = pull().output().expect("second pull");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let lines = json_lines(&out.stdout);
    let (last, progress) = lines.split_last().expect("output");
    assert_eq!(
        last,
        &serde_json::json!({"id": "qwen2.5-coder-1.5b", "installed": true, "sha256": SHA})
    );
    // One line a second: the first run (killed at half) and the second
    // together take more than a second on any disk this model fits on.
    assert!(
        !first_lines.is_empty() || !progress.is_empty(),
        "no progress line"
    );
    for p in &first_lines {
        assert!(
            p.get("installed").is_none(),
            "the killed run did not install: {p}"
        );
    }
    for p in first_lines.iter().chain(progress) {
        let mut keys: Vec<_> = p.as_object().expect("object").keys().cloned().collect();
        keys.sort();
        assert_eq!(keys, ["bytes_done", "bytes_total", "id", "rate_bps"], "{p}");
        assert_eq!(p["bytes_total"], size);
    }
    for p in progress {
        assert!(
            p["bytes_done"].as_u64().expect("bytes_done") >= killed_at,
            "resumed, not restarted: {p}"
        );
    }
    assert!(stderr.contains("resuming at byte"), "{stderr}");
    let sent = server.stats.body_bytes_sent.load(Ordering::SeqCst);
    let twice = sent.saturating_sub(size);
    eprintln!("killed at {killed_at} of {size} bytes; {sent} bytes sent in all, {twice} twice; {} progress lines before the kill, {} after", first_lines.len(), progress.len());
    assert!(twice * 100 <= size, "{twice} bytes fetched twice");
    let installed = home.path().join("models").join(NAME);
    assert_eq!(
        models::download::sha256_file(&installed).expect("hash"),
        SHA
    );
    assert!(!part.exists());
}
