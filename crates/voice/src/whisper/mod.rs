//! Whisper speech to text in process, on candle's Whisper model: 30 s
//! windows, greedy decoding with OpenAI's timestamp rules (so each window
//! yields timed segments and tells where the next window starts), the
//! no-speech check, and language detection for the multilingual model.

pub mod decoder;
pub mod mel;
pub mod tokens;

use std::path::Path;
use std::time::Instant;

use candle_core::{DType, Device, IndexOp, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::whisper::{self as m, model::Whisper as Model};
use serde::Deserialize;

use crate::error::VoiceError;
use crate::stt::{Language, LanguageChoice, Segment, SpeechToText, Transcript};
use tokens::{Specials, Vocabulary};

/// One timestamp token is 20 ms; one mel frame is 10 ms.
const MS_PER_TIMESTAMP: u64 = 20;
const MS_PER_FRAME: u64 = 10;
/// A window is decoded only if it holds this much voiced audio (WebRTC VAD);
/// shorter than the live gate's start so a single short word still counts.
const SPEECH_CHECK: crate::vad::GateConfig = crate::vad::GateConfig { start_ms: 100, stop_ms: 300 };
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
}

pub struct Whisper {
    model: Model,
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
}

impl Whisper {
    /// Loads a converted model directory (`model.safetensors`, `config.json`,
    /// `vocabulary.txt`), checking that its parts agree.
    pub fn load(dir: &Path) -> Result<Self, VoiceError> {
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
        let tensors = candle_core::safetensors::load(dir.join("model.safetensors"), &device)
            .map_err(|e| corrupt(format!("model.safetensors: {e}")))?;
        let vb = VarBuilder::from_tensors(tensors, DType::F32, &device);
        let filters = mel::filters(config.num_mel_bins);
        let decoder = decoder::CachedDecoder::load(vb.pp("model.decoder"), &config)
            .map_err(|e| corrupt(format!("model.safetensors: {e}")))?;
        let mel = mel::MelFrontEnd::new(config.num_mel_bins, filters.clone());
        let model = Model::load(&vb, config).map_err(|e| corrupt(format!("model.safetensors: {e}")))?;
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
        })
    }

    /// An English-only model (Whisper's `.en` models have the 51 864-token vocabulary).
    pub fn english_only(&self) -> bool {
        self.model.config.vocab_size == 51_864
    }

    /// Where the last `transcribe` spent its time.
    pub fn last_times(&self) -> StageTimes {
        self.last_times
    }

    /// The spectrogram of the audio and of a full window of silence after
    /// it (so every window the encoder is given lies inside it).
    fn mel_tensor(&self, pcm: &[f32]) -> Result<(Tensor, usize), VoiceError> {
        let (mel, frames) = self.mel.log_mel(pcm, m::N_FRAMES);
        let n_mels = self.model.config.num_mel_bins;
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
        let ys = self.model.decoder.forward(&t, features, first)?;
        let (_, seq_len, _) = ys.dims3()?;
        let last = self.model.decoder.final_linear(&ys.i((..1, seq_len - 1..))?)?.i(0)?.i(0)?;
        Ok((last.to_vec1::<f32>()?, ys))
    }

    fn detect_language(&mut self, features: &Tensor) -> Result<u32, VoiceError> {
        self.decoder.start(features)?;
        let hidden = self.decoder.feed(&[self.sp.sot])?;
        let logits = self.decoder.last_logits(&hidden)?;
        self.lang_ids
            .iter()
            .copied()
            .filter(|&id| (id as usize) < logits.len())
            .max_by(|&a, &b| logits[a as usize].total_cmp(&logits[b as usize]))
            .ok_or_else(|| VoiceError::Inference("the model lists no language tokens".into()))
    }

    fn decode_window(&mut self, features: &Tensor, prompt: &[u32]) -> Result<WindowResult, VoiceError> {
        let mut tokens = prompt.to_vec();
        let sample_begin = tokens.len();
        let max_tokens = self.model.config.max_target_positions / 2;
        let suppress = self.model.config.suppress_tokens.clone();
        let (mut sum_logprob, mut no_speech_prob) = (0f32, 0f32);
        self.decoder.start(features)?;
        for i in 0..max_tokens {
            // The prompt first, then one new token a pass (the rest is cached).
            let hidden = self.decoder.feed(&tokens[self.decoder.len()..])?;
            self.last_times.tokens += 1;
            let mut logits = self.decoder.last_logits(&hidden)?;
            if i == 0 {
                // The no-speech probability is read at the start-of-transcript position.
                let sot_logits = self.decoder.logits_at(&hidden, 0)?;
                no_speech_prob = softmax_at(&sot_logits, self.sp.no_speech as usize);
            }
            for &t in &suppress {
                if let Some(l) = logits.get_mut(t as usize) {
                    *l = f32::NEG_INFINITY;
                }
            }
            if i == 0 {
                for &t in &self.suppress_begin {
                    if let Some(l) = logits.get_mut(t as usize) {
                        *l = f32::NEG_INFINITY;
                    }
                }
            }
            apply_timestamp_rules(&mut logits, &tokens[sample_begin..], &self.sp);
            let logprobs = log_softmax(&logits);
            let next = argmax(&logprobs);
            sum_logprob += logprobs[next as usize];
            if next == self.sp.eot || tokens.len() + 1 >= self.model.config.max_target_positions {
                break;
            }
            tokens.push(next);
        }
        let sampled = tokens.split_off(sample_begin);
        let avg_logprob = sum_logprob / (sampled.len() + 1) as f32;
        Ok(WindowResult { tokens: sampled, avg_logprob, no_speech_prob })
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
            if single_ending {
                cuts.push(toks.len());
            }
            let mut last = 0;
            for &cut in &cuts {
                let slice = &toks[last..cut];
                if slice.len() >= 2 {
                    let start = (u64::from(slice[0].saturating_sub(ts_begin)) * MS_PER_TIMESTAMP).min(window_ms);
                    let end =
                        (u64::from(slice[slice.len() - 1].saturating_sub(ts_begin)) * MS_PER_TIMESTAMP).min(window_ms);
                    let text = text_of(slice);
                    if !text.is_empty() {
                        segments.push(Segment { start_ms: offset_ms + start, end_ms: offset_ms + end, text });
                    }
                }
                last = cut;
            }
            if !single_ending {
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
        let mel = m::audio::pcm_to_mel(&self.model.config, pcm_16k, &self.filters);
        let n_mels = self.model.config.num_mel_bins;
        let frames = mel.len() / n_mels;
        let mel = Tensor::from_vec(mel, (1, n_mels, frames), &self.device)?;
        self.last_times.mel_ms = ms_since(started);
        let content = pcm_16k.len() / m::HOP_LENGTH;
        let mut out = Vec::new();
        let mut seek = 0;
        while seek < content {
            let len = m::N_FRAMES.min(frames - seek);
            let started = Instant::now();
            let features = self.model.encoder.forward(&mel.narrow(2, seek, len)?, true)?;
            self.last_times.encoder_ms += ms_since(started);
            let started = Instant::now();
            let mut tokens = vec![self.sp.sot, self.sp.no_timestamps];
            let max_tokens = self.model.config.max_target_positions / 2;
            for i in 0..max_tokens {
                let (mut logits, _) = self.next_logits(&tokens, &features, i == 0)?;
                self.last_times.tokens += 1;
                for &t in &self.model.config.suppress_tokens {
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
        let features = self.model.encoder.forward(&mel.narrow(2, 0, encoder_context(frames))?, true)?;
        let window = self.decode_window(&features, &[self.sp.sot])?;
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

impl SpeechToText for Whisper {
    fn transcribe(&mut self, pcm_16k: &[f32], language: LanguageChoice) -> Result<Transcript, VoiceError> {
        let english_only = self.english_only();
        let mut lang_token = match (language, english_only) {
            (_, true) => None,
            (LanguageChoice::Fixed(l), false) => Some(
                self.vocab
                    .id(&format!("<|{}|>", l.code()))
                    .ok_or_else(|| VoiceError::Inference(format!("no <|{}|> token", l.code())))?,
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
                let context = encoder_context(window_frames);
                let started = Instant::now();
                let features = self.model.encoder.forward(&mel.narrow(2, seek, context)?, true)?;
                self.last_times.encoder_ms += ms_since(started);
                let started = Instant::now();
                if !english_only && lang_token.is_none() {
                    lang_token = Some(self.detect_language(&features)?);
                }
                let mut prompt = vec![self.sp.sot];
                if let Some(l) = lang_token {
                    prompt.extend([l, self.sp.transcribe]);
                }
                let window = self.decode_window(&features, &prompt)?;
                self.last_times.decoder_ms += ms_since(started);
                if window.no_speech_prob > m::NO_SPEECH_THRESHOLD as f32
                    && window.avg_logprob < m::LOGPROB_THRESHOLD as f32
                {
                    seek += window_frames;
                    continue;
                }
                let (mut found, advance) = self.segments_of(&window, seek as u64 * MS_PER_FRAME, window_frames);
                segments.append(&mut found);
                seek += advance.max(1);
            }
        }
        let language = match lang_token {
            None => "en".to_owned(),
            Some(id) => self.vocab.token(id).unwrap_or("").trim_start_matches("<|").trim_end_matches("|>").to_owned(),
        };
        let text = segments.iter().map(|s| s.text.as_str()).collect::<Vec<_>>().join(" ");
        Ok(Transcript { text, language, segments })
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
fn encoder_context(window_frames: usize) -> usize {
    let n = (window_frames + CONTEXT_MARGIN).min(m::N_FRAMES);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn specials() -> Specials {
        // A toy vocabulary: 0..10 text, 10 eot, 11 sot, 12 transcribe, 13 notimestamps, 14 nospeech, 15.. timestamps.
        Specials { eot: 10, sot: 11, transcribe: 12, no_timestamps: 13, no_speech: 14, timestamp_begin: 15 }
    }

    #[test]
    fn a_short_window_is_encoded_with_its_length_and_a_margin_a_long_one_whole() {
        assert_eq!(encoder_context(300), 500);
        assert_eq!(encoder_context(301), 502, "even: the second convolution has stride 2");
        assert_eq!(encoder_context(2_900), m::N_FRAMES);
        assert_eq!(encoder_context(m::N_FRAMES), m::N_FRAMES);
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
