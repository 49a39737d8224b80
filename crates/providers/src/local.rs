//! The in-process engine: GGUF models run with llama.cpp (via `llama-cpp-2`)
//! on the CPU, offline.
//!
//! * The llama.cpp backend is a process-wide global, initialised once.
//! * Models load lazily on first use and stay cached per path (shared by
//!   engines made with [`LocalEngine::with_threads`]).
//! * A request's `model` is a GGUF file stem inside the models directory
//!   (`SmolLM2-135M-Instruct.Q4_1` -> `<models_dir>/SmolLM2-135M-Instruct.Q4_1.gguf`).
//! * Generation runs on a blocking thread; one generation at a time per
//!   engine family (the machine has few cores), others queue.
//! * With `json_schema`, the schema becomes a grammar and the reply is one
//!   JSON value matching it — unless the token limit cuts it off first
//!   (`FinishReason::Length`): give string fields a `maxLength` and size
//!   `max_tokens` to fit, or a free-running string never closes.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Once, OnceLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::gguf::GgufContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::logit_bias::LlamaLogitBias;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::{send_logs_to_tracing, LogOptions};

use crate::gguf::{validate_gguf_file, GgufHeader};
use crate::loop_guard::{LoopGuard, Step};
use crate::{
    ChatMessage, Completion, CompletionRequest, FinishReason, ModelCapability, Provider,
    ProviderError, Role, TokenSink,
};

/// Prompt tokens decoded per batch.
const N_BATCH: usize = 512;
/// Prompt tokens per decode call: about a second of work on one thread, so
/// cancellation and progress are seen often. A 476-token prompt took 4.1–5.8 s
/// in 128-token chunks and 3.9–5.3 s in 512-token ones, 3 runs each
/// interleaved on a busy machine: no difference beyond the noise.
const PROMPT_CHUNK: usize = 128;
/// Prompt tokens per decode call when a prompt is only read ahead (see
/// [`Provider::prefill`]) or read for background work
/// ([`CompletionRequest::background`]): a reply that arrives meanwhile
/// waits at most one such chunk (about half a second on two cores, a
/// second on one with Qwen 1.5B), not a full one (four seconds on one).
const PREFILL_CHUNK: usize = 32;
/// How many of the persona's last replies a new reply is kept from repeating.
const RECENT_REPLIES_AVOIDED: usize = 3;
/// How long a generation waits for one whose caller has gone to reach its
/// next boundary before running beside it: waiting keeps the abandoned
/// call's evaluated prompt usable and the cores to itself; beside it, only
/// the contexts left in the pool can be continued.
const OVERLAP_GRACE: Duration = Duration::from_millis(1500);
/// Tokens a step proposes from earlier text (see [`lookup_draft`]). On two
/// cores the default model reads 4 tokens in one batch in about 1.6 times
/// one token's time (116 vs 71 ms, `batch_bench`), 8 in over 3 times.
const LOOKAHEAD: usize = 3;
/// The longest run of last tokens looked for in earlier text.
const LOOKUP_NGRAM: usize = 3;
/// Context size used when a model does not state its training context.
const FALLBACK_CTX: usize = 4096;
/// Set to any value to route llama.cpp's own logging into `tracing`
/// (target `llama-cpp-2`); by default it is silenced.
pub const LOG_ENV: &str = "LEDGERMIND_LLAMA_LOG";

static BACKEND: OnceLock<Result<LlamaBackend, ProviderError>> = OnceLock::new();
static LOGS: OnceLock<()> = OnceLock::new();
/// llama.cpp's context creation mutates the model: never run two at once.
static CONTEXT_CREATION: Mutex<()> = Mutex::new(());

fn init_logs() {
    LOGS.get_or_init(|| {
        let enabled = std::env::var_os(LOG_ENV).is_some();
        send_logs_to_tracing(LogOptions::default().with_logs_enabled(enabled));
    });
}

/// The process-wide llama.cpp backend.
fn backend() -> Result<&'static LlamaBackend, ProviderError> {
    init_logs();
    BACKEND
        .get_or_init(|| {
            LlamaBackend::init().map_err(|e| ProviderError::ModelLoad(format!("llama.cpp could not start: {e}")))
        })
        .as_ref()
        .map_err(Clone::clone)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves no broken invariant
    // (the map and the unit are always consistent), so keep going.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Threads for generation by default: one per physical core. A person
/// waits on every generation, and both reading the prompt and writing the
/// reply scale with cores: on a 2-core machine one thread took 2.4 s for a
/// short reply that two finish in 1.5 s. Hyper-threads share a core's
/// arithmetic units, so counting them makes llama.cpp slower, not faster.
pub fn default_threads() -> usize {
    num_cpus::get_physical().max(1)
}

struct Shared {
    models_dir: PathBuf,
    models: Mutex<HashMap<PathBuf, Arc<LlamaModel>>>,
    /// One generation at a time…
    busy: Mutex<()>,
    /// …whose `abandoned` flag is here: once its caller has gone (cancelled),
    /// the next generation starts at once instead of waiting for the old one
    /// to reach its next batch boundary (a long prompt batch takes seconds).
    holder: Mutex<Option<Arc<AtomicBool>>>,
    /// At most one such overlapping generation, so a burst of cancellations
    /// cannot pile contexts up.
    overlap: Mutex<()>,
    /// Evaluated contexts kept between calls (see [`WarmContext`]).
    warm: Mutex<Vec<WarmContext>>,
    /// Where evaluated prompts are kept between processes, when set (see
    /// [`LocalEngine::keep_prompts_in`]).
    prompt_cache: OnceLock<PathBuf>,
    /// The CPU's counters lately (see [`threads_free_now`]).
    cpu_seen: Mutex<CpuSeen>,
    /// Whether the thread that keeps `cpu_seen` fresh is started.
    cpu_watch: Once,
    /// Prompt tokens the latest call found already evaluated.
    last_reused: std::sync::atomic::AtomicUsize,
}

/// The in-process llama.cpp engine. Cheap to clone; clones share the model
/// cache and the one-generation-at-a-time queue.
#[derive(Clone)]
pub struct LocalEngine {
    shared: Arc<Shared>,
    threads: usize,
    /// Whether each generation uses only the cores other programs leave
    /// free (see [`threads_free_now`]) rather than always `threads`.
    auto: bool,
    /// How long a call waits for an abandoned one (see [`OVERLAP_GRACE`]).
    overlap_grace: Duration,
    /// Tokens proposed from earlier text per step (see [`lookup_draft`]);
    /// 0 writes one token a step.
    lookahead: usize,
}

impl std::fmt::Debug for LocalEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEngine")
            .field("models_dir", &self.shared.models_dir)
            .field("threads", &self.threads)
            .finish()
    }
}

impl LocalEngine {
    /// An engine serving `<models_dir>/<stem>.gguf` with `threads` CPU
    /// threads; 0 means up to [`default_threads`], as many as other
    /// programs leave free when a generation starts. Nothing is loaded yet.
    pub fn new(models_dir: PathBuf, threads: usize) -> Self {
        let auto = threads == 0;
        let threads = if auto { default_threads() } else { threads };
        Self {
            shared: Arc::new(Shared {
                models_dir,
                models: Mutex::new(HashMap::new()),
                busy: Mutex::new(()),
                holder: Mutex::new(None),
                overlap: Mutex::new(()),
                warm: Mutex::new(Vec::new()),
                prompt_cache: OnceLock::new(),
                cpu_seen: Mutex::new(CpuSeen::default()),
                cpu_watch: Once::new(),
                last_reused: std::sync::atomic::AtomicUsize::new(0),
            }),
            threads,
            auto,
            overlap_grace: OVERLAP_GRACE,
            lookahead: LOOKAHEAD,
        }
    }

    /// The same engine (same model cache and queue) with another thread count.
    pub fn with_threads(&self, threads: usize) -> Self {
        Self {
            shared: self.shared.clone(),
            threads: if threads == 0 {
                default_threads()
            } else {
                threads
            },
            auto: threads == 0,
            overlap_grace: self.overlap_grace,
            lookahead: self.lookahead,
        }
    }

