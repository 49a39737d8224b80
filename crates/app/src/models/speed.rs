//! How fast a local model reads and writes on this computer: measured once
//! after it is installed (or when the person asks), kept beside the models
//! in `speed.json`, and shown in the picker. A catalog's figures come from
//! other machines; this one is the person's own.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use providers::{ChatMessage, CompletionRequest, Role};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use super::spec::ModelSpec;
use crate::context::jobs::Failure;
use crate::context::Context;
use crate::error::AppError;
use crate::Result;

const FILE: &str = "speed.json";
/// Enough generated tokens to average over, few enough that a measurement
/// after a download takes seconds.
const REPLY_TOKENS: u32 = 24;
/// A fixed passage of about 150 tokens: what the model reads (its prompt
/// speed) before it writes.
const PASSAGE: &str = "The lighthouse keeper wrote in the log every evening at six. \
He noted the wind, the colour of the sea, the ships that passed and the birds that rested on the gallery. \
In winter the entries were short: fog, rain, a trawler heading north. In summer they grew longer, \
with visitors who climbed the hundred and twelve steps and asked whether he was ever lonely. \
He always answered that the sea was company enough, and that the light needed someone who paid attention. \
When the light was automated, the last entry said only: handed over, all in order, the lamp is clean.";

/// One measurement, in tokens per second on this computer.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct SpeedView {
    /// How fast it reads a prompt.
    pub prompt_tokens_per_s: f64,
    /// How fast it writes a reply.
    pub reply_tokens_per_s: f64,
}

/// The measurement kept for a model file (its stem), if any.
pub(crate) fn read(dir: &Path, stem: &str) -> Option<SpeedView> {
    read_all(dir).remove(stem)
}

fn read_all(dir: &Path) -> BTreeMap<String, SpeedView> {
    std::fs::read(dir.join(FILE)).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
}

/// Keeps `speed` for `stem`; the file is written whole to a temporary
/// file, then renamed, so a crash leaves the old file or the new one.
pub(crate) fn write(dir: &Path, stem: &str, speed: SpeedView) -> std::io::Result<()> {
    let mut all = read_all(dir);
    all.insert(stem.to_owned(), speed);
    replace(dir, &all)
}

/// Drops the measurement of a removed model.
pub(crate) fn forget(dir: &Path, stem: &str) {
    let mut all = read_all(dir);
    if all.remove(stem).is_some() {
        if let Err(e) = replace(dir, &all) {
            tracing::warn!(error = %e, "could not drop a removed model's speed");
        }
    }
}

fn replace(dir: &Path, all: &BTreeMap<String, SpeedView>) -> std::io::Result<()> {
    crate::paths::write_atomically(&dir.join(FILE), &serde_json::to_vec_pretty(all).map_err(std::io::Error::other)?)
}

/// Measures the local model `stem`: one tiny call loads it, then a fixed
/// passage is read and a short summary written. Runs as background work: a
/// reply that arrives meanwhile goes first and the measurement says so.
pub(crate) async fn measure(ctx: &Context, stem: &str) -> Result<SpeedView> {
    let spec = ModelSpec::local(stem);
    let provider = ctx.provider_for(&spec).await?;
    let background = |f: Failure| match f {
        Failure::Preempted => AppError::new("MODEL_BUSY", "a reply needed the model: measure again when it is done"),
        Failure::Retry(e) | Failure::Final(e) => e,
        Failure::Deferred(_) => AppError::new("MODEL_BUSY", "the model is not free now: measure again later"),
    };
    let mut warm = CompletionRequest::chat(stem.to_owned(), vec![ChatMessage::new(Role::User, "Reply with OK.")]);
    warm.max_tokens = 1;
    ctx.complete_in_background(provider.as_ref(), warm).await.map_err(background)?;
    // A new opening each time: the prompt kept from the last measurement
    // must not be reused, or reading would look instant.
    let opening = format!("Measurement {}. You summarise passages.", uuid::Uuid::now_v7());
    let mut request = CompletionRequest::chat(
        stem.to_owned(),
        vec![ChatMessage::new(Role::System, &opening), ChatMessage::new(Role::User, &format!("{PASSAGE}\n\nSummarise the passage in two sentences."))],
    );
    request.max_tokens = REPLY_TOKENS;
    request.temperature = 0.0;
    let called = Instant::now();
    let done = ctx.measure_in_background(provider.as_ref(), request).await.map_err(background)?;
    let total_s = called.elapsed().as_secs_f64();
    let first_s = done.first_token_ms.map(|ms| ms / 1000.0).filter(|s| *s > 0.0);
    let (Some(first_s), true) = (first_s, done.completion_tokens > 1 && total_s > 0.0) else {
        return Err(AppError::new("MODEL_LOAD_FAILED", "the model wrote too little to measure its speed"));
    };
    let writing_s = (total_s - first_s).max(1e-3);
    Ok(SpeedView {
        prompt_tokens_per_s: f64::from(done.prompt_tokens) / first_s,
        reply_tokens_per_s: f64::from(done.completion_tokens - 1) / writing_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measurements_are_kept_per_model_and_forgotten_with_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(read(dir.path(), "a"), None);
        let a = SpeedView { prompt_tokens_per_s: 50.0, reply_tokens_per_s: 9.5 };
        let b = SpeedView { prompt_tokens_per_s: 400.0, reply_tokens_per_s: 60.0 };
        write(dir.path(), "a", a).expect("write");
        write(dir.path(), "b", b).expect("write");
        assert_eq!((read(dir.path(), "a"), read(dir.path(), "b")), (Some(a), Some(b)));
        forget(dir.path(), "a");
        assert_eq!((read(dir.path(), "a"), read(dir.path(), "b")), (None, Some(b)));
        std::fs::write(dir.path().join(FILE), b"not json").expect("spoil");
        assert_eq!(read(dir.path(), "b"), None, "a spoiled file is no measurement, not an error");
    }
}
