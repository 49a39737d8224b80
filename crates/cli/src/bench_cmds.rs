//! `ledgermind bench chat`: send → first token, split into our overhead and
//! the model's own time, on the real local model.

use std::process::ExitCode;

use app::{AppEvent, ReplyTiming};

use crate::common::{fail, Ctx};

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// How long the simulated person pauses between the draft and the send.
const TYPING_PAUSE_MS: u64 = 300;

pub async fn chat(ctx: &Ctx, persona: &str, runs: usize) -> ExitCode {
    let prompts = [
        "Hello! How are you today?",
        "What is a good name for a cat?",
        "Tell me one fact about the moon.",
        "Give me a word that rhymes with light.",
    ];
    // Odd runs are "typed": the draft is handed over first, as the app's
    // composer does when typing pauses (after 250 ms), and the send follows a
    // short pause. Even runs are "cold", like a script calling `chat`. Every
    // text is unique, so no run finds another run's embedding cached.
    let mut typed = Vec::new();
    for i in 0..runs {
        let text = format!("{} (run {i})", prompts[i % prompts.len()]);
        let is_typed = i % 2 == 1;
        if is_typed {
            ctx.engine.memory().prefetch_embedding(&text);
            tokio::time::sleep(std::time::Duration::from_millis(TYPING_PAUSE_MS)).await;
        }
        let mut rx = ctx.engine.subscribe();
        let request = match ctx.engine.conversation().send_message(persona, &text).await {
            Ok((_, r)) => r,
            Err(e) => return fail(&e),
        };
        if is_typed {
            typed.push(request.clone());
        }
        loop {
            match rx.recv().await {
                Ok(AppEvent::ReplyFinished { request_id, .. }) if request_id == request => break,
                Ok(AppEvent::ReplyFailed { request_id, error, .. }) if request_id == request => {
                    eprintln!("error [{}]: {}", error.code, error.message);
                    return ExitCode::from(1);
                }
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(_) => return ExitCode::from(1),
            }
        }
    }
    let timings = ctx.engine.conversation().reply_timings();
    // The first reply loads the model; report it apart.
    let (first, rest) = match timings.split_first() {
        Some((f, r)) => (f, r),
        None => return ExitCode::from(1),
    };
    let pick = |typed_runs: bool| -> Vec<&ReplyTiming> {
        rest.iter().filter(|t| typed.contains(&t.request_id) == typed_runs).collect()
    };
    let sorted = |ts: &[&ReplyTiming], f: fn(&ReplyTiming) -> f64| -> Vec<f64> {
        let mut v: Vec<f64> = ts.iter().map(|t| f(t)).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        v
    };
    let (cold, warm) = (pick(false), pick(true));
    let mut model: Vec<f64> = rest.iter().map(|t| t.model_first_token_ms).collect();
    let mut commit: Vec<f64> = rest.iter().map(|t| t.commit_ms).collect();
    for v in [&mut model, &mut commit] {
        v.sort_by(|a, b| a.total_cmp(b));
    }
    let tokens: u32 = rest.iter().map(|t| t.completion_tokens).sum();
    let gen_ms: f64 = rest.iter().map(|t| t.total_ms - t.overhead_ms - t.commit_ms).sum();
    println!("runs: {} (+1 warm-up that loaded the model: first token after {:.0} ms)", rest.len(), first.model_first_token_ms + first.overhead_ms);
    for (label, set) in [("typed (draft handed over while typing)", &warm), ("cold (sent without a draft)", &cold)] {
        let overhead = sorted(set, |t| t.overhead_ms);
        let retrieval = sorted(set, |t| t.retrieval_ms);
        let write = sorted(set, |t| t.write_ms);
        let wait = sorted(set, |t| t.queue_wait_ms);
        let reads = sorted(set, |t| t.reads_ms);
        let frame = sorted(set, |t| t.frame_ms);
        let planner = sorted(set, |t| t.planner_ms);
        println!("{label}, {} runs:", set.len());
        println!("  our overhead send→provider (ledger write, queue, prompt): p50 {:.2} ms  p95 {:.2} ms", percentile(&overhead, 0.5), percentile(&overhead, 0.95));
        println!("    of which writing the message and its job:              p50 {:.2} ms  p95 {:.2} ms", percentile(&write, 0.5), percentile(&write, 0.95));
        println!("    of which waiting for the reply worker:                 p50 {:.2} ms  p95 {:.2} ms", percentile(&wait, 0.5), percentile(&wait, 0.95));
        println!("    of which reading persona, profile, history, quota:     p50 {:.2} ms  p95 {:.2} ms", percentile(&reads, 0.5), percentile(&reads, 0.95));
        println!("    of which ranking memories for the prompt:              p50 {:.2} ms  p95 {:.2} ms", percentile(&retrieval, 0.5), percentile(&retrieval, 0.95));
        println!("    of which the context frame and its narrative:          p50 {:.2} ms  p95 {:.2} ms", percentile(&frame, 0.5), percentile(&frame, 0.95));
        println!("    of which the planner request:                          p50 {:.2} ms  p95 {:.2} ms", percentile(&planner, 0.5), percentile(&planner, 0.95));
    }
    println!("each run, ms (overhead = write + wait + prepare; reads, retrieval, frame and planner are parts of prepare):");
    for t in rest {
        let kind = if typed.contains(&t.request_id) { "typed" } else { "cold " };
        println!(
            "  {kind} overhead {:7.2}  write {:6.2}  wait {:6.2}  reads {:5.2}  retrieval {:6.2}  frame {:5.2}  planner {:5.2}  model first token {:8.0}",
            t.overhead_ms, t.write_ms, t.queue_wait_ms, t.reads_ms, t.retrieval_ms, t.frame_ms, t.planner_ms, t.model_first_token_ms
        );
    }
    let overhead = sorted(&warm, |t| t.overhead_ms);
    println!("model time provider→first token:                       p50 {:.2} ms  p95 {:.2} ms", percentile(&model, 0.5), percentile(&model, 0.95));
    println!("reply commit to ledger after the last token:            p50 {:.2} ms  p95 {:.2} ms", percentile(&commit, 0.5), percentile(&commit, 0.95));
    println!("typed overhead / model first-token time (p50 ratio):    {:.3}", percentile(&overhead, 0.5) / percentile(&model, 0.5));
    if gen_ms > 0.0 {
        println!("generation: {} tokens, {:.1} tokens/s including first-token latency", tokens, f64::from(tokens) / (gen_ms / 1e3));
    }
    ExitCode::SUCCESS
}

