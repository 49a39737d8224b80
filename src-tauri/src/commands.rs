//! Tauri commands: each pulls the engine out of state and makes one call.

use std::path::PathBuf;
use std::sync::Arc;

use app::{
    ExportView, ImportView,
    AccountView, AppEvent, CheckpointView, Engine, ErrorView, EventView, ItemView, MemoryView, MessageView, MetadataServiceView,
    ModelView, NewAccount, PersonaGroupsView, PersonaView, ProposalView, QueueView, ReceiptView, StatusView, ToolResultView,
    UsedItemView, VerifyView,
};
use app::{ConstitutionView, HandoverView, ObligationView, SessionEnd, SessionModeView, SimulationView, TokenUsageView, WhyView};
// runtime
use app::{AwaitingInputView, ToolSettingView};
use tauri::ipc::Channel;
use tauri::State;

use crate::Backend;

pub(crate) type Reply<T> = Result<T, ErrorView>;

/// The engine; while it is still starting, waits for it.
pub(crate) async fn engine(state: &State<'_, Backend>) -> Reply<Arc<Engine>> {
    state.engine().await.map_err(|e| e.view())
}

pub(crate) fn view<T>(r: app::Result<T>) -> Reply<T> {
    r.map_err(|e| e.view())
}

/// Streams every engine event to the web view over one channel.
#[tauri::command]
pub async fn subscribe(state: State<'_, Backend>, on_event: Channel<AppEvent>) -> Reply<()> {
    let mut rx = engine(&state).await?.subscribe();
    tauri::async_runtime::spawn(async move {
        loop {
            match rx.recv().await {
                Ok(event) => {
                    if on_event.send(event).is_err() {
                        break; // the page went away
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(skipped = n, "the UI fell behind the event stream");
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            }
        }
    });
    Ok(())
}

#[tauri::command]
pub async fn status(state: State<'_, Backend>) -> Reply<StatusView> {
    match state.engine().await {
        Ok(engine) => Ok(engine.status().await),
        Err(e) => Ok(StatusView::unavailable(&e)),
    }
}

#[tauri::command]
pub async fn list_personas(state: State<'_, Backend>) -> Reply<Vec<PersonaView>> {
    view(engine(&state).await?.personas().list_personas().await)
}

#[tauri::command]
pub async fn create_persona(state: State<'_, Backend>, name: String, description: String) -> Reply<PersonaView> {
    view(engine(&state).await?.personas().create_persona_described(&name, &description).await)
}

#[tauri::command]
pub async fn set_persona_model(state: State<'_, Backend>, persona_id: String, model: String) -> Reply<PersonaView> {
    view(engine(&state).await?.personas().set_persona_model(&persona_id, &model).await)
}

#[tauri::command]
pub async fn list_messages(state: State<'_, Backend>, persona_id: String) -> Reply<Vec<MessageView>> {
    view(engine(&state).await?.conversation().list_messages(&persona_id).await)
}

/// The person opened a chat: its model loads and the start of the next
/// reply's prompt is read ahead, in the background (the call returns at once).
#[tauri::command]
pub async fn open_chat(state: State<'_, Backend>, persona_id: String) -> Reply<()> {
    let engine = engine(&state).await?;
    tauri::async_runtime::spawn(async move { engine.conversation().open(&persona_id).await });
    Ok(())
}

#[tauri::command]
pub async fn send_message(state: State<'_, Backend>, persona_id: String, content: String) -> Reply<MessageView> {
    view(engine(&state).await?.conversation().send_message(&persona_id, &content).await.map(|(m, _)| m))
}

#[tauri::command]
pub async fn mark_read(state: State<'_, Backend>, persona_id: String) -> Reply<()> {
    view(engine(&state).await?.conversation().mark_read(&persona_id).await)
}

#[tauri::command]
pub async fn verify_ledger(state: State<'_, Backend>) -> Reply<VerifyView> {
    view(engine(&state).await?.vault().verify().await)
}

#[tauri::command]
pub async fn key_status(state: State<'_, Backend>) -> Reply<Vec<app::KeyStatusView>> {
    view(engine(&state).await?.keys().key_status().await)
}

#[tauri::command]
pub async fn rotate_missing_keys(state: State<'_, Backend>) -> Reply<Vec<app::KeyReplacementView>> {
    view(engine(&state).await?.keys().rotate_missing_keys().await)
}

#[tauri::command]
pub async fn list_events(state: State<'_, Backend>, before_seq: Option<i64>, limit: u32) -> Reply<Vec<EventView>> {
    view(engine(&state).await?.vault().list_events(before_seq, limit).await)
}

#[tauri::command]
pub async fn list_accounts(state: State<'_, Backend>) -> Reply<Vec<AccountView>> {
    view(engine(&state).await?.models().list_accounts().await)
}

#[tauri::command]
pub async fn add_account(state: State<'_, Backend>, account: NewAccount) -> Reply<AccountView> {
    view(engine(&state).await?.models().add_account(account).await)
}

#[tauri::command]
pub async fn remove_account(state: State<'_, Backend>, name: String) -> Reply<()> {
    view(engine(&state).await?.models().remove_account(&name).await)
}

#[tauri::command]
pub async fn list_models(state: State<'_, Backend>) -> Reply<Vec<ModelView>> {
    view(engine(&state).await?.models().list_models().await)
}

#[tauri::command]
pub async fn import_model(state: State<'_, Backend>, path: PathBuf) -> Reply<ModelView> {
    let engine = engine(&state).await?;
    // Copying a model file of hundreds of MB blocks: off the async threads.
    match tauri::async_runtime::spawn_blocking(move || engine.models().import_model(&path)).await {
        Ok(r) => view(r),
        Err(e) => Err(app::AppError::new("STORAGE_SAVE_FAILED", format!("the model copy stopped: {e}")).view()),
    }
}

/// The catalog for the model picker, with one model recommended for the
/// needs asked (language, memory to spare).
#[tauri::command]
pub async fn model_choices(state: State<'_, Backend>, needs: app::ModelNeeds) -> Reply<Vec<app::ModelChoiceView>> {
    Ok(engine(&state).await?.models().model_choices(&needs).await)
}

/// Starts a download; its progress arrives as `model_pull` events.
#[tauri::command]
pub async fn pull_model(state: State<'_, Backend>, id: String) -> Reply<()> {
    view(engine(&state).await?.models().pull_model(&id))
}

#[tauri::command]
pub async fn cancel_model_pull(state: State<'_, Backend>, id: String) -> Reply<bool> {
    Ok(engine(&state).await?.models().cancel_model_pull(&id))
}

#[tauri::command]
pub async fn measure_model_speed(state: State<'_, Backend>, id: String) -> Reply<app::SpeedView> {
    view(engine(&state).await?.models().measure_model_speed(&id).await)
}

#[tauri::command]
pub async fn remove_model(state: State<'_, Backend>, id: String) -> Reply<()> {
    view(engine(&state).await?.models().remove_model(&id).await)
}

/// Replies use this model from now on (Ei and the personas on Ei's model).
#[tauri::command]
pub async fn use_model(state: State<'_, Backend>, id: String) -> Reply<Vec<PersonaView>> {
    let engine = engine(&state).await?;
    view(engine.personas().use_model(engine.models(), &id).await)
}

/// The model servers running on this machine (Ollama, LM Studio, Jan …).
#[tauri::command]
pub async fn local_servers(state: State<'_, Backend>) -> Reply<Vec<app::ServerView>> {
    view(engine(&state).await?.models().local_servers().await)
}

/// Makes a found server an account with `model` as its default model.
#[tauri::command]
pub async fn add_server_account(state: State<'_, Backend>, url: String, model: String, api_key: String) -> Reply<AccountView> {
    view(engine(&state).await?.models().add_server_account(&url, &model, &api_key).await)
}

/// One folder's listing for the in-app file chooser.
#[tauri::command]
pub async fn browse_folder(state: State<'_, Backend>, path: Option<PathBuf>, extensions: Vec<String>) -> Reply<app::FolderView> {
    let models = engine(&state).await?.data_dir().models();
    view(app::browse(path.as_deref(), &extensions, &models))
}

#[tauri::command]
pub async fn list_checkpoints(state: State<'_, Backend>) -> Reply<Vec<CheckpointView>> {
    view(engine(&state).await?.vault().list_checkpoints().await.map(|v| v.into_iter().map(Into::into).collect()))
}

#[tauri::command]
pub async fn save_checkpoint(state: State<'_, Backend>, slot: i64, name: String) -> Reply<CheckpointView> {
    view(engine(&state).await?.vault().save_checkpoint(slot, &name).await.map(Into::into))
}

#[tauri::command]
pub async fn delete_checkpoint(state: State<'_, Backend>, slot: i64) -> Reply<()> {
    view(engine(&state).await?.vault().delete_checkpoint(slot).await)
}

#[tauri::command]
pub async fn restore_checkpoint(state: State<'_, Backend>, slot: i64) -> Reply<ReceiptView> {
    view(engine(&state).await?.vault().restore_checkpoint(slot).await.map(Into::into))
}

#[tauri::command]
pub async fn undo_restore(state: State<'_, Backend>) -> Reply<ReceiptView> {
    view(engine(&state).await?.vault().undo_restore().await.map(Into::into))
}

#[tauri::command]
pub async fn get_receipt(state: State<'_, Backend>, seq: i64) -> Reply<ReceiptView> {
    view(engine(&state).await?.vault().receipt(seq).await.map(Into::into))
}

// ----- runtime -----

#[tauri::command]
pub async fn list_items(state: State<'_, Backend>, query: Option<String>) -> Reply<Vec<ItemView>> {
    view(engine(&state).await?.tools().list_items(query.as_deref()).await)
}

#[tauri::command]
pub async fn pending_proposal(state: State<'_, Backend>, persona_id: String) -> Reply<Option<ProposalView>> {
    view(engine(&state).await?.tools().pending_proposal(&persona_id).await)
}

/// The question this conversation waits on (AWAITING_INPUT), if any.
#[tauri::command]
pub async fn awaiting_input(state: State<'_, Backend>, persona_id: String) -> Reply<Option<AwaitingInputView>> {
    view(engine(&state).await?.tools().awaiting_input(&persona_id).await)
}

#[tauri::command]
pub async fn confirm_proposal(state: State<'_, Backend>, persona_id: String, nonce: String) -> Reply<ToolResultView> {
    view(engine(&state).await?.tools().confirm_proposal(&persona_id, &nonce).await)
}

#[tauri::command]
pub async fn reject_proposal(state: State<'_, Backend>, persona_id: String) -> Reply<bool> {
    view(engine(&state).await?.tools().reject_proposal(&persona_id).await)
}

#[tauri::command]
pub async fn get_metadata_service(state: State<'_, Backend>) -> Reply<MetadataServiceView> {
    view(engine(&state).await?.tools().metadata_service().await)
}

#[tauri::command]
pub async fn set_metadata_service(state: State<'_, Backend>, base_url: String, api_key: String) -> Reply<MetadataServiceView> {
    view(engine(&state).await?.tools().set_metadata_service(&base_url, &api_key).await)
}

/// Settings → Tools: every tool with its on/off state.
#[tauri::command]
pub async fn list_tool_settings(state: State<'_, Backend>) -> Reply<Vec<ToolSettingView>> {
    view(engine(&state).await?.tools().tool_settings().await)
}

#[tauri::command]
pub async fn set_tool_enabled(state: State<'_, Backend>, tool: String, enabled: bool) -> Reply<Vec<ToolSettingView>> {
    view(engine(&state).await?.tools().set_tool_enabled(&tool, enabled).await)
}

/// A draft being typed: its embedding is computed ahead of the send, and
/// with the chat it is typed in, the prompt its reply would get is read
/// into the model in the background (the call returns at once).
#[tauri::command]
pub async fn prefetch_draft(state: State<'_, Backend>, text: String, persona_id: Option<String>) -> Reply<()> {
    let engine = engine(&state).await?;
    tauri::async_runtime::spawn(async move { engine.conversation().draft_typed(persona_id.as_deref(), &text).await });
    Ok(())
}

// ----- memory: what they know about you, groups, memories used, queue control -----

#[tauri::command]
pub async fn list_memories(state: State<'_, Backend>, persona_id: Option<String>, include_superseded: bool) -> Reply<Vec<MemoryView>> {
    view(engine(&state).await?.memory().list_memories(persona_id.as_deref(), include_superseded).await)
}

#[tauri::command]
pub async fn confirm_memory(state: State<'_, Backend>, id: String) -> Reply<MemoryView> {
    view(engine(&state).await?.memory().confirm_memory(&id).await)
}

#[tauri::command]
pub async fn edit_memory(state: State<'_, Backend>, id: String, text: String) -> Reply<MemoryView> {
    view(engine(&state).await?.memory().edit_memory(&id, &text).await)
}

#[tauri::command]
pub async fn forget_memory(state: State<'_, Backend>, id: String) -> Reply<()> {
    view(engine(&state).await?.memory().forget_memory(&id).await)
}

#[tauri::command]
pub async fn memories_used(state: State<'_, Backend>, message_id: String) -> Reply<Vec<UsedItemView>> {
    view(engine(&state).await?.memory().memories_used(&message_id).await)
}

#[tauri::command]
pub async fn persona_groups(state: State<'_, Backend>, persona_id: String) -> Reply<PersonaGroupsView> {
    view(engine(&state).await?.memory().persona_groups(&persona_id).await)
}

#[tauri::command]
pub async fn set_persona_groups(state: State<'_, Backend>, persona_id: String, group_primary: String, groups_visible: Vec<String>) -> Reply<PersonaGroupsView> {
    view(engine(&state).await?.memory().set_persona_groups(&persona_id, &group_primary, &groups_visible).await)
}

#[tauri::command]
pub async fn queue_view(state: State<'_, Backend>) -> Reply<QueueView> {
    view(engine(&state).await?.conversation().queue_view().await)
}

#[tauri::command]
pub async fn pause_queue(state: State<'_, Backend>) -> Reply<()> {
    engine(&state).await?.conversation().pause_queue().await;
    Ok(())
}

#[tauri::command]
pub async fn resume_queue(state: State<'_, Backend>) -> Reply<()> {
    engine(&state).await?.conversation().resume_queue().await;
    Ok(())
}

#[tauri::command]
pub async fn abort_current(state: State<'_, Backend>) -> Reply<bool> {
    Ok(engine(&state).await?.conversation().abort_current())
}

// ----- memory: persona management and chat state -----

#[tauri::command]
pub async fn persona_profile(state: State<'_, Backend>, persona_id: String) -> Reply<app::PersonaProfileView> {
    view(engine(&state).await?.personas().persona_profile(&persona_id).await)
}

#[tauri::command]
pub async fn update_persona(state: State<'_, Backend>, persona_id: String, edit: app::PersonaEdit) -> Reply<app::PersonaProfileView> {
    view(engine(&state).await?.personas().update_persona(&persona_id, edit).await)
}

#[tauri::command]
pub async fn pause_persona(state: State<'_, Backend>, persona_id: String, until: Option<String>) -> Reply<PersonaView> {
    view(engine(&state).await?.personas().pause_persona(&persona_id, until.as_deref()).await)
}

#[tauri::command]
pub async fn list_archived_personas(state: State<'_, Backend>) -> Reply<Vec<PersonaView>> {
    view(engine(&state).await?.personas().list_archived_personas().await)
}

#[tauri::command]
pub async fn set_message_context(state: State<'_, Backend>, message_id: String, status: String) -> Reply<MessageView> {
    view(engine(&state).await?.personas().set_message_context(&message_id, &status).await)
}

#[tauri::command]
pub async fn recall_message(state: State<'_, Backend>, message_id: String) -> Reply<String> {
    view(engine(&state).await?.personas().recall_message(&message_id).await)
}

#[tauri::command]
pub async fn ceremony_settings(state: State<'_, Backend>) -> Reply<app::CeremonySettingsView> {
    view(engine(&state).await?.personas().ceremony_settings().await)
}

#[tauri::command]
pub async fn set_ceremony_time(state: State<'_, Backend>, time: String) -> Reply<app::CeremonySettingsView> {
    view(engine(&state).await?.personas().set_ceremony_time(&time).await)
}

#[tauri::command]
pub async fn set_queue_priority(state: State<'_, Backend>, id: String, priority: String) -> Reply<()> {
    view(engine(&state).await?.personas().set_queue_priority(&id, &priority).await)
}

// ----- profile: export and erasure -----

#[tauri::command]
pub async fn export_profile(state: State<'_, Backend>, path: String, passphrase: String) -> Reply<ExportView> {
    view(engine(&state).await?.vault().export_to(&path, &passphrase).await)
}

/// Checks and stages an export; it opens at the next start (`restart_app`).
#[tauri::command]
pub async fn import_profile(state: State<'_, Backend>, path: String, passphrase: String, replace: bool) -> Reply<ImportView> {
    let engine = engine(&state).await?;
    // On a thread of its own: sqlx's import future is not provably `Send`.
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let staged = tauri::async_runtime::block_on(engine.vault().stage_import(&path, &passphrase, replace));
        let _ = tx.send(staged);
    });
    match rx.await {
        Ok(staged) => view(staged),
        Err(_) => Err(app::AppError::new("STORAGE_SAVE_FAILED", "the import stopped unexpectedly; nothing was changed").view()),
    }
}

