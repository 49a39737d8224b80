//! Whisper speech to text in process, on candle's Whisper model: 30 s
//! windows, greedy decoding with OpenAI's timestamp rules (so each window
//! yields timed segments and tells where the next window starts), the
//! no-speech check, and language detection for the multilingual model.

pub mod bilingual;
pub mod decoder;
pub mod mel;
pub mod quantize;
pub mod tokens;

use std::path::Path;
use std::time::Instant;

use candle_core::{DType, Device, IndexOp, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::whisper::{self as m, model::Whisper as Model, quantized_model::Whisper as QModel};
use candle_transformers::quantized_var_builder::VarBuilder as QVarBuilder;
use serde::Deserialize;

use crate::error::VoiceError;
use crate::stt::{Draft, Language, LanguageChoice, Segment, SpeechToText, Transcript};
use tokens::{Specials, Vocabulary};

/// One timestamp token is 20 ms; one mel frame is 10 ms.
const MS_PER_TIMESTAMP: u64 = 20;
const MS_PER_FRAME: u64 = 10;
/// A window is decoded only if it holds this much voiced audio (WebRTC VAD);
/// shorter than the live gate's start so a single short word still counts.
const SPEECH_CHECK: crate::vad::GateConfig = crate::vad::GateConfig { start_ms: 100, stop_ms: 300 };
/// Decoding stops when the last this-many text tokens already came
/// earlier in the window: the model is looping. Six tokens are about
/// four words; people seldom say the same four words twice in one breath.
const REPEAT_NGRAM: usize = 6;
/// The first timestamp may be at most 1 s into the window (OpenAI's default).
const MAX_INITIAL_TIMESTAMP: u32 = 50;

/// The parts of the converted config.json that candle's `Config` does not hold.
#[derive(Debug, Deserialize)]
struct Extras {
    #[serde(default)]
    suppress_tokens_begin: Vec<u32>,
    #[serde(default)]
    lang_ids: Vec<u32>,
}

/// Where the last `transcribe` spent its time, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StageTimes {
    pub mel_ms: f64,
    pub encoder_ms: f64,
    pub decoder_ms: f64,
    /// Decoder passes (prompt and sampled tokens) over all windows.
    pub tokens: usize,
    /// Windows decoded again at a higher temperature.
    pub fallbacks: usize,
}

pub struct Whisper {
    model: Backbone,
    precision: Precision,
    /// OpenAI's decoding safeguards (retry hotter on doubtful text, stop
    /// on a repeat); off only to measure what they prevent.
    safeguards: bool,
    /// Mel frames of padding encoded after a short window's audio (see
    /// [`encoder_context`]).
    context_margin: usize,
    /// The decoder with a self-attention cache, on the model's weights.
    decoder: decoder::CachedDecoder,
    mel: mel::MelFrontEnd,
    vocab: Vocabulary,
    sp: Specials,
    filters: Vec<f32>,
    last_times: StageTimes,
    suppress_begin: Vec<u32>,
    lang_ids: Vec<u32>,
    device: Device,
}

/// What decoding one window produced.
struct WindowResult {
    /// Sampled tokens after the prompt, without the end of text.
    tokens: Vec<u32>,
    avg_logprob: f32,
    no_speech_prob: f32,
    /// The text's length over its zlib-compressed length.
    compression_ratio: f32,
    /// Decoding was stopped where the text began repeating itself.
    repeated: bool,
    temperature: f32,
}

impl WindowResult {
    /// Probably silence: the no-speech token likely and the text unsure.
    fn is_silence(&self) -> bool {
        self.no_speech_prob > m::NO_SPEECH_THRESHOLD as f32 && self.avg_logprob < m::LOGPROB_THRESHOLD as f32
    }

    /// OpenAI's checks on a decoded window: text that compresses too well
    /// repeats itself; a low average log-probability is a guess.
    fn needs_fallback(&self) -> bool {
        !self.is_silence()
            && (self.compression_ratio > m::COMPRESSION_RATIO_THRESHOLD as f32
                || self.avg_logprob < m::LOGPROB_THRESHOLD as f32)
    }
}

/// The file a quantized model is kept in, beside `model.safetensors`
/// (written at setup by the `whisper_quantize` example).
pub const QUANTIZED_FILE: &str = "model-q8_0.gguf";

/// Which weights to load from a model directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// `model.safetensors`, f32.
    F32,
    /// `model-q8_0.gguf`: the decoder's matrices in q8_0 (the rest f32);
    /// the encoder on the same weights dequantized (see `load_with`).
    Q8,
    /// The same file with the encoder in q8_0 as well: what `Q8` was
    /// measured against (stt_bench); not loaded by the product.
    Q8Encoder,
}

/// candle's Whisper on f32 or on quantized weights: the encoder, and the
/// decoder the raw baseline runs.
enum Backbone {
    F32(Model),
    Quantized(QModel),
}

impl Backbone {
    fn config(&self) -> &m::Config {
        match self {
            Backbone::F32(m) => &m.config,
            Backbone::Quantized(m) => &m.config,
        }
    }

    fn encode(&mut self, mel: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Backbone::F32(m) => m.encoder.forward(mel, true),
            Backbone::Quantized(m) => m.encoder.forward(mel, true),
        }
    }

    fn decode(&mut self, tokens: &Tensor, features: &Tensor, first: bool) -> candle_core::Result<Tensor> {
        match self {
            Backbone::F32(m) => m.decoder.forward(tokens, features, first),
            Backbone::Quantized(m) => m.decoder.forward(tokens, features, first),
        }
    }

    fn final_linear(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Backbone::F32(m) => m.decoder.final_linear(x),
            Backbone::Quantized(m) => m.decoder.final_linear(x),
        }
    }
}