// ----- `ledgermind bench replies` -----

/// The conversations (en and pt-BR, written for this benchmark).
const REPLY_SET: &str = include_str!("../bench/replies.json");
/// Reply length limit of the anchor (the same model, minimal prompt).
const ANCHOR_MAX_TOKENS: u32 = 128;
/// Turn windows the latency is reported at: turn 1, about 10 and about 30.
const TURN_WINDOWS: [(&str, usize, usize); 3] = [("turn 1", 1, 2), ("turn 10", 9, 11), ("turn 30", 28, 30)];
/// A reply repeating a run of this many words (or a sentence) loops.
const LOOP_RUN_WORDS: usize = 6;

#[derive(Debug, clap::Args)]
pub struct RepliesArgs {
    /// Which conversations: tune, held-out or all.
    #[arg(long, default_value = "all")]
    pub split: String,
    /// Only these conversation ids (comma-separated).
    #[arg(long)]
    pub only: Option<String>,
    /// Skip the anchor (the model with a minimal prompt and default samplers).
    #[arg(long)]
    pub no_anchor: bool,
    /// Print every reply.
    #[arg(long)]
    pub verbose: bool,
    /// Send each message as soon as the last reply is done, without the
    /// next prompt read ahead (as one `ledgermind chat` per message does).
    #[arg(long)]
    pub no_read_ahead: bool,
    /// Hand each message over as a draft before it is sent, as the window's
    /// composer does when typing pauses, and wait until the draft is read
    /// (a person still typing or pausing that long) before sending it.
    #[arg(long)]
    pub drafts: bool,
}

#[derive(Debug, serde::Deserialize)]
struct ReplySet {
    conversations: Vec<Conversation>,
}

#[derive(Debug, serde::Deserialize)]
struct Conversation {
    id: String,
    split: String,
    language: String,
    persona: String,
    description: String,
    turns: Vec<Turn>,
}

#[derive(Debug, serde::Deserialize)]
struct Turn {
    say: String,
    #[serde(default)]
    expect: Vec<String>,
}

/// One measured turn.
#[derive(Debug, Clone)]
struct Measured {
    split: String,
    turn: usize,
    question: bool,
    answered: bool,
    looped: bool,
    failed: bool,
    prompt_tokens: u32,
    first_token_ms: f64,
    reply_ms: f64,
    /// After the reply, until the next prompt was read ahead: how long the
    /// person must read and type for the next first token to be as measured.
    read_ahead_ms: f64,
    /// How long the draft took to read before the send (NaN: no draft).
    draft_ms: f64,
}

