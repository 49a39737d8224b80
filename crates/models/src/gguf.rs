//! Reading a GGUF file's header: magic, version and the metadata keys that
//! say what the model is (architecture, layers, KV heads, context, chat
//! template), from a local file or from the first megabytes of a remote one
//! fetched with a Range request, before the download.

use std::io::Read;
use std::path::Path;

use serde::Serialize;

/// Metadata holds the tokenizer's vocabulary (150 000 strings for Qwen), so
/// a header can run to several megabytes; past this it is not plausible.
const MAX_HEADER_BYTES: u64 = 64 * 1024 * 1024;
const MAX_COUNT: u64 = 1 << 24;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GgufError {
    #[error("not a GGUF file: it does not start with the GGUF signature")]
    NotGguf,
    #[error("unsupported GGUF version {0} (2 and 3 are read)")]
    Version(u32),
    #[error("the file is truncated: its header needs more than the {have} bytes present")]
    Truncated { have: u64 },
    #[error("the GGUF header is corrupt: {0}")]
    Corrupt(String),
    #[error("not a chat model: {0}")]
    NotChat(String),
    #[error("cannot read the model file: {0}")]
    Io(String),
}

/// What the header says about the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GgufInfo {
    pub version: u32,
    pub tensor_count: u64,
    pub architecture: String,
    pub name: Option<String>,
    pub block_count: Option<u64>,
    pub head_count: Option<u64>,
    pub head_count_kv: Option<u64>,
    pub embedding_length: Option<u64>,
    pub key_length: Option<u64>,
    pub value_length: Option<u64>,
    pub context_length: Option<u64>,
    pub has_chat_template: bool,
    /// Where the metadata ends (the tensor infos follow).
    pub metadata_end: u64,
}

impl GgufInfo {
    /// f16 KV cache bytes per token: layers × KV heads × (key + value
    /// length) × 2, with key/value length defaulting to embedding / heads.
    pub fn kv_bytes_per_token(&self) -> Option<u64> {
        let layers = self.block_count?;
        let heads = self.head_count?;
        let kv_heads = self.head_count_kv.unwrap_or(heads);
        let per_head = self.embedding_length.filter(|_| heads > 0).map(|e| e / heads);
        let k = self.key_length.or(per_head)?;
        let v = self.value_length.or(per_head)?;
        Some(layers * kv_heads * (k + v) * 2)
    }

    /// Refuses a model that cannot hold a conversation: no chat template, or
    /// an encoder-only (embedding) architecture.
    pub fn require_chat(&self) -> Result<(), GgufError> {
        const ENCODERS: &[&str] = &["bert", "nomic-bert", "jina-bert-v2", "t5encoder"];
        if ENCODERS.contains(&self.architecture.as_str()) {
            return Err(GgufError::NotChat(format!("{} is an embedding (encoder-only) architecture", self.architecture)));
        }
        if !self.has_chat_template {
            return Err(GgufError::NotChat("it has no tokenizer.chat_template".into()));
        }
        Ok(())
    }
}

