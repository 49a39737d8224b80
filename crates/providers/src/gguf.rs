//! A cheap, pure-Rust check of a GGUF file's header, done before a file is
//! handed to llama.cpp (which may abort the process on some corrupt files)
//! and when a user imports a model.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::ProviderError;

/// The fixed header fields of a GGUF file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GgufHeader {
    pub version: u32,
    pub tensor_count: u64,
    pub kv_count: u64,
    pub file_size: u64,
}

/// Magic (4) + version (4) + tensor count (8) + metadata count (8).
const HEADER_LEN: usize = 24;
/// Plenty for any real model; larger counts mean a corrupt header.
const MAX_COUNT: u64 = 1 << 20;
const MAX_KEY_LEN: u64 = 64 * 1024;

/// Checks that `path` is a readable GGUF (v2 or v3) file with a plausible
/// header: the "GGUF" magic, a supported version, sane tensor and metadata
/// counts, and a readable first metadata key. Returns `ModelLoad` with a
/// message fit for users otherwise. It does not prove the weights are intact.
pub fn validate_gguf_file(path: &Path) -> Result<GgufHeader, ProviderError> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| {
        ProviderError::ModelLoad(if e.kind() == std::io::ErrorKind::NotFound {
            format!("model file {shown} does not exist")
        } else {
            format!("cannot read model file {shown}: {e}")
        })
    })?;
    if !meta.is_file() {
        return Err(ProviderError::ModelLoad(format!("{shown} is not a file")));
    }
    let file_size = meta.len();
    let mut file = File::open(path)
        .map_err(|e| ProviderError::ModelLoad(format!("cannot open model file {shown}: {e}")))?;
    let mut head = Vec::with_capacity(HEADER_LEN + 8 + 64);
    file.by_ref()
        .take((HEADER_LEN + 8 + 64) as u64)
        .read_to_end(&mut head)
        .map_err(|e| ProviderError::ModelLoad(format!("cannot read model file {shown}: {e}")))?;
    let corrupt = |why: &str| {
        ProviderError::ModelLoad(format!("{shown} is not a valid GGUF model file: {why}"))
    };
    if head.len() < 4 || &head[..4] != b"GGUF" {
        return Err(corrupt("it does not start with the GGUF signature"));
    }
    if head.len() < HEADER_LEN {
        return Err(corrupt(&format!("the file is only {file_size} bytes long")));
    }
    let version = u32::from_le_bytes(le_bytes::<4>(&head[4..8]));
    if !(2..=3).contains(&version) {
        return Err(corrupt(&format!("unsupported GGUF version {version}")));
    }
    let tensor_count = u64::from_le_bytes(le_bytes::<8>(&head[8..16]));
    let kv_count = u64::from_le_bytes(le_bytes::<8>(&head[16..24]));
    if tensor_count == 0 || tensor_count > MAX_COUNT {
        return Err(corrupt(&format!("implausible tensor count {tensor_count}")));
    }
    if kv_count == 0 || kv_count > MAX_COUNT {
        return Err(corrupt(&format!("implausible metadata count {kv_count}")));
    }
    // The first metadata key: u64 length then that many UTF-8 bytes.
    if head.len() < HEADER_LEN + 8 {
        return Err(corrupt("the metadata is missing"));
    }
    let key_len = u64::from_le_bytes(le_bytes::<8>(&head[HEADER_LEN..HEADER_LEN + 8]));
    if key_len == 0 || key_len > MAX_KEY_LEN || key_len > file_size {
        return Err(corrupt("the first metadata key is unreadable"));
    }
    let start = HEADER_LEN + 8;
    let visible = head
        .len()
        .saturating_sub(start)
        .min(usize::try_from(key_len).unwrap_or(0));
    if std::str::from_utf8(&head[start..start + visible]).is_err() {
        return Err(corrupt("the first metadata key is not text"));
    }
    Ok(GgufHeader {
        version,
        tensor_count,
        kv_count,
        file_size,
    })
}

fn le_bytes<const N: usize>(slice: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&slice[..N]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(version: u32, tensors: u64, kvs: u64, key: &[u8]) -> Vec<u8> {
        let mut v = b"GGUF".to_vec();
        v.extend_from_slice(&version.to_le_bytes());
        v.extend_from_slice(&tensors.to_le_bytes());
        v.extend_from_slice(&kvs.to_le_bytes());
        v.extend_from_slice(&(key.len() as u64).to_le_bytes());
        v.extend_from_slice(key);
        v.extend_from_slice(&[0u8; 64]);
        v
    }

    fn check(bytes: &[u8]) -> Result<GgufHeader, ProviderError> {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.gguf");
        std::fs::write(&path, bytes).expect("write");
        validate_gguf_file(&path)
    }

    #[test]
    fn accepts_plausible_header() {
        let h = check(&header(3, 10, 5, b"general.architecture")).expect("valid");
        assert_eq!((h.version, h.tensor_count, h.kv_count), (3, 10, 5));
    }

    #[test]
    fn rejects_bad_files() {
        for (bytes, why) in [
            (b"not a model at all".to_vec(), "signature"),
            (b"GGUF".to_vec(), "only"),
            (header(1, 10, 5, b"general.architecture"), "version"),
            (header(3, 0, 5, b"general.architecture"), "tensor count"),
            (
                header(3, u64::MAX, 5, b"general.architecture"),
                "tensor count",
            ),
            (header(3, 10, 5, b""), "metadata key"),
            (header(3, 10, 5, &[0xff, 0xfe, 0xfd]), "not text"),
        ] {
            match check(&bytes) {
                Err(ProviderError::ModelLoad(m)) => assert!(m.contains(why), "{m} / {why}"),
                other => panic!("expected ModelLoad for {why}, got {other:?}"),
            }
        }
        match validate_gguf_file(Path::new("/nonexistent/dir/x.gguf")) {
            Err(ProviderError::ModelLoad(m)) => assert!(m.contains("does not exist")),
            other => panic!("{other:?}"),
        }
    }
}
