use std::io::Write;
use std::process::ExitCode;

use app::AppEvent;
use clap::Subcommand;

use crate::common::{fail, print_json, Ctx};

#[derive(Debug, Subcommand)]
pub enum PersonaCmd {
    /// Create a persona from a name and an optional short description.
    Create {
        name: String,
        #[arg(long, default_value = "")]
        description: String,
        /// Let the local model fill traits, topics and a longer description
        /// (the description itself is kept as written); waits for it.
        #[arg(long)]
        fill: bool,
    },
    /// Show a persona's profile: traits, topics, settings, groups.
    Show {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Pause a persona until a time (RFC 3339), or resume it with --resume.
    Pause {
        name: String,
        #[arg(long, required_unless_present = "resume")]
        until: Option<String>,
        #[arg(long)]
        resume: bool,
    },
    /// List personas.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Archive (or with --undo, unarchive) a persona.
    Archive {
        name: String,
        #[arg(long)]
        undo: bool,
    },
    /// Delete an archived persona and erase its conversation.
    Delete {
        name: String,
        #[arg(long)]
        with_human_data: bool,
    },
}

pub async fn run(ctx: &Ctx, cmd: PersonaCmd) -> ExitCode {
    match cmd {
        PersonaCmd::Create { name, description, fill } => {
            let created = if fill {
                ctx.engine.personas().create_persona_described(&name, &description).await
            } else {
                ctx.engine.personas().create_persona(&name, &description).await
            };
            match created {
                Ok(p) => {
                    println!("{}\t{}", p.id, p.name);
                    if fill && !description.trim().is_empty() {
                        return wait_for_fill(ctx, &p.name).await;
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&e),
            }
        }
        PersonaCmd::Show { name, json } => match ctx.engine.personas().persona_profile(&name).await {
            Ok(p) if json => print_json(&p),
            Ok(p) => {
                println!("{} ({})\n{}", p.name, p.id, p.short_description);
                if !p.long_description.is_empty() {
                    println!("{}", p.long_description);
                }
                println!("traits: {}", p.traits.join(", "));
                for t in &p.topics {
                    println!("topic: {} — {}", t.name, t.perspective);
                }
                println!(
                    "filled by: {}; heartbeat: {} min; context window: {} h; group: {} (+{})",
                    p.profile_source,
                    p.heartbeat_minutes,
                    p.context_window_hours,
                    p.group_primary,
                    p.groups_visible.join(", ")
                );
                if let Some(until) = &p.paused_until {
                    println!("paused until {until}");
                }
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e),
        },
        PersonaCmd::Pause { name, until, resume } => {
            let until = if resume { None } else { until };
            match ctx.engine.personas().pause_persona(&name, until.as_deref()).await {
                Ok(p) => {
                    println!("{}\t{}", p.name, p.paused_until.as_deref().unwrap_or("resumed"));
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&e),
            }
        }
        PersonaCmd::Archive { name, undo } => crate::vault_cmds::persona_archive(ctx, &name, !undo).await,
        PersonaCmd::Delete { name, with_human_data } => {
            crate::vault_cmds::persona_delete(ctx, &name, with_human_data).await
        }
        PersonaCmd::List { json } => match ctx.engine.personas().list_personas().await {
            Ok(list) if json => print_json(&list),
            Ok(list) => {
                for p in list {
                    let tag = if p.is_system { " (built-in)" } else { "" };
                    println!("{}\t{}{}\t{}\tunread={}", p.id, p.name, tag, p.model, p.unread);
                }
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e),
        },
    }
}

/// How long `persona create --fill` waits for the model before leaving
/// the fill queued (it then finishes the next time the app or CLI runs).
const FILL_WAIT: std::time::Duration = std::time::Duration::from_secs(900);

/// Waits for the queued fill of `name`, with a progress dot per second on
/// stderr, and prints what it made (or that it fell back).
async fn wait_for_fill(ctx: &Ctx, name: &str) -> ExitCode {
    eprint!("filling traits and topics with the local model");
    let deadline = std::time::Instant::now() + FILL_WAIT;
    loop {
        let p = match ctx.engine.personas().persona_profile(name).await {
            Ok(p) => p,
            Err(e) => return fail(&e),
        };
        if p.profile_source != "pending" {
            eprintln!();
            let topics: Vec<&str> = p.topics.iter().map(|t| t.name.as_str()).collect();
            println!("filled by: {}\ntraits: {}\ntopics: {}", p.profile_source, p.traits.join(", "), topics.join(", "));
            return ExitCode::SUCCESS;
        }
        if std::time::Instant::now() >= deadline {
            eprintln!("\nthe fill is still queued; it finishes the next time the app or the CLI runs");
            return ExitCode::SUCCESS;
        }
        eprint!(".");
        let _ = std::io::stderr().flush();
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

/// Sends a message and streams the reply to stdout.
pub async fn chat(ctx: &Ctx, persona: &str, message: &str) -> ExitCode {
    let mut rx = ctx.engine.subscribe();
    // The model loads (about a second for the default) while the message is
    // screened, stored and its memories recalled.
    // A task of its own: screening the message is CPU work that would
    // otherwise hold the load back until it yields.
    let conversation = ctx.engine.conversation();
    let warming = {
        let (conversation, persona) = (conversation.clone(), persona.to_owned());
        tokio::spawn(async move { conversation.warm_up(&persona).await })
    };
    let sent = conversation.send_message(persona, message).await;
    drop(warming);
    let request = match sent {
        Ok((_, request)) => request,
        Err(e) => return fail(&e),
    };
    let mut out = std::io::stdout().lock();
    if request.is_empty() {
        // A deterministic intent (delete all, list all, cancel) answered at once.
        let last = ctx.engine.conversation().list_messages(persona).await.ok().and_then(|mut m| m.pop());
        let _ = writeln!(out, "{}", last.map(|m| m.content).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    let mut streamed = false;
    loop {
        match rx.recv().await {
            Ok(AppEvent::ReplyDelta { request_id, text, .. }) if request_id == request => {
                let piece = if streamed { text.as_str() } else { text.trim_start() };
                streamed = true;
                let _ = write!(out, "{piece}");
                let _ = out.flush();
            }
            Ok(AppEvent::ReplyFinished { request_id, message }) if request_id == request => {
                if !streamed {
                    let _ = write!(out, "{}", message.content);
                }
                let _ = writeln!(out);
                return ExitCode::SUCCESS;
            }
            Ok(AppEvent::ReplyFailed { request_id, error, .. }) if request_id == request => {
                let _ = writeln!(out);
                eprintln!("error [{}]: {}", error.code, error.message);
                return ExitCode::from(1);
            }
            Ok(_) => {}
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
            Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                eprintln!("error: the engine stopped before the reply finished");
                return ExitCode::from(1);
            }
        }
    }
}