/// Lower case without accents, so "Violão" matches "violao".
fn fold(text: &str) -> String {
    text.to_lowercase()
        .chars()
        .map(|c| match c {
            'á' | 'à' | 'â' | 'ã' | 'ä' => 'a',
            'é' | 'ê' | 'è' | 'ë' => 'e',
            'í' | 'î' | 'ì' | 'ï' => 'i',
            'ó' | 'ô' | 'õ' | 'ò' | 'ö' => 'o',
            'ú' | 'û' | 'ù' | 'ü' => 'u',
            'ç' => 'c',
            c => c,
        })
        .collect()
}

fn judge(turn: &Turn, reply: &str) -> (bool, bool) {
    let folded = fold(reply);
    let answered = !turn.expect.is_empty() && turn.expect.iter().any(|e| folded.contains(&fold(e)));
    let looped = repeats_itself(reply, LOOP_RUN_WORDS);
    (answered, looped)
}

/// Whether a reply repeats itself: a sentence of three words or more said
/// twice, or a run of `run` words said twice (words compared without case
/// and punctuation). Independent of the engine's own loop guard.
fn repeats_itself(text: &str, run: usize) -> bool {
    let words: Vec<(String, bool)> = text
        .split_whitespace()
        .map(|w| {
            let norm: String = w.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect();
            (norm, w.trim_end_matches(['"', '\'', ')', '*']).ends_with(['.', '!', '?', '…']))
        })
        .filter(|(n, _)| !n.is_empty())
        .collect();
    let mut runs = std::collections::HashSet::new();
    if words.windows(run).any(|w| !runs.insert(w.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>())) {
        return true;
    }
    let mut sentences = std::collections::HashSet::new();
    let mut current = Vec::new();
    for (norm, ends) in &words {
        current.push(norm.as_str());
        if *ends {
            if current.len() >= 3 && !sentences.insert(current.clone()) {
                return true;
            }
            current.clear();
        }
    }
    false
}

fn short(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out: String = one_line.chars().take(140).collect();
    if one_line.chars().count() > 140 {
        out.push('…');
    }
    out
}

pub async fn replies(ctx: &Ctx, args: RepliesArgs) -> ExitCode {
    let set: ReplySet = match serde_json::from_str(REPLY_SET) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: the reply set is unreadable: {e}");
            return ExitCode::from(1);
        }
    };
    let only: Option<Vec<&str>> = args.only.as_deref().map(|o| o.split(',').map(str::trim).collect());
    let chosen: Vec<&Conversation> = set
        .conversations
        .iter()
        .filter(|c| args.split == "all" || c.split == args.split)
        .filter(|c| only.as_ref().is_none_or(|o| o.contains(&c.id.as_str())))
        .collect();
    if chosen.is_empty() {
        eprintln!("error: no conversation matches --split {} --only {:?}", args.split, args.only);
        return ExitCode::from(2);
    }
    let model = app::DEFAULT_LOCAL_MODEL;
    // The anchor runs first, alone, so our background work does not share the CPU with it.
    let anchor = if args.no_anchor { None } else { Some(anchor_run(ctx, &chosen, model, args.verbose).await) };
    let mut ours = Vec::new();
    for c in &chosen {
        match our_run(ctx, c, args.verbose, !args.no_read_ahead, args.drafts).await {
            Ok(mut m) => ours.append(&mut m),
            Err(code) => return code,
        }
    }
    print_table(&chosen, &ours, anchor.as_deref());
    ExitCode::SUCCESS
}