    /// The same engine proposing up to `tokens` tokens a step from earlier
    /// text (3 by default; 0: none, one token a step).
    pub fn with_lookahead(&self, tokens: usize) -> Self {
        Self { lookahead: tokens, ..self.clone() }
    }

    /// The same engine with another wait before a call runs beside one
    /// whose caller has gone (1.5 s by default).
    pub fn with_overlap_grace(&self, grace: Duration) -> Self {
        Self { overlap_grace: grace, ..self.clone() }
    }

    pub fn models_dir(&self) -> &Path {
        &self.shared.models_dir
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Stems of the `*.gguf` files in the models directory, sorted.
    pub fn list_models(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.shared.models_dir) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.is_file()
                    && p.extension()
                        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
            })
            .filter_map(|p| p.file_stem().and_then(|s| s.to_str()).map(str::to_string))
            .collect();
        names.sort();
        names
    }

    /// The file a model name resolves to. Names are file stems; a trailing
    /// `.gguf` is tolerated; paths and hidden names are refused.
    pub fn model_path(&self, name: &str) -> Result<PathBuf, ProviderError> {
        let stem = name.strip_suffix(".gguf").unwrap_or(name);
        if stem.is_empty()
            || stem.starts_with('.')
            || stem.contains(['/', '\\', '\0'])
            || stem.contains("..")
        {
            return Err(ProviderError::ModelLoad(format!(
                "{name:?} is not a model name (expected a GGUF file stem such as \
                 \"SmolLM2-135M-Instruct.Q4_1\")"
            )));
        }
        Ok(self.shared.models_dir.join(format!("{stem}.gguf")))
    }

    /// Whether the model is loaded in memory.
    pub fn is_loaded(&self, name: &str) -> bool {
        self.model_path(name)
            .is_ok_and(|p| lock(&self.shared.models).contains_key(&p))
    }

    /// Drops a cached model (it is freed once no generation uses it).
    pub fn unload(&self, name: &str) -> bool {
        self.model_path(name)
            .is_ok_and(|p| lock(&self.shared.models).remove(&p).is_some())
    }

    /// Loads a model now instead of on first use.
    pub async fn preload(&self, name: &str) -> Result<(), ProviderError> {
        let path = self.model_path(name)?;
        let engine = self.clone();
        tokio::task::spawn_blocking(move || engine.model(&path).map(|_| ()))
            .await
            .map_err(|e| ProviderError::ModelLoad(format!("loading stopped unexpectedly: {e}")))?
    }

    /// Checks a GGUF file before it is imported or loaded: the header check
    /// of [`validate_gguf_file`], then llama.cpp's own metadata parser
    /// (without loading weights), which must find `general.architecture`.
    pub fn validate_model_file(path: &Path) -> Result<GgufHeader, ProviderError> {
        let header = validate_gguf_file(path)?;
        init_logs();
        let shown = path.display();
        let ctx = GgufContext::from_file(path).ok_or_else(|| {
            ProviderError::ModelLoad(format!(
                "{shown} is not a valid GGUF model file: its metadata could not be read"
            ))
        })?;
        if ctx.find_key("general.architecture") < 0 {
            return Err(ProviderError::ModelLoad(format!(
                "{shown} is not a valid GGUF model file: it names no architecture"
            )));
        }
        Ok(header)
    }

    /// Copies a user's GGUF file into the models directory after checking
    /// it, and returns the model name (file stem) to use in requests.
    pub fn import_model(&self, source: &Path) -> Result<String, ProviderError> {
        Self::validate_model_file(source)?;
        let stem = source
            .file_stem()
            .and_then(|s| s.to_str())
            .ok_or_else(|| ProviderError::ModelLoad("the file name is not valid text".into()))?
            .to_string();
        let target = self.model_path(&stem)?;
        if target.exists() {
            return Err(ProviderError::ModelLoad(format!(
                "a model named {stem:?} already exists"
            )));
        }
        let io = |e: std::io::Error| ProviderError::ModelLoad(format!("cannot import {stem}: {e}"));
        std::fs::create_dir_all(&self.shared.models_dir).map_err(io)?;
        let partial = self.shared.models_dir.join(format!(".{stem}.gguf.partial"));
        std::fs::copy(source, &partial).map_err(io)?;
        std::fs::rename(&partial, &target).map_err(|e| {
            let _ = std::fs::remove_file(&partial);
            io(e)
        })?;
        Ok(stem)
    }

    /// The cached model, loading it on first use.
    fn model(&self, path: &Path) -> Result<Arc<LlamaModel>, ProviderError> {
        let backend = backend()?;
        let mut models = lock(&self.shared.models);
        if let Some(model) = models.get(path) {
            return Ok(model.clone());
        }
        if !path.exists() {
            let mut message = format!("model file {} does not exist", path.display());
            let available = self.list_models();
            if !available.is_empty() {
                message.push_str(&format!(" (installed: {})", available.join(", ")));
            }
            return Err(ProviderError::ModelLoad(message));
        }
        // The header check only: llama.cpp's loader parses the metadata
        // itself and refuses what it cannot run; parsing it twice costs the
        // default model about 65 ms of every load.
        validate_gguf_file(path)?;
        let started = Instant::now();
        let model = LlamaModel::load_from_file(backend, path, &LlamaModelParams::default())
            .map_err(|e| {
                ProviderError::ModelLoad(format!(
                    "llama.cpp could not load {} ({e}): the file may be corrupt, truncated, \
                     or of an unsupported architecture",
                    path.display()
                ))
            })?;
        tracing::info!(
            path = %path.display(),
            ms = started.elapsed().as_millis() as u64,
            "loaded local model"
        );
        let model = Arc::new(model);
        models.insert(path.to_path_buf(), model.clone());
        Ok(model)
    }

    #[allow(clippy::too_many_arguments)]
    fn generate(
        &self,
        path: &Path,
        request: &CompletionRequest,
        sink: Option<&TokenSink>,
        started: Instant,
        abandoned: &Arc<AtomicBool>,
        evaluate_only: bool,
    ) -> Result<Completion, ProviderError> {
        let cancelled = || request.cancel.is_cancelled() || abandoned.load(Ordering::SeqCst);
        let backend = backend()?;
        // The cores free now, watched while the model may still be loading
        // (our own process's work is not counted as busy).
        let threads = if self.auto {
            self.shared.cpu_watch.call_once(|| watch_cpu(Arc::downgrade(&self.shared)));
            threads_free_now(self.threads, &self.shared.cpu_seen)
        } else {
            self.threads
        };
        let t_threads = started.elapsed();
        let mut holder_gone_since: Option<Instant> = None;
        // Wait for our turn, still answering to cancellation.
        let _turn = loop {
            if cancelled() {
                return Ok(cancelled_empty());
            }
            {
                // Taking the turn and naming its holder happen under one lock,
                // so a waiter never sees the previous holder's flag beside a
                // new holder's turn.
                let mut holder = lock(&self.shared.holder);
                match self.shared.busy.try_lock() {
                    Ok(guard) => {
                        *holder = Some(abandoned.clone());
                        break Turn::Own { _guard: guard };
                    }
                    Err(std::sync::TryLockError::Poisoned(p)) => {
                        *holder = Some(abandoned.clone());
                        break Turn::Own { _guard: p.into_inner() };
                    }
                    Err(std::sync::TryLockError::WouldBlock) => {
                        let holder_gone = holder.as_ref().is_some_and(|h| h.load(Ordering::SeqCst));
                        let since = holder_gone.then(|| *holder_gone_since.get_or_insert_with(Instant::now));
                        if since.is_some_and(|t| t.elapsed() >= self.overlap_grace) {
                            if let Ok(guard) = self.shared.overlap.try_lock() {
                                break Turn::Overlap { _guard: guard };
                            }
                        }
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        let own_turn = matches!(_turn, Turn::Own { .. });
        let t_turn = started.elapsed();
        let model = self.model(path)?;
        if cancelled() {
            return Ok(cancelled_empty());
        }
        let vocab = model.vocab();

        let prompt = render_prompt(&model, &request.messages);
        // The exact text the model reads is what explains a strange reply.
        tracing::trace!(%prompt, "local prompt");
        let mut tokens = vocab.tokenize(prompt.as_bytes(), true, true);
        if tokens.len() >= 2 && tokens[0] == vocab.bos() && tokens[1] == vocab.bos() {
            tokens.remove(0);
        }
        let n_prompt = tokens.len();
        let n_ctx_train = match usize::try_from(model.n_ctx_train()) {
            Ok(0) | Err(_) => FALLBACK_CTX,
            Ok(n) => n,
        };
        if n_prompt + 1 >= n_ctx_train {
            return Err(ProviderError::Http {
                status: 413,
                message: format!(
                    "the prompt is {n_prompt} tokens long; the model's context holds {n_ctx_train}"
                ),
            });
        }
        // Room for the reply, also when the prompt is only read ahead: the
        // call that continues it then finds the context big enough.
        let room = (request.max_tokens as usize).min(n_ctx_train - n_prompt - 1);
        // Reading ahead writes nothing: the loop below ends before sampling.
        let max_new = if evaluate_only { 0 } else { room };
        let needed = n_prompt + room + 1;
        // A warm context of this model whose evaluated tokens share the
        // longest prefix with this prompt: only the rest is evaluated. Also
        // beside an abandoned call: that one holds only its own context (a
        // summary's, most often), and the conversation's waits in the pool;
        // without it a reply sent during a summary read its whole prompt again.
        let warm = self.take_warm(path, &tokens, needed, threads);
        let mut slot = match warm {
            Some(w) if w.threads == threads => w,
            Some(w) => w.with_threads(backend, threads)?,
            None => {
                let n_ctx = needed.max(WARM_MIN_CTX).div_ceil(1024).saturating_mul(1024).min(n_ctx_train);
                let mut fresh = WarmContext::new(backend, model.clone(), path, n_ctx, threads)?;
                if own_turn {
                    self.load_kept_prompt(&mut fresh, &tokens);
                }
                fresh
            }
        };
        let reused = slot.keep_prefix(&tokens);
        self.shared.last_reused.store(reused, Ordering::SeqCst);
        let t_warm = started.elapsed();

        let mut sampler = build_sampler(&model, request)?;
        if request.json_schema.is_none() && request.sampling.is_some() {
            // The persona's own last replies count as already said: the
            // repetition penalty and DRY otherwise see only the reply being
            // written, and a small model answers message after message in
            // the shape of its last reply ("Que ótimo! Como vai?" twenty
            // turns running). The person's words and the remembered lines
            // are left out: a reply must be free to repeat a fact.
            for m in recent_replies(request) {
                sampler.accept_many(vocab.tokenize(m.as_bytes(), false, false));
            }
        }
        // The first token of each word the reply may not begin with, as the
        // reply's first token would spell it (with or without a space).
        let avoided: Vec<LlamaToken> = if request.json_schema.is_none() {
            spellings(&model, &request.not_first).filter_map(|t| t.first().copied()).collect()
        } else {
            Vec::new()
        };
        let t_sampler = started.elapsed();
        let decode_err = |e: llama_cpp_2::DecodeError| {
            ProviderError::Unavailable(format!("local decoding failed: {e}"))
        };

        // The prompt's new tokens, in chunks; logits only for the last token.
        // After each chunk an empty piece tells the caller the call is still
        // moving: a long prompt on a busy CPU can take longer before its
        // first token than a caller's "no progress" limit.
        let mut batch = LlamaBatch::new(N_BATCH, 1);
        let chunk_len = if evaluate_only || request.background { PREFILL_CHUNK } else { PROMPT_CHUNK };
        for (chunk_index, chunk) in tokens[reused..].chunks(chunk_len).enumerate() {
            if chunk_index > 0 {
                if let Some(sink) = sink {
                    let _ = sink.send(String::new());
                }
            }
            if cancelled() {
                // What was read so far stays usable: the call that
                // cancelled this one most often shares its start.
                self.put_warm(slot);
                return Ok(cancelled_empty_with(n_prompt));
            }
            batch.clear();
            for (i, token) in chunk.iter().enumerate() {
                let pos = reused + chunk_index * chunk_len + i;
                let last = pos + 1 == n_prompt;
                batch
                    .add(*token, i32::try_from(pos).unwrap_or(i32::MAX), &[0], last)
                    .map_err(|e| ProviderError::Unavailable(format!("local batch failed: {e}")))?;
            }
            slot.ctx.decode(&mut batch).map_err(decode_err)?;
            slot.tokens.extend_from_slice(chunk);
            if slot.tokens.len() == n_prompt {
                slot.last_logits = i32::try_from(chunk.len() - 1).ok();
            }
        }

        let t_read = started.elapsed();
        let mut text = String::new();
        let mut utf8 = Utf8Stream::default();
        // A question one of the last replies asked ends this one before it
        // is asked again (see `LoopGuard::asked_before`).
        let mut guard = request
            .sampling
            .filter(|s| s.loop_guard && request.json_schema.is_none())
            .map(|_| LoopGuard::asked_before(recent_replies(request)));
        let mut first_token_ms = None;
        let mut generated = 0usize;
        let mut pos = n_prompt;
        // Tokens proposed by `lookup_draft` and read after the last written
        // one, not yet confirmed. `row` holds the logits after the last
        // confirmed token: first this call's last batch, or the read ahead
        // that left exactly this prompt evaluated (`keep_prefix`); each
        // confirmed proposal moves it on.
        let mut draft: std::collections::VecDeque<LlamaToken> = std::collections::VecDeque::new();
        let mut row = slot.last_logits.unwrap_or(batch.n_tokens() - 1);
        let (mut proposed, mut confirmed) = (0usize, 0usize);
        let emit = |piece: String, text: &mut String| {
            if let Some(sink) = sink {
                let _ = sink.send(piece.clone());
            }
            text.push_str(&piece);
        };
        let finish = loop {
            if cancelled() {
                break FinishReason::Cancelled;
            }
            if generated >= max_new {
                break FinishReason::Length;
            }
            let token = if first_token_ms.is_none() && !avoided.is_empty() {
                sample_avoiding(&mut sampler, &slot.ctx, row, &avoided)
            } else {
                sampler.sample(&slot.ctx, row)
            };
            // A proposed token the model writes itself is already read.
            let already_read = draft.front() == Some(&token);
            if already_read {
                draft.pop_front();
                confirmed += 1;
            } else if !draft.is_empty() {
                slot.take_back(pos, row)?;
                draft.clear();
            }
            if first_token_ms.is_none() {
                first_token_ms = Some(started.elapsed().as_secs_f64() * 1000.0);
                tracing::debug!(threads, t_threads = ?t_threads, t_turn = ?t_turn, t_warm = ?t_warm, t_sampler = ?t_sampler, t_read = ?t_read, first = ?started.elapsed(), fresh = n_prompt - reused, "first token");
            }
            if vocab.is_eog(token) {
                break FinishReason::Stop;
            }
            generated += 1;
            let bytes = vocab.token_to_piece(token, false, None);
            let piece = utf8.push(&bytes);
            let stop_marker = STOP_MARKERS.iter().any(|m| piece.contains(m));
            match guard.as_mut() {
                Some(_) if stop_marker => break FinishReason::Stop,
                Some(g) => match g.push(&piece) {
                    Step::Show(shown) => emit(shown, &mut text),
                    Step::Loop(shown) => {
                        emit(shown, &mut text);
                        tracing::info!(tokens = generated, "the reply started repeating itself; it ends before the repeat");
                        break FinishReason::Stop;
                    }
                },
                None => {
                    if !piece.is_empty() {
                        emit(piece, &mut text);
                    }
                }
            }
            if already_read {
                pos += 1;
                row += 1;
                continue;
            }
            // The token, and the tokens that followed the same words earlier
            // (the question's words an answer repeats, a name, a remembered
            // line), in one batch: each the model then writes itself costs
            // a fraction of a step.
            let room = max_new.saturating_sub(generated + 1);
            // A failed decode drops the context, so the token can join it first.
            slot.tokens.push(token);
            // One word in common is a guess until the reply has shown it
            // is saying earlier words again (a summary, a remembered line):
            // in short spoken answers most such guesses failed, each
            // costing a step more than it saved.
            let shortest = if confirmed > 0 { 1 } else { 2 };
            let proposal = lookup_draft(&slot.tokens, shortest, self.lookahead.min(room), |t| vocab.is_eog(t));
            batch.clear();
            for (i, t) in std::iter::once(token).chain(proposal.iter().copied()).enumerate() {
                batch
                    .add(t, i32::try_from(pos + i).unwrap_or(i32::MAX), &[0], true)
                    .map_err(|e| ProviderError::Unavailable(format!("local batch failed: {e}")))?;
            }
            pos += 1;
            slot.ctx.decode(&mut batch).map_err(decode_err)?;
            slot.tokens.extend_from_slice(&proposal);
            proposed += proposal.len();
            draft = proposal.into();
            row = 0;
            slot.last_logits = i32::try_from(draft.len()).ok();
        };
        // Proposed tokens the reply did not reach leave the context as if
        // never read; the last written token's logits are still at `row`.
        if !draft.is_empty() {
            slot.take_back(pos, row)?;
        }
        let rest = utf8.finish();
        match guard.as_mut() {
            Some(g) if !g.looped() => {
                if finish != FinishReason::Cancelled {
                    let (Step::Show(shown) | Step::Loop(shown)) = g.push(&rest);
                    emit(shown, &mut text);
                    let tail = g.finish();
                    emit(tail, &mut text);
                }
            }
            Some(_) => {}
            None => emit(rest, &mut text),
        }
        if own_turn && finish != FinishReason::Cancelled {
            self.save_kept_prompt(&slot);
        }
        // A cancelled call keeps what it read: the call that cancelled it
        // most often shares its start (a draft read stopped by the send of
        // the same words, a reply cut off by the next message), and
        // dropping it made that call read the whole prompt again. A call
        // that ran beside an abandoned one keeps its context too: the
        // conversation's next turn continues from it.
        self.put_warm(slot);
        if let Some(now) = cpu_times() {
            lock(&self.shared.cpu_seen).record(Instant::now(), now);
        }
        tracing::debug!(
            model = %path.display(),
            prompt_tokens = n_prompt,
            reused_tokens = reused,
            completion_tokens = generated,
            proposed,
            confirmed,
            ?finish,
            ms = started.elapsed().as_millis() as u64,
            "local completion"
        );
        Ok(Completion {
            text,
            prompt_tokens: u32::try_from(n_prompt).unwrap_or(u32::MAX),
            completion_tokens: u32::try_from(generated).unwrap_or(u32::MAX),
            finish,
            first_token_ms,
            tool_calls: Vec::new(),
        })
    }

    /// Takes the warm context of `path` sharing the longest prefix with
    /// `tokens` (and big enough for `needed`). When none fits and the pool is
    /// full, the least recently used one is dropped to make room.
    fn take_warm(&self, path: &Path, tokens: &[LlamaToken], needed: usize, threads: usize) -> Option<WarmContext> {
        let mut pool = lock(&self.shared.warm);
        // A context too small for this call stays for the calls it fits: a
        // summary of the whole conversation needs a bigger context than a
        // reply, and dropping the conversation's for it made the next reply
        // read its whole prompt again (seconds before its first token).
        // A context made for another thread count is taken too (the caller
        // moves what it holds into one with this call's threads): the
        // threads follow what other programs do from one call to the next,
        // and a conversation whose context was passed over for that read its
        // whole prompt again (218 tokens, 4.7 s before a spoken reply).
        let best = pool
            .iter()
            .enumerate()
            .filter(|(_, w)| w.path == path && w.n_ctx >= needed)
            .map(|(i, w)| (i, common_prefix(&w.tokens, tokens), w.threads == threads))
            .max_by_key(|(_, p, same)| (*p, *same))
            .map(|(i, p, _)| (i, p));
        // Every prompt shares the template's first tokens: reuse only a
        // prefix worth keeping, so a background job does not take over the
        // conversation's context.
        match best {
            Some((i, p)) if p >= MIN_REUSE || (p > 0 && p * 2 >= tokens.len()) => Some(pool.swap_remove(i)),
            _ => {
                if pool.len() >= WARM_CONTEXTS {
                    if let Some(oldest) = pool.iter().enumerate().min_by_key(|(_, w)| w.used).map(|(i, _)| i) {
                        pool.swap_remove(oldest);
                    }
                }
                None
            }
        }
    }

    /// Returns a context to the pool; when memory is short, the pool is
    /// emptied instead (a context is rebuilt on demand).
    fn put_warm(&self, mut slot: WarmContext) {
        slot.used = Instant::now();
        let mut pool = lock(&self.shared.warm);
        if memory_is_short() {
            tracing::info!("little memory left; warm model contexts dropped");
            pool.clear();
            return;
        }
        pool.push(slot);
        while pool.len() > WARM_CONTEXTS {
            if let Some(oldest) = pool.iter().enumerate().min_by_key(|(_, w)| w.used).map(|(i, _)| i) {
                pool.swap_remove(oldest);
            }
        }
    }

    /// Whether no generation holds the model: a call abandoned by its
    /// caller may still be finishing, and the next call then runs beside it
    /// without the context that call holds.
    pub fn is_idle(&self) -> bool {
        !matches!(self.shared.busy.try_lock(), Err(std::sync::TryLockError::WouldBlock))
    }

    /// Drops every warm context (their memory is freed).
    pub fn drop_warm_contexts(&self) {
        lock(&self.shared.warm).clear();
    }

    /// Keeps each conversation's evaluated prompt on disk in `dir`, so a
    /// new process (one `ledgermind chat` per message, or the app after a
    /// restart) evaluates only what is new since the last reply instead of
    /// the whole history. The files hold what the model computed from the
    /// conversation: [`LocalEngine::forget_kept_prompts`] removes them when
    /// anything of it is erased. Set once; later calls are ignored.
    pub fn keep_prompts_in(&self, dir: PathBuf) {
        let _ = self.shared.prompt_cache.set(dir);
    }

    /// Deletes every prompt kept on disk (and every warm context, which
    /// holds the same): after an erasure nothing computed from the erased
    /// text may remain.
    pub fn forget_kept_prompts(&self) -> std::io::Result<()> {
        self.drop_warm_contexts();
        let Some(dir) = self.shared.prompt_cache.get() else {
            return Ok(());
        };
        match std::fs::remove_dir_all(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// The kept prompt a new context for `tokens` may start from: one file
    /// per model and conversation start (the system message and first
    /// turn), so two personas do not overwrite each other's.
    fn kept_prompt_file(&self, path: &Path, tokens: &[LlamaToken]) -> Option<PathBuf> {
        let dir = self.shared.prompt_cache.get()?;
        let stem = path.file_stem()?.to_str()?;
        let head = &tokens[..tokens.len().min(KEPT_PROMPT_KEY_TOKENS)];
        // FNV-1a: a stable name across processes (std's hasher is seeded).
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for t in head {
            for b in t.0.to_le_bytes() {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        Some(dir.join(format!("{stem}-{h:016x}.kv")))
    }

    /// Fills a fresh context from the kept prompt, if one fits.
    fn load_kept_prompt(&self, slot: &mut WarmContext, tokens: &[LlamaToken]) {
        let Some(file) = self.kept_prompt_file(&slot.path, tokens) else { return };
        if !file.exists() {
            return;
        }
        match slot.ctx.state_load_file(&file, slot.n_ctx) {
            Ok(kept) => {
                tracing::debug!(tokens = kept.len(), "evaluated prompt read from disk");
                slot.tokens = kept;
                slot.last_logits = None;
            }
            Err(e) => {
                // Written by another build or for a larger context: start clean.
                tracing::debug!(error = %e, "a kept prompt could not be used");
                slot.ctx.clear_kv_cache();
                slot.tokens.clear();
            }
        }
    }

    /// Writes the context's evaluated tokens beside the others, atomically
    /// (a crash leaves the old file or the new one, never half of one).
    fn save_kept_prompt(&self, slot: &WarmContext) {
        if slot.tokens.len() < MIN_REUSE {
            return;
        }
        let Some(file) = self.kept_prompt_file(&slot.path, &slot.tokens) else { return };
        let Some(dir) = file.parent() else { return };
        if let Err(e) = std::fs::create_dir_all(dir) {
            tracing::debug!(error = %e, "no folder for kept prompts");
            return;
        }
        let partial = file.with_extension("kv.partial");
        match slot.ctx.state_save_file(&partial, &slot.tokens) {
            Ok(()) => {
                if let Err(e) = std::fs::rename(&partial, &file) {
                    tracing::debug!(error = %e, "a kept prompt could not be put in place");
                    let _ = std::fs::remove_file(&partial);
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "the evaluated prompt could not be kept");
                let _ = std::fs::remove_file(&partial);
            }
        }
        prune_kept_prompts(dir);
    }

    /// How many tokens each warm context holds evaluated.
    pub fn warm_contexts(&self) -> Vec<usize> {
        lock(&self.shared.warm).iter().map(|w| w.tokens.len()).collect()
    }

    /// The thread count of each warm context, in the pool's order.
    pub fn warm_context_threads(&self) -> Vec<usize> {
        lock(&self.shared.warm).iter().map(|w| w.threads).collect()
    }

    /// How many prompt tokens the latest call found already evaluated.
    pub fn last_reused_tokens(&self) -> usize {
        self.shared.last_reused.load(Ordering::SeqCst)
    }
}

/// How many evaluated contexts are kept between calls: the conversation's
/// and the background work's (extraction, summaries) beside it.
const WARM_CONTEXTS: usize = 3;
/// Fewer shared tokens than this (and under half the prompt) are not worth
/// taking another call's context for.
const MIN_REUSE: usize = 32;
/// The smallest context made, so a conversation can grow in it.
const WARM_MIN_CTX: usize = 1024;
/// Below this much available memory no context is kept warm.
const MIN_AVAILABLE_BYTES: u64 = 512 * 1024 * 1024;
/// Text that marks the start of another turn when a model writes it out
/// instead of ending its turn.
const STOP_MARKERS: [&str; 3] = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"];

/// Leading prompt tokens that name a kept prompt's file.
const KEPT_PROMPT_KEY_TOKENS: usize = 48;
/// Kept prompts on disk at most (the most recently written stay).
const KEPT_PROMPTS: usize = 8;

/// Removes the oldest kept prompts beyond [`KEPT_PROMPTS`].
fn prune_kept_prompts(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "kv"))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if files.len() <= KEPT_PROMPTS {
        return;
    }
    files.sort();
    for (_, old) in &files[..files.len() - KEPT_PROMPTS] {
        let _ = std::fs::remove_file(old);
    }
}

/// How long the CPU is watched before a generation picks its threads…
const CPU_SAMPLE: Duration = Duration::from_millis(60);
/// …unless counters at least that old and at most this old were seen: the
/// CPU since then is watched instead, without waiting.
const CPU_RECENT: Duration = Duration::from_secs(3);
/// How often the CPU's counters are read while the engine is in use.
const CPU_TICK: Duration = Duration::from_millis(250);

/// The CPU's counters at the two latest moments they were read.
#[derive(Debug, Default, Clone, Copy)]
struct CpuSeen {
    newest: Option<(Instant, CpuTimes)>,
    before: Option<(Instant, CpuTimes)>,
}

impl CpuSeen {
    fn record(&mut self, at: Instant, times: CpuTimes) {
        self.before = self.newest.replace((at, times));
    }

    /// The newest counters old enough to judge the CPU by and still recent.
    fn usable(&self) -> Option<(Instant, CpuTimes)> {
        [self.newest, self.before].into_iter().flatten().find(|(at, _)| (CPU_SAMPLE..=CPU_RECENT).contains(&at.elapsed()))
    }
}

/// Keeps `shared.cpu_seen` fresh, a read every `CPU_TICK`, for as long as
/// the engine lives, so a generation judges the CPU without waiting.
fn watch_cpu(shared: std::sync::Weak<Shared>) {
    let spawned = std::thread::Builder::new().name("cpu-watch".into()).spawn(move || loop {
        std::thread::sleep(CPU_TICK);
        let Some(shared) = shared.upgrade() else { break };
        if let Some(now) = cpu_times() {
            lock(&shared.cpu_seen).record(Instant::now(), now);
        }
    });
    if let Err(e) = spawned {
        tracing::debug!(error = %e, "the CPU is judged at each generation instead");
    }
}

/// Threads for a generation starting now: `max`, less each core other
/// programs keep busy (at least one). llama.cpp's threads wait for each
/// other at every step, so a thread that shares its core with a compiler
/// stalls all of them: on this 2-core machine with a build running, a short
/// reply took 38 s on two threads and 7 s on one (quiet: 1.5 s on two,
/// 2.4 s on one). Our own process's CPU time is not counted as busy.
///
/// The window watched ends now and starts at the newest counters in `seen`
/// at least `CPU_SAMPLE` old (kept fresh by [`watch_cpu`] and by the end of
/// each generation), so a reply's first token does not wait the 60 ms a
/// fresh look at the CPU takes; without such counters it waits.
fn threads_free_now(max: usize, seen: &Mutex<CpuSeen>) -> usize {
    if max <= 1 {
        return 1;
    }
    let seen = *lock(seen);
    let before = match (seen.usable(), seen.newest.filter(|(at, _)| at.elapsed() <= CPU_RECENT)) {
        (Some((_, before)), _) => before,
        (None, Some((at, before))) => {
            std::thread::sleep(CPU_SAMPLE.saturating_sub(at.elapsed()));
            before
        }
        (None, None) => {
            let Some(before) = cpu_times() else { return max };
            std::thread::sleep(CPU_SAMPLE);
            before
        }
    };
    let Some(after) = cpu_times() else { return max };
    let total = after.total.saturating_sub(before.total);
    if total == 0 {
        return max;
    }
    let others = after.busy.saturating_sub(before.busy).saturating_sub(after.own.saturating_sub(before.own));
    let cores = num_cpus::get().max(1) as f64;
    // Busy share of all cores, in cores; half a core busy counts as one.
    let busy_cores = (others as f64 / total as f64 * cores).round() as usize;
    max.saturating_sub(busy_cores).max(1)
}

#[derive(Debug, Clone, Copy)]
struct CpuTimes {
    /// Clock ticks every core spent, and of those not idle.
    total: u64,
    busy: u64,
    /// Ticks this process spent.
    own: u64,
}

fn cpu_times() -> Option<CpuTimes> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat.lines().next()?.split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
    if fields.len() < 5 {
        return None;
    }
    let total: u64 = fields.iter().take(8).sum();
    let busy = busy_ticks(&fields, niced_programs_yield());
    let own = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which may hold spaces.
    let rest = own.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let own = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(CpuTimes { total, busy, own })
}

/// Ticks of `/proc/stat`'s first line (user, nice, system, idle, iowait,
/// …) that other work keeps from our threads: all but idle and iowait, and
/// without the niced programs' share when they give way to us.
fn busy_ticks(fields: &[u64], niced_yield: bool) -> u64 {
    let total: u64 = fields.iter().take(8).sum();
    let niced = if niced_yield { fields[1] } else { 0 };
    total.saturating_sub(fields[3] + fields[4] + niced)
}

/// Whether programs at a lower priority (nice) give their cores to ours.
/// Without the kernel's session groups (`sched_autogroup_enabled` 0 or
/// absent) they do: a build at nice 19 beside a nice-0 reply got 6–15 % of
/// the cores and the reply the rest, so the reply need not take fewer
/// threads for it (on one thread a reply took twice as long). With them on,
/// nice only orders the processes of one session, and a niced build started
/// in another terminal takes its fair share like any program.
fn niced_programs_yield() -> bool {
    static YIELD: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *YIELD.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled").map_or(true, |v| v.trim() == "0")
    })
}

fn memory_is_short() -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/meminfo") else {
        return false;
    };
    info.lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .is_some_and(|kb| kb * 1024 < MIN_AVAILABLE_BYTES)
}

