//! The BERT encoder of all-MiniLM-L6-v2 (and of other BERT-shaped
//! encoders read into the same weights), one text at a time, on the CPU.
//!
//! Candle's `BertModel` (used until session 6) spent a fixed ~8 ms per
//! query packing every weight matrix for its matrix library, whatever the
//! input's length, and split each product over threads that a busy CPU
//! schedules late. A chat query is ~5–15 tokens: here each weight row is
//! read once, straight from the model's own (out, in) layout, into small
//! register blocks; no padding, one thread per text. Same floats as
//! candle's to ~1e-6 (test `the_own_encoder_matches_candles_bert`).

use std::collections::HashMap;

use candle_core::Tensor;
use serde::Deserialize;

use crate::MemoryError;

/// The parts of a BERT `config.json` the encoder needs.
#[derive(Debug, Clone, Deserialize)]
pub struct BertConfig {
    pub hidden_size: usize,
    pub num_attention_heads: usize,
    pub num_hidden_layers: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f32,
    #[serde(default = "default_act")]
    pub hidden_act: String,
}

fn default_eps() -> f32 {
    1e-12
}

fn default_act() -> String {
    "gelu".into()
}

/// A linear layer: `weight` is (out, in) row-major, as stored.
struct Linear {
    weight: Vec<f32>,
    bias: Vec<f32>,
}

struct Norm {
    gain: Vec<f32>,
    bias: Vec<f32>,
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: Norm,
    intermediate: Linear,
    output: Linear,
    output_norm: Norm,
}

pub struct Bert {
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
    config: BertConfig,
}

impl Bert {
    /// From a safetensors map (names with or without a `bert.` prefix).
    pub fn from_tensors(tensors: &HashMap<String, Tensor>, config: BertConfig) -> Result<Self, MemoryError> {
        let get = |name: &str| -> Result<Vec<f32>, MemoryError> {
            let t = tensors
                .get(name)
                .or_else(|| tensors.get(&format!("bert.{name}")))
                .ok_or_else(|| MemoryError::ModelUnavailable(format!("the weights have no {name}")))?;
            t.flatten_all()
                .and_then(|t| t.to_dtype(candle_core::DType::F32))
                .and_then(|t| t.to_vec1::<f32>())
                .map_err(|e| MemoryError::ModelUnavailable(format!("bad weights for {name}: {e}")))
        };
        Self::from_parts(&get, config)
    }

    /// From named float weights with Hugging Face BERT's names (the word
    /// table's row count is its length over the width); another model file
    /// format reads its own weights into these names.
    pub fn from_parts(
        get: &dyn Fn(&str) -> Result<Vec<f32>, MemoryError>,
        config: BertConfig,
    ) -> Result<Self, MemoryError> {
        if config.hidden_act != "gelu" || config.num_attention_heads == 0 || config.hidden_size % config.num_attention_heads != 0 {
            return Err(MemoryError::ModelUnavailable(format!(
                "unsupported BERT: activation {}, {} heads for {} dimensions",
                config.hidden_act, config.num_attention_heads, config.hidden_size
            )));
        }
        let sized = |name: &str, len: usize| -> Result<Vec<f32>, MemoryError> {
            let v = get(name)?;
            if v.len() == len {
                Ok(v)
            } else {
                Err(MemoryError::ModelUnavailable(format!("{name} has {} values, expected {len}", v.len())))
            }
        };
        let (h, inter) = (config.hidden_size, config.intermediate_size);
        let linear = |name: &str, inputs: usize, outputs: usize| -> Result<Linear, MemoryError> {
            Ok(Linear { weight: sized(&format!("{name}.weight"), inputs * outputs)?, bias: sized(&format!("{name}.bias"), outputs)? })
        };
        let norm = |name: &str| -> Result<Norm, MemoryError> {
            Ok(Norm { gain: sized(&format!("{name}.weight"), h)?, bias: sized(&format!("{name}.bias"), h)? })
        };
        let layers = (0..config.num_hidden_layers)
            .map(|i| {
                let p = format!("encoder.layer.{i}");
                Ok(Layer {
                    query: linear(&format!("{p}.attention.self.query"), h, h)?,
                    key: linear(&format!("{p}.attention.self.key"), h, h)?,
                    value: linear(&format!("{p}.attention.self.value"), h, h)?,
                    attention_out: linear(&format!("{p}.attention.output.dense"), h, h)?,
                    attention_norm: norm(&format!("{p}.attention.output.LayerNorm"))?,
                    intermediate: linear(&format!("{p}.intermediate.dense"), h, inter)?,
                    output: linear(&format!("{p}.output.dense"), inter, h)?,
                    output_norm: norm(&format!("{p}.output.LayerNorm"))?,
                })
            })
            .collect::<Result<Vec<_>, MemoryError>>()?;
        let word = get("embeddings.word_embeddings.weight")?;
        if word.is_empty() || word.len() % h != 0 {
            return Err(MemoryError::ModelUnavailable(format!("the word table has {} values for width {h}", word.len())));
        }
        let token_type = get("embeddings.token_type_embeddings.weight")?;
        if token_type.len() < h || token_type.len() % h != 0 {
            return Err(MemoryError::ModelUnavailable(format!("the token type table has {} values", token_type.len())));
        }
        Ok(Self {
            word,
            position: sized("embeddings.position_embeddings.weight", config.max_position_embeddings * h)?,
            // Only type 0 is ever used (one segment).
            token_type: token_type[..h].to_vec(),
            embedding_norm: norm("embeddings.LayerNorm")?,
            layers,
            config,
        })
    }

