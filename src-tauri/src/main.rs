//! The Ledgermind desktop app: a thin Tauri shell. It opens the engine,
//! registers the commands and forwards engine events to the web view. No
//! business rules live here.

#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

mod autostart;
mod commands;
mod documents;
mod desktop;
#[cfg(target_os = "linux")]
mod hotkey;
mod talk;

use std::sync::Arc;
use std::time::Instant;

use app::{AppError, DataDir, Engine, EngineConfig};
use ledger::KeyringStore;
use tauri::Manager;
use tokio::sync::watch;

type Started = Option<Result<Arc<Engine>, AppError>>;

/// The engine, or why it could not start (shown by the UI's status panel).
/// It starts in the background while the window opens; commands wait for it.
pub struct Backend(watch::Receiver<Started>);

impl Backend {
    pub async fn engine(&self) -> Result<Arc<Engine>, AppError> {
        let mut rx = self.0.clone();
        let started = rx.wait_for(Option::is_some).await;
        match started.as_deref() {
            Ok(Some(result)) => result.clone(),
            _ => Err(AppError::new("APP_SHUTTING_DOWN", "the engine stopped before it was ready")),
        }
    }

    /// The engine if it has started, without waiting.
    fn started(&self) -> Option<Arc<Engine>> {
        self.0.borrow().as_ref().and_then(|r| r.as_ref().ok().cloned())
    }
}

/// llama.cpp threads: `LEDGERMIND_THREADS`, else 0 (as many as are free).
fn threads() -> usize {
    std::env::var("LEDGERMIND_THREADS").ok().and_then(|t| t.parse().ok()).unwrap_or(0)
}

/// The web view runs our UI's JavaScript without JavaScriptCore's JIT
/// tiers (interpreter only), unless the environment says otherwise. The UI
/// is a few hundred kilobytes of event handlers that run briefly, not hot
/// loops: without the JIT the web process keeps about 9 MB less at idle
/// (118 → 109 MB PSS, measured with `tests/bench/startup.mjs` and smaps),
/// start-up is no slower, and there is no writable-executable memory for an
/// exploit to use (the reason Safari's Lockdown Mode turns it off too).
/// `JSC_useJIT=true` in the environment turns it back on.
fn web_view_without_jit() {
    if std::env::var_os("JSC_useJIT").is_none() {
        // Before any thread exists: WebKit's web process inherits it.
        std::env::set_var("JSC_useJIT", "false");
    }
}

