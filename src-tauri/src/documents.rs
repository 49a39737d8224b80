//! The document library's commands and the window's file drop: each makes
//! one call into the engine.

use std::path::PathBuf;

use app::library::{CitationView, DocumentHitView, DocumentItemView, PassageView};
use tauri::{Manager, State};

use crate::commands::{engine, view, Reply};
use crate::Backend;

/// Files and folders dropped on the window: documents are imported (the
/// progress arrives as events); model files are left to the web view,
/// which imports them as models.
pub fn dropped(handle: &tauri::AppHandle, paths: &[PathBuf]) {
    let documents: Vec<PathBuf> = paths.iter().filter(|p| !app::library::is_model_file(p)).cloned().collect();
    if documents.is_empty() {
        return;
    }
    let handle = handle.clone();
    tauri::async_runtime::spawn(async move {
        let Some(backend) = handle.try_state::<Backend>() else { return };
        match backend.engine().await {
            Ok(engine) => engine.library().import_dropped(documents).await,
            Err(e) => tracing::warn!(code = e.code, "dropped documents were not imported: {}", e.message),
        }
    });
}

/// The files named on a command line (flags left out), relative ones
/// taken from `cwd`, the folder the launch came from.
pub fn paths_from_args(args: &[String], cwd: &std::path::Path) -> Vec<PathBuf> {
    args.iter()
        .filter(|a| !a.starts_with("--"))
        .map(|a| a.strip_prefix("file://").unwrap_or(a.as_str()))
        .map(|a| if std::path::Path::new(a).is_absolute() { PathBuf::from(a) } else { cwd.join(a) })
        .collect()
}

/// Files given on the command line, to this copy or to a second launch:
/// imported into the library with the usual progress, as a drop would be.
/// A path that is missing is said in the log and left out; a file the
/// library cannot read is reported by the import's own progress.
pub fn opened(handle: &tauri::AppHandle, paths: Vec<PathBuf>) {
    let (present, missing): (Vec<PathBuf>, Vec<PathBuf>) = paths.into_iter().partition(|p| p.exists());
    for p in &missing {
        tracing::warn!(path = %p.display(), "a file given on the command line does not exist; not imported");
    }
    if !present.is_empty() {
        dropped(handle, &present);
    }
}

#[tauri::command]
pub async fn import_documents(state: State<'_, Backend>, paths: Vec<PathBuf>, watch: Option<bool>) -> Reply<String> {
    view(engine(&state).await?.library().import_documents(paths, watch.unwrap_or(false)).await)
}

#[tauri::command]
pub async fn cancel_import(state: State<'_, Backend>, import_id: String) -> Reply<bool> {
    Ok(engine(&state).await?.library().cancel_import(&import_id))
}

#[tauri::command]
pub async fn list_documents(state: State<'_, Backend>) -> Reply<Vec<DocumentItemView>> {
    view(engine(&state).await?.library().documents().await)
}

#[tauri::command]
pub async fn remove_document(state: State<'_, Backend>, id: i64) -> Reply<()> {
    view(engine(&state).await?.library().remove_document(id).await)
}

#[tauri::command]
pub async fn set_document_groups(state: State<'_, Backend>, id: i64, groups: Vec<String>) -> Reply<()> {
    view(engine(&state).await?.library().set_document_groups(id, groups).await)
}

#[tauri::command]
pub async fn search_documents(state: State<'_, Backend>, query: String, k: usize) -> Reply<Vec<DocumentHitView>> {
    view(engine(&state).await?.library().search_documents(&query, k).await)
}

#[tauri::command]
pub async fn message_citations(state: State<'_, Backend>, message_id: String) -> Reply<Vec<CitationView>> {
    view(engine(&state).await?.library().message_citations(&message_id).await)
}

#[tauri::command]
pub async fn document_passage(state: State<'_, Backend>, chunk_id: i64) -> Reply<PassageView> {
    view(engine(&state).await?.library().document_passage(chunk_id).await)
}
