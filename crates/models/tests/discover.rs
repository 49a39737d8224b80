//! Server discovery against fake servers on free ports. Real Ollama, LM
//! Studio, Jan, llama.cpp and vLLM cannot be installed here; the fakes
//! answer the way their documentation says the real ones do.

use std::time::Duration;

use models::discover::{discover, ollama_blobs, Probe, ServerKind};
use models::testkit::{FakeKind, FakeServer};

#[tokio::test]
async fn fake_servers_are_found_and_fingerprinted() {
    let ollama = FakeServer::start(FakeKind::Ollama, vec!["qwen2.5-coder:0.5b".into(), "llama3.2:1b".into()]).await.expect("ollama");
    let lms = FakeServer::start(FakeKind::LmStudio, vec!["qwen2.5-1.5b-instruct".into()]).await.expect("lms");
    let jan = FakeServer::start(FakeKind::Jan, vec!["jan-v1".into()]).await.expect("jan");
    let llama = FakeServer::start(FakeKind::LlamaCpp, vec!["gemma-3-1b-it".into()]).await.expect("llama");
    let vllm = FakeServer::start(FakeKind::Vllm, vec!["Qwen/Qwen2.5-1.5B-Instruct".into()]).await.expect("vllm");
    let probes = vec![
        Probe { kind: ServerKind::Ollama, base: ollama.url() },
        Probe { kind: ServerKind::Lmstudio, base: lms.url() },
        Probe { kind: ServerKind::Jan, base: jan.url() },
        Probe { kind: ServerKind::Llamacpp, base: llama.url() },
        Probe { kind: ServerKind::Vllm, base: vllm.url() },
    ];
    let found = discover(&probes, Duration::from_secs(2)).await;
    assert_eq!(found.len(), 5, "{found:?}");
    let o = &found[0];
    assert_eq!(o.kind, ServerKind::Ollama);
    assert_eq!(o.url, format!("{}/v1", ollama.url()));
    assert_eq!(o.models, vec!["qwen2.5-coder:0.5b", "llama3.2:1b"]);
    assert!(!o.needs_key);
    assert_eq!(found[1].models, vec!["qwen2.5-1.5b-instruct"]);
    assert!(found[2].needs_key && found[2].models.is_empty());
    assert_eq!(found[3].models, vec!["gemma-3-1b-it"]);
    assert_eq!(found[4].models, vec!["Qwen/Qwen2.5-1.5B-Instruct"]);
}

/// A server of one kind is not taken for another: each probe asks what
/// only its product answers.
#[tokio::test]
async fn wrong_product_on_a_port_is_not_misnamed() {
    let vllm = FakeServer::start(FakeKind::Vllm, vec!["m".into()]).await.expect("vllm");
    let llama = FakeServer::start(FakeKind::LlamaCpp, vec!["m".into()]).await.expect("llama");
    let probes = vec![
        Probe { kind: ServerKind::Ollama, base: vllm.url() },
        Probe { kind: ServerKind::Lmstudio, base: vllm.url() },
        Probe { kind: ServerKind::Llamacpp, base: vllm.url() },
        Probe { kind: ServerKind::Vllm, base: llama.url() },
        Probe { kind: ServerKind::Ollama, base: llama.url() },
    ];
    let found = discover(&probes, Duration::from_secs(2)).await;
    assert!(found.is_empty(), "{found:?}");
}

#[tokio::test]
async fn nothing_listening_is_quick_and_empty() {
    // A port just closed: connection refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("port");
    let t0 = std::time::Instant::now();
    let found = discover(&[Probe { kind: ServerKind::Ollama, base: format!("http://127.0.0.1:{port}") }], Duration::from_millis(300)).await;
    assert!(found.is_empty());
    assert!(t0.elapsed() < Duration::from_secs(2));
}

#[test]
fn ollama_blobs_listed_read_only_and_deduplicated() {
    let dir = tempfile::tempdir().expect("tmp");
    let blobs = dir.path().join("blobs");
    std::fs::create_dir_all(&blobs).expect("mkdir");
    let hex = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32";
    let gguf = blobs.join(format!("sha256-{hex}"));
    std::fs::write(&gguf, b"GGUF\x03\0\0\0rest").expect("write");
    // A non-GGUF layer (the template) is not a model.
    std::fs::write(blobs.join(format!("sha256-{}", "ab".repeat(32))), b"{{ .Prompt }}").expect("write");
    let before = std::fs::metadata(&gguf).and_then(|m| m.modified()).expect("mtime");
    for (ns, model, tag) in [("library", "qwen2.5-coder", "0.5b"), ("library", "qwen2.5-coder", "mine"), ("someone", "coder", "latest")] {
        let d = dir.path().join("manifests/registry.ollama.ai").join(ns).join(model);
        std::fs::create_dir_all(&d).expect("mkdir");
        let manifest = serde_json::json!({"layers": [
            {"mediaType": "application/vnd.ollama.image.model", "digest": format!("sha256:{hex}"), "size": 12},
            {"mediaType": "application/vnd.ollama.image.template", "digest": format!("sha256:{}", "ab".repeat(32))}
        ]});
        std::fs::write(d.join(tag), manifest.to_string()).expect("manifest");
    }
    let list = ollama_blobs(dir.path());
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0].sha256, hex);
    let mut names = list[0].names.clone();
    names.sort();
    assert_eq!(names, vec!["qwen2.5-coder:0.5b", "qwen2.5-coder:mine", "someone/coder:latest"]);
    assert_eq!(std::fs::metadata(&gguf).and_then(|m| m.modified()).expect("mtime"), before);
}
