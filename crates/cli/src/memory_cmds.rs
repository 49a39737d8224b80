//! `import-conversation` and `recall`: the memory retrieval commands.
//!
//! Wiring for crates/cli/src/main.rs (the lead adds these lines):
//!
//! ```ignore
//! mod memory_cmds;                       // next to `mod persona_cmds;`
//!
//! // in `enum Command`:
//!     /// Import FILE (a JSON array of {"id", "speaker", "text", "timestamp"}) into PERSONA's conversation.
//!     ImportConversation(memory_cmds::ImportArgs),
//!     /// Rank PERSONA's past messages and memories for QUERY (the ranking replies use).
//!     Recall(memory_cmds::RecallArgs),
//!
//! // in the `match cli.command` inside `rt.block_on`:
//!     Command::ImportConversation(args) => memory_cmds::import(&ctx, args).await,
//!     Command::Recall(args) => memory_cmds::recall(&ctx, args).await,
//! ```

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use app::{AppError, EmbedProgress, RecallView};
use clap::Args;

use crate::common::{fail, print_json, Ctx};

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Persona name or id.
    pub persona: String,
    /// JSON array of {"id", "speaker", "text", "timestamp"}; speaker is "human" or the persona's name.
    pub file: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Return once messages are stored and keyword-indexed, without waiting
    /// for embeddings (they are made by the next process that stays open).
    #[arg(long)]
    pub no_wait: bool,
}

#[derive(Debug, Args)]
pub struct RecallArgs {
    /// Persona name or id.
    pub persona: String,
    /// What to look for (or use --queries).
    #[arg(required_unless_present = "queries", conflicts_with = "queries")]
    pub query: Option<String>,
    /// How many results.
    #[arg(long, default_value_t = 5)]
    pub k: usize,
    /// One JSON line per query: {"query", "results": [{"id", "kind", "score", "text", "source_ids"}]}.
    #[arg(long)]
    pub json: bool,
    /// File with one {"query": ...} per line; prints one JSON line per query.
    #[arg(long)]
    pub queries: Option<PathBuf>,
}

fn progress_printer(label: &'static str) -> impl Fn(EmbedProgress) + Send + Sync {
    move |p: EmbedProgress| {
        if p.total > 0 && p.embedded < p.total {
            eprint!("\r{label}: {}/{} embedded", p.embedded, p.total);
        } else if p.total > 0 {
            eprintln!("\r{label}: {}/{} embedded", p.embedded, p.total);
        }
    }
}

pub async fn import(ctx: &Ctx, args: ImportArgs) -> ExitCode {
    let report = match ctx.engine.memory().import_conversation(&args.persona, &args.file).await {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    if !args.no_wait {
        if let Err(e) = ctx.engine.memory().wait_for_embeddings(&progress_printer("embeddings")).await {
            return fail(&e);
        }
    }
    if args.json {
        return print_json(&report);
    }
    let (guard, report) = (&report.guard, &report.report);
    println!(
        "imported {} messages ({} already present) in {:.0} ms: {:.0} messages/s",
        report.imported, report.skipped, report.millis, report.messages_per_second
    );
    if !guard.sanitized.is_empty() || !guard.blocked.is_empty() {
        eprintln!(
            "injection guard ({}): {} sanitized, {} left out: {}",
            guard.correlation_id,
            guard.sanitized.len(),
            guard.blocked.len(),
            guard.blocked.join(", ")
        );
    }
    let status = ctx.engine.memory().memory_status();
    if status.starts_with("keyword") {
        eprintln!("note: {status}");
    }
    ExitCode::SUCCESS
}

/// The product's JSON line for one query.
fn json_line(view: &RecallView) -> serde_json::Value {
    serde_json::json!({
        "query": view.query,
        "results": view.results.iter().map(|r| serde_json::json!({
            "id": r.id,
            "kind": r.kind,
            "score": r.score,
            "text": r.text,
            "source_ids": r.source_ids,
        })).collect::<Vec<_>>(),
    })
}


pub async fn recall(ctx: &Ctx, args: RecallArgs) -> ExitCode {
    let queries = match (&args.query, &args.queries) {
        (_, Some(path)) => match crate::common::read_queries(path) {
            Ok(q) => q,
            Err(e) => return fail(&e),
        },
        (Some(q), None) => vec![q.clone()],
        (None, None) => return fail(&AppError::invalid("give a QUERY or --queries FILE")),
    };
    // Rank over a fully embedded index, so the answer does not depend on timing.
    if let Err(e) = ctx.engine.memory().wait_for_embeddings(&progress_printer("indexing")).await {
        return fail(&e);
    }
    let json = args.json || args.queries.is_some();
    let mut out = std::io::stdout().lock();
    for q in queries {
        let view = match ctx.engine.memory().recall(&args.persona, &q, args.k).await {
            Ok(v) => v,
            Err(e) => return fail(&e),
        };
        let line = if json {
            json_line(&view).to_string()
        } else {
            let mut s = String::new();
            for r in &view.results {
                let text: String = r.text.chars().take(120).collect();
                s.push_str(&format!("{:.4}  {:<8} {}  {}\n", r.score, r.kind, r.id, text.replace('\n', " ")));
            }
            s.trim_end().to_owned()
        };
        if writeln!(out, "{line}").is_err() {
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}
