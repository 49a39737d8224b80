//! Opening the engine for a command, and the small shared commands.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use app::{AppError, DataDir, Engine, EngineConfig};
use ledger::KeyringStore;

pub struct Ctx {
    pub engine: Arc<Engine>,
}

impl Ctx {
    pub async fn open(home: Option<std::path::PathBuf>) -> Result<Self, AppError> {
        let data_dir = home.map(DataDir::new).unwrap_or_else(DataDir::from_env);
        let mut config = EngineConfig::new(data_dir, Arc::new(KeyringStore::new("ledgermind")));
        config.local_threads = std::env::var("LEDGERMIND_THREADS")
            .ok()
            .and_then(|t| t.parse().ok())
            .unwrap_or(0);
        let engine = Engine::start(config).await?;
        Ok(Self { engine })
    }
}


/// Prints an error the way every command does and picks the exit code.
pub fn fail(e: &AppError) -> ExitCode {
    eprintln!("error [{}]: {}", e.code, e.message);
    ExitCode::from(1)
}

pub fn print_json<T: serde::Serialize>(value: &T) -> ExitCode {
    match serde_json::to_string(value) {
        Ok(s) => {
            let mut out = std::io::stdout().lock();
            if writeln!(out, "{s}").is_err() {
                return ExitCode::from(1);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: cannot encode JSON: {e}");
            ExitCode::from(1)
        }
    }
}

pub async fn verify(ctx: &Ctx, json: bool) -> ExitCode {
    let report = match ctx.engine.vault().verify().await {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    if json {
        print_json(&report);
    } else if report.ok {
        println!("ok: {} events; hash chain and signatures hold ({:.1} ms)", report.events, report.millis);
        print_epochs(&report.key_epochs);
    } else {
        println!(
            "FAILED at event {}: {}",
            report.first_bad_seq.unwrap_or_default(),
            report.reason.as_deref().unwrap_or("unknown")
        );
        print_epochs(&report.key_epochs);
    }
    if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    }
}

/// The key epoch boundaries, one line per commit that replaced keys.
fn print_epochs(epochs: &[app::KeyEpochView]) {
    let mut i = 0;
    while i < epochs.len() {
        let ts = &epochs[i].ts;
        let group: Vec<&app::KeyEpochView> = epochs[i..].iter().take_while(|e| e.ts == *ts).collect();
        i += group.len();
        let who: Vec<String> = group
            .iter()
            .map(|e| {
                let how = if e.self_certified { "self-certified by its new key" } else { "endorsed by the human key" };
                format!("{} at event {} ({how})", e.name, e.seq)
            })
            .collect();
        let when = ts.replace('T', " ");
        let when = when.get(..16).unwrap_or(&when);
        println!("keys replaced on {when} UTC: {} — {}", who.join(", "), group[0].reason);
        println!("  events before it verify with the old public keys, events after it with the new ones");
    }
}

pub async fn events(ctx: &Ctx, json: bool, last: Option<u32>) -> ExitCode {
    let events = match ctx.engine.ledger().all_events().await {
        Ok(e) => e,
        Err(e) => return fail(&e.into()),
    };
    let skip = last.map(|n| events.len().saturating_sub(n as usize)).unwrap_or(0);
    let mut out = std::io::stdout().lock();
    for e in events.into_iter().skip(skip) {
        let line = if json {
            serde_json::to_string(&e).unwrap_or_default()
        } else {
            format!("{:>6}  {}  {:<24} {:<38} {}", e.seq, e.ts, e.kind, e.entity_id, &e.hash[..16])
        };
        if writeln!(out, "{line}").is_err() {
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}

pub async fn queue(ctx: &Ctx, json: bool) -> ExitCode {
    let items = match ctx.engine.ledger().queue_items(None).await {
        Ok(i) => i,
        Err(e) => return fail(&e.into()),
    };
    if json {
        return print_json(&items);
    }
    for i in items {
        println!(
            "{}  {:<8} {:<8} p{} attempts={} {}",
            i.id,
            i.kind,
            format!("{:?}", i.state).to_lowercase(),
            i.priority,
            i.attempts,
            i.last_error.unwrap_or_default()
        );
    }
    ExitCode::SUCCESS
}

pub async fn status(ctx: &Ctx) -> ExitCode {
    print_json(&ctx.engine.status().await)
}

/// The queries of a `--queries FILE.jsonl` file: one `{"query": …}` per
/// line, blank lines skipped; a bad line is an error naming it.
pub fn read_queries(path: &std::path::Path) -> Result<Vec<String>, AppError> {
    use std::io::BufRead;
    let file = std::fs::File::open(path)
        .map_err(|e| AppError::invalid(format!("cannot read {}: {e}", path.display())))?;
    let mut out = Vec::new();
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| AppError::invalid(format!("cannot read {}: {e}", path.display())))?;
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&line)
            .map_err(|e| AppError::invalid(format!("line {} of {}: not JSON: {e}", n + 1, path.display())))?;
        let q = v.get("query").and_then(|q| q.as_str()).ok_or_else(|| {
            AppError::invalid(format!("line {} of {}: expected {{\"query\": \"...\"}}", n + 1, path.display()))
        })?;
        out.push(q.to_owned());
    }
    Ok(out)
}