/// Parses the header from the bytes at the start of a file. `Truncated`
/// means the header runs past `bytes`: fetch more, or (when `bytes` is the
/// whole file) the file is cut short.
pub fn parse(bytes: &[u8]) -> Result<GgufInfo, GgufError> {
    let mut c = Cursor { b: bytes, at: 0 };
    if bytes.len() >= 4 && &bytes[..4] != b"GGUF" {
        return Err(GgufError::NotGguf);
    }
    let magic = c.take(4)?;
    if magic != b"GGUF" {
        return Err(GgufError::NotGguf);
    }
    let version = c.u32()?;
    if !(2..=3).contains(&version) {
        return Err(GgufError::Version(version));
    }
    let tensor_count = c.u64()?;
    let kv_count = c.u64()?;
    if tensor_count > MAX_COUNT || kv_count > MAX_COUNT {
        return Err(GgufError::Corrupt(format!("implausible counts ({tensor_count} tensors, {kv_count} keys)")));
    }
    let mut info = GgufInfo {
        version,
        tensor_count,
        architecture: String::new(),
        name: None,
        block_count: None,
        head_count: None,
        head_count_kv: None,
        embedding_length: None,
        key_length: None,
        value_length: None,
        context_length: None,
        has_chat_template: false,
        metadata_end: 0,
    };
    // Keys are named after the architecture, which may come after them.
    let mut numbers: Vec<(String, u64)> = Vec::new();
    for _ in 0..kv_count {
        let key = c.string()?;
        let ty = c.u32()?;
        match (key.as_str(), ty) {
            ("general.architecture", 8) => info.architecture = c.string()?,
            ("general.name", 8) => info.name = Some(c.string()?),
            ("tokenizer.chat_template", 8) => {
                let len = c.u64()?;
                c.skip(len)?;
                info.has_chat_template = len > 0;
            }
            _ => {
                if let Some(n) = c.value(ty)? {
                    numbers.push((key, n));
                }
            }
        }
    }
    info.metadata_end = c.at as u64;
    if info.architecture.is_empty() {
        return Err(GgufError::Corrupt("no general.architecture".into()));
    }
    let arch = info.architecture.clone();
    let get = |suffix: &str| {
        let key = format!("{arch}.{suffix}");
        numbers.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    };
    info.block_count = get("block_count");
    info.head_count = get("attention.head_count");
    info.head_count_kv = get("attention.head_count_kv");
    info.embedding_length = get("embedding_length");
    info.key_length = get("attention.key_length");
    info.value_length = get("attention.value_length");
    info.context_length = get("context_length");
    Ok(info)
}

/// Reads the header of a local file; a file that ends inside its header is
/// refused as truncated.
pub fn read_file(path: &Path) -> Result<GgufInfo, GgufError> {
    let file = std::fs::File::open(path).map_err(|e| GgufError::Io(format!("{}: {e}", path.display())))?;
    let len = file.metadata().map_err(|e| GgufError::Io(e.to_string()))?.len();
    let mut want: u64 = 4 * 1024 * 1024;
    let mut buf = Vec::new();
    let mut reader = std::io::BufReader::new(file);
    loop {
        let target = want.min(len).min(MAX_HEADER_BYTES);
        let more = target.saturating_sub(buf.len() as u64);
        (&mut reader).take(more).read_to_end(&mut buf).map_err(|e| GgufError::Io(e.to_string()))?;
        match parse(&buf) {
            Err(GgufError::Truncated { .. }) if (buf.len() as u64) < len.min(MAX_HEADER_BYTES) => want *= 4,
            Err(GgufError::Truncated { .. }) => return Err(GgufError::Truncated { have: len }),
            other => {
                let info = other?;
                if info.tensor_count > 0 && len <= info.metadata_end {
                    return Err(GgufError::Truncated { have: len });
                }
                return Ok(info);
            }
        }
    }
}

/// Reads the header of a remote file with Range requests (4 MB, then more
/// as the metadata needs), following redirects.
pub async fn read_remote(client: &reqwest::Client, url: &str) -> Result<GgufInfo, GgufError> {
    let mut want: u64 = 4 * 1024 * 1024;
    loop {
        let resp = client
            .get(url)
            .header(reqwest::header::RANGE, format!("bytes=0-{}", want - 1))
            .header(reqwest::header::ACCEPT_ENCODING, "identity")
            .send()
            .await
            .map_err(|e| GgufError::Io(e.to_string()))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(GgufError::Io(format!("{url}: HTTP {status}")));
        }
        let whole = status == reqwest::StatusCode::OK;
        let total = if whole { resp.content_length() } else { content_range_total(resp.headers()) };
        // A server that ignores Range would send the whole file: read only
        // what the header needs.
        let mut buf = Vec::new();
        let mut stream = resp;
        while (buf.len() as u64) < want {
            match stream.chunk().await.map_err(|e| GgufError::Io(e.to_string()))? {
                Some(chunk) => buf.extend_from_slice(&chunk),
                None => break,
            }
        }
        buf.truncate(want as usize);
        match parse(&buf) {
            Err(GgufError::Truncated { .. }) => {
                let end = total.unwrap_or(u64::MAX);
                if (buf.len() as u64) >= end || want >= MAX_HEADER_BYTES || (buf.len() as u64) < want {
                    return Err(GgufError::Truncated { have: buf.len() as u64 });
                }
                want = (want * 4).min(MAX_HEADER_BYTES);
            }
            other => return other,
        }
    }
}

