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
            ctx.engine.prefetch_embedding(&text);
            tokio::time::sleep(std::time::Duration::from_millis(TYPING_PAUSE_MS)).await;
        }
        let mut rx = ctx.engine.subscribe();
        let request = match ctx.engine.send_message(persona, &text).await {
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
    let timings = ctx.engine.reply_timings();
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