fn main() {
    // Started as the document library's extraction child: do only that.
    if let Some(code) = app::library::run_if_worker() {
        std::process::exit(code);
    }
    web_view_without_jit();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LEDGERMIND_LOG").unwrap_or_else(|_| "info".into()),
        )
        .init();
    let data_dir = DataDir::from_env();
    // `--hidden` (the login entry's flag) starts in the tray; any other
    // arguments are files to import (a file manager's "Open with").
    let args: Vec<String> = std::env::args().skip(1).collect();
    let start_hidden = args.iter().any(|a| a == autostart::HIDDEN_FLAG);
    let cwd = std::env::current_dir().unwrap_or_default();
    let opened = documents::paths_from_args(&args, &cwd);
    // First: a second launch must hand over before anything else starts.
    let builder = tauri::Builder::default().plugin(
        tauri_plugin_single_instance::Builder::new()
            .dbus_id(desktop::instance_id(&data_dir))
            .callback(|app, args, cwd| {
                // The files a second launch was given go to this copy's library.
                let paths = documents::paths_from_args(args.get(1..).unwrap_or_default(), std::path::Path::new(&cwd));
                documents::opened(app, paths);
                if !args.iter().any(|a| a == autostart::HIDDEN_FLAG) {
                    desktop::show_main(app);
                }
            })
            .build(),
    );
    // On Linux the shortcut is our own X11 grab (`hotkey`): the plugin's
    // backend there polls twenty times a second.
    #[cfg(not(target_os = "linux"))]
    let builder = builder.plugin(
        tauri_plugin_global_shortcut::Builder::new()
            .with_handler(|app, _shortcut, event| {
                desktop::on_shortcut(app, event.state == tauri_plugin_global_shortcut::ShortcutState::Pressed)
            })
            .build(),
    );
    let result = builder
        .on_window_event(|window, event| {
            if let tauri::WindowEvent::CloseRequested { api, .. } = event {
                desktop::on_close_requested(window, api);
            }
        })
        .setup(move |app| {
            let handle = app.handle().clone();
            // Managed first: the tray's menu reads the settings while it is built.
            app.manage(desktop::Desktop::new(data_dir.clone()));
            app.manage(talk::VoiceShell::default());
            let shell = app.state::<desktop::Desktop>();
            let tray = desktop::install_tray(&handle);
            shell.set_tray(tray);
            // Started at login: only the tray, unless there is no tray to
            // come back from (then the window shows as usual).
            if start_hidden && tray {
                if let Some(window) = app.get_webview_window("main") {
                    let _ = window.hide();
                }
            }
            desktop::start_shortcut_keys(&handle);
            shell.register_shortcut(&handle);
            let mut config = EngineConfig::new(data_dir, Arc::new(KeyringStore::new("ledgermind")));
            config.local_threads = threads();
            let (tx, rx) = watch::channel(None);
            app.manage(Backend(rx));
            documents::opened(&handle, opened.clone());
            // Opening the keychain, the ledger and the index overlaps with the
            // web view's own start-up instead of delaying the window.
            // (A thread of its own: sqlx's futures are not provably `Send` for `spawn`.)
            std::thread::spawn(move || {
                let started = Instant::now();
                let engine = tauri::async_runtime::block_on(Engine::start(config));
                match &engine {
                    Ok(engine) => {
                        tracing::info!(ms = started.elapsed().as_millis() as u64, "engine started");
                        // The window stays between turns: the next prompt is
                        // read while the person reads the reply and types.
                        engine.conversation().read_ahead_between_turns(true);
                        desktop::follow_personas(handle, engine.clone());
                    }
                    Err(e) => tracing::error!(code = e.code, "the engine did not start: {}", e.message),
                }
                let _ = tx.send(Some(engine));
            });
            Ok(())
        })
        .invoke_handler(tauri::generate_handler![
            commands::subscribe,
            commands::status,
            commands::list_personas,
            commands::create_persona,
            commands::set_persona_model,
            commands::list_messages,
            commands::open_chat,
            commands::send_message,
            commands::mark_read,
            commands::verify_ledger,
            commands::key_status,
            commands::rotate_missing_keys,
            commands::list_events,
            commands::list_accounts,
            commands::add_account,
            commands::remove_account,
            commands::list_models,
            commands::import_model,
            commands::browse_folder,
            commands::list_checkpoints,
            commands::save_checkpoint,
            commands::delete_checkpoint,
            commands::restore_checkpoint,
            commands::undo_restore,
            commands::get_receipt,
            commands::list_items,
            commands::pending_proposal,
            commands::awaiting_input,
            commands::confirm_proposal,
            commands::reject_proposal,
            commands::get_metadata_service,
            commands::set_metadata_service,
            commands::list_tool_settings,
            commands::set_tool_enabled,
            commands::prefetch_draft,
            commands::export_profile,
            commands::import_profile,
            commands::restart_app,
            commands::forget_message,
            commands::archive_persona,
            commands::delete_persona,
            commands::list_memories,
            commands::confirm_memory,
            commands::edit_memory,
            commands::forget_memory,
            commands::memories_used,
            commands::persona_groups,
            commands::set_persona_groups,
            commands::queue_view,
            commands::pause_queue,
            commands::resume_queue,
            commands::abort_current,
            // memory: persona management and chat state
            commands::persona_profile,
            commands::update_persona,
            commands::pause_persona,
            commands::list_archived_personas,
            commands::set_message_context,
            commands::recall_message,
            commands::set_queue_priority,
            commands::ceremony_settings,
            commands::set_ceremony_time,
            commands::why_reply,
            commands::end_session,
            commands::get_constitution,
            commands::set_constitution,
            commands::get_persona_language,
            commands::set_persona_language,
            commands::list_obligations,
            commands::complete_obligation,
            commands::token_usage,
            commands::set_token_quota,
            commands::list_handovers,
            commands::session_mode,
            commands::set_session_mode,
            commands::add_obligation,
            commands::simulate_proposal,
            documents::import_documents,
            documents::cancel_import,
            documents::list_documents,
            documents::remove_document,
            documents::set_document_groups,
            documents::search_documents,
            documents::message_citations,
            documents::document_passage,
            commands::desktop_settings,
            commands::set_desktop_settings,
            commands::voice_talk,
            commands::voice_stop,
            commands::voice_devices,
            commands::keep_page_state,
            commands::kept_page_state,
            commands::voice_latest,
            commands::start_at_login,
            commands::set_start_at_login,
            commands::model_choices,
            commands::pull_model,
            commands::cancel_model_pull,
            commands::measure_model_speed,
            commands::remove_model,
            commands::use_model,
            commands::local_servers,
            commands::add_server_account,
        ])
        // Files and folders dropped on the window are read here, in Rust;
        // the web view only shows the overlay and the progress.
        .on_window_event(|window, event| {
            if let tauri::WindowEvent::DragDrop(tauri::DragDropEvent::Drop { paths, .. }) = event {
                documents::dropped(window.app_handle(), paths);
            }
        })
        .build(tauri::generate_context!("../tauri.conf.json"));
    let app = match result {
        Ok(app) => app,
        Err(e) => {
            // The copy that held the single-instance name is quitting (its
            // name still listed, its answer never coming): start again in a
            // moment as this same process, and become the running copy.
            let tries: u32 = std::env::var("LEDGERMIND_RELAUNCH").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
            if e.to_string().contains("failed to forward arguments to the running instance") && tries < 20 {
                use std::os::unix::process::CommandExt;
                std::thread::sleep(std::time::Duration::from_millis(500));
                let exe = std::env::current_exe().unwrap_or_else(|_| std::path::PathBuf::from("/proc/self/exe"));
                let failed = std::process::Command::new(exe)
                    .args(std::env::args_os().skip(1))
                    .env("LEDGERMIND_RELAUNCH", (tries + 1).to_string())
                    .exec();
                eprintln!("Ledgermind could not start again: {failed}");
            }
            eprintln!("Ledgermind could not start its window: {e}");
            std::process::exit(1);
        }
    };
    app.run(|handle, event| {
        // The last window going away (a hidden window's web view released)
        // is no reason to quit while Ledgermind lives in the tray; Quit
        // exits with a code and is never held here.
        if let tauri::RunEvent::ExitRequested { code: None, api, .. } = &event {
            if handle.try_state::<desktop::Desktop>().is_some_and(|d| d.close_hides()) {
                api.prevent_exit();
            }
        }
        if let tauri::RunEvent::Exit = event {
            // Let go of the single-instance name first: the shutdown below
            // can take seconds (handovers, the current step), and a launch
            // meanwhile would hand its arguments to a copy that no longer
            // answers, and fail to open.
            tauri_plugin_single_instance::destroy(handle);
            if let Some(engine) = handle.try_state::<Backend>().and_then(|b| b.started()) {
                // Closing the window ends every open session with a handover;
                // then finish the current step (queued replies stay queued).
                tauri::async_runtime::block_on(async {
                    engine.office().close_sessions().await;
                    engine.shutdown().await;
                });
            }
        }
    });
}