/// Restarts the app (after an import). The exit handler ends the sessions and
/// stops the engine first, as on a normal quit.
#[tauri::command]
pub fn restart_app(app: tauri::AppHandle) {
    app.restart();
}

#[tauri::command]
pub async fn forget_message(state: State<'_, Backend>, message_id: String) -> Reply<()> {
    view(engine(&state).await?.vault().forget_message(&message_id).await)
}

#[tauri::command]
pub async fn archive_persona(state: State<'_, Backend>, persona_id: String, archived: bool) -> Reply<()> {
    view(engine(&state).await?.vault().archive_persona(&persona_id, archived).await)
}

#[tauri::command]
pub async fn delete_persona(state: State<'_, Backend>, persona_id: String, with_human_data: bool) -> Reply<()> {
    view(engine(&state).await?.vault().delete_persona(&persona_id, with_human_data).await.map(|_| ()))
}

// ----- office -----

#[tauri::command]
pub async fn why_reply(state: State<'_, Backend>, message_id: String) -> Reply<WhyView> {
    view(engine(&state).await?.office().why(&message_id).await)
}

#[tauri::command]
pub async fn end_session(state: State<'_, Backend>, persona: String) -> Reply<Option<HandoverView>> {
    view(engine(&state).await?.office().end_session(&persona, SessionEnd::New).await)
}

