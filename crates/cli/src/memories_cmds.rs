//! `ledgermind memories`: what the personas have learned about the person,
//! one item per line, as the "What they know about you" page shows it.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use crate::common::{fail, Ctx};

/// How long `--extract-now` waits for the queued extraction to finish.
const EXTRACT_LIMIT: Duration = Duration::from_secs(600);

#[derive(Debug, Args)]
pub struct MemoriesArgs {
    /// Only what this persona may see.
    #[arg(long)]
    persona: Option<String>,
    /// One JSON object per line: {kind, text, persona, confidence, confirmed}.
    #[arg(long)]
    json: bool,
    /// Run the extraction work still waiting for a quiet conversation first.
    #[arg(long)]
    extract_now: bool,
}

pub async fn memories(ctx: &Ctx, args: MemoriesArgs) -> ExitCode {
    if args.extract_now {
        if let Err(e) = ctx.engine.memory().extract_now(args.persona.as_deref(), EXTRACT_LIMIT).await {
            return fail(&e);
        }
    }
    let items = match ctx.engine.memory().list_memories(args.persona.as_deref(), false).await {
        Ok(items) => items,
        Err(e) => return fail(&e),
    };
    for m in &items {
        let confirmed = m.validation == "human";
        if args.json {
            let line = serde_json::json!({
                "kind": m.kind,
                "text": m.text,
                "persona": m.learned_by_name,
                "confidence": m.confidence,
                "confirmed": confirmed,
            });
            println!("{line}");
        } else {
            let mark = if confirmed { " (confirmed)" } else { "" };
            println!("{:<7} {:.2}  {}  [{}]{mark}", m.kind, m.confidence, m.text, m.learned_by_name);
        }
    }
    if !args.json && items.is_empty() {
        println!("Nothing learned yet.");
    }
    ExitCode::SUCCESS
}