/// Prompt lookup: the tokens that followed the one earlier occurrence of
/// `history`'s last tokens (the longest run found, `shortest` to
/// [`LOOKUP_NGRAM`] tokens), at most `max`, stopping before an
/// end-of-generation token. Empty when no such run came before, or the
/// longest came more than once.
fn lookup_draft(
    history: &[LlamaToken],
    shortest: usize,
    max: usize,
    is_end: impl Fn(LlamaToken) -> bool,
) -> Vec<LlamaToken> {
    if max == 0 {
        return Vec::new();
    }
    for n in (shortest.max(1)..=LOOKUP_NGRAM).rev() {
        if history.len() <= n {
            continue;
        }
        let tail = &history[history.len() - n..];
        let mut found = (0..history.len() - n).rev().filter(|&start| &history[start..start + n] == tail);
        if let Some(start) = found.next() {
            // Words said more than once were followed by different words:
            // which comes next is a guess, and a wrong guess costs a step.
            if found.next().is_some() {
                return Vec::new();
            }
            return history[start + n..]
                .iter()
                .copied()
                .take(max)
                .take_while(|&t| !is_end(t))
                .collect();
        }
    }
    Vec::new()
}

fn common_prefix(a: &[LlamaToken], b: &[LlamaToken]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// A llama.cpp context kept between calls with the tokens it has evaluated.
struct WarmContext {
    // Declared first: dropped before the model it borrows.
    ctx: LlamaContext<'static>,
    model: Arc<LlamaModel>,
    path: PathBuf,
    n_ctx: usize,
    threads: usize,
    /// The tokens whose keys and values the context holds, from position 0.
    tokens: Vec<LlamaToken>,
    /// The row of the last decode's output that holds the logits of the
    /// last of `tokens`, while nothing has been decoded or removed since: a
    /// call whose prompt is exactly `tokens` (a reply to the words a draft
    /// read ahead) samples its first token from them instead of reading
    /// that token again.
    last_logits: Option<i32>,
    used: Instant,
}

impl WarmContext {
    fn new(
        backend: &LlamaBackend,
        model: Arc<LlamaModel>,
        path: &Path,
        n_ctx: usize,
        threads: usize,
    ) -> Result<Self, ProviderError> {
        let t = i32::try_from(threads).unwrap_or(i32::MAX);
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(u32::try_from(n_ctx).unwrap_or(u32::MAX)))
            .with_n_batch(N_BATCH as u32)
            .with_n_ubatch(N_BATCH as u32)
            .with_n_threads(t)
            .with_n_threads_batch(t);
        let ctx = {
            let _creating = lock(&CONTEXT_CREATION);
            model.new_context(backend, params)
        }
        .map_err(|e| {
            ProviderError::Unavailable(format!("the local engine has no memory for a context: {e}"))
        })?;
        // SAFETY: the context borrows the model, which lives on the heap
        // inside the `Arc` stored beside it in this struct; the struct drops
        // `ctx` before `model` (field order) and never hands the context out
        // beyond its own lifetime, so the borrow never outlives the model.
        #[allow(unsafe_code)]
        let ctx: LlamaContext<'static> = unsafe { std::mem::transmute(ctx) };
        Ok(Self { ctx, model, path: path.to_path_buf(), n_ctx, threads, tokens: Vec::new(), last_logits: None, used: Instant::now() })
    }

    /// The same evaluated tokens in a new context that runs on `threads`
    /// (llama-cpp-2 sets a context's threads only when it is made): the
    /// sequence's keys and values are copied, which takes milliseconds where
    /// reading the tokens again takes seconds. If the copy fails, the new
    /// context starts empty.
    fn with_threads(self, backend: &LlamaBackend, threads: usize) -> Result<Self, ProviderError> {
        let mut moved = Self::new(backend, self.model.clone(), &self.path, self.n_ctx, threads)?;
        let copied = self
            .ctx
            .state_seq_get(0, llama_cpp_2::LlamaStateSeqFlags::empty())
            .and_then(|state| moved.ctx.state_seq_set(&state, 0));
        match copied {
            Ok(()) => moved.tokens = self.tokens,
            Err(e) => {
                tracing::debug!(error = %e, "a warm context could not be moved to other threads");
                moved.ctx.clear_kv_cache();
            }
        }
        Ok(moved)
    }

    /// Forgets the evaluated tokens from position `len` on; false when
    /// llama.cpp could not (the context then holds what it held).
    fn truncate(&mut self, len: usize) -> bool {
        let removed = self.ctx.clear_kv_cache_seq(Some(0), u32::try_from(len).ok(), None).unwrap_or(false);
        if removed {
            self.tokens.truncate(len);
        }
        removed
    }

    /// Forgets proposed tokens the model did not write (from position
    /// `len` on); the last one kept has its logits at `row` of the last batch.
    fn take_back(&mut self, len: usize, row: i32) -> Result<(), ProviderError> {
        if !self.truncate(len) {
            return Err(ProviderError::Unavailable("the local engine could not take back proposed tokens".into()));
        }
        self.last_logits = Some(row);
        Ok(())
    }

    /// Keeps the evaluated prefix shared with `tokens` and returns its
    /// length: all of them when the context holds exactly `tokens` with the
    /// last one's logits, else at least the last token is evaluated again,
    /// for its logits.
    fn keep_prefix(&mut self, tokens: &[LlamaToken]) -> usize {
        let mut keep = common_prefix(&self.tokens, tokens);
        if keep == tokens.len() && keep == self.tokens.len() && self.last_logits.is_some() {
            return keep;
        }
        self.last_logits = None;
        if keep >= tokens.len() {
            keep = tokens.len().saturating_sub(1);
        }
        if !self.truncate(keep) {
            self.ctx.clear_kv_cache();
            self.tokens.clear();
            keep = 0;
        }
        keep
    }
}

