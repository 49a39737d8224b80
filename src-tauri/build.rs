//! tauri.conf.json lives at the workspace root (the design asks for it
//! there), so codegen runs from the root. The command list doubles as the
//! permission manifest: the web view may call exactly these.

fn main() {
    // Packed relative relocations (glibc >= 2.36): the loader's relocation
    // table shrinks from ~1.4 MB to a few KB; less to read and keep at start.
    println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    println!("cargo:rerun-if-changed={}", root.join("tauri.conf.json").display());
    println!("cargo:rerun-if-changed={}", root.join("ui/dist").display());
    if let Err(e) = std::env::set_current_dir(&root) {
        panic!("cannot enter the workspace root {}: {e}", root.display());
    }
    let manifest = tauri_build::AppManifest::new().commands(&[
        "subscribe",
        "status",
        "list_personas",
        "create_persona",
        "set_persona_model",
        "list_messages",
        "send_message",
        "mark_read",
        "verify_ledger",
        "key_status",
        "rotate_missing_keys",
        "list_events",
        "list_accounts",
        "add_account",
        "remove_account",
        "list_models",
        "import_model",
        "browse_folder",
        "list_checkpoints",
        "save_checkpoint",
        "delete_checkpoint",
        "restore_checkpoint",
        "undo_restore",
        "get_receipt",
        // runtime (issue #6)
        "list_items",
        "pending_proposal",
        "awaiting_input",
        "confirm_proposal",
        "reject_proposal",
        "get_metadata_service",
        "set_metadata_service",
        "list_tool_settings",
        "set_tool_enabled",
        "prefetch_draft",
        "export_profile",
        "import_profile",
        "restart_app",
        "forget_message",
        "archive_persona",
        "delete_persona",
        "list_memories",
        "confirm_memory",
        "edit_memory",
        "forget_memory",
        "memories_used",
        "persona_groups",
        "set_persona_groups",
        "queue_view",
        "pause_queue",
        "resume_queue",
        "abort_current",
        // memory (#4): persona management and chat state
        "persona_profile",
        "update_persona",
        "pause_persona",
        "list_archived_personas",
        "set_message_context",
        "recall_message",
        "set_queue_priority",
        "ceremony_settings",
        "set_ceremony_time",
        // office (issue #5)
        "why_reply",
        "end_session",
        "get_constitution",
        "set_constitution",
        "get_persona_language",
        "set_persona_language",
        "list_obligations",
        "complete_obligation",
        "token_usage",
        "set_token_quota",
        "list_handovers",
        "session_mode",
        "set_session_mode",
        "add_obligation",
        "simulate_proposal",
        // documents
        "import_documents",
        "cancel_import",
        "list_documents",
        "remove_document",
        "set_document_groups",
        "search_documents",
        "message_citations",
        "document_passage",
        "desktop_settings",
        "set_desktop_settings",
        "voice_talk",
        "voice_stop",
        "voice_devices",
        "keep_page_state",
        "kept_page_state",
        "voice_latest",
    ]);
    tauri_build::try_build(tauri_build::Attributes::new().app_manifest(manifest)).unwrap_or_else(|e| panic!("{e:#}"));
}