/// The total of a `Content-Range: bytes a-b/total` header.
pub(crate) fn content_range_total(headers: &reqwest::header::HeaderMap) -> Option<u64> {
    let v = headers.get(reqwest::header::CONTENT_RANGE)?.to_str().ok()?;
    v.rsplit('/').next()?.trim().parse().ok()
}

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: u64) -> Result<&'a [u8], GgufError> {
        let n = usize::try_from(n).map_err(|_| GgufError::Corrupt("length overflows".into()))?;
        let end = self.at.checked_add(n).ok_or_else(|| GgufError::Corrupt("length overflows".into()))?;
        if end > self.b.len() {
            if end as u64 > MAX_HEADER_BYTES {
                return Err(GgufError::Corrupt(format!("a metadata value claims {n} bytes")));
            }
            return Err(GgufError::Truncated { have: self.b.len() as u64 });
        }
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn skip(&mut self, n: u64) -> Result<(), GgufError> {
        self.take(n).map(|_| ())
    }
    fn u32(&mut self) -> Result<u32, GgufError> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn u64(&mut self) -> Result<u64, GgufError> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_le_bytes(a))
    }
    fn string(&mut self) -> Result<String, GgufError> {
        let len = self.u64()?;
        let s = self.take(len)?;
        String::from_utf8(s.to_vec()).map_err(|_| GgufError::Corrupt("a key or value is not UTF-8".into()))
    }

    /// Reads a value of type `ty`; returns it when it is an unsigned or
    /// signed integer (the only values the fit check needs), the largest
    /// element for an integer array (per-layer KV head counts), else skips.
    fn value(&mut self, ty: u32) -> Result<Option<u64>, GgufError> {
        Ok(match ty {
            0 | 1 | 7 => Some(u64::from(self.take(1)?[0])),
            2 | 3 => {
                let s = self.take(2)?;
                Some(u64::from(u16::from_le_bytes([s[0], s[1]])))
            }
            4 => Some(u64::from(self.u32()?)),
            5 => Some(u64::try_from(self.u32()? as i32).unwrap_or(0)),
            6 => {
                self.skip(4)?;
                None
            }
            8 => {
                let len = self.u64()?;
                self.skip(len)?;
                None
            }
            9 => {
                let elem = self.u32()?;
                let count = self.u64()?;
                if count > MAX_COUNT * 4 {
                    return Err(GgufError::Corrupt(format!("an array claims {count} elements")));
                }
                let fixed = match elem {
                    0 | 1 | 7 => Some(1),
                    2 | 3 => Some(2),
                    4 | 5 | 6 => Some(4),
                    10..=12 => Some(8),
                    _ => None,
                };
                match (elem, fixed) {
                    // Integer arrays: keep the largest (per-layer head counts).
                    (4 | 5 | 10 | 11, Some(_)) => {
                        let mut max = None;
                        for _ in 0..count {
                            let v = self.value(elem)?;
                            max = max.max(v);
                        }
                        max
                    }
                    (_, Some(size)) => {
                        self.skip(count * size)?;
                        None
                    }
                    (8, None) => {
                        for _ in 0..count {
                            let len = self.u64()?;
                            self.skip(len)?;
                        }
                        None
                    }
                    _ => return Err(GgufError::Corrupt(format!("array of unknown type {elem}"))),
                }
            }
            10 | 11 => Some(self.u64()?),
            12 => {
                self.skip(8)?;
                None
            }
            other => return Err(GgufError::Corrupt(format!("unknown value type {other}"))),
        })
    }
}

