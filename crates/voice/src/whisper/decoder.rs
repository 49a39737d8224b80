//! Whisper's text decoder with a key/value cache. candle's `TextDecoder`
//! caches only the cross-attention's keys and values: every new token runs
//! the whole sequence through the self-attention and the MLPs again, so a
//! window of n tokens costs n^2/2 token passes. This one keeps each layer's
//! self-attention keys and values, so a token costs one pass; it reads the
//! same weights (shared with candle's model, not copied) and computes the
//! same function (test in `whisper::tests`).

use candle_core::quantized::QMatMul;
use candle_core::{Device, IndexOp, Module, Result, Tensor, D};
use candle_nn::{Embedding, LayerNorm, VarBuilder};
use candle_transformers::models::whisper::Config;
use candle_transformers::quantized_var_builder::VarBuilder as QVarBuilder;

/// Where the weights come from: f32 tensors (safetensors), or a GGUF file
/// whose matrices are quantized (q8_0: a quarter of the bytes to read per
/// token, which is what a decoder pass on a CPU waits for).
#[derive(Clone)]
pub enum Weights<'a> {
    F32(VarBuilder<'a>),
    Quantized(QVarBuilder),
}

impl Weights<'_> {
    pub fn pp(&self, s: &str) -> Self {
        match self {
            Weights::F32(vb) => Weights::F32(vb.pp(s)),
            Weights::Quantized(vb) => Weights::Quantized(vb.pp(s)),
        }
    }

    fn device(&self) -> Device {
        match self {
            Weights::F32(vb) => vb.device().clone(),
            Weights::Quantized(vb) => vb.device().clone(),
        }
    }

    /// A tensor in f32 (dequantized if it was stored quantized).
    fn tensor<S: Into<candle_core::Shape>>(&self, shape: S, name: &str) -> Result<Tensor> {
        match self {
            Weights::F32(vb) => vb.get(shape, name),
            Weights::Quantized(vb) => vb.get(shape, name)?.dequantize(vb.device()),
        }
    }

    fn linear(&self, d_in: usize, d_out: usize, bias: bool) -> Result<Linear> {
        let b = if bias { Some(self.tensor(d_out, "bias")?) } else { None };
        Ok(match self {
            Weights::F32(vb) => Linear::F32(candle_nn::Linear::new(vb.get((d_out, d_in), "weight")?, b)),
            Weights::Quantized(vb) => Linear::Quantized(QMatMul::from_arc(vb.get((d_out, d_in), "weight")?)?, b),
        })
    }
}

/// A linear layer on f32 or quantized weights.
pub enum Linear {
    F32(candle_nn::Linear),
    Quantized(QMatMul, Option<Tensor>),
}

impl Module for Linear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            Linear::F32(l) => l.forward(x),
            Linear::Quantized(w, b) => {
                let y = w.forward(x)?;
                match b {
                    Some(b) => y.broadcast_add(b),
                    None => Ok(y),
                }
            }
        }
    }
}

struct Attention {
    query: Linear,
    key: Linear,
    value: Linear,
    out: Linear,
    n_head: usize,
}

impl Attention {
    fn load(n_state: usize, n_head: usize, vb: Weights) -> Result<Self> {
        Ok(Self {
            query: vb.pp("q_proj").linear(n_state, n_state, true)?,
            key: vb.pp("k_proj").linear(n_state, n_state, false)?,
            value: vb.pp("v_proj").linear(n_state, n_state, true)?,
            out: vb.pp("out_proj").linear(n_state, n_state, true)?,
            n_head,
        })
    }

    /// `(batch, ctx, state)` to `(batch, head, ctx, state / head)`.
    fn heads(&self, x: &Tensor) -> Result<Tensor> {
        let (b, n, s) = x.dims3()?;
        x.reshape((b, n, self.n_head, s / self.n_head))?.transpose(1, 2)?.contiguous()
    }

