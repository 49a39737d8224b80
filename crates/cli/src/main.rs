//! `ledgermind`: the command-line shell over the same core as the desktop
//! app, for scripts and tests. It only parses arguments, calls the engine
//! and prints; every rule lives in the crates below.

mod bench_cmds;
mod common;
mod docs_cmds;
mod guard_cmds;
mod keys_cmds;
mod memories_cmds;
mod memory_cmds;
mod models_cmds;
mod office_cmds;
mod persona_cmds;
mod vault_cmds;
mod voice_cmds;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::common::Ctx;

#[derive(Debug, Parser)]
#[command(name = "ledgermind", version, about = "Ledgermind: local-first AI companions with a signed memory ledger")]
struct Cli {
    /// Data directory (default: $LEDGERMIND_HOME, else the OS data directory).
    #[arg(long, global = true, env = "LEDGERMIND_HOME")]
    home: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create, list, archive or delete personas.
    #[command(subcommand)]
    Persona(persona_cmds::PersonaCmd),
    /// Send MESSAGE to PERSONA and print the reply as it streams.
    Chat { persona: String, message: String },
    /// Recompute the hash chain and signatures; exit 0 only when all hold.
    Verify {
        #[arg(long)]
        json: bool,
    },
    /// List the ledger's events, oldest first.
    Events {
        #[arg(long)]
        json: bool,
        /// Only the last N events.
        #[arg(long)]
        last: Option<u32>,
    },
    /// Queue status: pending and dead-lettered work.
    Queue {
        #[arg(long)]
        json: bool,
    },
    /// Check TEXT (or stdin) for prompt injection.
    Guard {
        /// Text may start with "-" (a YAML front matter, a list): it is
        /// still the text, not an option.
        #[arg(allow_hyphen_values = true)]
        text: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// List the tool registry as offered to the model; with a home, each
    /// tool's on/off setting is applied (`enabled`), and --enable /
    /// --disable change it.
    Tools(guard_cmds::ToolsArgs),
    /// Machine and data-directory status.
    Status,
    /// Force the prompt a local MODEL gets: compact (small models), full
    /// (the whole narrative), or auto (chosen from the GGUF metadata).
    PromptProfile { model: String, profile: String },
    /// Import FILE (a JSON array of {"id", "speaker", "text", "timestamp"}) into PERSONA's conversation.
    ImportConversation(memory_cmds::ImportArgs),
    /// Rank PERSONA's past messages and memories for QUERY (the ranking replies use).
    Recall(memory_cmds::RecallArgs),
    /// Save slots: list | save SLOT NAME | restore SLOT | delete SLOT | undo.
    #[command(subcommand)]
    Checkpoint(vault_cmds::CheckpointCmd),
    /// Write the whole profile, encrypted, to FILE (with the private
    /// signing keys, so the new machine needs no new key epoch, unless
    /// --without-keys).
    Export {
        file: std::path::PathBuf,
        #[arg(long)]
        passphrase_file: std::path::PathBuf,
        #[arg(long)]
        without_keys: bool,
    },
    /// Signing keys: status | rotate --all-missing.
    #[command(subcommand)]
    Keys(keys_cmds::KeysCmd),
    /// Import an export FILE into an empty home.
    Import {
        file: std::path::PathBuf,
        #[arg(long)]
        passphrase_file: std::path::PathBuf,
    },
    /// Print the inclusion proof of event SEQ (JSON).
    Prove { seq: i64 },
    /// Check an inclusion proof FILE offline; exit 0 only if it holds.
    CheckProof { file: std::path::PathBuf },
    /// Benchmarks that print ratios against a baseline from the same run.
    #[command(subcommand)]
    Bench(BenchCmd),
    /// Print the context frame PERSONA's next reply would use.
    Frame(office_cmds::FrameArgs),
    /// End PERSONA's session ("New"): it writes a handover, checked against the ledger.
    EndSession {
        persona: String,
        #[arg(long)]
        json: bool,
    },
    /// Show or set (--set, --override) PERSONA's constitution.
    Constitution(office_cmds::ConstitutionArgs),
    /// Run one dreaming cycle for PERSONA (period summary + baseline narrative).
    Dream { persona: String },
    /// Show or switch (--type, --mode) PERSONA's session type and mode.
    Session(office_cmds::SessionArgs),
    /// The offline voice engine on audio files: transcribe, say.
    #[command(subcommand)]
    Voice(voice_cmds::VoiceCmd),
    /// What the personas have learned about you: facts, traits, topics, people, quotes.
    Memories(memories_cmds::MemoriesArgs),
    /// The document library: add | list | remove | search.
    #[command(subcommand)]
    Docs(docs_cmds::DocsCmd),
    /// The model manager: list | pull ID | use ID [--persona NAME] | remove ID | servers.
    #[command(subcommand)]
    Models(models_cmds::ModelsCmd),
}

#[derive(Debug, Subcommand)]
enum BenchCmd {
    /// Appends and verify vs raw Ed25519 sign/verify, checkpoints, export.
    #[command(flatten)]
    Vault(vault_cmds::BenchCmd),
    /// Send → first token on the persona's model, our overhead vs the model's time.
    Chat {
        #[arg(long, default_value = "Ei")]
        persona: String,
        #[arg(long, default_value_t = 11)]
        runs: usize,
    },
    /// office (#5): frame + narrative build time with a full ledger, as a share of the model's time to first token.
    Office(office_cmds::BenchArgs),
    /// Facts-then-questions conversations on the local model: answered, loops, prompt size and latency by turn, beside the model with a minimal prompt.
    Replies(bench_cmds::RepliesArgs),
}

fn main() -> ExitCode {
    // Started as the document extractor's child process: do only that.
    if let Some(code) = app::library::run_if_worker() {
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LEDGERMIND_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    // Commands that need no data directory.
    match &cli.command {
        Command::Guard { text, json } => return guard_cmds::guard(text.clone(), *json, cli.home.as_deref()),
        // Without a home, the registry as built in (no settings to apply).
        Command::Tools(args) if cli.home.is_none() => return guard_cmds::tools(args),
        Command::CheckProof { file } => return vault_cmds::check_proof(file),
        // The voice engine works on files and models; it opens no ledger.
        Command::Voice(cmd) if !cmd.needs_engine() => {
            if let Command::Voice(cmd) = cli.command {
                return voice_cmds::run(cli.home, cmd);
            }
        }
        _ => {}
    }
    let rt = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    rt.block_on(async move {
        // These must not open (and so create) a profile first.
        if let Command::Import { file, passphrase_file } = &cli.command {
            return vault_cmds::import(cli.home.clone(), file, passphrase_file).await;
        }
        // The library needs no ledger (and so no keychain).
        if let Command::Docs(cmd) = &cli.command {
            return docs_cmds::run(cli.home.clone(), cmd.clone()).await;
        }
        // The models folder and the network; only a persona's model needs the ledger.
        if let Command::Models(cmd) = &cli.command {
            if !cmd.needs_engine() {
                return models_cmds::run(cli.home.clone(), cmd.clone()).await;
            }
        }
        if let Command::Bench(BenchCmd::Vault(cmd)) = &cli.command {
            return vault_cmds::bench(cmd).await;
        }
        let home = cli.home.clone();
        let ctx = match Ctx::open(cli.home).await {
            Ok(ctx) => ctx,
            Err(e) => return common::fail(&e),
        };
        let code = match cli.command {
            Command::Persona(cmd) => persona_cmds::run(&ctx, cmd).await,
            Command::Chat { persona, message } => persona_cmds::chat(&ctx, &persona, &message).await,
            Command::Verify { json } => common::verify(&ctx, json).await,
            Command::Events { json, last } => common::events(&ctx, json, last).await,
            Command::Queue { json } => common::queue(&ctx, json).await,
            Command::Status => common::status(&ctx).await,
            Command::PromptProfile { model, profile } => match ctx.engine.conversation().set_prompt_profile(&model, &profile).await {
                Ok(()) => {
                    println!("prompt profile of {model}: {profile}");
                    ExitCode::SUCCESS
                }
                Err(e) => common::fail(&e),
            },
            Command::ImportConversation(args) => memory_cmds::import(&ctx, args).await,
            Command::Recall(args) => memory_cmds::recall(&ctx, args).await,
            Command::Memories(args) => memories_cmds::memories(&ctx, args).await,
            Command::Frame(args) => office_cmds::frame(&ctx, args).await,
            Command::EndSession { persona, json } => office_cmds::end_session(&ctx, &persona, json).await,
            Command::Constitution(args) => office_cmds::constitution(&ctx, args).await,
            Command::Dream { persona } => office_cmds::dream(&ctx, &persona).await,
            Command::Session(args) => office_cmds::session(&ctx, args).await,
            Command::Bench(BenchCmd::Chat { persona, runs }) => bench_cmds::chat(&ctx, &persona, runs).await,
            Command::Bench(BenchCmd::Office(args)) => office_cmds::bench(&ctx, args).await,
            Command::Bench(BenchCmd::Replies(args)) => bench_cmds::replies(&ctx, args).await,
            Command::Checkpoint(cmd) => vault_cmds::checkpoint(&ctx, cmd).await,
            Command::Export { file, passphrase_file, without_keys } => {
                vault_cmds::export(&ctx, &file, &passphrase_file, !without_keys).await
            }
            Command::Keys(cmd) => keys_cmds::run(&ctx, cmd).await,
            Command::Prove { seq } => vault_cmds::prove(&ctx, seq).await,
            Command::Import { .. }
            | Command::Bench(BenchCmd::Vault(_))
            | Command::CheckProof { .. }
            | Command::Docs(_) => ExitCode::SUCCESS,
            Command::Tools(args) => guard_cmds::tools_in_home(&ctx, &args).await,
            Command::Voice(cmd) => voice_cmds::converse(&ctx, home, cmd).await,
            Command::Guard { .. } => ExitCode::SUCCESS,
            Command::Models(cmd) => models_cmds::run_with_engine(&ctx, cmd).await,
        };
        ctx.engine.shutdown().await;
        code
    })
}