/// Every tensor of a GGUF file, dequantized to f32, by name.
fn dequantized_gguf(path: &Path, device: &Device) -> candle_core::Result<std::collections::HashMap<String, Tensor>> {
    let mut file = std::fs::File::open(path)?;
    let content = candle_core::quantized::gguf_file::Content::read(&mut file)?;
    let mut out = std::collections::HashMap::with_capacity(content.tensor_infos.len());
    let names: Vec<String> = content.tensor_infos.keys().cloned().collect();
    for name in names {
        let q = content.tensor(&mut file, &name, device)?;
        out.insert(name, q.dequantize(device)?);
    }
    Ok(out)
}

impl Whisper {
    /// Loads a converted model directory (`config.json`, `vocabulary.txt`
    /// and the weights), checking that its parts agree: the quantized
    /// weights when they are there (as fast, as accurate: see
    /// `stt_bench`), else `model.safetensors`.
    pub fn load(dir: &Path) -> Result<Self, VoiceError> {
        let precision = if dir.join(QUANTIZED_FILE).is_file() { Precision::Q8 } else { Precision::F32 };
        Self::load_with(dir, precision)
    }

    /// Loads the model directory's weights of the given precision.
    pub fn load_with(dir: &Path, precision: Precision) -> Result<Self, VoiceError> {
        let corrupt = |reason: String| VoiceError::ModelCorrupt { dir: dir.to_owned(), reason };
        let cfg_text =
            std::fs::read_to_string(dir.join("config.json")).map_err(|e| corrupt(format!("config.json: {e}")))?;
        let config: m::Config = serde_json::from_str(&cfg_text).map_err(|e| corrupt(format!("config.json: {e}")))?;
        let extras: Extras = serde_json::from_str(&cfg_text).map_err(|e| corrupt(format!("config.json: {e}")))?;
        let vocab = Vocabulary::load(&dir.join("vocabulary.txt")).map_err(|e| corrupt(e.to_string()))?;
        if vocab.len() != config.vocab_size {
            return Err(corrupt(format!("vocabulary.txt has {} tokens, the model {}", vocab.len(), config.vocab_size)));
        }
        let sp = vocab.specials().map_err(|e| corrupt(e.to_string()))?;
        let device = Device::Cpu;
        let filters = mel::filters(config.num_mel_bins);
        let mel = mel::MelFrontEnd::new(config.num_mel_bins, filters.clone());
        let (model, decoder) = match precision {
            Precision::F32 => {
                let file = "model.safetensors";
                let tensors = candle_core::safetensors::load(dir.join(file), &device)
                    .map_err(|e| corrupt(format!("{file}: {e}")))?;
                let vb = VarBuilder::from_tensors(tensors, DType::F32, &device);
                let decoder = decoder::CachedDecoder::load(decoder::Weights::F32(vb.pp("model.decoder")), &config)
                    .map_err(|e| corrupt(format!("{file}: {e}")))?;
                let model = Model::load(&vb, config).map_err(|e| corrupt(format!("{file}: {e}")))?;
                (Backbone::F32(model), decoder)
            }
            Precision::Q8 | Precision::Q8Encoder => {
                let file = QUANTIZED_FILE;
                let vb =
                    QVarBuilder::from_gguf(dir.join(file), &device).map_err(|e| corrupt(format!("{file}: {e}")))?;
                let decoder =
                    decoder::CachedDecoder::load(decoder::Weights::Quantized(vb.pp("model.decoder")), &config)
                        .map_err(|e| corrupt(format!("{file}: {e}")))?;
                // The encoder runs once per window over hundreds of frames:
                // a matrix product that f32 GEMM does faster than q8_0's
                // row-by-row dot products (stt_bench's split showed the q8_0
                // encoder the slower). The decoder runs one token at a time,
                // where reading a quarter of the bytes is what counts; it
                // keeps q8_0. Same file, so the same weights either way.
                let backbone = if precision == Precision::Q8 {
                    let tensors =
                        dequantized_gguf(&dir.join(file), &device).map_err(|e| corrupt(format!("{file}: {e}")))?;
                    let fvb = VarBuilder::from_tensors(tensors, DType::F32, &device);
                    Backbone::F32(Model::load(&fvb, config).map_err(|e| corrupt(format!("{file}: {e}")))?)
                } else {
                    Backbone::Quantized(QModel::load(&vb, config).map_err(|e| corrupt(format!("{file}: {e}")))?)
                };
                (backbone, decoder)
            }
        };
        Ok(Self {
            model,
            decoder,
            mel,
            vocab,
            sp,
            filters,
            last_times: StageTimes::default(),
            suppress_begin: extras.suppress_tokens_begin,
            lang_ids: extras.lang_ids,
            device,
            precision,
            safeguards: true,
            context_margin: CONTEXT_MARGIN,
        })
    }

    /// The weights loaded.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// Turns the decoding safeguards off (plain greedy decoding, as
    /// before them: the benchmarks' baseline) or on (the default).
    pub fn set_safeguards(&mut self, on: bool) {
        self.safeguards = on;
    }

    /// Sets the padding encoded after a short window's audio, in mel
    /// frames (10 ms each): the benchmarks compare margins with this.
    pub fn set_context_margin(&mut self, frames: usize) {
        self.context_margin = frames;
    }

    /// The padding encoded after a short window's audio, in mel frames.
    pub fn context_margin(&self) -> usize {
        self.context_margin
    }

    /// An English-only model (Whisper's `.en` models have the 51 864-token vocabulary).
    pub fn english_only(&self) -> bool {
        self.model.config().vocab_size == 51_864
    }

    /// Where the last `transcribe` spent its time.
    pub fn last_times(&self) -> StageTimes {
        self.last_times
    }