    /// Keys and values, split in heads and scaled as OpenAI's model does
    /// (a quarter power on each side of the product).
    fn keys_values(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
        let (_, _, s) = x.dims3()?;
        let scale = ((s / self.n_head) as f64).powf(-0.25);
        let k = (self.heads(&self.key.forward(x)?)? * scale)?;
        let v = self.heads(&self.value.forward(x)?)?;
        Ok((k, v))
    }

    fn attend(&self, x: &Tensor, k: &Tensor, v: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let (_, _, s) = x.dims3()?;
        let scale = ((s / self.n_head) as f64).powf(-0.25);
        let q = (self.heads(&self.query.forward(x)?)? * scale)?;
        let mut qk = q.matmul(&k.transpose(2, 3)?.contiguous()?)?;
        if let Some(mask) = mask {
            qk = qk.broadcast_add(mask)?;
        }
        let w = candle_nn::ops::softmax_last_dim(&qk)?;
        let wv = w.matmul(v)?.transpose(1, 2)?.flatten_from(2)?;
        self.out.forward(&wv)
    }
}

struct Block {
    attn: Attention,
    attn_ln: LayerNorm,
    cross: Attention,
    cross_ln: LayerNorm,
    fc1: Linear,
    fc2: Linear,
    mlp_ln: LayerNorm,
    /// Self-attention keys and values of the tokens so far.
    cache: Option<(Tensor, Tensor)>,
    /// Cross-attention keys and values of the window's audio features.
    audio: Option<(Tensor, Tensor)>,
}

fn layer_norm(size: usize, vb: Weights) -> Result<LayerNorm> {
    Ok(LayerNorm::new(vb.tensor(size, "weight")?, vb.tensor(size, "bias")?, 1e-5))
}

impl Block {
    fn load(n_state: usize, n_head: usize, vb: Weights) -> Result<Self> {
        Ok(Self {
            attn: Attention::load(n_state, n_head, vb.pp("self_attn"))?,
            attn_ln: layer_norm(n_state, vb.pp("self_attn_layer_norm"))?,
            cross: Attention::load(n_state, n_head, vb.pp("encoder_attn"))?,
            cross_ln: layer_norm(n_state, vb.pp("encoder_attn_layer_norm"))?,
            fc1: vb.pp("fc1").linear(n_state, n_state * 4, true)?,
            fc2: vb.pp("fc2").linear(n_state * 4, n_state, true)?,
            mlp_ln: layer_norm(n_state, vb.pp("final_layer_norm"))?,
            cache: None,
            audio: None,
        })
    }

    fn forward(&mut self, x: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let h = self.attn_ln.forward(x)?;
        let (k, v) = self.attn.keys_values(&h)?;
        let (k, v) = match self.cache.take() {
            Some((pk, pv)) => (Tensor::cat(&[&pk, &k], 2)?, Tensor::cat(&[&pv, &v], 2)?),
            None => (k, v),
        };
        let x = (x + self.attn.attend(&h, &k, &v, mask)?)?;
        self.cache = Some((k, v));
        let (ak, av) = self.audio.as_ref().ok_or_else(|| candle_core::Error::Msg("no audio features".into()))?;
        let x = (&x + self.cross.attend(&self.cross_ln.forward(&x)?, ak, av, None)?)?;
        let mlp = self.fc2.forward(&self.fc1.forward(&self.mlp_ln.forward(&x)?)?.gelu()?)?;
        x + mlp
    }
}

/// The output projection (tied to the token embedding).
enum Unembed {
    /// The embedding matrix transposed once, `(state, vocab)`.
    F32(Tensor),
    /// The quantized embedding matrix, `(vocab, state)`.
    Quantized(QMatMul),
}

pub struct CachedDecoder {
    token_embedding: Embedding,
    unembed: Unembed,
    positional: Tensor,
    blocks: Vec<Block>,
    ln: LayerNorm,
    /// Tokens already in the cache.
    len: usize,
    max_len: usize,
    device: Device,
}