#[tauri::command]
pub async fn get_constitution(state: State<'_, Backend>, persona: String) -> Reply<Option<ConstitutionView>> {
    view(engine(&state).await?.office().constitution(&persona).await)
}

#[tauri::command]
pub async fn set_constitution(
    state: State<'_, Backend>,
    persona: String,
    core_directive: String,
    overrides: Vec<String>,
) -> Reply<ConstitutionView> {
    view(engine(&state).await?.office().set_constitution(&persona, &core_directive, &overrides).await)
}

#[tauri::command]
pub async fn get_persona_language(state: State<'_, Backend>, persona: String) -> Reply<String> {
    view(engine(&state).await?.office().persona_language(&persona).await)
}

#[tauri::command]
pub async fn set_persona_language(state: State<'_, Backend>, persona: String, language: String) -> Reply<String> {
    view(engine(&state).await?.office().set_persona_language(&persona, &language).await)
}

#[tauri::command]
pub async fn list_obligations(state: State<'_, Backend>, persona: String) -> Reply<Vec<ObligationView>> {
    view(engine(&state).await?.office().obligations(&persona).await)
}

#[tauri::command]
pub async fn complete_obligation(state: State<'_, Backend>, id: String) -> Reply<()> {
    view(engine(&state).await?.office().complete_obligation(&id).await)
}