    /// The spectrogram of the audio and of a full window of silence after
    /// it (so every window the encoder is given lies inside it).
    fn mel_tensor(&self, pcm: &[f32]) -> Result<(Tensor, usize), VoiceError> {
        let (mel, frames) = self.mel.log_mel(pcm, m::N_FRAMES);
        let n_mels = self.model.config().num_mel_bins;
        Ok((Tensor::from_vec(mel, (1, n_mels, frames), &self.device)?, frames))
    }

    /// Logits for the next token after `tokens` through candle's decoder
    /// (the whole sequence again each token), as a plain vector: the raw
    /// baseline's path.
    fn next_logits(
        &mut self,
        tokens: &[u32],
        features: &Tensor,
        first: bool,
    ) -> Result<(Vec<f32>, Tensor), VoiceError> {
        let t = Tensor::new(tokens, &self.device)?.unsqueeze(0)?;
        let ys = self.model.decode(&t, features, first)?;
        let (_, seq_len, _) = ys.dims3()?;
        let last = self.model.final_linear(&ys.i((..1, seq_len - 1..))?)?.i(0)?.i(0)?;
        Ok((last.to_vec1::<f32>()?, ys))
    }

    /// The language `pcm_16k` is spoken in, of English and Portuguese, and
    /// how sure the model is of it (its probability against the other
    /// one): the encoder on the first window and one decoder step, without
    /// transcribing it. An English-only model is sure of English.
    pub fn language_of(&mut self, pcm_16k: &[f32]) -> Result<(Language, f32), VoiceError> {
        if self.english_only() {
            return Ok((Language::En, 1.0));
        }
        let window_frames = (pcm_16k.len() / m::HOP_LENGTH).clamp(1, m::N_FRAMES);
        let (mel, _) = self.mel_tensor(pcm_16k)?;
        let features = self.model.encode(&mel.narrow(2, 0, encoder_context(window_frames, self.context_margin))?)?;
        let logits = self.language_logits(&features)?;
        let logit = |l: Language| self.language_token(l).and_then(|id| logits.get(id as usize).copied());
        let (Some(en), Some(pt)) = (logit(Language::En), logit(Language::Pt)) else {
            return Err(VoiceError::Inference("the model lists no English or Portuguese token".into()));
        };
        let p_pt = 1.0 / (1.0 + (en - pt).exp());
        Ok(if p_pt > 0.5 { (Language::Pt, p_pt) } else { (Language::En, 1.0 - p_pt) })
    }

    /// The logits after `<|startoftranscript|>` over `features`: where
    /// Whisper says which language it hears.
    fn language_logits(&mut self, features: &Tensor) -> Result<Vec<f32>, VoiceError> {
        self.decoder.start(features)?;
        let hidden = self.decoder.feed(&[self.sp.sot])?;
        Ok(self.decoder.last_logits(&hidden)?)
    }

    /// The vocabulary's `<|en|>` / `<|pt|>` token.
    fn language_token(&self, language: Language) -> Option<u32> {
        self.vocab.id(&format!("<|{}|>", language.code()))
    }

    /// The likeliest of the languages the product speaks (English and
    /// Portuguese; every language the model knows if it lists neither).
    /// Choosing among all of them, a short question in a synthetic or
    /// accented voice was read as Thai or Welsh now and then, and then
    /// transcribed in that language's script.
    fn detect_language(&mut self, features: &Tensor) -> Result<u32, VoiceError> {
        let logits = self.language_logits(features)?;
        let ours: Vec<u32> = [Language::En, Language::Pt]
            .into_iter()
            .filter_map(|l| self.language_token(l))
            .filter(|id| self.lang_ids.contains(id))
            .collect();
        let candidates = if ours.is_empty() { &self.lang_ids } else { &ours };
        candidates
            .iter()
            .copied()
            .filter(|&id| (id as usize) < logits.len())
            .max_by(|&a, &b| logits[a as usize].total_cmp(&logits[b as usize]))
            .ok_or_else(|| VoiceError::Inference("the model lists no language tokens".into()))
    }

    /// The next token from a position's logits: the model's suppressed
    /// tokens (and, first, those suppressed at the beginning) and the
    /// timestamp rules applied, then the likeliest token (greedy) or one
    /// drawn at `temperature`; with its log-probability (of the unscaled
    /// logits, as OpenAI's decoder counts it).
    fn choose(
        &self,
        mut logits: Vec<f32>,
        sampled: &[u32],
        suppress: &[u32],
        temperature: f32,
        rng: &mut XorShift,
    ) -> (u32, f32) {
        for &t in suppress {
            if let Some(l) = logits.get_mut(t as usize) {
                *l = f32::NEG_INFINITY;
            }
        }
        if sampled.is_empty() {
            for &t in &self.suppress_begin {
                if let Some(l) = logits.get_mut(t as usize) {
                    *l = f32::NEG_INFINITY;
                }
            }
        }
        apply_timestamp_rules(&mut logits, sampled, &self.sp);
        let logprobs = log_softmax(&logits);
        let next = if temperature > 0.0 { sample(&logprobs, temperature, rng) } else { argmax(&logprobs) };
        (next, logprobs[next as usize])
    }

