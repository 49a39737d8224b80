//! The office's commands: the context frame, session endings, the
//! constitution, and one dreaming cycle.

use std::process::ExitCode;

use app::{SessionEnd, SessionType};

use crate::common::{fail, print_json, Ctx};

#[derive(Debug, clap::Args)]
pub struct FrameArgs {
    persona: String,
    /// work | assist | deliberate | research (a chat reply is `assist`).
    #[arg(long, default_value = "assist")]
    session_type: String,
    #[arg(long)]
    json: bool,
}

/// Prints the frame the persona's next reply would use.
pub async fn frame(ctx: &Ctx, args: FrameArgs) -> ExitCode {
    let Some(session_type) = SessionType::parse(&args.session_type) else {
        eprintln!("error [INVALID_INPUT]: the session type must be work, assist, deliberate or research");
        return ExitCode::from(2);
    };
    match ctx.engine.frame(&args.persona, session_type).await {
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
    match ctx.engine.end_session(persona, SessionEnd::New).await {
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
        Some(core) => ctx.engine.set_constitution(&args.persona, core, &args.overrides).await.map(Some),
        None => ctx.engine.constitution(&args.persona).await,
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
    match ctx.engine.dream(persona).await {
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
