//! The model servers people already run on this machine, found from Rust
//! (no webview, so no CORS in the way), each recognised by what only it
//! answers: Ollama's "Ollama is running", LM Studio's `/api/v0/models`,
//! Jan's 401 without its key, llama.cpp's `/health` + `/props`, vLLM's
//! `owned_by: "vllm"`. And Ollama's downloaded GGUF blobs, which are plain
//! GGUF files another program can read in place.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerKind {
    Ollama,
    Lmstudio,
    Jan,
    Llamacpp,
    Vllm,
}

/// A server found, with the models it offers (empty when it needs a key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerInfo {
    pub kind: ServerKind,
    /// The OpenAI-compatible base URL (ends in `/v1`).
    pub url: String,
    pub models: Vec<String>,
    pub needs_key: bool,
}

/// Where to look: one base URL (scheme, host, port) per kind.
#[derive(Debug, Clone)]
pub struct Probe {
    pub kind: ServerKind,
    pub base: String,
}

/// The default ports; Ollama's address from `OLLAMA_HOST` as Ollama reads it.
pub fn default_probes() -> Vec<Probe> {
    let ollama = std::env::var("OLLAMA_HOST")
        .ok()
        .map(|h| h.trim().trim_end_matches('/').to_owned())
        .filter(|h| !h.is_empty())
        .map(|h| {
            let h = if h.contains("://") { h } else { format!("http://{h}") };
            // "0.0.0.0" is where it listens, not where to connect.
            h.replace("://0.0.0.0", "://127.0.0.1")
        })
        .unwrap_or_else(|| "http://127.0.0.1:11434".into());
    vec![
        Probe { kind: ServerKind::Ollama, base: ollama },
        Probe { kind: ServerKind::Lmstudio, base: "http://127.0.0.1:1234".into() },
        Probe { kind: ServerKind::Jan, base: "http://127.0.0.1:1337".into() },
        Probe { kind: ServerKind::Llamacpp, base: "http://127.0.0.1:8080".into() },
        Probe { kind: ServerKind::Vllm, base: "http://127.0.0.1:8000".into() },
    ]
}

/// Probes all at once; a probe that does not answer within `timeout` (or
/// answers as something else) is left out.
pub async fn discover(probes: &[Probe], timeout: Duration) -> Vec<ServerInfo> {
    let client = match reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
    {
        Ok(c) => c,
        Err(_) => return Vec::new(),
    };
    let tasks = probes.iter().map(|p| probe(&client, p));
    futures_util::future::join_all(tasks).await.into_iter().flatten().collect()
}

async fn get(client: &reqwest::Client, url: &str) -> Option<(u16, String)> {
    let r = client.get(url).send().await.ok()?;
    let status = r.status().as_u16();
    let body = r.text().await.ok()?;
    Some((status, body))
}

async fn get_json(client: &reqwest::Client, url: &str) -> Option<serde_json::Value> {
    match get(client, url).await? {
        (200, body) => serde_json::from_str(&body).ok(),
        _ => None,
    }
}

fn openai_ids(v: &serde_json::Value) -> Vec<String> {
    v.get("data")
        .and_then(|d| d.as_array())
        .map(|a| a.iter().filter_map(|m| m.get("id").and_then(|i| i.as_str()).map(str::to_owned)).collect())
        .unwrap_or_default()
}

async fn probe(client: &reqwest::Client, p: &Probe) -> Option<ServerInfo> {
    let base = p.base.trim_end_matches('/').to_owned();
    let v1 = format!("{base}/v1");
    let found = |models: Vec<String>, needs_key: bool| Some(ServerInfo { kind: p.kind, url: v1.clone(), models, needs_key });
    match p.kind {
        ServerKind::Ollama => {
            let (status, body) = get(client, &format!("{base}/")).await?;
            if status != 200 || !body.contains("Ollama is running") {
                return None;
            }
            let tags = get_json(client, &format!("{base}/api/tags")).await;
            let models = tags
                .as_ref()
                .and_then(|t| t.get("models"))
                .and_then(|m| m.as_array())
                .map(|a| a.iter().filter_map(|m| m.get("name").and_then(|n| n.as_str()).map(str::to_owned)).collect())
                .unwrap_or_default();
            found(models, false)
        }
        ServerKind::Lmstudio => {
            let v = get_json(client, &format!("{base}/api/v0/models")).await?;
            let data = v.get("data")?.as_array()?;
            // LM Studio's own fields, so another OpenAI server on 1234 is not taken for it.
            let is_lms = data.is_empty() || data.iter().any(|m| m.get("state").is_some() || m.get("compatibility_type").is_some());
            if !is_lms {
                return None;
            }
            found(openai_ids(&v), false)
        }
        ServerKind::Jan => {
            let (status, body) = get(client, &format!("{v1}/models")).await?;
            match status {
                401 | 403 => found(Vec::new(), true),
                200 => found(serde_json::from_str(&body).map(|v| openai_ids(&v)).unwrap_or_default(), false),
                _ => None,
            }
        }
        ServerKind::Llamacpp => {
            let health = get_json(client, &format!("{base}/health")).await?;
            if health.get("status").and_then(|s| s.as_str()) != Some("ok") {
                return None;
            }
            let props = get_json(client, &format!("{base}/props")).await?;
            if props.get("default_generation_settings").is_none() && props.get("model_path").is_none() {
                return None;
            }
            let mut models = get_json(client, &format!("{v1}/models")).await.map(|v| openai_ids(&v)).unwrap_or_default();
            if models.is_empty() {
                if let Some(path) = props.get("model_path").and_then(|m| m.as_str()) {
                    models.push(path.rsplit('/').next().unwrap_or(path).to_owned());
                }
            }
            found(models, false)
        }
        ServerKind::Vllm => {
            let v = get_json(client, &format!("{v1}/models")).await?;
            let data = v.get("data")?.as_array()?;
            if !data.iter().any(|m| m.get("owned_by").and_then(|o| o.as_str()) == Some("vllm")) {
                return None;
            }
            found(openai_ids(&v), false)
        }
    }
}