    /// Decodes one window greedily (`temperature` 0) or by sampling.
    /// Greedy decoding may start from `draft`, the tokens an earlier,
    /// shorter take of the same audio produced: they are fed in one pass
    /// and kept only as far as this window's own choice at each position
    /// agrees, so the result is the same as decoding from scratch, minus
    /// the passes the draft saved. Decoding stops where the text starts
    /// repeating itself (the repeat cut off).
    fn decode_window(
        &mut self,
        features: &Tensor,
        prompt: &[u32],
        temperature: f32,
        draft: &[u32],
        rng: &mut XorShift,
    ) -> Result<WindowResult, VoiceError> {
        let mut tokens = prompt.to_vec();
        let sample_begin = tokens.len();
        let max_tokens = self.model.config().max_target_positions / 2;
        let max_len = self.model.config().max_target_positions;
        let suppress = self.model.config().suppress_tokens.clone();
        // Each sampled token's log-probability; the end of text's comes last.
        let mut logprobs: Vec<f32> = Vec::new();
        let repeat_ngram = if self.safeguards { REPEAT_NGRAM } else { 0 };
        let mut ended = false;
        let mut repeated = false;
        self.decoder.start(features)?;
        // The prompt and the draft in one pass, then the draft checked position by position.
        let draft: &[u32] = if temperature > 0.0 { &[] } else { draft };
        let draft = &draft[..draft.len().min(max_tokens).min(max_len.saturating_sub(sample_begin + 1))];
        let first: Vec<u32> = tokens.iter().chain(draft).copied().collect();
        let hidden = self.decoder.feed(&first)?;
        self.last_times.tokens += 1;
        // The no-speech probability is read at the start-of-transcript position.
        let no_speech_prob = softmax_at(&self.decoder.logits_at(&hidden, 0)?, self.sp.no_speech as usize);
        let mut pending: Option<u32> = None;
        if temperature > 0.0 {
            let logits = self.decoder.logits_at(&hidden, sample_begin - 1)?;
            let (next, lp) = self.choose(logits, &[], &suppress, temperature, rng);
            logprobs.push(lp);
            if next == self.sp.eot {
                ended = true;
            } else {
                pending = Some(next);
            }
        } else {
            // u32::MAX: past the draft, where the window's own choice is simply taken.
            for (j, &proposed) in draft.iter().chain(std::iter::once(&u32::MAX)).enumerate() {
                let logits = self.decoder.logits_at(&hidden, sample_begin - 1 + j)?;
                let (next, lp) = self.choose(logits, &tokens[sample_begin..], &suppress, 0.0, rng);
                logprobs.push(lp);
                if next == self.sp.eot {
                    ended = true;
                    break;
                }
                if next != proposed {
                    pending = Some(next);
                    break;
                }
                tokens.push(next);
                if let Some(cut) = repeat_start(&tokens[sample_begin..], self.sp.timestamp_begin, repeat_ngram) {
                    tokens.truncate(sample_begin + cut);
                    logprobs.truncate(cut);
                    repeated = true;
                    break;
                }
            }
        }
        if let Some(next) = pending.filter(|_| !ended && !repeated) {
            // What is in the cache past the agreed tokens is the draft's, not ours.
            self.decoder.truncate(tokens.len())?;
            tokens.push(next);
            if let Some(cut) = repeat_start(&tokens[sample_begin..], self.sp.timestamp_begin, repeat_ngram) {
                tokens.truncate(sample_begin + cut);
                logprobs.truncate(cut);
                repeated = true;
            }
            while !repeated && tokens.len() - sample_begin < max_tokens && tokens.len() + 1 < max_len {
                let hidden = self.decoder.feed(&tokens[self.decoder.len()..])?;
                self.last_times.tokens += 1;
                let logits = self.decoder.last_logits(&hidden)?;
                let (next, lp) = self.choose(logits, &tokens[sample_begin..], &suppress, temperature, rng);
                logprobs.push(lp);
                if next == self.sp.eot {
                    break;
                }
                tokens.push(next);
                if let Some(cut) = repeat_start(&tokens[sample_begin..], self.sp.timestamp_begin, repeat_ngram) {
                    tokens.truncate(sample_begin + cut);
                    logprobs.truncate(cut);
                    repeated = true;
                }
            }
        }
        let sampled = tokens.split_off(sample_begin);
        let avg_logprob = logprobs.iter().sum::<f32>() / (sampled.len() + 1) as f32;
        let text = self.vocab.decode(&sampled, self.sp.eot);
        Ok(WindowResult {
            compression_ratio: compression_ratio(&text),
            tokens: sampled,
            avg_logprob,
            no_speech_prob,
            repeated,
            temperature,
        })
    }

    /// Decodes a window as OpenAI's `transcribe` does: greedy first; when
    /// the text compresses too well (it repeats itself) or the model was
    /// unsure of it (average log-probability under -1), again at a higher
    /// temperature. Unsure text over what is probably silence is not
    /// retried (the caller drops it). When every try fails, the try with
    /// text that does not repeat and the best average log-probability is
    /// kept (OpenAI keeps the last, the hottest, which on a small model is
    /// the least likely to be right); the greedy one if all repeat.
    fn decode_with_fallback(
        &mut self,
        features: &Tensor,
        prompt: &[u32],
        draft: &[u32],
        seed: u64,
    ) -> Result<WindowResult, VoiceError> {
        let mut rng = XorShift::new(seed);
        let mut kept: Option<WindowResult> = None;
        for (i, &t) in m::TEMPERATURES.iter().enumerate() {
            let window = self.decode_window(features, prompt, t as f32, draft, &mut rng)?;
            if i > 0 {
                self.last_times.fallbacks += 1;
            }
            if !window.needs_fallback() {
                return Ok(window);
            }
            let better = match &kept {
                None => true,
                Some(k) => {
                    let ok = |w: &WindowResult| w.compression_ratio <= m::COMPRESSION_RATIO_THRESHOLD as f32;
                    ok(&window) && (!ok(k) || window.avg_logprob > k.avg_logprob)
                }
            };
            if better {
                kept = Some(window);
            }
        }
        kept.ok_or_else(|| VoiceError::Inference("no decoding temperature".into()))
    }