    /// The mean of the last layer's token vectors for `ids` (one text, with
    /// its `[CLS]` and `[SEP]`; at most `max_position_embeddings` tokens).
    pub fn mean_pooled(&self, ids: &[u32]) -> Vec<f32> {
        let h = self.config.hidden_size;
        let ids = &ids[..ids.len().min(self.config.max_position_embeddings)];
        let m = ids.len();
        let vocab = self.word.len() / h.max(1);
        let mut x = vec![0f32; m * h];
        for (i, &id) in ids.iter().enumerate() {
            let id = (id as usize).min(vocab.saturating_sub(1));
            let row = &mut x[i * h..(i + 1) * h];
            let (w, p) = (&self.word[id * h..(id + 1) * h], &self.position[i * h..(i + 1) * h]);
            for (c, v) in row.iter_mut().enumerate() {
                *v = w[c] + p[c] + self.token_type[c];
            }
        }
        let eps = self.config.layer_norm_eps;
        layer_norm(&mut x, &self.embedding_norm, eps);
        for l in &self.layers {
            let ctx = self.attention(&x, m, l);
            let mut a = linear(&ctx, m, &l.attention_out);
            a.iter_mut().zip(&x).for_each(|(a, x)| *a += x);
            layer_norm(&mut a, &l.attention_norm, eps);
            let mut inner = linear(&a, m, &l.intermediate);
            inner.iter_mut().for_each(|v| *v = gelu(*v));
            let mut out = linear(&inner, m, &l.output);
            out.iter_mut().zip(&a).for_each(|(o, a)| *o += a);
            layer_norm(&mut out, &l.output_norm, eps);
            x = out;
        }
        let mut mean = vec![0f32; h];
        for row in x.chunks_exact(h) {
            mean.iter_mut().zip(row).for_each(|(s, v)| *s += v);
        }
        mean.iter_mut().for_each(|s| *s /= m.max(1) as f32);
        mean
    }

    /// Multi-head self-attention over all `m` tokens (one text: no mask).
    fn attention(&self, x: &[f32], m: usize, l: &Layer) -> Vec<f32> {
        let h = self.config.hidden_size;
        let d = h / self.config.num_attention_heads;
        let (q, k, v) = (linear(x, m, &l.query), linear(x, m, &l.key), linear(x, m, &l.value));
        let scale = 1.0 / (d as f32).sqrt();
        let mut ctx = vec![0f32; m * h];
        let mut p = vec![0f32; m];
        for o in (0..h).step_by(d) {
            for i in 0..m {
                let qi = &q[i * h + o..i * h + o + d];
                for (j, s) in p.iter_mut().enumerate() {
                    *s = qi.iter().zip(&k[j * h + o..j * h + o + d]).map(|(a, b)| a * b).sum::<f32>() * scale;
                }
                let max = p.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let mut sum = 0.0;
                p.iter_mut().for_each(|s| {
                    *s = (*s - max).exp();
                    sum += *s;
                });
                let c = &mut ctx[i * h + o..i * h + o + d];
                for (j, s) in p.iter().enumerate() {
                    let w = s / sum;
                    c.iter_mut().zip(&v[j * h + o..j * h + o + d]).for_each(|(c, v)| *c += w * v);
                }
            }
        }
        ctx
    }
}

fn layer_norm(x: &mut [f32], n: &Norm, eps: f32) {
    for row in x.chunks_exact_mut(n.gain.len()) {
        let len = row.len() as f32;
        let mean = row.iter().sum::<f32>() / len;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / len;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, g), b) in row.iter_mut().zip(&n.gain).zip(&n.bias) {
            *v = (*v - mean) * inv * g + b;
        }
    }
}

