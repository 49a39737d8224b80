//! `docs`: the document library from the command line (add, list, remove,
//! search). Opens only the library and the local embedder, never the
//! ledger, so it needs no keychain; the app records what changed here in
//! the ledger (`document_changed`) at its next start.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use app::library::{open_library, AddReport, Library, SearchHit, SearchMode};
use app::{AppError, DataDir};
use clap::{Args, Subcommand};

use crate::common::{fail, print_json};

#[derive(Debug, Clone, Subcommand)]
pub enum DocsCmd {
    /// Add files or folders; returns when they are indexed.
    Add {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Keep watching the folders: the app picks up changes while it runs and at start.
        #[arg(long)]
        watch: bool,
        /// One JSON line per document: {"document", "id", "status", "pages", "chunks", "error"}.
        #[arg(long)]
        json: bool,
    },
    /// The documents with their status.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Remove a document (by path or id): its text, chunks and vectors are deleted.
    Remove { target: String },
    /// The best passages for QUERY with their citations.
    Search(SearchArgs),
}

#[derive(Debug, Clone, Args)]
pub struct SearchArgs {
    /// What to look for (or use --queries).
    #[arg(required_unless_present = "queries", conflicts_with = "queries")]
    pub query: Option<String>,
    /// How many results.
    #[arg(long, default_value_t = 5)]
    pub k: usize,
    /// One JSON line per query: {"query", "results": [{"document", "id", "page", "section", "snippet", "score"}]}.
    #[arg(long)]
    pub json: bool,
    /// File with one {"query": ...} per line; prints one JSON line per query (needs --json).
    #[arg(long, requires = "json")]
    pub queries: Option<PathBuf>,
}

pub async fn run(home: Option<PathBuf>, cmd: DocsCmd) -> ExitCode {
    let data_dir = home.map(DataDir::new).unwrap_or_else(DataDir::from_env);
    let library = match open_library(&data_dir).await {
        Ok(l) => l,
        Err(e) => return fail(&e),
    };
    let code = match cmd {
        DocsCmd::Add { paths, watch, json } => add(&library, &paths, watch, json).await,
        DocsCmd::List { json } => list(&library, json).await,
        DocsCmd::Remove { target } => match library.remove(&target).await {
            Ok(doc) => {
                println!("removed {} ({} chunks)", doc.path, doc.chunks);
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e.into()),
        },
        DocsCmd::Search(args) => search(&library, args).await,
    };
    library.close().await;
    code
}

fn add_line(r: &AddReport) -> String {
    let pages = r.pages.map(|p| format!(", {p} pages")).unwrap_or_default();
    let error = r.error.as_deref().map(|e| format!(": {e}")).unwrap_or_default();
    format!("{:<14} {} ({} chunks{pages}){error}", r.status.as_str(), r.document, r.chunks)
}

async fn add(library: &Library, paths: &[PathBuf], watch: bool, json: bool) -> ExitCode {
    let mut out_failed = false;
    let result = library
        .add_paths(paths, watch, |r| {
            let line = if json { serde_json::to_string(r).unwrap_or_default() } else { add_line(r) };
            let mut out = std::io::stdout().lock();
            out_failed |= writeln!(out, "{line}").and_then(|_| out.flush()).is_err();
        })
        .await;
    match result {
        Err(e) => fail(&e.into()),
        Ok(_) if out_failed => ExitCode::from(1),
        Ok(_) => ExitCode::SUCCESS,
    }
}

async fn list(library: &Library, json: bool) -> ExitCode {
    let docs = match library.list().await {
        Ok(d) => d,
        Err(e) => return fail(&e.into()),
    };
    if json {
        return print_json(&docs);
    }
    for d in docs {
        let pages = d.pages.map(|p| format!("{p} p., ")).unwrap_or_default();
        let flagged = if d.flagged > 0 { format!(", {} flagged by the guard", d.flagged) } else { String::new() };
        let error = d.error.map(|e| format!(": {e}")).unwrap_or_default();
        println!(
            "{:>5}  {:<14} {}  ({pages}{} chunks, {} KB{flagged}){error}",
            d.id,
            d.status.as_str(),
            d.path,
            d.chunks,
            (d.size.max(0) as u64).div_ceil(1024)
        );
    }
    ExitCode::SUCCESS
}

/// The product's JSON line for one query.
fn json_line(query: &str, hits: &[SearchHit]) -> serde_json::Value {
    serde_json::json!({
        "query": query,
        "results": hits.iter().map(|h| serde_json::json!({
            "document": h.document,
            "id": h.id,
            "page": h.page,
            "section": h.section,
            "snippet": h.snippet,
            "score": h.score,
        })).collect::<Vec<_>>(),
    })
}


async fn search(library: &Library, args: SearchArgs) -> ExitCode {
    let queries = match (&args.queries, &args.query) {
        (Some(file), _) => match crate::common::read_queries(file) {
            Ok(q) => q,
            Err(e) => return fail(&e),
        },
        (None, Some(q)) => vec![q.clone()],
        (None, None) => return fail(&AppError::invalid("give a QUERY or --queries FILE")),
    };
    let mut out = std::io::stdout().lock();
    for query in queries {
        let hits = match library.search(&query, args.k, SearchMode::Hybrid).await {
            Ok(h) => h,
            Err(e) => return fail(&e.into()),
        };
        let written = if args.json {
            writeln!(out, "{}", json_line(&query, &hits))
        } else {
            hits.iter().enumerate().try_for_each(|(i, h)| {
                let place = match (h.page, &h.section) {
                    (Some(p), Some(s)) => format!("p. {p}, {s}"),
                    (Some(p), None) => format!("p. {p}"),
                    (None, Some(s)) => s.clone(),
                    (None, None) => String::new(),
                };
                let flag = if h.guard == "allow" { "" } else { " [flagged by the injection guard]" };
                writeln!(out, "{}. {} {place} ({:.3}){flag}\n   {}", i + 1, h.document, h.score, h.snippet)
            })
        };
        if written.is_err() {
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}