async fn our_run(ctx: &Ctx, c: &Conversation, verbose: bool, read_ahead: bool, drafts: bool) -> Result<Vec<Measured>, ExitCode> {
    let persona = ctx.engine.personas().create_persona(&c.persona, &c.description).await.map_err(|e| fail(&e))?;
    ctx.engine.office().set_persona_language(&persona.id, &c.language).await.map_err(|e| fail(&e))?;
    let conversation = ctx.engine.conversation();
    // As the window does: the chat opens, then the person reads each reply
    // and writes the next message.
    conversation.read_ahead_between_turns(read_ahead);
    if read_ahead {
        conversation.open(&persona.id).await;
    }
    let mut out = Vec::new();
    for (i, turn) in c.turns.iter().enumerate() {
        let draft_ms = if drafts {
            let typing = std::time::Instant::now();
            conversation.draft_typed(Some(&persona.id), &turn.say).await;
            typing.elapsed().as_secs_f64() * 1e3
        } else {
            f64::NAN
        };
        let mut rx = ctx.engine.subscribe();
        let request = ctx.engine.conversation().send_message(&persona.id, &turn.say).await.map_err(|e| fail(&e))?.1;
        let reply = loop {
            match rx.recv().await {
                Ok(AppEvent::ReplyFinished { request_id, message }) if request_id == request => break Ok(message.content),
                Ok(AppEvent::ReplyFailed { request_id, error, .. }) if request_id == request => break Err(format!("[{}] {}", error.code, error.message)),
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(_) => return Err(ExitCode::from(1)),
            }
        };
        let reading = std::time::Instant::now();
        conversation.until_read_ahead().await;
        let read_ahead_ms = if read_ahead { reading.elapsed().as_secs_f64() * 1e3 } else { f64::NAN };
        let timing = ctx.engine.conversation().reply_timings().into_iter().find(|t| t.request_id == request);
        let (text, failed) = match &reply {
            Ok(t) => (t.as_str(), false),
            Err(e) => (e.as_str(), true),
        };
        let (answered, looped) = if failed { (false, false) } else { judge(turn, text) };
        if verbose || !turn.expect.is_empty() {
            eprintln!("ours   {} #{:<2} {:>5} {} → {}", c.id, i + 1, if turn.expect.is_empty() { "" } else if answered { "OK" } else { "MISS" }, turn.say, short(text));
        }
        if verbose {
            if let Some(t) = &timing {
                eprintln!(
                    "       first token {:.0} ms = ours {:.0} (retrieval {:.0}, frame {:.0}) + model {:.0}; prompt {} tokens; whole reply {:.0} ms",
                    t.overhead_ms + t.model_first_token_ms, t.overhead_ms, t.retrieval_ms, t.frame_ms, t.model_first_token_ms, t.prompt_tokens, t.total_ms
                );
            }
        }
        out.push(Measured {
            split: c.split.clone(),
            turn: i + 1,
            question: !turn.expect.is_empty(),
            answered,
            looped,
            failed,
            prompt_tokens: timing.as_ref().map_or(0, |t| t.prompt_tokens),
            first_token_ms: timing.as_ref().map_or(f64::NAN, |t| t.overhead_ms + t.model_first_token_ms),
            reply_ms: timing.as_ref().map_or(f64::NAN, |t| t.total_ms),
            read_ahead_ms,
            draft_ms,
        });
    }
    Ok(out)
}

#[cfg(feature = "local")]
async fn anchor_run(ctx: &Ctx, chosen: &[&Conversation], model: &str, verbose: bool) -> Vec<Measured> {
    use providers::{ChatMessage, CompletionRequest, Provider, Role};
    let threads = std::env::var("LEDGERMIND_THREADS").ok().and_then(|t| t.parse().ok()).unwrap_or(0);
    let engine = providers::LocalEngine::new(ctx.engine.data_dir().models(), threads);
    let mut out = Vec::new();
    for c in chosen {
        let mut messages = vec![ChatMessage::new(Role::System, format!("You are {}. {}", c.persona, c.description))];
        for (i, turn) in c.turns.iter().enumerate() {
            messages.push(ChatMessage::new(Role::User, turn.say.clone()));
            let mut request = CompletionRequest::chat(model, messages.clone());
            // llama.cpp's default samplers (top-k 40, top-p 0.95, min-p 0.05, temperature 0.8), no repetition control.
            request.temperature = 0.8;
            request.max_tokens = ANCHOR_MAX_TOKENS;
            // Every call evaluates its whole prompt, as a plain llama.cpp call does.
            engine.drop_warm_contexts();
            let started = std::time::Instant::now();
            let result = engine.complete(request, None).await;
            let reply_ms = started.elapsed().as_secs_f64() * 1e3;
            let m = match result {
                Ok(done) => {
                    let (answered, looped) = judge(turn, &done.text);
                    if verbose || !turn.expect.is_empty() {
                        eprintln!("anchor {} #{:<2} {:>5} {} → {}", c.id, i + 1, if turn.expect.is_empty() { "" } else if answered { "OK" } else { "MISS" }, turn.say, short(&done.text));
                    }
                    messages.push(ChatMessage::new(Role::Assistant, done.text.trim().to_owned()));
                    Measured {
                        split: c.split.clone(),
                        turn: i + 1,
                        question: !turn.expect.is_empty(),
                        answered,
                        looped,
                        failed: false,
                        prompt_tokens: done.prompt_tokens,
                        first_token_ms: done.first_token_ms.unwrap_or(f64::NAN),
                        reply_ms,
                        read_ahead_ms: f64::NAN,
                        draft_ms: f64::NAN,
                    }
                }
                Err(e) => {
                    eprintln!("anchor {} #{} failed: {e}", c.id, i + 1);
                    messages.pop();
                    Measured { split: c.split.clone(), turn: i + 1, question: !turn.expect.is_empty(), answered: false, looped: false, failed: true, prompt_tokens: 0, first_token_ms: f64::NAN, reply_ms, read_ahead_ms: f64::NAN, draft_ms: f64::NAN }
                }
            };
            out.push(m);
        }
    }
    out
}