#[tauri::command]
pub async fn token_usage(state: State<'_, Backend>) -> Reply<Vec<TokenUsageView>> {
    view(engine(&state).await?.office().token_usage().await)
}

#[tauri::command]
pub async fn set_token_quota(state: State<'_, Backend>, persona: String, daily_limit: u32) -> Reply<()> {
    view(engine(&state).await?.office().set_token_quota(&persona, daily_limit).await)
}

#[tauri::command]
pub async fn list_handovers(state: State<'_, Backend>, persona: String) -> Reply<Vec<HandoverView>> {
    view(engine(&state).await?.office().handovers(&persona, 200).await)
}

// office: session modes, obligations added by the person, simulations
#[tauri::command]
pub async fn session_mode(state: State<'_, Backend>, persona: String) -> Reply<SessionModeView> {
    view(engine(&state).await?.office().session_mode(&persona).await)
}

#[tauri::command]
pub async fn set_session_mode(state: State<'_, Backend>, persona: String, session_type: String, mode: String) -> Reply<SessionModeView> {
    view(engine(&state).await?.office().set_session_mode(&persona, &session_type, &mode).await)
}

#[tauri::command]
pub async fn add_obligation(
    state: State<'_, Backend>,
    persona: String,
    text: String,
    due_at: Option<String>,
    kind: String,
) -> Reply<ObligationView> {
    view(engine(&state).await?.office().add_obligation(&persona, &text, due_at.as_deref(), &kind).await)
}

