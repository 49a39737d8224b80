//! Quantized Whisper weights made from the converted safetensors (f16 on
//! disk, read as f32): every matrix a linear layer multiplies by
//! (attention projections, MLP, the token embedding that is also the
//! output projection) in q8_0, the
//! rest (convolutions, norms, biases, positions) kept in f32, written as
//! GGUF, which candle's quantized Whisper reads. Deterministic: the same
//! input gives the same bytes (tensors in name order, no timestamps).

use std::path::{Path, PathBuf};

use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::Device;

use crate::error::VoiceError;

/// Whether a tensor is a matrix a linear layer multiplies by.
fn is_matrix(name: &str, dims: &[usize]) -> bool {
    let linear = name.ends_with("_proj.weight")
        || name.ends_with("fc1.weight")
        || name.ends_with("fc2.weight")
        || name.ends_with("embed_tokens.weight");
    // q8_0 packs rows in blocks of 32.
    linear && dims.len() == 2 && dims[1] % 32 == 0
}

/// Writes `dir/model-q8_0.gguf` from `dir/model.safetensors`; returns its path.
pub fn quantize_dir(dir: &Path) -> Result<PathBuf, VoiceError> {
    let corrupt = |reason: String| VoiceError::ModelCorrupt { dir: dir.to_owned(), reason };
    let source = dir.join("model.safetensors");
    let tensors = candle_core::safetensors::load(&source, &Device::Cpu)
        .map_err(|e| corrupt(format!("model.safetensors: {e}")))?;
    let mut names: Vec<&String> = tensors.keys().collect();
    names.sort();
    let mut quantized = Vec::with_capacity(names.len());
    for name in names {
        let t = &tensors[name];
        let t = t.to_dtype(candle_core::DType::F32)?;
        let dtype = if is_matrix(name, t.dims()) { GgmlDType::Q8_0 } else { GgmlDType::F32 };
        quantized.push((name.as_str(), QTensor::quantize(&t, dtype)?));
    }
    let target = dir.join(super::QUANTIZED_FILE);
    let partial = dir.join(format!("{}.partial", super::QUANTIZED_FILE));
    let io = |source| VoiceError::Io { path: partial.clone(), source };
    {
        let mut file = std::io::BufWriter::new(std::fs::File::create(&partial).map_err(io)?);
        let arch = gguf_file::Value::String("whisper".into());
        let refs: Vec<(&str, &QTensor)> = quantized.iter().map(|(n, q)| (*n, q)).collect();
        gguf_file::write(&mut file, &[("general.architecture", &arch)], &refs)?;
        std::io::Write::flush(&mut file).map_err(io)?;
    }
    // Whole or not at all: a half-written file is never taken for the model.
    std::fs::rename(&partial, &target).map_err(|source| VoiceError::Io { path: target.clone(), source })?;
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_linear_matrices_are_quantized() {
        assert!(is_matrix("model.decoder.layers.0.self_attn.q_proj.weight", &[384, 384]));
        assert!(is_matrix("model.decoder.embed_tokens.weight", &[51_864, 384]));
        assert!(is_matrix("model.encoder.layers.3.fc2.weight", &[384, 1536]));
        assert!(!is_matrix("model.encoder.conv1.weight", &[384, 80, 3]));
        assert!(!is_matrix("model.decoder.embed_positions.weight", &[448, 384]));
        assert!(!is_matrix("model.decoder.layers.0.self_attn.q_proj.bias", &[384]));
        assert!(!is_matrix("model.decoder.layers.0.fc1.weight", &[1536, 30]), "rows not in blocks of 32");
    }
}