/// A GGUF file Ollama downloaded, readable in place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OllamaBlob {
    pub sha256: String,
    pub path: PathBuf,
    pub size_bytes: u64,
    /// The `name:tag`s whose manifest points at this blob.
    pub names: Vec<String>,
}

/// `$OLLAMA_MODELS`, else `~/.ollama/models`.
pub fn ollama_models_dir() -> Option<PathBuf> {
    std::env::var_os("OLLAMA_MODELS").filter(|v| !v.is_empty()).map(PathBuf::from).or_else(|| dirs::home_dir().map(|h| h.join(".ollama").join("models")))
}

/// The GGUF blobs under `models_dir/blobs` (`sha256-<hex>`), one entry per
/// hash with every name that uses it. Nothing is opened for writing.
pub fn ollama_blobs(models_dir: &Path) -> Vec<OllamaBlob> {
    let mut names: BTreeMap<String, Vec<String>> = BTreeMap::new();
    collect_manifests(&models_dir.join("manifests"), &mut Vec::new(), &mut names);
    let Ok(rd) = std::fs::read_dir(models_dir.join("blobs")) else { return Vec::new() };
    let mut out: BTreeMap<String, OllamaBlob> = BTreeMap::new();
    for e in rd.flatten() {
        let file_name = e.file_name();
        let Some(hex) = file_name.to_str().and_then(|n| n.strip_prefix("sha256-").or_else(|| n.strip_prefix("sha256:"))) else {
            continue;
        };
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        let path = e.path();
        let mut magic = [0u8; 4];
        let is_gguf = std::fs::File::open(&path).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic)).is_ok() && &magic == b"GGUF";
        if !is_gguf {
            continue;
        }
        let hex = hex.to_ascii_lowercase();
        let size_bytes = e.metadata().map(|m| m.len()).unwrap_or(0);
        out.entry(hex.clone()).or_insert_with(|| OllamaBlob {
            names: names.get(&hex).cloned().unwrap_or_default(),
            sha256: hex,
            path,
            size_bytes,
        });
    }
    out.into_values().collect()
}

/// Walks `manifests/<registry>/<namespace>/<model>/<tag>`; maps each model
/// layer's digest to `model:tag` (the namespace shown unless `library`).
fn collect_manifests(dir: &Path, trail: &mut Vec<String>, out: &mut BTreeMap<String, Vec<String>>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if trail.len() < 4 {
                trail.push(name);
                collect_manifests(&p, trail, out);
                trail.pop();
            }
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&p) else { continue };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
        let model = trail.last().cloned().unwrap_or_default();
        let namespace = if trail.len() >= 2 { trail[trail.len() - 2].clone() } else { String::new() };
        let shown = if namespace.is_empty() || namespace == "library" { format!("{model}:{name}") } else { format!("{namespace}/{model}:{name}") };
        for layer in v.get("layers").and_then(|l| l.as_array()).into_iter().flatten() {
            if layer.get("mediaType").and_then(|m| m.as_str()) != Some("application/vnd.ollama.image.model") {
                continue;
            }
            if let Some(hex) = layer.get("digest").and_then(|d| d.as_str()).and_then(|d| d.strip_prefix("sha256:")) {
                let list = out.entry(hex.to_ascii_lowercase()).or_default();
                if !list.contains(&shown) {
                    list.push(shown.clone());
                }
            }
        }
    }
}