#[tauri::command]
pub async fn simulate_proposal(state: State<'_, Backend>, persona: String, nonce: String) -> Reply<SimulationView> {
    view(engine(&state).await?.office().simulate_proposal(&persona, &nonce).await)
}

#[tauri::command]
pub fn desktop_settings(desktop: State<'_, crate::desktop::Desktop>) -> app::DesktopView {
    desktop.view()
}

#[tauri::command]
pub fn set_desktop_settings(
    app: tauri::AppHandle,
    desktop: State<'_, crate::desktop::Desktop>,
    settings: app::DesktopSettings,
) -> Reply<app::DesktopView> {
    desktop.update(&app, settings).map_err(|e| e.view())
}

#[tauri::command]
pub fn voice_talk(app: tauri::AppHandle) {
    crate::talk::talk_or_stop(&app);
}

#[tauri::command]
pub fn voice_stop(app: tauri::AppHandle) {
    crate::talk::stop(&app);
}

#[tauri::command]
pub async fn voice_devices() -> Reply<Vec<app::voice::VoiceDeviceView>> {
    match tauri::async_runtime::spawn_blocking(app::voice::devices).await {
        Ok(result) => result.map_err(|e| e.view()),
        Err(e) => Err(app::AppError::new("VOICE_DEVICE_UNAVAILABLE", format!("listing sound devices failed: {e}")).view()),
    }
}

