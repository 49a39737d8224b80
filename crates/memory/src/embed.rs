//! Sentence embeddings: the [`Embedder`] trait, the local all-MiniLM-L6-v2
//! (BERT, via candle) and a hashing fake for logic tests.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};

use crate::tokenizer::WordPiece;
use crate::MemoryError;

/// Turns texts into L2-normalised vectors of `dim()` floats.
pub trait Embedder: Send + Sync {
    fn dim(&self) -> usize;
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, MemoryError>;
    /// Identifies the model: vectors from different models never mix.
    fn model_id(&self) -> String {
        format!("unnamed-{}", self.dim())
    }
}

/// Folder name of the default local embedding model under `<home>/models/`.
pub const MINILM_DIR: &str = "all-MiniLM-L6-v2";
/// Longest input in tokens (chat turns are short; longer text is truncated).
pub const MINILM_MAX_TOKENS: usize = 128;
const BATCH: usize = 32;

/// all-MiniLM-L6-v2 on the CPU: mean pooling over real tokens, L2-normalised.
pub struct MiniLm {
    model: BertModel,
    tokenizer: WordPiece,
    device: Device,
    dim: usize,
}

impl MiniLm {
    /// Files expected in `dir`: config.json, model.safetensors, vocab.txt.
    pub fn load(dir: &Path) -> Result<Self, MemoryError> {
        let need = |name: &str| -> Result<PathBuf, MemoryError> {
            let p = dir.join(name);
            if p.is_file() {
                Ok(p)
            } else {
                Err(MemoryError::ModelUnavailable(format!("{} is missing", p.display())))
            }
        };
        let (config_path, weights_path, vocab_path) =
            (need("config.json")?, need("model.safetensors")?, need("vocab.txt")?);
        let config_text = std::fs::read_to_string(&config_path)
            .map_err(|e| MemoryError::ModelUnavailable(format!("cannot read {}: {e}", config_path.display())))?;
        let config: Config = serde_json::from_str(&config_text)
            .map_err(|e| MemoryError::ModelUnavailable(format!("{} is not a BERT config: {e}", config_path.display())))?;
        let dim: usize = serde_json::from_str::<serde_json::Value>(&config_text)
            .ok()
            .and_then(|v| v.get("hidden_size").and_then(|h| h.as_u64()))
            .unwrap_or(384) as usize;
        let weights = std::fs::read(&weights_path)
            .map_err(|e| MemoryError::ModelUnavailable(format!("cannot read {}: {e}", weights_path.display())))?;
        let device = Device::Cpu;
        let bad = |e: candle_core::Error| MemoryError::ModelUnavailable(format!("bad weights: {e}"));
        let mut tensors = candle_core::safetensors::load_buffer(&weights, &device).map_err(bad)?;
        drop(weights);
        for (name, w) in tensors.iter_mut() {
            if w.rank() == 2 && !name.contains("embeddings") {
                *w = transposed_storage(w).map_err(bad)?;
            }
        }
        let vb = VarBuilder::from_tensors(tensors, DType::F32, &device);
        let model = BertModel::load(vb, &config)
            .map_err(|e| MemoryError::ModelUnavailable(format!("cannot build the model: {e}")))?;
        let tokenizer = WordPiece::from_file(&vocab_path, MINILM_MAX_TOKENS)?;
        Ok(Self { model, tokenizer, device, dim })
    }

    fn embed_batch(&self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, MemoryError> {
        let n = ids.len();
        let len = ids.iter().map(Vec::len).max().unwrap_or(2);
        let mut flat = vec![0u32; n * len];
        let mut mask = vec![0u32; n * len];
        for (i, row) in ids.iter().enumerate() {
            flat[i * len..i * len + row.len()].copy_from_slice(row);
            mask[i * len..i * len + row.len()].iter_mut().for_each(|m| *m = 1);
        }
        let input = Tensor::from_vec(flat, (n, len), &self.device)?;
        let mask = Tensor::from_vec(mask, (n, len), &self.device)?;
        let types = input.zeros_like()?;
        let out = self.model.forward(&input, &types, Some(&mask))?; // (n, len, dim)
        let maskf = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (n, len, 1)
        let summed = out.broadcast_mul(&maskf)?.sum(1)?; // (n, dim)
        let counts = maskf.sum(1)?; // (n, 1)
        let mean = summed.broadcast_div(&counts)?;
        let rows: Vec<Vec<f32>> = mean.to_vec2()?;
        Ok(rows.into_iter().map(normalise).collect())
    }
}

impl Embedder for MiniLm {
    fn dim(&self) -> usize {
        self.dim
    }

    fn model_id(&self) -> String {
        MINILM_DIR.to_owned()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, MemoryError> {
        let encoded: Vec<Vec<u32>> = texts.iter().map(|t| self.tokenizer.encode(t)).collect();
        // Batches of similar length waste little on padding.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| encoded[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(BATCH) {
            let batch: Vec<Vec<u32>> = chunk.iter().map(|&i| encoded[i].clone()).collect();
            for (&i, v) in chunk.iter().zip(self.embed_batch(&batch)?) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}

/// The same (out, in) matrix, stored column by column. A linear layer
/// multiplies by the weight's transpose, which is then contiguous: the matrix
/// library packs it with plain copies instead of a strided gather (for a
/// short query that gather was half of the embedding's time).
fn transposed_storage(w: &Tensor) -> candle_core::Result<Tensor> {
    w.t()?.contiguous()?.t()
}

pub fn normalise(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// A deterministic bag-of-words-and-trigrams embedder: no model, no files.
/// Only for logic tests; it knows nothing about meaning.
#[cfg(any(test, feature = "test-support"))]
pub struct HashingEmbedder {
    pub dim: usize,
}

#[cfg(any(test, feature = "test-support"))]
impl Default for HashingEmbedder {
    fn default() -> Self {
        Self { dim: 384 }
    }
}

#[cfg(any(test, feature = "test-support"))]
impl Embedder for HashingEmbedder {
    fn dim(&self) -> usize {
        self.dim
    }
    fn model_id(&self) -> String {
        format!("hashing-{}", self.dim)
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, MemoryError> {
        fn h(s: &str) -> u64 {
            // FNV-1a: stable across runs and platforms.
            s.bytes().fold(0xcbf29ce484222325u64, |a, b| (a ^ b as u64).wrapping_mul(0x100000001b3))
        }
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; self.dim];
                let lower = t.to_lowercase();
                for w in lower.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
                    v[(h(w) % self.dim as u64) as usize] += 1.0;
                    let cs: Vec<char> = format!(" {w} ").chars().collect();
                    for g in cs.windows(3) {
                        v[(h(&g.iter().collect::<String>()) % self.dim as u64) as usize] += 0.3;
                    }
                }
                normalise(v)
            })
            .collect())
    }
}