impl std::fmt::Debug for WarmContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WarmContext")
            .field("path", &self.path)
            .field("n_ctx", &self.n_ctx)
            .field("tokens", &self.tokens.len())
            .field("params", &self.model.n_params())
            .finish()
    }
}

/// A generation's right to run: the engine's one turn, or the single overlap
/// allowed beside a generation whose caller has gone.
enum Turn<'a> {
    Own { _guard: MutexGuard<'a, ()> },
    Overlap { _guard: MutexGuard<'a, ()> },
}

/// Sets the flag when the `complete` future is dropped, so an abandoned
/// generation stops at the next token.
struct AbandonOnDrop(Arc<AtomicBool>);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[async_trait]
impl Provider for LocalEngine {
    fn name(&self) -> &str {
        "local"
    }

    /// Loads the model if needed and reads its size, training context and
    /// chat template from it. A model that cannot load reports nothing.
    async fn capability(&self, model: &str) -> ModelCapability {
        let Ok(path) = self.model_path(model) else {
            return ModelCapability { local: true, ..ModelCapability::default() };
        };
        let engine = self.clone();
        let read = tokio::task::spawn_blocking(move || {
            engine.model(&path).map(|m| ModelCapability {
                parameters: Some(m.n_params()),
                context: Some(m.n_ctx_train()).filter(|c| *c > 0),
                chat_template: m.chat_template(None).is_ok(),
                local: true,
                languages: m
                    .meta_val_str("general.languages")
                    .map(|l| {
                        l.split(|c: char| !c.is_alphanumeric() && c != '-')
                            .filter(|t| !t.is_empty())
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default(),
            })
        })
        .await;
        match read {
            Ok(Ok(c)) => c,
            _ => ModelCapability { local: true, ..ModelCapability::default() },
        }
    }

    async fn complete(
        &self,
        request: CompletionRequest,
        sink: Option<TokenSink>,
    ) -> Result<Completion, ProviderError> {
        self.run(request, sink, false).await
    }

    /// Reads the prompt into a warm context (kept on disk too) and writes
    /// nothing: the next call that starts with the same messages evaluates
    /// only what follows them. `max_tokens` is the room kept for that call's
    /// reply.
    async fn prefill(&self, request: CompletionRequest) -> Result<Completion, ProviderError> {
        self.run(request, None, true).await
    }
}

impl LocalEngine {
    async fn run(
        &self,
        request: CompletionRequest,
        sink: Option<TokenSink>,
        evaluate_only: bool,
    ) -> Result<Completion, ProviderError> {
        let started = Instant::now();
        let path = self.model_path(&request.model)?;
        let engine = self.clone();
        let abandoned = Arc::new(AtomicBool::new(false));
        let guard = AbandonOnDrop(abandoned.clone());
        let cancel = request.cancel.clone();
        let generation = tokio::task::spawn_blocking(move || {
            engine.generate(&path, &request, sink.as_ref(), started, &abandoned, evaluate_only)
        });
        // A cancelled call returns at once: the engine thread may be inside a
        // prompt batch for seconds, and whoever cancelled (a reply preempting
        // background work, the user's abort) must not wait for it. The thread
        // stops at its next boundary; the next generation does not wait.
        let result = tokio::select! {
            r = generation => r,
            () = cancel.cancelled() => return Ok(cancelled_empty()),
        };
        // Finished: flagging the generation as abandoned now is harmless.
        drop(guard);
        result.map_err(|e| {
            ProviderError::Unavailable(format!("the local engine stopped unexpectedly: {e}"))
        })?
    }
}

fn cancelled_empty() -> Completion {
    cancelled_empty_with(0)
}

fn cancelled_empty_with(prompt_tokens: usize) -> Completion {
    Completion {
        text: String::new(),
        prompt_tokens: u32::try_from(prompt_tokens).unwrap_or(u32::MAX),
        completion_tokens: 0,
        finish: FinishReason::Cancelled,
        first_token_ms: None,
        tool_calls: Vec::new(),
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

/// ChatML, for models that ship no (usable) chat template.
pub fn chatml_prompt(messages: &[ChatMessage]) -> String {
    let mut out = String::new();
    for m in messages {
        out.push_str("<|im_start|>");
        out.push_str(role_name(m.role));
        out.push('\n');
        out.push_str(&m.content);
        out.push_str("<|im_end|>\n");
    }
    out.push_str("<|im_start|>assistant\n");
    out
}

/// The model's own chat template applied to the messages, or ChatML when
/// the model has none or llama.cpp does not know it.
fn render_prompt(model: &LlamaModel, messages: &[ChatMessage]) -> String {
    let chat: Result<Vec<LlamaChatMessage>, _> = messages
        .iter()
        .map(|m| LlamaChatMessage::new(role_name(m.role).to_string(), m.content.replace('\0', "")))
        .collect();
    let rendered = match (model.chat_template(None), chat) {
        (Ok(template), Ok(chat)) => model.apply_chat_template(&template, &chat, true).ok(),
        _ => None,
    };
    rendered.filter(|p| !p.is_empty()).unwrap_or_else(|| {
        tracing::debug!("model has no usable chat template; using ChatML");
        chatml_prompt(messages)
    })
}

/// The persona's last replies in the prompt, oldest first.
fn recent_replies(request: &CompletionRequest) -> impl Iterator<Item = &str> {
    let replies: Vec<&str> = request.messages.iter().filter(|m| m.role == Role::Assistant).map(|m| m.content.as_str()).collect();
    let from = replies.len().saturating_sub(RECENT_REPLIES_AVOIDED);
    replies.into_iter().skip(from)
}

/// How the model writes each of `words`, at a sentence's start and after
/// a space, as tokens.
fn spellings<'a>(model: &'a LlamaModel, words: &'a [String]) -> impl Iterator<Item = Vec<LlamaToken>> + 'a {
    let vocab = model.vocab();
    words.iter().flat_map(|w| [w.clone(), format!(" {w}")]).map(move |w| vocab.tokenize(w.as_bytes(), false, false))
}

/// Samples (and accepts) a token as `sampler.sample` does, with the
/// `avoided` tokens out of the running.
fn sample_avoiding(sampler: &mut LlamaSampler, ctx: &LlamaContext<'_>, idx: i32, avoided: &[LlamaToken]) -> LlamaToken {
    let mut candidates = ctx.token_data_array_ith(idx);
    for c in candidates.data.iter_mut().filter(|c| avoided.contains(&c.id())) {
        c.set_logit(f32::NEG_INFINITY);
    }
    candidates.apply_sampler(sampler);
    match candidates.selected_token() {
        Some(token) => {
            sampler.accept(token);
            token
        }
        None => sampler.sample(ctx, idx),
    }
}

fn build_sampler(
    model: &LlamaModel,
    request: &CompletionRequest,
) -> Result<LlamaSampler, ProviderError> {
    let mut chain = Vec::new();
    if request.json_schema.is_none() && !request.never.is_empty() {
        // Only a word the model writes as one token can be kept out whole.
        let never: Vec<LlamaLogitBias> = spellings(model, &request.never)
            .filter(|t| t.len() == 1)
            .map(|t| LlamaLogitBias::new(t[0], f32::NEG_INFINITY))
            .collect();
        if !never.is_empty() {
            chain.push(LlamaSampler::logit_bias(model.n_vocab(), &never));
        }
    }
    if let Some(schema) = &request.json_schema {
        let grammar = llama_cpp_2::json_schema_to_grammar(&schema.to_string()).map_err(|e| {
            ProviderError::Http {
                status: 400,
                message: format!("unsupported JSON schema: {e}"),
            }
        })?;
        let sampler =
            LlamaSampler::grammar(model, &grammar, "root").map_err(|e| ProviderError::Http {
                status: 400,
                message: format!("unusable JSON schema grammar: {e}"),
            })?;
        chain.push(sampler);
    }
    let free_text = request.json_schema.is_none();
    let top_p = match request.sampling {
        Some(s) if free_text => {
            if s.repeat_penalty != 1.0 {
                chain.push(LlamaSampler::penalties(model.n_vocab(), s.penalty_last_n, s.repeat_penalty, 0.0, 0.0));
            }
            if s.dry_multiplier > 0.0 {
                // llama.cpp's defaults: base 1.75, allowed length 2, the
                // whole context, its sequence breakers.
                chain.push(LlamaSampler::dry(model, s.dry_multiplier, 1.75, 2, -1, ["\n", ":", "\"", "*"]));
            }
            s.top_p
        }
        _ => 0.95,
    };
    if request.temperature <= 0.0 {
        chain.push(LlamaSampler::greedy());
    } else {
        chain.push(LlamaSampler::top_k(40));
        chain.push(LlamaSampler::top_p(top_p, 1));
        chain.push(LlamaSampler::min_p(0.05, 1));
        chain.push(LlamaSampler::temp(request.temperature));
        chain.push(LlamaSampler::dist(rand::random::<u32>()));
    }
    Ok(LlamaSampler::chain_simple(chain))
}

/// Turns token bytes into text, holding back a multi-byte character split
/// across tokens until it is complete. Invalid bytes become U+FFFD.
#[derive(Debug, Default)]
pub(crate) struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    pub(crate) fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    out.push_str(&String::from_utf8_lossy(&self.pending[..valid]));
                    match e.error_len() {
                        // An incomplete character at the end: wait for more.
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    /// Whatever is left at the end of generation.
    pub(crate) fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).to_string();
        self.pending.clear();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A build at nice 19 takes no threads from a reply where niced programs
    /// give way; elsewhere it counts like any program.
    #[test]
    fn niced_programs_count_as_busy_only_where_they_do_not_give_way() {
        // user, nice, system, idle, iowait, irq, softirq, steal
        let fields = [100, 300, 50, 500, 40, 5, 5, 0];
        assert_eq!(busy_ticks(&fields, false), 460);
        assert_eq!(busy_ticks(&fields, true), 160);
    }

    /// Proposed: what followed the one earlier run of the last tokens,
    /// the longest run first; nothing after a run said more than once.
    #[test]
    fn a_lookup_proposes_what_followed_the_last_words_once_before() {
        let t = |v: &[i32]| v.iter().map(|&x| LlamaToken(x)).collect::<Vec<_>>();
        let end = |x: LlamaToken| x.0 == 99;
        // "capital" (7) once before, followed by "of Italy ?" (8 9 10).
        assert_eq!(lookup_draft(&t(&[1, 7, 8, 9, 10, 2, 3, 7]), 1, 3, end), t(&[8, 9, 10]));
        assert_eq!(lookup_draft(&t(&[1, 7, 8, 9, 10, 2, 3, 7]), 1, 2, end), t(&[8, 9]));
        assert_eq!(lookup_draft(&t(&[1, 7, 8, 9, 10, 2, 3, 7]), 1, 0, end), t(&[]));
        // Never before: nothing.
        assert_eq!(lookup_draft(&t(&[1, 2, 3, 4]), 1, 3, end), t(&[]));
        // "5 6" twice before, followed by different words: a guess, not proposed.
        assert_eq!(lookup_draft(&t(&[5, 6, 1, 5, 6, 2, 5, 6]), 1, 3, end), t(&[]));
        // The longer run decides: "4 5 6" once before, though "5 6" twice.
        assert_eq!(lookup_draft(&t(&[4, 5, 6, 7, 8, 5, 6, 0, 4, 5, 6]), 1, 3, end), t(&[7, 8, 5]));
        // An end of generation is never proposed.
        assert_eq!(lookup_draft(&t(&[7, 8, 99, 3, 7]), 1, 3, end), t(&[8]));
        // What follows may run into the words just said.
        assert_eq!(lookup_draft(&t(&[7, 8, 7]), 1, 3, end), t(&[8, 7]));
        // Two words in common at the least: one is not enough.
        assert_eq!(lookup_draft(&t(&[1, 7, 8, 9, 10, 2, 3, 7]), 2, 3, end), t(&[]));
        assert_eq!(lookup_draft(&t(&[1, 3, 7, 8, 9, 10, 2, 3, 7]), 2, 3, end), t(&[8, 9, 10]));
    }

    #[test]
    fn utf8_split_across_tokens() {
        let mut s = Utf8Stream::default();
        let euro = "€".as_bytes(); // 3 bytes
        assert_eq!(s.push(b"a"), "a");
        assert_eq!(s.push(&euro[..1]), "");
        assert_eq!(s.push(&euro[1..2]), "");
        assert_eq!(s.push(&[euro[2], b'b']), "€b");
        let crab = "🦀".as_bytes();
        assert_eq!(s.push(&crab[..3]), "");
        assert_eq!(s.push(&crab[3..]), "🦀");
        assert_eq!(s.push(&[0xff, b'x']), "\u{FFFD}x");
        assert_eq!(s.push(&euro[..2]), "");
        assert_eq!(s.finish(), "\u{FFFD}");
        assert_eq!(s.finish(), "");
    }

    #[test]
    fn model_names_resolve_inside_the_dir() {
        let e = LocalEngine::new(PathBuf::from("/models"), 1);
        assert_eq!(
            e.model_path("a.Q4").expect("ok"),
            PathBuf::from("/models/a.Q4.gguf")
        );
        assert_eq!(
            e.model_path("a.gguf").expect("ok"),
            PathBuf::from("/models/a.gguf")
        );
        for bad in ["", "../x", "a/b", ".hidden", "a\\b"] {
            assert!(
                matches!(e.model_path(bad), Err(ProviderError::ModelLoad(_))),
                "{bad}"
            );
        }
    }

    /// The engine's watcher reads the counters while it lives, so a
    /// generation finds some old enough to judge the CPU by at once.
    #[test]
    fn the_cpu_is_watched_while_the_engine_lives() {
        let engine = LocalEngine::new(PathBuf::from("/m"), 0);
        assert!(lock(&engine.shared.cpu_seen).usable().is_none());
        watch_cpu(Arc::downgrade(&engine.shared));
        // Two readings and the 60 ms after them, with room for a busy machine.
        let watching = Instant::now();
        while lock(&engine.shared.cpu_seen).usable().is_none() && watching.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(lock(&engine.shared.cpu_seen).usable().is_some(), "no counters were read");
        let weak = Arc::downgrade(&engine.shared);
        drop(engine);
        // The watcher holds the engine only while it records a reading.
        let dropped = Instant::now();
        while weak.upgrade().is_some() && dropped.elapsed() < CPU_TICK * 4 {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(weak.upgrade().is_none(), "the watcher keeps the engine alive");
    }

    /// With every core kept busy by other processes, a generation takes
    /// one thread, not one per core.
    #[test]
    fn a_generation_leaves_the_cores_other_programs_use() {
        let cores = num_cpus::get().max(2);
        let mut spinners: Vec<std::process::Child> = (0..cores)
            .map(|_| {
                std::process::Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .spawn()
                    .expect("sh")
            })
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        let busy = threads_free_now(cores, &Mutex::new(CpuSeen::default()));
        // The counters a generation that ended 100 ms ago left: the CPU
        // since then is judged at once.
        let mut seen = CpuSeen::default();
        seen.record(Instant::now(), cpu_times().expect("counters"));
        std::thread::sleep(Duration::from_millis(100));
        let judging = Instant::now();
        let busy_since = threads_free_now(cores, &Mutex::new(seen));
        let waited = judging.elapsed();
        // Counters read just now are too fresh to judge by: the ones read
        // before them are used, still without waiting.
        seen.record(Instant::now(), cpu_times().expect("counters"));
        let judging = Instant::now();
        let busy_before = threads_free_now(cores, &Mutex::new(seen));
        let waited_before = judging.elapsed();
        for s in &mut spinners {
            let _ = s.kill();
            let _ = s.wait();
        }
        assert_eq!(busy, 1, "{cores} cores busy elsewhere");
        assert_eq!(busy_since, 1, "{cores} cores busy elsewhere since the last generation");
        assert!(waited < CPU_SAMPLE / 2, "judged in {waited:?}");
        assert_eq!(busy_before, 1, "{cores} cores busy elsewhere since the counters before the newest");
        assert!(waited_before < CPU_SAMPLE / 2, "judged in {waited_before:?}");
        assert_eq!(threads_free_now(1, &Mutex::new(CpuSeen::default())), 1);
    }

    #[test]
    fn threads_default() {
        assert!(default_threads() >= 1);
        assert_eq!(
            LocalEngine::new(PathBuf::from("/m"), 0).threads(),
            default_threads()
        );
        assert_eq!(
            LocalEngine::new(PathBuf::from("/m"), 3)
                .with_threads(2)
                .threads(),
            2
        );
    }

    #[test]
    fn chatml_fallback() {
        let p = chatml_prompt(&[ChatMessage::new(Role::User, "hi")]);
        assert_eq!(p, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    }

    #[test]
    fn list_models_finds_gguf_stems() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("b.Q4.gguf"), b"x").expect("write");
        std::fs::write(dir.path().join("a.gguf"), b"x").expect("write");
        std::fs::write(dir.path().join("notes.txt"), b"x").expect("write");
        let e = LocalEngine::new(dir.path().to_path_buf(), 1);
        assert_eq!(e.list_models(), vec!["a".to_string(), "b.Q4".to_string()]);
    }
}