    /// Splits a window's tokens into timed segments at each pair of
    /// timestamps; returns them with how many mel frames to move on.
    fn segments_of(&self, window: &WindowResult, offset_ms: u64, window_frames: usize) -> (Vec<Segment>, usize) {
        let ts_begin = self.sp.timestamp_begin;
        let toks = &window.tokens;
        let is_ts = |t: u32| t >= ts_begin;
        let single_ending = toks.len() >= 2 && !is_ts(toks[toks.len() - 2]) && is_ts(toks[toks.len() - 1]);
        let mut cuts: Vec<usize> = (1..toks.len()).filter(|&i| is_ts(toks[i - 1]) && is_ts(toks[i])).collect();
        let mut segments = Vec::new();
        let mut advance = window_frames;
        let text_of = |slice: &[u32]| self.vocab.decode(slice, self.sp.eot).trim().to_owned();
        // A timestamp past the window's audio (the encoder's margin of
        // padding) is the end of the audio.
        let window_ms = window_frames as u64 * MS_PER_FRAME;
        if !cuts.is_empty() {
            // A window cut at a repeat inside a segment has no more to
            // give: that unclosed segment is kept and the window is done.
            // Cut where a segment begins, the window resumes at that
            // segment's timestamp like any other: what follows is decoded
            // afresh (speech said twice is heard twice), and a loop over
            // silence finds no speech there.
            let tail_kept =
                window.repeated && cuts.last().is_some_and(|&c| c < toks.len() && !text_of(&toks[c..]).is_empty());
            if single_ending || tail_kept {
                cuts.push(toks.len());
            }
            let ms_of = |t: u32, otherwise: u64| {
                if is_ts(t) {
                    (u64::from(t - ts_begin) * MS_PER_TIMESTAMP).min(window_ms)
                } else {
                    otherwise
                }
            };
            let mut last = 0;
            for &cut in &cuts {
                let slice = &toks[last..cut];
                if slice.len() >= 2 {
                    let start = ms_of(slice[0], 0);
                    let end = ms_of(slice[slice.len() - 1], window_ms).max(start);
                    let text = text_of(slice);
                    if !text.is_empty() {
                        segments.push(Segment { start_ms: offset_ms + start, end_ms: offset_ms + end, text });
                    }
                }
                last = cut;
            }
            if !single_ending && !tail_kept {
                // Resume at the last timestamp: the rest of the window is decoded again.
                let last_ts = toks[last - 1].saturating_sub(ts_begin) as usize;
                let frames = last_ts * (MS_PER_TIMESTAMP / MS_PER_FRAME) as usize;
                if frames > 0 {
                    advance = frames.min(window_frames);
                }
            }
        } else {
            let end = toks
                .iter()
                .rev()
                .find(|&&t| is_ts(t) && t > ts_begin)
                .map(|&t| (u64::from(t - ts_begin) * MS_PER_TIMESTAMP).min(window_ms))
                .unwrap_or(window_ms);
            let text = text_of(toks);
            if !text.is_empty() {
                segments.push(Segment { start_ms: offset_ms, end_ms: offset_ms + end, text });
            }
        }
        (segments, advance)
    }

    /// The model alone, as candle's own example drives it: candle's mel
    /// (over the audio padded to whole 30 s windows), the encoder on 30 s
    /// windows and candle's decoder (the whole sequence again each token),
    /// greedy without timestamps or any rule but the model's suppressed
    /// tokens. The benchmark's baseline; returns the tokens and leaves its
    /// stage times in `last_times`.
    pub fn raw_greedy(&mut self, pcm_16k: &[f32]) -> Result<Vec<u32>, VoiceError> {
        self.last_times = StageTimes::default();
        let started = Instant::now();
        let mel = m::audio::pcm_to_mel(self.model.config(), pcm_16k, &self.filters);
        let n_mels = self.model.config().num_mel_bins;
        let frames = mel.len() / n_mels;
        let mel = Tensor::from_vec(mel, (1, n_mels, frames), &self.device)?;
        self.last_times.mel_ms = ms_since(started);
        let content = pcm_16k.len() / m::HOP_LENGTH;
        let mut out = Vec::new();
        let mut seek = 0;
        while seek < content {
            let len = m::N_FRAMES.min(frames - seek);
            let started = Instant::now();
            let features = self.model.encode(&mel.narrow(2, seek, len)?)?;
            self.last_times.encoder_ms += ms_since(started);
            let started = Instant::now();
            let mut tokens = vec![self.sp.sot, self.sp.no_timestamps];
            let max_tokens = self.model.config().max_target_positions / 2;
            for i in 0..max_tokens {
                let (mut logits, _) = self.next_logits(&tokens, &features, i == 0)?;
                self.last_times.tokens += 1;
                for &t in &self.model.config().suppress_tokens {
                    if let Some(l) = logits.get_mut(t as usize) {
                        *l = f32::NEG_INFINITY;
                    }
                }
                let next = argmax(&logits);
                if next == self.sp.eot {
                    break;
                }
                tokens.push(next);
            }
            self.last_times.decoder_ms += ms_since(started);
            out.extend_from_slice(&tokens[2..]);
            seek += m::N_FRAMES;
        }
        Ok(out)
    }