/// GELU with the exact erf (as BERT's "gelu").
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// Abramowitz & Stegun 7.1.26: |error| < 1.5e-7.
fn erf(x: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let poly = ((((1.061_405_4 * t - 1.453_152_1) * t + 1.421_413_7) * t - 0.284_496_74) * t + 0.254_829_6) * t;
    (1.0 - poly * (-x * x).exp()).copysign(x)
}

/// `x` (m × in) · weightᵀ + bias.
fn linear(x: &[f32], m: usize, l: &Linear) -> Vec<f32> {
    let (n, k) = (l.bias.len(), l.weight.len() / l.bias.len().max(1));
    let mut out: Vec<f32> = (0..m).flat_map(|_| l.bias.iter().copied()).collect();
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512F (checked just above); the
        // function's loads stay inside the slices (it asserts their sizes).
        #[allow(unsafe_code)]
        unsafe {
            products_avx512(x, m, k, &l.weight, n, &mut out)
        };
        return out;
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has AVX2 and FMA (checked just above); the
        // function's loads stay inside the slices (it asserts their sizes).
        #[allow(unsafe_code)]
        unsafe {
            products_avx2(x, m, k, &l.weight, n, &mut out)
        };
        return out;
    }
    products(x, m, k, &l.weight, n, &mut out);
    out
}

/// [`products`] written with explicit fused multiply-adds: the compiler
/// neither fuses Rust's `a * b + c` (it rounds twice) nor keeps the
/// generic version's accumulators in registers at 16 lanes. Blocks of 3
/// tokens × 4 outputs. The loads read raw pointers: after the size check
/// every row `r < m` of x and `j < n` of w is `k` floats long, and only
/// its first `k / lanes` whole vectors are loaded (the rest is added in
/// scalar).
#[cfg(target_arch = "x86_64")]
macro_rules! simd_products {
    ($x:ident, $m:ident, $k:ident, $w:ident, $n:ident, $out:ident, $lanes:literal, $vec:ty, $zero:ident, $load:ident, $fma:ident, $sum:ident) => {{
        assert!($x.len() >= $m * $k && $w.len() >= $n * $k && $out.len() >= $m * $n);
        let whole = $k / $lanes * $lanes;
        let mut j = 0;
        while j + 4 <= $n {
            let wp: [*const f32; 4] = std::array::from_fn(|q| $w.as_ptr().add((j + q) * $k));
            let mut i = 0;
            while i < $m {
                let rows = ($m - i).min(3);
                // A last block of one or two tokens repeats its last row
                // (its sums are not written).
                let xp: [*const f32; 3] = std::array::from_fn(|r| $x.as_ptr().add((i + r.min(rows - 1)) * $k));
                let mut acc: [[$vec; 4]; 3] = [[$zero(); 4]; 3];
                let mut c = 0;
                while c < whole {
                    let wv: [$vec; 4] = std::array::from_fn(|q| $load(wp[q].add(c)));
                    for r in 0..3 {
                        let xv = $load(xp[r].add(c));
                        for q in 0..4 {
                            acc[r][q] = $fma(xv, wv[q], acc[r][q]);
                        }
                    }
                    c += $lanes;
                }
                for r in 0..rows {
                    for q in 0..4 {
                        let tail: f32 = (whole..$k).map(|c| $x[(i + r) * $k + c] * $w[(j + q) * $k + c]).sum();
                        $out[(i + r) * $n + j + q] += $sum(acc[r][q]) + tail;
                    }
                }
                i += 3;
            }
            j += 4;
        }
        for j in j..$n {
            for i in 0..$m {
                $out[i * $n + j] +=
                    $x[i * $k..(i + 1) * $k].iter().zip(&$w[j * $k..(j + 1) * $k]).map(|(a, b)| a * b).sum::<f32>();
            }
        }
    }};
}

/// [`products`] with AVX2 + FMA (chosen at run time).
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
#[target_feature(enable = "avx2,fma")]
unsafe fn products_avx2(x: &[f32], m: usize, k: usize, w: &[f32], n: usize, out: &mut [f32]) {
    use std::arch::x86_64::*;
    simd_products!(x, m, k, w, n, out, 8, __m256, _mm256_setzero_ps, _mm256_loadu_ps, _mm256_fmadd_ps, sum_avx2)
}

/// [`products`] with AVX-512 (chosen at run time): twice the lanes per
/// instruction, and the query's embedding is these products almost
/// entirely (about twice as fast as the compiler's
/// vectorisation of [`products`] for AVX2 on this machine).
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn products_avx512(x: &[f32], m: usize, k: usize, w: &[f32], n: usize, out: &mut [f32]) {
    use std::arch::x86_64::*;
    simd_products!(x, m, k, w, n, out, 16, __m512, _mm512_setzero_ps, _mm512_loadu_ps, _mm512_fmadd_ps, _mm512_reduce_add_ps)
}

