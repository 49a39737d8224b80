//! The office's commands: the context frame, session endings, the
//! constitution, and one dreaming cycle.

use std::process::ExitCode;

use app::{SessionEnd, SessionType};

use crate::common::{fail, print_json, Ctx};

#[derive(Debug, clap::Args)]
pub struct FrameArgs {
    persona: String,
    /// work | assist | deliberate | research (default: the persona's
    /// current session type, the one its next reply uses).
    #[arg(long)]
    session_type: Option<String>,
    #[arg(long)]
    json: bool,
}

/// Prints the frame the persona's next reply would use.
pub async fn frame(ctx: &Ctx, args: FrameArgs) -> ExitCode {
    let current = match &args.session_type {
        Some(t) => t.clone(),
        None => match ctx.engine.office().session_mode(&args.persona).await {
            Ok(s) => s.session_type,
            Err(e) => return fail(&e),
        },
    };
    let Some(session_type) = SessionType::parse(&current) else {
        eprintln!("error [INVALID_INPUT]: the session type must be work, assist, deliberate or research");
        return ExitCode::from(2);
    };
    match ctx.engine.office().frame(&args.persona, session_type).await {
        Ok(frame) if args.json => print_json(&frame),
        Ok(frame) => {
            println!("{}", frame.narrative);
            println!();
            let b = &frame.token_budget;
            println!("frame_hash {}", frame.frame_hash);
            println!("tokens {} of {} ({} budget {}, counter {})", b.used, b.effective, b.session_type.as_str(), b.budget, b.counter);
            for s in &b.sections {
                println!("  {:<14} {:>5} tokens {:>5.1} %  dropped {}", s.name, s.tokens, s.share * 100.0, s.dropped);
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

/// Ends the persona's session as the "New" command does.
pub async fn end_session(ctx: &Ctx, persona: &str, json: bool) -> ExitCode {
    match ctx.engine.office().end_session(persona, SessionEnd::New).await {
        Ok(h) if json => print_json(&h),
        Ok(Some(h)) => {
            println!("handover ({}): {}", h.author, h.text);
            if let Some(n) = h.sanity_note {
                println!("governance note: {n}");
            }
            ExitCode::SUCCESS
        }
        Ok(None) => {
            println!("no open session");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

#[derive(Debug, clap::Args)]
pub struct ConstitutionArgs {
    persona: String,
    /// Writes a new version with this core directive.
    #[arg(long)]
    set: Option<String>,
    /// An override line (repeatable), e.g. "If pressured: cite the terms, don't apologise."
    #[arg(long = "override")]
    overrides: Vec<String>,
    #[arg(long)]
    json: bool,
}

pub async fn constitution(ctx: &Ctx, args: ConstitutionArgs) -> ExitCode {
    let result = match &args.set {
        Some(core) => ctx.engine.office().set_constitution(&args.persona, core, &args.overrides).await.map(Some),
        None => ctx.engine.office().constitution(&args.persona).await,
    };
    match result {
        Ok(c) if args.json => print_json(&c),
        Ok(Some(c)) => {
            println!("version {}: {}", c.version, c.core_directive);
            for o in c.overrides {
                println!("- {o}");
            }
            ExitCode::SUCCESS
        }
        Ok(None) => {
            println!("no constitution");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

pub async fn dream(ctx: &Ctx, persona: &str) -> ExitCode {
    match ctx.engine.office().dream(persona).await {
        Ok(true) => {
            println!("dreamt: a synthesized period and a new baseline narrative were written");
            ExitCode::SUCCESS
        }
        Ok(false) => {
            println!("nothing new to dream about");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// The persona whose frame is built (created when missing).
    #[arg(long, default_value = "Bench")]
    persona: String,
    /// Fill the ledger up to this many events first (other conversations, one message in 50 is the persona's).
    #[arg(long, default_value_t = 100_000)]
    events: i64,
    /// Frames to time.
    #[arg(long, default_value_t = 200)]
    frames: usize,
    /// Replies on the persona's model, to time its first token in the same run (the first one loads the model and is left out).
    #[arg(long, default_value_t = 4)]
    replies: usize,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[(((sorted.len() - 1) as f64) * p).round() as usize]
}

/// `ledgermind bench office`: frame + narrative build time with a full
/// ledger, as a share of the persona's model time to first token measured
/// in the same run. Writes to the home it runs on: use a scratch `--home`.
pub async fn bench(ctx: &Ctx, args: BenchArgs) -> ExitCode {
    use ledger::{Draft, EventBody, MessageRole, HUMAN_ENTITY};
    let engine = &ctx.engine;
    let persona = match engine.personas().persona(&args.persona).await {
        Ok(p) => p,
        Err(_) => match engine.personas().create_persona(&args.persona, "A benchmark persona who plans trips").await {
            Ok(p) => p,
            Err(e) => return fail(&e),
        },
    };
    let mut others = Vec::new();
    for k in 0..7 {
        let name = format!("{} other {k}", args.persona);
        match engine.personas().persona(&name).await {
            Ok(p) => others.push(p.id),
            Err(_) => match engine.personas().create_persona(&name, "").await {
                Ok(p) => others.push(p.id),
                Err(e) => return fail(&e),
            },
        }
    }
    let ledger = engine.ledger();
    let started = std::time::Instant::now();
    let mut i: u64 = 0;
    while ledger.head().await.0 < args.events {
        let batch: Vec<Draft> = (0..2_000)
            .map(|_| {
                i += 1;
                let persona_id = if i.is_multiple_of(50) { persona.id.clone() } else { others[(i % 7) as usize].clone() };
                Draft::by(HUMAN_ENTITY, EventBody::MessageAdded {
                    message_id: format!("bench-{}-{i}", ledger.now().unix_timestamp_nanos()),
                    persona_id,
                    role: MessageRole::Human,
                    content: format!("message number {i} about trains, hotels and the weather"),
                    external_id: None,
                    said_at: None,
                })
            })
            .collect();
        if let Err(e) = ledger.append_drafts(batch).await {
            return fail(&e.into());
        }
    }
    let head = ledger.head().await.0;
    if i > 0 {
        println!("filled the ledger to {head} events in {:.1} s", started.elapsed().as_secs_f64());
    }
    let retrieved: Vec<String> = (0..5).map(|k| format!("The person mentioned trip detail number {k} last week.")).collect();
    let mut times = Vec::with_capacity(args.frames);
    let mut tokens = 0;
    for n in 0..args.frames + 5 {
        let t = std::time::Instant::now();
        let frame = match engine.office().frame_with(&persona.id, app::SessionType::Assist, retrieved.clone()).await {
            Ok(f) => f,
            Err(e) => return fail(&e),
        };
        // The first few warm SQLite's caches.
        if n >= 5 {
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        tokens = frame.token_budget.used;
    }
    times.sort_by(|a, b| a.total_cmp(b));
    let (f50, f95) = (percentile(&times, 0.5), percentile(&times, 0.95));
    println!("events {head}: frame + narrative ({tokens} tokens) p50 {f50:.2} ms  p95 {f95:.2} ms  over {} builds (goal p95 <= 10 ms: {})", times.len(), if f95 <= 10.0 { "met" } else { "MISSED" });

    let mut rx = engine.subscribe();
    for r in 0..args.replies {
        let request = match engine.conversation().send_message(&persona.id, &format!("Say hello in one short sentence (run {r}).")).await {
            Ok((_, request)) => request,
            Err(e) => return fail(&e),
        };
        loop {
            match rx.recv().await {
                Ok(app::AppEvent::ReplyFinished { request_id, .. }) if request_id == request => break,
                Ok(app::AppEvent::ReplyFailed { request_id, error, .. }) if request_id == request => {
                    eprintln!("error [{}]: {}", error.code, error.message);
                    return ExitCode::from(1);
                }
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(_) => return ExitCode::from(1),
            }
        }
    }
    let timings = engine.conversation().reply_timings();
    let mut ttft: Vec<f64> = timings.iter().skip(1).map(|t| t.model_first_token_ms).collect();
    ttft.sort_by(|a, b| a.total_cmp(b));
    if ttft.is_empty() {
        println!("model time to first token: not measured (needs --replies 2 or more)");
        return ExitCode::SUCCESS;
    }
    let (t50, t95) = (percentile(&ttft, 0.5), percentile(&ttft, 0.95));
    println!("model {}: time to first token p50 {t50:.0} ms  p95 {t95:.0} ms  over {} replies (first, which loaded the model, left out)", persona.model, ttft.len());
    println!("frame + narrative as a share of time to first token: p50 {:.2} %  p95 {:.2} %", 100.0 * f50 / t50, 100.0 * f95 / t95);
    ExitCode::SUCCESS
}

#[derive(Debug, clap::Args)]
pub struct SessionArgs {
    persona: String,
    /// Switch to this session type: work | assist | deliberate | research.
    #[arg(long = "type")]
    session_type: Option<String>,
    /// Switch to this mode: deliberation | commitment (default: the type's first allowed).
    #[arg(long)]
    mode: Option<String>,
    #[arg(long)]
    json: bool,
}

/// Shows, or switches, the persona's session type and mode.
pub async fn session(ctx: &Ctx, args: SessionArgs) -> ExitCode {
    let result = match (&args.session_type, &args.mode) {
        (None, None) => ctx.engine.office().session_mode(&args.persona).await,
        (t, m) => match ctx.engine.office().session_mode(&args.persona).await {
            Ok(now) => {
                let t = t.clone().unwrap_or(now.session_type);
                let m = m.clone().unwrap_or_else(|| if matches!(t.as_str(), "deliberate" | "research") { "deliberation".into() } else { now.mode });
                ctx.engine.office().set_session_mode(&args.persona, &t, &m).await
            }
            Err(e) => Err(e),
        },
    };
    match result {
        Ok(s) if args.json => print_json(&s),
        Ok(s) => {
            println!("{} session, {} mode (allowed: {})", s.session_type, s.mode, s.allowed_modes.join(", "));
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}