impl CachedDecoder {
    /// Loads from the model's `model.decoder` weights.
    pub fn load(vb: Weights, cfg: &Config) -> Result<Self> {
        let n_state = cfg.d_model;
        let table = vb.pp("embed_tokens").tensor((cfg.vocab_size, n_state), "weight")?;
        let unembed = match &vb {
            Weights::F32(_) => Unembed::F32(table.t()?.contiguous()?),
            Weights::Quantized(q) => {
                Unembed::Quantized(QMatMul::from_arc(q.pp("embed_tokens").get((cfg.vocab_size, n_state), "weight")?)?)
            }
        };
        let token_embedding = Embedding::new(table, n_state);
        let positional = vb.tensor((cfg.max_target_positions, n_state), "embed_positions.weight")?;
        let blocks = (0..cfg.decoder_layers)
            .map(|i| Block::load(n_state, cfg.decoder_attention_heads, vb.pp(&format!("layers.{i}"))))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            token_embedding,
            unembed,
            positional,
            blocks,
            ln: layer_norm(n_state, vb.pp("layer_norm"))?,
            len: 0,
            max_len: cfg.max_target_positions,
            device: vb.device(),
        })
    }

    /// Starts a new sequence over a window's encoded audio `(1, frames, state)`.
    pub fn start(&mut self, audio: &Tensor) -> Result<()> {
        for b in &mut self.blocks {
            b.cache = None;
            b.audio = Some(b.cross.keys_values(audio)?);
        }
        self.len = 0;
        Ok(())
    }

    /// Forgets the tokens after the first `len` (a draft's that did not hold).
    pub fn truncate(&mut self, len: usize) -> Result<()> {
        if len >= self.len {
            return Ok(());
        }
        for b in &mut self.blocks {
            if let Some((k, v)) = b.cache.take() {
                b.cache = if len == 0 { None } else { Some((k.narrow(2, 0, len)?, v.narrow(2, 0, len)?)) };
            }
        }
        self.len = len;
        Ok(())
    }

    /// How many tokens the sequence holds.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Feeds `tokens` after those already seen; returns the final layer
    /// norm's output for them, `(1, tokens.len(), state)`.
    pub fn feed(&mut self, tokens: &[u32]) -> Result<Tensor> {
        let n = tokens.len();
        if n == 0 || self.len + n > self.max_len {
            return Err(candle_core::Error::Msg(format!("{} tokens after {} do not fit", n, self.len)));
        }
        let t = Tensor::new(tokens, &self.device)?.unsqueeze(0)?;
        let mut x = self.token_embedding.forward(&t)?.broadcast_add(&self.positional.narrow(0, self.len, n)?)?;
        // New token i (at position len + i) sees positions up to len + i.
        let mask = if n > 1 {
            let past = self.len;
            let m: Vec<f32> = (0..n)
                .flat_map(|i| (0..past + n).map(move |j| if j > past + i { f32::NEG_INFINITY } else { 0.0 }))
                .collect();
            Some(Tensor::from_vec(m, (n, past + n), &self.device)?)
        } else {
            None
        };
        for b in &mut self.blocks {
            x = b.forward(&x, mask.as_ref())?;
        }
        self.len += n;
        self.ln.forward(&x)
    }

    /// Logits over the vocabulary at position `i` of a `feed` output.
    pub fn logits_at(&self, hidden: &Tensor, i: usize) -> Result<Vec<f32>> {
        let h = hidden.i((.., i..i + 1, ..))?.squeeze(0)?;
        let logits = match &self.unembed {
            Unembed::F32(w) => h.matmul(w)?,
            Unembed::Quantized(w) => w.forward(&h)?,
        };
        logits.squeeze(0)?.to_vec1::<f32>()
    }

    /// Logits at the last position of a `feed` output.
    pub fn last_logits(&self, hidden: &Tensor) -> Result<Vec<f32>> {
        let n = hidden.dim(D::Minus2)?;
        self.logits_at(hidden, n - 1)
    }
}