    /// The largest difference between the cached decoder's logits and
    /// candle's whole-sequence decoder's, at every step of decoding the
    /// start of `pcm` greedily; with the number of steps.
    #[cfg(feature = "test-support")]
    pub fn decoder_difference(&mut self, pcm: &[f32]) -> Result<(f32, usize), VoiceError> {
        let (mel, _) = self.mel_tensor(pcm)?;
        let frames = (pcm.len() / m::HOP_LENGTH).min(m::N_FRAMES);
        let features = self.model.encode(&mel.narrow(2, 0, encoder_context(frames, self.context_margin))?)?;
        let window = self.decode_window(&features, &[self.sp.sot], 0.0, &[], &mut XorShift::new(1))?;
        let mut tokens = vec![self.sp.sot];
        tokens.extend(&window.tokens);
        self.decoder.start(&features)?;
        let mut worst = 0f32;
        for k in 1..=tokens.len() {
            let hidden = self.decoder.feed(&tokens[k - 1..k])?;
            let ours = self.decoder.last_logits(&hidden)?;
            let (theirs, _) = self.next_logits(&tokens[..k], &features, k == 1)?;
            for (a, b) in ours.iter().zip(&theirs) {
                worst = worst.max((a - b).abs());
            }
        }
        Ok((worst, tokens.len()))
    }

    /// The text of tokens (for the raw baseline).
    pub fn text_of(&self, tokens: &[u32]) -> String {
        self.vocab.decode(tokens, self.sp.eot).trim().to_owned()
    }
}

impl Whisper {
    /// Transcribes `pcm_16k`. With `draft`, greedy decoding of the first
    /// window starts from the draft's tokens (see `decode_window`) and the
    /// draft is replaced by this take's. `safeguards` off decodes greedily
    /// only (no retry at a higher temperature): for a draft of an utterance
    /// still under way, whose end is cut mid-word anyway.
    fn run(
        &mut self,
        pcm_16k: &[f32],
        language: LanguageChoice,
        draft: Option<&mut Draft>,
        safeguards: bool,
    ) -> Result<Transcript, VoiceError> {
        let english_only = self.english_only();
        let mut lang_token = match (language, english_only) {
            (_, true) => None,
            (LanguageChoice::Fixed(l), false) => Some(
                self.language_token(l).ok_or_else(|| VoiceError::Inference(format!("no <|{}|> token", l.code())))?,
            ),
            (LanguageChoice::Auto, false) => None,
        };
        if english_only && language == LanguageChoice::Fixed(Language::Pt) {
            return Err(VoiceError::LanguageUnavailable {
                language: "Portuguese".into(),
                model: crate::models::WHISPER_BASE.into(),
            });
        }
        let content_frames = pcm_16k.len() / m::HOP_LENGTH;
        let mut segments = Vec::new();
        self.last_times = StageTimes::default();
        // A draft holds one window's tokens: it helps audio of one window only.
        let single_window = content_frames <= m::N_FRAMES;
        let mut new_draft = Draft::default();
        if content_frames > 0 {
            let started = Instant::now();
            let (mel, _) = self.mel_tensor(pcm_16k)?;
            self.last_times.mel_ms = ms_since(started);
            let mut seek = 0usize;
            while seek < content_frames {
                let window_frames = m::N_FRAMES.min(content_frames - seek);
                // Whisper writes words into silence and noise ("you", "Thank
                // you."); a window where the voice gate finds no speech is
                // not decoded at all.
                let window_pcm =
                    &pcm_16k[seek * m::HOP_LENGTH..((seek + window_frames) * m::HOP_LENGTH).min(pcm_16k.len())];
                if crate::vad::utterances(window_pcm, SPEECH_CHECK).is_empty() {
                    seek += window_frames;
                    continue;
                }
                let context = encoder_context(window_frames, self.context_margin);
                let started = Instant::now();
                let features = self.model.encode(&mel.narrow(2, seek, context)?)?;
                self.last_times.encoder_ms += ms_since(started);
                let started = Instant::now();
                if !english_only && lang_token.is_none() {
                    lang_token = Some(self.detect_language(&features)?);
                }
                let mut prompt = vec![self.sp.sot];
                if let Some(l) = lang_token {
                    prompt.extend([l, self.sp.transcribe]);
                }
                let given: &[u32] = match (&draft, single_window) {
                    (Some(d), true) if d.prompt == prompt => &d.tokens,
                    _ => &[],
                };
                let given = given.to_vec();
                let window = if safeguards && self.safeguards {
                    self.decode_with_fallback(&features, &prompt, &given, seek as u64)?
                } else {
                    self.decode_window(&features, &prompt, 0.0, &given, &mut XorShift::new(seek as u64))?
                };
                self.last_times.decoder_ms += ms_since(started);
                if single_window && window.temperature == 0.0 {
                    new_draft = Draft { prompt: prompt.clone(), tokens: window.tokens.clone() };
                }
                if window.is_silence() {
                    seek += window_frames;
                    continue;
                }
                let (mut found, advance) = self.segments_of(&window, seek as u64 * MS_PER_FRAME, window_frames);
                segments.append(&mut found);
                seek += advance.max(1);
            }
        }
        if let Some(d) = draft {
            *d = new_draft;
        }
        let language = match lang_token {
            None => "en".to_owned(),
            Some(id) => self.vocab.token(id).unwrap_or("").trim_start_matches("<|").trim_end_matches("|>").to_owned(),
        };
        let text = segments.iter().map(|s| s.text.as_str()).collect::<Vec<_>>().join(" ");
        Ok(Transcript { text, language, segments })
    }
}

impl SpeechToText for Whisper {
    fn transcribe(&mut self, pcm_16k: &[f32], language: LanguageChoice) -> Result<Transcript, VoiceError> {
        self.run(pcm_16k, language, None, true)
    }

    fn transcribe_drafted(
        &mut self,
        pcm_16k: &[f32],
        language: LanguageChoice,
        draft: &mut Draft,
    ) -> Result<Transcript, VoiceError> {
        self.run(pcm_16k, language, Some(draft), true)
    }

    fn transcribe_partial(
        &mut self,
        pcm_16k: &[f32],
        language: LanguageChoice,
        draft: &mut Draft,
    ) -> Result<Transcript, VoiceError> {
        self.run(pcm_16k, language, Some(draft), false)
    }
}

