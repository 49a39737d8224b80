//! The header check done before a file is handed to llama.cpp (which may
//! abort the process on some corrupt files) and when a user imports a
//! model. The reading is the model manager's (`models::gguf`), so a file the
//! downloader accepts and a file the engine loads are judged by one parser;
//! this turns its reasons into the engine's error.

use std::path::Path;

use models::gguf::{read_file, GgufError};

use crate::ProviderError;

/// The fixed header fields of a GGUF file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GgufHeader {
    pub version: u32,
    pub tensor_count: u64,
    pub kv_count: u64,
    pub file_size: u64,
}

/// Checks that `path` is a readable GGUF (v2 or v3) file whose metadata
/// parses to its end, names an architecture and is followed by tensor data.
/// Returns `ModelLoad` with a message fit for users otherwise. It does not
/// prove the weights are intact.
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
    let info = read_file(path).map_err(|e| {
        ProviderError::ModelLoad(match e {
            GgufError::Io(why) => format!("cannot read model file {shown}: {why}"),
            other => format!("{shown} is not a valid GGUF model file: {other}"),
        })
    })?;
    Ok(GgufHeader {
        version: info.version,
        tensor_count: info.tensor_count,
        kv_count: info.kv_count,
        file_size: meta.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use models::gguf::write_header;

    fn model(tensors: u64) -> Vec<u8> {
        let mut v = write_header(
            &[("general.architecture", "llama")],
            &[("llama.block_count", 2)],
            tensors,
        );
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
        let bytes = model(10);
        let h = check(&bytes).expect("valid");
        assert_eq!(
            (h.version, h.tensor_count, h.kv_count, h.file_size),
            (3, 10, 2, bytes.len() as u64)
        );
    }

    #[test]
    fn rejects_bad_files() {
        let mut old = model(10);
        old[4] = 1;
        let whole = model(10);
        let no_arch = {
            let mut v = write_header(&[("general.name", "x")], &[], 10);
            v.extend_from_slice(&[0u8; 64]);
            v
        };
        let mut not_text = model(10);
        // The first key's first byte: not UTF-8.
        not_text[32] = 0xff;
        for (bytes, why) in [
            (b"not a model at all".to_vec(), "signature"),
            (b"GGUF".to_vec(), "truncated"),
            (whole[..whole.len() - 70].to_vec(), "truncated"),
            (old, "version 1"),
            (model(0), "no tensors"),
            (no_arch, "architecture"),
            (not_text, "UTF-8"),
        ] {
            match check(&bytes) {
                Err(ProviderError::ModelLoad(m)) => {
                    assert!(
                        m.contains(why) && m.contains("not a valid GGUF model file"),
                        "{m} / {why}"
                    )
                }
                other => panic!("expected ModelLoad for {why}, got {other:?}"),
            }
        }
        match validate_gguf_file(Path::new("/nonexistent/dir/x.gguf")) {
            Err(ProviderError::ModelLoad(m)) => assert!(m.contains("does not exist")),
            other => panic!("{other:?}"),
        }
    }
}