/// The sum of one AVX register's lanes.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn sum_avx2(v: std::arch::x86_64::__m256) -> f32 {
    let lanes: [f32; 8] = std::mem::transmute(v);
    lanes.iter().sum()
}

/// Adds x (m × k) · wᵀ to `out` (m × n); `w` is (n, k) row-major. Blocks of
/// 3 tokens × 4 outputs keep 12 accumulators of 8 lanes in registers and
/// read each weight row once per 3 tokens. The portable version, for CPUs
/// without AVX2.
fn products(x: &[f32], m: usize, k: usize, w: &[f32], n: usize, out: &mut [f32]) {
    let mut j = 0;
    while j + 4 <= n {
        let mut i = 0;
        while i + 3 <= m {
            block::<3>(x, i, k, w, j, n, out);
            i += 3;
        }
        while i < m {
            block::<1>(x, i, k, w, j, n, out);
            i += 1;
        }
        j += 4;
    }
    for j in j..n {
        for i in 0..m {
            out[i * n + j] += x[i * k..(i + 1) * k].iter().zip(&w[j * k..(j + 1) * k]).map(|(a, b)| a * b).sum::<f32>();
        }
    }
}

const LANES: usize = 8;

#[inline(always)]
fn block<const R: usize>(x: &[f32], i0: usize, k: usize, w: &[f32], j: usize, n: usize, out: &mut [f32]) {
    let mut acc = [[[0f32; LANES]; 4]; R];
    let ws: [&[f32]; 4] = std::array::from_fn(|q| &w[(j + q) * k..(j + q + 1) * k]);
    let xs: [&[f32]; R] = std::array::from_fn(|r| &x[(i0 + r) * k..(i0 + r + 1) * k]);
    let whole = k / LANES * LANES;
    for c in (0..whole).step_by(LANES) {
        let wv: [[f32; LANES]; 4] = std::array::from_fn(|q| std::array::from_fn(|l| ws[q][c + l]));
        for r in 0..R {
            let xv: [f32; LANES] = std::array::from_fn(|l| xs[r][c + l]);
            for q in 0..4 {
                for l in 0..LANES {
                    acc[r][q][l] += xv[l] * wv[q][l];
                }
            }
        }
    }
    for r in 0..R {
        for q in 0..4 {
            let tail: f32 = xs[r][whole..].iter().zip(&ws[q][whole..]).map(|(a, b)| a * b).sum();
            out[(i0 + r) * n + j + q] += acc[r][q].iter().sum::<f32>() + tail;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kernel the CPU can run gives the plain loop's products: the
    /// encoder's own test only reaches the widest one this CPU has.
    #[test]
    fn every_products_kernel_matches_the_plain_loop() {
        let mut seed = 1u32;
        let mut next = move || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        };
        // Odd sizes: token counts that are not multiples of 3, outputs not
        // of 4, inputs not of 16, so every tail path runs.
        for (m, k, n) in [(1, 384, 384), (7, 384, 1536), (14, 1536, 384), (5, 37, 11), (3, 16, 4)] {
            let x: Vec<f32> = (0..m * k).map(|_| next()).collect();
            let w: Vec<f32> = (0..n * k).map(|_| next()).collect();
            let plain: Vec<f32> = (0..m * n)
                .map(|o| x[(o / n) * k..(o / n + 1) * k].iter().zip(&w[(o % n) * k..(o % n + 1) * k]).map(|(a, b)| a * b).sum())
                .collect();
            let close = |got: &[f32], label: &str| {
                for (g, p) in got.iter().zip(&plain) {
                    assert!((g - p).abs() <= 1e-4 * (1.0 + p.abs()), "{label} {m}×{k}×{n}: {g} vs {p}");
                }
            };
            let mut out = vec![0f32; m * n];
            products(&x, m, k, &w, n, &mut out);
            close(&out, "8 lanes");
            #[cfg(target_arch = "x86_64")]
            #[allow(unsafe_code)]
            {
                if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                    let mut out = vec![0f32; m * n];
                    // SAFETY: AVX2 and FMA checked just above.
                    unsafe { products_avx2(&x, m, k, &w, n, &mut out) };
                    close(&out, "AVX2");
                }
                if std::arch::is_x86_feature_detected!("avx512f") {
                    let mut out = vec![0f32; m * n];
                    // SAFETY: AVX-512F checked just above.
                    unsafe { products_avx512(&x, m, k, &w, n, &mut out) };
                    close(&out, "AVX-512");
                }
            }
        }
    }
}