/// What the page would lose if it were made anew (unsent text, the open
/// chat), kept by the shell so releasing the hidden window's web view
/// loses nothing; empty text forgets the key.
#[tauri::command]
pub fn keep_page_state(desktop: State<'_, crate::desktop::Desktop>, key: String, text: String) {
    desktop.keep_page_state(key, text);
}

#[tauri::command]
pub fn kept_page_state(desktop: State<'_, crate::desktop::Desktop>, key: String) -> String {
    desktop.kept_page_state(&key)
}

/// The latest voice turn's steps, for a page that opens after they happened.
#[tauri::command]
pub fn voice_latest(voice: State<'_, crate::talk::VoiceShell>) -> Vec<app::voice::VoiceEvent> {
    voice.latest()
}

/// Whether Ledgermind starts (hidden, in the tray) at login: the XDG
/// autostart entry is the setting itself.
#[tauri::command]
pub fn start_at_login() -> bool {
    crate::autostart::entry_path().is_ok_and(|p| crate::autostart::enabled_at(&p))
}

/// Writes or removes the XDG autostart entry; answers the new state.
#[tauri::command]
pub fn set_start_at_login(enabled: bool) -> Reply<bool> {
    let result = crate::autostart::entry_path()
        .and_then(|p| crate::autostart::set_at(&p, enabled, &crate::autostart::current_program()).map(|()| p));
    match result {
        Ok(p) => Ok(crate::autostart::enabled_at(&p)),
        Err(e) => Err(app::AppError::new("AUTOSTART_FAILED", e.to_string()).view()),
    }
}
