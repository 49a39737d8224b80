use std::io::Read;
use std::process::ExitCode;

use runtime::tools::{Role, ToolRegistry};

use crate::common::print_json;

/// `ledgermind guard [TEXT] --json`: analyse TEXT, or stdin when absent.
pub fn guard(text: Option<String>, json: bool) -> ExitCode {
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

/// `ledgermind tools --json`: the registry as offered to a persona.
pub fn tools(json: bool) -> ExitCode {
    let registry = ToolRegistry::builtin();
    let offered = registry.offered(Role::Persona, &|_| true);
    if json {
        return print_json(&ToolRegistry::to_json(&offered));
    }
    for t in offered {
        let confirm = if t.requires_confirmation { " (asks first)" } else { "" };
        println!("{:<22} {}{}", t.name, t.description, confirm);
    }
    ExitCode::SUCCESS
}
