//! Whisper's text decoder with a key/value cache. candle's `TextDecoder`
//! caches only the cross-attention's keys and values: every new token runs
//! the whole sequence through the self-attention and the MLPs again, so a
//! window of n tokens costs n^2/2 token passes. This one keeps each layer's
//! self-attention keys and values, so a token costs one pass; it reads the
//! same weights (shared with candle's model, not copied) and computes the
//! same function (test in `whisper::tests`).

use candle_core::{Device, IndexOp, Module, Result, Tensor, D};
use candle_nn::{embedding, Embedding, LayerNorm, Linear, VarBuilder};
use candle_transformers::models::whisper::Config;

struct Attention {
    query: Linear,
    key: Linear,
    value: Linear,
    out: Linear,
    n_head: usize,
}

impl Attention {
    fn load(n_state: usize, n_head: usize, vb: VarBuilder) -> Result<Self> {
        Ok(Self {
            query: candle_nn::linear(n_state, n_state, vb.pp("q_proj"))?,
            key: candle_nn::linear_no_bias(n_state, n_state, vb.pp("k_proj"))?,
            value: candle_nn::linear(n_state, n_state, vb.pp("v_proj"))?,
            out: candle_nn::linear(n_state, n_state, vb.pp("out_proj"))?,
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

fn layer_norm(size: usize, vb: VarBuilder) -> Result<LayerNorm> {
    Ok(LayerNorm::new(vb.get(size, "weight")?, vb.get(size, "bias")?, 1e-5))
}

impl Block {
    fn load(n_state: usize, n_head: usize, vb: VarBuilder) -> Result<Self> {
        Ok(Self {
            attn: Attention::load(n_state, n_head, vb.pp("self_attn"))?,
            attn_ln: layer_norm(n_state, vb.pp("self_attn_layer_norm"))?,
            cross: Attention::load(n_state, n_head, vb.pp("encoder_attn"))?,
            cross_ln: layer_norm(n_state, vb.pp("encoder_attn_layer_norm"))?,
            fc1: candle_nn::linear(n_state, n_state * 4, vb.pp("fc1"))?,
            fc2: candle_nn::linear(n_state * 4, n_state, vb.pp("fc2"))?,
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

pub struct CachedDecoder {
    token_embedding: Embedding,
    /// The embedding matrix transposed once, `(state, vocab)`, for the logits.
    unembed: Tensor,
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
    pub fn load(vb: VarBuilder, cfg: &Config) -> Result<Self> {
        let n_state = cfg.d_model;
        let token_embedding = embedding(cfg.vocab_size, n_state, vb.pp("embed_tokens"))?;
        let unembed = token_embedding.embeddings().t()?.contiguous()?;
        let positional = vb.get((cfg.max_target_positions, n_state), "embed_positions.weight")?;
        let blocks = (0..cfg.decoder_layers)
            .map(|i| Block::load(n_state, cfg.decoder_attention_heads, vb.pp(format!("layers.{i}"))))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            token_embedding,
            unembed,
            positional,
            blocks,
            ln: layer_norm(n_state, vb.pp("layer_norm"))?,
            len: 0,
            max_len: cfg.max_target_positions,
            device: vb.device().clone(),
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
        hidden.i((.., i..i + 1, ..))?.squeeze(0)?.matmul(&self.unembed)?.squeeze(0)?.to_vec1::<f32>()
    }

    /// Logits at the last position of a `feed` output.
    pub fn last_logits(&self, hidden: &Tensor) -> Result<Vec<f32>> {
        let n = hidden.dim(D::Minus2)?;
        self.logits_at(hidden, n - 1)
    }
}
