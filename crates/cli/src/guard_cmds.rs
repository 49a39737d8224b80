use std::collections::HashSet;
use std::io::Read;
use std::process::ExitCode;

use runtime::tools::{Role, ToolRegistry};
use serde_json::Value;

use crate::common::{fail, print_json, Ctx};

/// `ledgermind guard [TEXT] --json`: analyse TEXT, or stdin when absent.
/// The trained classifier comes from HOME's models folder (or the default
/// data directory's), else the setup cache; without it the rules run alone
/// and a note on stderr says so (the JSON on stdout keeps its shape).
pub fn guard(text: Option<String>, json: bool, home: Option<&std::path::Path>) -> ExitCode {
    let data = home.map_or_else(app::DataDir::from_env, app::DataDir::new);
    let status = app::install_guard_model(&app::guard_model_dirs(&data.models()));
    if !matches!(status, app::GuardModelStatus::Loaded(_)) {
        eprintln!("note: {}", status.describe());
    }
    let text = match text {
        Some(t) => t,
        None => {
            let mut buf = String::new();
            if let Err(e) = std::io::stdin().read_to_string(&mut buf) {
                eprintln!("error: cannot read stdin: {e}");
                return ExitCode::from(2);
            }
            buf
        }
    };
    let report = runtime::guard::analyze(&text);
    if json {
        return print_json(&report);
    }
    match serde_json::to_value(&report) {
        Ok(v) => {
            println!(
                "risk: {}  action: {}",
                v["risk_level"].as_str().unwrap_or("?"),
                v["action"].as_str().unwrap_or("?")
            );
            for f in v["findings"].as_array().into_iter().flatten() {
                println!("  - {}: {}", f["category"].as_str().unwrap_or("?"), f["detail"].as_str().unwrap_or(""));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct ToolsArgs {
    #[arg(long)]
    json: bool,
    /// Switch TOOL on (needs a home; repeatable).
    #[arg(long, value_name = "TOOL")]
    enable: Vec<String>,
    /// Switch TOOL off: it is no longer offered to any model (repeatable).
    #[arg(long, value_name = "TOOL")]
    disable: Vec<String>,
}

/// `ledgermind tools --json` without a home: the registry as offered to a
/// persona, every tool on (there are no settings to apply).
pub fn tools(args: &ToolsArgs) -> ExitCode {
    if !args.enable.is_empty() || !args.disable.is_empty() {
        eprintln!("error: --enable / --disable need a home (--home or LEDGERMIND_HOME)");
        return ExitCode::from(2);
    }
    print_tools(args.json, &HashSet::new())
}

/// `ledgermind --home DIR tools --json`: the same list with the user's
/// per-tool settings applied: a tool switched off carries
/// `"enabled": false` (the model is not offered it).
pub async fn tools_in_home(ctx: &Ctx, args: &ToolsArgs) -> ExitCode {
    let changes = args.enable.iter().map(|t| (t, true)).chain(args.disable.iter().map(|t| (t, false)));
    for (tool, on) in changes {
        if let Err(e) = ctx.engine.tools().set_tool_enabled(tool, on).await {
            return fail(&e);
        }
    }
    match ctx.engine.tools().tool_settings().await {
        Ok(settings) => {
            let off: HashSet<String> = settings.into_iter().filter(|t| !t.enabled).map(|t| t.name).collect();
            print_tools(args.json, &off)
        }
        Err(e) => fail(&e),
    }
}

/// The registry as offered to a persona; `off` are the tools switched off.
fn print_tools(json: bool, off: &HashSet<String>) -> ExitCode {
    let registry = ToolRegistry::builtin();
    let offered = registry.offered(Role::Persona, &|_| true);
    if json {
        let mut list = ToolRegistry::to_json(&offered);
        for t in list.as_array_mut().into_iter().flatten() {
            let enabled = t["name"].as_str().is_some_and(|n| !off.contains(n));
            t["enabled"] = Value::Bool(enabled);
        }
        return print_json(&list);
    }
    for t in offered {
        let confirm = if t.requires_confirmation { " (asks first)" } else { "" };
        let state = if off.contains(&t.name) { " [off]" } else { "" };
        println!("{:<22} {}{}{}", t.name, t.description, confirm, state);
    }
    ExitCode::SUCCESS
}
