//! Sentence embeddings: the [`Embedder`] trait, the local all-MiniLM-L6-v2
//! (weights loaded with candle, encoded by [`crate::bert`]) and a hashing
//! fake for logic tests.

use std::path::{Path, PathBuf};

use crate::bert::{Bert, BertConfig};
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
    /// Embeds search queries; models trained with distinct query and
    /// passage inputs (e5's "query: " / "passage: ") override it, and
    /// `embed` is then the passage side.
    fn embed_query(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, MemoryError> {
        self.embed(texts)
    }
    /// Longest input the model reads whole, in its tokens with its special
    /// tokens (a longer one is truncated or must be split by the caller).
    fn max_tokens(&self) -> usize {
        MINILM_MAX_TOKENS
    }
}

/// Folder name of the default local embedding model under `<home>/models/`.
pub const MINILM_DIR: &str = "all-MiniLM-L6-v2";
/// Longest input in tokens (chat turns are short; longer text is truncated).
pub const MINILM_MAX_TOKENS: usize = 128;

/// all-MiniLM-L6-v2 on the CPU: mean pooling over the tokens, L2-normalised.
pub struct MiniLm {
    model: Bert,
    tokenizer: WordPiece,
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
        let config: BertConfig = serde_json::from_str(&config_text)
            .map_err(|e| MemoryError::ModelUnavailable(format!("{} is not a BERT config: {e}", config_path.display())))?;
        let dim = config.hidden_size;
        let weights = std::fs::read(&weights_path)
            .map_err(|e| MemoryError::ModelUnavailable(format!("cannot read {}: {e}", weights_path.display())))?;
        let tensors = candle_core::safetensors::load_buffer(&weights, &candle_core::Device::Cpu)
            .map_err(|e| MemoryError::ModelUnavailable(format!("bad weights: {e}")))?;
        drop(weights);
        let model = Bert::from_tensors(&tensors, config)?;
        let tokenizer = WordPiece::from_file(&vocab_path, MINILM_MAX_TOKENS)?;
        Ok(Self { model, tokenizer, dim })
    }

    fn embed_one(&self, text: &str) -> Vec<f32> {
        normalise(self.model.mean_pooled(&self.tokenizer.encode(text)))
    }
}

impl Embedder for MiniLm {
    fn dim(&self) -> usize {
        self.dim
    }

    fn model_id(&self) -> String {
        MINILM_DIR.to_owned()
    }

    /// One text (a query) on the calling thread; several (background
    /// indexing) spread over one thread per core.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, MemoryError> {
        on_threads(texts, |t| self.embed_one(t))
    }
}

/// `embed` over `texts` in order: one text on the calling thread, several
/// spread over one thread per core.
pub fn on_threads(texts: &[&str], embed: impl Fn(&str) -> Vec<f32> + Sync) -> Result<Vec<Vec<f32>>, MemoryError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(texts.len());
    if threads <= 1 {
        return Ok(texts.iter().map(|t| embed(t)).collect());
    }
    let per_thread = texts.len().div_ceil(threads);
    let embed = &embed;
    std::thread::scope(|scope| {
        let parts: Vec<_> = texts
            .chunks(per_thread)
            .map(|part| scope.spawn(move || part.iter().map(|t| embed(t)).collect::<Vec<_>>()))
            .collect();
        parts.into_iter().try_fold(Vec::with_capacity(texts.len()), |mut out, part| {
            out.extend(part.join().map_err(|_| MemoryError::Embed("an embedding thread panicked".into()))?);
            Ok(out)
        })
    })
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