/// Writes a GGUF header (v3) with the given string and u32 metadata; used
/// by tests and the benchmark to make model-shaped files.
pub fn write_header(strings: &[(&str, &str)], numbers: &[(&str, u32)], tensor_count: u64) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"GGUF");
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&tensor_count.to_le_bytes());
    out.extend_from_slice(&((strings.len() + numbers.len()) as u64).to_le_bytes());
    let put_str = |out: &mut Vec<u8>, s: &str| {
        out.extend_from_slice(&(s.len() as u64).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    };
    for (k, v) in strings {
        put_str(&mut out, k);
        out.extend_from_slice(&8u32.to_le_bytes());
        put_str(&mut out, v);
    }
    for (k, v) in numbers {
        put_str(&mut out, k);
        out.extend_from_slice(&4u32.to_le_bytes());
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// A chat-model header shaped like Qwen2.5-0.5B's, for synthetic files.
pub fn chat_header() -> Vec<u8> {
    write_header(
        &[
            ("general.architecture", "qwen2"),
            ("general.name", "synthetic"),
            ("tokenizer.chat_template", "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"),
        ],
        &[
            ("qwen2.block_count", 24),
            ("qwen2.attention.head_count", 14),
            ("qwen2.attention.head_count_kv", 2),
            ("qwen2.embedding_length", 896),
            ("qwen2.context_length", 32768),
        ],
        1,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_chat_header_and_kv_size() {
        let h = chat_header();
        let info = parse(&h).expect("parses");
        assert_eq!(info.architecture, "qwen2");
        assert_eq!(info.block_count, Some(24));
        assert_eq!(info.head_count_kv, Some(2));
        assert!(info.has_chat_template);
        assert_eq!(info.kv_bytes_per_token(), Some(24 * 2 * 128 * 2));
        assert!(info.require_chat().is_ok());
        assert_eq!(info.metadata_end, h.len() as u64);
    }

    #[test]
    fn every_cut_is_truncated_not_garbage() {
        let h = chat_header();
        for cut in 4..h.len() {
            assert!(matches!(parse(&h[..cut]), Err(GgufError::Truncated { .. })), "cut at {cut}");
        }
    }

    #[test]
    fn refuses_non_gguf_old_version_and_non_chat() {
        assert_eq!(parse(b"GGML0000"), Err(GgufError::NotGguf));
        let mut h = chat_header();
        h[4] = 1;
        assert_eq!(parse(&h), Err(GgufError::Version(1)));
        let plain = write_header(&[("general.architecture", "llama")], &[("llama.block_count", 2)], 1);
        let info = parse(&plain).expect("parses");
        assert!(matches!(info.require_chat(), Err(GgufError::NotChat(_))));
        let bert = write_header(&[("general.architecture", "bert"), ("tokenizer.chat_template", "x")], &[], 1);
        assert!(matches!(parse(&bert).map(|i| i.require_chat()), Ok(Err(GgufError::NotChat(_)))));
    }

    #[test]
    fn truncated_file_is_refused() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join("cut.gguf");
        let h = chat_header();
        std::fs::write(&p, &h[..h.len() - 10]).expect("write");
        assert!(matches!(read_file(&p), Err(GgufError::Truncated { .. })));
        // Header complete but no tensor data after it.
        std::fs::write(&p, &h).expect("write");
        assert!(matches!(read_file(&p), Err(GgufError::Truncated { .. })));
        let mut whole = h.clone();
        whole.extend_from_slice(&[0u8; 64]);
        std::fs::write(&p, &whole).expect("write");
        assert!(read_file(&p).is_ok());
    }
}