/// The thread count candle's CPU kernels use (RAYON_NUM_THREADS, else
/// the cores available).
pub fn compute_threads() -> usize {
    candle_core::utils::get_num_threads()
}

/// Mel frames of padding the encoder still sees after a short window's audio.
const CONTEXT_MARGIN: usize = 200;

/// How many mel frames the encoder runs on for a window holding
/// `window_frames` of audio: a short utterance is encoded with its length
/// and a two-second margin instead of a full 30 s window of padding (the
/// encoder's cost grows with its input; candle takes the positions for the
/// length given). Long audio keeps the full window.
fn encoder_context(window_frames: usize, margin: usize) -> usize {
    let n = (window_frames + margin).min(m::N_FRAMES);
    // The second convolution has stride 2.
    n + n % 2
}

/// OpenAI's `ApplyTimestampRules`: timestamps come in pairs and never go
/// back; the first token is a timestamp within the first second; when the
/// timestamps together are likelier than any text token, one is forced.
fn apply_timestamp_rules(logits: &mut [f32], sampled: &[u32], sp: &Specials) {
    let ts = sp.timestamp_begin as usize;
    let eot = sp.eot as usize;
    let n = logits.len();
    if let Some(l) = logits.get_mut(sp.no_timestamps as usize) {
        *l = f32::NEG_INFINITY;
    }
    let last_was_ts = sampled.last().is_some_and(|&t| t >= sp.timestamp_begin);
    let penultimate_was_ts = sampled.len() < 2 || sampled[sampled.len() - 2] >= sp.timestamp_begin;
    if last_was_ts {
        if penultimate_was_ts {
            logits[ts.min(n)..].fill(f32::NEG_INFINITY);
        } else {
            logits[..eot.min(n)].fill(f32::NEG_INFINITY);
        }
    }
    if let Some(&last_ts) = sampled.iter().rev().find(|&&t| t >= sp.timestamp_begin) {
        let floor = if last_was_ts && !penultimate_was_ts { last_ts } else { last_ts + 1 };
        logits[ts.min(n)..(floor as usize).min(n)].fill(f32::NEG_INFINITY);
    }
    if sampled.is_empty() {
        logits[..ts.min(n)].fill(f32::NEG_INFINITY);
        let last_allowed = ts + MAX_INITIAL_TIMESTAMP as usize;
        if last_allowed + 1 < n {
            logits[last_allowed + 1..].fill(f32::NEG_INFINITY);
        }
    }
    let logprobs = log_softmax(logits);
    if ts < n {
        let ts_logprob = log_sum_exp(&logprobs[ts..]);
        let max_text = logprobs[..ts].iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        if ts_logprob > max_text {
            logits[..ts].fill(f32::NEG_INFINITY);
        }
    }
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

/// The softmax probability of entry `i`.
fn softmax_at(x: &[f32], i: usize) -> f32 {
    x.get(i).map_or(0.0, |v| (v - log_sum_exp(x)).exp())
}

fn log_sum_exp(x: &[f32]) -> f32 {
    let max = x.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    if max == f32::NEG_INFINITY {
        return max;
    }
    max + x.iter().map(|v| (v - max).exp()).sum::<f32>().ln()
}

fn log_softmax(x: &[f32]) -> Vec<f32> {
    let lse = log_sum_exp(x);
    x.iter().map(|v| v - lse).collect()
}

fn argmax(x: &[f32]) -> u32 {
    let mut best = 0;
    for (i, v) in x.iter().enumerate() {
        if *v > x[best] {
            best = i;
        }
    }
    best as u32
}

/// Where a loop begins: when the last `n` text tokens of `sampled`
/// (timestamps skipped) already occurred earlier, the index in `sampled`
/// of the first of them (everything from there is the repeat).
fn repeat_start(sampled: &[u32], timestamp_begin: u32, n: usize) -> Option<usize> {
    let text: Vec<usize> = (0..sampled.len()).filter(|&i| sampled[i] < timestamp_begin).collect();
    if n == 0 || text.len() <= n {
        return None;
    }
    let tail_at = text.len() - n;
    let tail: Vec<u32> = text[tail_at..].iter().map(|&i| sampled[i]).collect();
    let seen = (0..tail_at).any(|start| text[start..start + n].iter().map(|&i| sampled[i]).eq(tail.iter().copied()));
    seen.then(|| text[tail_at])
}

/// The text's length over its zlib-compressed length (OpenAI's
/// `compression_ratio`): repetitive text compresses well.
fn compression_ratio(text: &str) -> f32 {
    use std::io::Write;
    let bytes = text.as_bytes();
    if bytes.is_empty() {
        return 0.0;
    }
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing to a Vec cannot fail; a failure would only leave the ratio at 0.
    let compressed = z.write_all(bytes).and_then(|()| z.finish()).map(|v| v.len()).unwrap_or(0);
    if compressed == 0 {
        return 0.0;
    }
    bytes.len() as f32 / compressed as f32
}

/// A small deterministic generator for sampling at a temperature: the
/// same audio gives the same transcript every time.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// Uniform in [0, 1).
    fn next_f32(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// A token drawn from `softmax(logprobs / temperature)`.
fn sample(logprobs: &[f32], temperature: f32, rng: &mut XorShift) -> u32 {
    let scaled: Vec<f32> = logprobs.iter().map(|l| l / temperature).collect();
    let lse = log_sum_exp(&scaled);
    let mut u = rng.next_f32();
    let mut last_possible = argmax(logprobs);
    for (i, l) in scaled.iter().enumerate() {
        if *l == f32::NEG_INFINITY {
            continue;
        }
        last_possible = i as u32;
        u -= (l - lse).exp();
        if u < 0.0 {
            return i as u32;
        }
    }
    last_possible
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specials() -> Specials {
        // A toy vocabulary: 0..10 text, 10 eot, 11 sot, 12 transcribe, 13 notimestamps, 14 nospeech, 15.. timestamps.
        Specials { eot: 10, sot: 11, transcribe: 12, no_timestamps: 13, no_speech: 14, timestamp_begin: 15 }
    }

    #[test]
    fn a_repeat_is_found_where_it_begins_timestamps_aside() {
        let ts = 100;
        // "1 2 3 4 5 6 7" then a timestamp pair, then "1 2 3 4 5 6" again.
        let mut seq: Vec<u32> = vec![100, 1, 2, 3, 4, 5, 6, 7, 140, 140, 1, 2, 3, 4, 5];
        assert_eq!(repeat_start(&seq, ts, 6), None, "five tokens of the repeat are not yet six");
        seq.push(6);
        assert_eq!(repeat_start(&seq, ts, 6), Some(10), "cut where the second \"1\" is");
        // One word over and over.
        let same = vec![9u32; 7];
        assert_eq!(repeat_start(&same, ts, 6), Some(1));
        // Text that never repeats six tokens in a row.
        let varied: Vec<u32> = (0..40).collect();
        assert_eq!(repeat_start(&varied, ts, 6), None);
        // A short phrase said twice ("no, no") is not a loop.
        assert_eq!(repeat_start(&[5, 6, 5, 6, 7, 8, 9], ts, 6), None);
        assert_eq!(repeat_start(&[1, 2, 3, 1, 2, 3], ts, 0), None, "n = 0: off");
    }

    #[test]
    fn repeated_text_compresses_far_better_than_a_sentence() {
        let once = "He keeps his old letters in a wooden box under the bed.";
        let nine = std::iter::repeat_n(once, 9).collect::<Vec<_>>().join(" ");
        assert!(compression_ratio(once) < 1.5, "{}", compression_ratio(once));
        assert!(compression_ratio(&nine) > m::COMPRESSION_RATIO_THRESHOLD as f32, "{}", compression_ratio(&nine));
        assert_eq!(compression_ratio(""), 0.0);
    }

    #[test]
    fn sampling_is_repeatable_and_follows_the_temperature() {
        let logprobs = log_softmax(&[2.0, 1.0, 0.0, f32::NEG_INFINITY]);
        let draw = |t: f32, seed: u64| {
            let mut rng = XorShift::new(seed);
            (0..2_000).map(|_| sample(&logprobs, t, &mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(draw(0.5, 3), draw(0.5, 3), "same seed, same draws");
        let share = |d: &[u32], k: u32| d.iter().filter(|&&x| x == k).count() as f32 / d.len() as f32;
        let cool = draw(0.2, 7);
        let hot = draw(1.0, 7);
        assert!(share(&cool, 0) > 0.95, "{}", share(&cool, 0));
        // At 1.0 the model's own probabilities: e^2 / (e^2 + e + 1) = 0.665.
        assert!((share(&hot, 0) - 0.665).abs() < 0.04, "{}", share(&hot, 0));
        assert_eq!(share(&hot, 3), 0.0, "a suppressed token is never drawn");
    }

    #[test]
    fn a_short_window_is_encoded_with_its_length_and_a_margin_a_long_one_whole() {
        assert_eq!(encoder_context(300, CONTEXT_MARGIN), 500);
        assert_eq!(encoder_context(301, CONTEXT_MARGIN), 502, "even: the second convolution has stride 2");
        assert_eq!(encoder_context(2_900, CONTEXT_MARGIN), m::N_FRAMES);
        assert_eq!(encoder_context(m::N_FRAMES, CONTEXT_MARGIN), m::N_FRAMES);
    }

    #[test]
    fn the_first_token_must_be_an_early_timestamp() {
        let mut logits = vec![5.0; 100];
        apply_timestamp_rules(&mut logits, &[], &specials());
        assert!(logits[..15].iter().all(|v| *v == f32::NEG_INFINITY));
        assert!(logits[15..=65].iter().all(|v| v.is_finite()));
        assert!(logits[66..].iter().all(|v| *v == f32::NEG_INFINITY));
    }

    #[test]
    fn after_a_pair_of_timestamps_comes_text_and_after_a_lone_one_a_timestamp_or_the_end() {
        let sp = specials();
        let mut after_pair = vec![0.0; 100];
        after_pair[3] = 10.0;
        apply_timestamp_rules(&mut after_pair, &[15, 3, 20, 20], &sp);
        assert!(after_pair[15..].iter().all(|v| *v == f32::NEG_INFINITY));
        assert!(after_pair[3].is_finite());
        let mut after_text_ts = vec![0.0; 100];
        // The end of text likelier than all timestamps together, so no timestamp is forced.
        after_text_ts[10] = 10.0;
        apply_timestamp_rules(&mut after_text_ts, &[15, 3, 20], &sp);
        assert!(after_text_ts[..10].iter().all(|v| *v == f32::NEG_INFINITY));
        assert!(after_text_ts[10].is_finite(), "the end of text stays possible");
        // Timestamps never go back: below 20 is out, 20 itself may close the pair.
        assert!(after_text_ts[19] == f32::NEG_INFINITY && after_text_ts[20].is_finite());
    }

    #[test]
    fn likely_timestamps_force_a_timestamp() {
        let sp = specials();
        let mut logits = vec![0.0; 100];
        logits[3] = 2.0; // the best text token, but 85 timestamps at 0.0 outweigh it together
        apply_timestamp_rules(&mut logits, &[15, 3], &sp);
        assert!(logits[..15].iter().all(|v| *v == f32::NEG_INFINITY));
    }
}