#[cfg(not(feature = "local"))]
async fn anchor_run(_: &Ctx, _: &[&Conversation], _: &str, _: bool) -> Vec<Measured> {
    Vec::new()
}

fn print_table(chosen: &[&Conversation], ours: &[Measured], anchor: Option<&[Measured]>) {
    let splits: Vec<&str> = {
        let mut s: Vec<&str> = chosen.iter().map(|c| c.split.as_str()).collect();
        s.sort();
        s.dedup();
        s
    };
    let answered = |m: &[Measured], split: Option<&str>| -> String {
        let qs: Vec<&Measured> = m.iter().filter(|x| x.question && split.is_none_or(|s| x.split == s)).collect();
        let ok = qs.iter().filter(|x| x.answered).count();
        if qs.is_empty() {
            return "-".into();
        }
        format!("{ok}/{} = {:.0}%", qs.len(), 100.0 * ok as f64 / qs.len() as f64)
    };
    let looping = |m: &[Measured]| format!("{}/{}", m.iter().filter(|x| x.looped).count(), m.len());
    let failed = |m: &[Measured]| format!("{}", m.iter().filter(|x| x.failed).count());
    let window = |m: &[Measured], lo: usize, hi: usize, f: fn(&Measured) -> f64| -> Vec<f64> {
        let mut v: Vec<f64> = m.iter().filter(|x| x.turn >= lo && x.turn <= hi && !x.failed).map(f).filter(|v| v.is_finite()).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        v
    };
    let pct = |v: &[f64]| -> String {
        if v.is_empty() {
            return "-".into();
        }
        format!("p50 {:.2} p95 {:.2} s (n={})", percentile(v, 0.5) / 1e3, percentile(v, 0.95) / 1e3, v.len())
    };
    let tokens = |v: &[f64]| -> String {
        if v.is_empty() {
            return "-".into();
        }
        format!("p50 {:.0} max {:.0}", percentile(v, 0.5), v[v.len() - 1])
    };
    let empty: &[Measured] = &[];
    let a = anchor.unwrap_or(empty);
    let row = |label: &str, o: String, a: String| println!("{label:<34} {o:<36} {a}");
    println!("conversations: {} ({}), turns: {}, questions: {}", chosen.len(), splits.join(" + "), ours.len(), ours.iter().filter(|m| m.question).count());
    row("", "ours".into(), "anchor (minimal prompt, llama.cpp default samplers)".into());
    row("answered", answered(ours, None), answered(a, None));
    for s in &splits {
        row(&format!("  answered, {s}"), answered(ours, Some(*s)), answered(a, Some(*s)));
    }
    row("looping replies", looping(ours), looping(a));
    row("failed replies", failed(ours), failed(a));
    for (label, lo, hi) in TURN_WINDOWS {
        row(&format!("prompt tokens, {label} ({lo}-{hi})"), tokens(&window(ours, lo, hi, |m| f64::from(m.prompt_tokens))), tokens(&window(a, lo, hi, |m| f64::from(m.prompt_tokens))));
    }
    for (label, lo, hi) in TURN_WINDOWS {
        row(&format!("first token, {label} ({lo}-{hi})"), pct(&window(ours, lo, hi, |m| m.first_token_ms)), pct(&window(a, lo, hi, |m| m.first_token_ms)));
    }
    for (label, lo, hi) in TURN_WINDOWS {
        row(&format!("whole reply, {label} ({lo}-{hi})"), pct(&window(ours, lo, hi, |m| m.reply_ms)), pct(&window(a, lo, hi, |m| m.reply_ms)));
    }
    row("whole reply, all turns", pct(&window(ours, 1, usize::MAX, |m| m.reply_ms)), pct(&window(a, 1, usize::MAX, |m| m.reply_ms)));
    row("next prompt read ahead after reply", pct(&window(ours, 1, usize::MAX, |m| m.read_ahead_ms)), "-".into());
    row("draft read before the send", pct(&window(ours, 1, usize::MAX, |m| m.draft_ms)), "-".into());
}
