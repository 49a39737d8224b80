//! Watched folders: an owned task that feeds file-system events (debounced
//! by notify-debouncer-full: a rename is one event, a burst of writes is
//! one) into the library. New and changed files are indexed, deleted ones
//! removed. Events are lost while the app is closed, so a start-up
//! reconcile scan ([`::library::Library::reconcile`]) runs first.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ::library::{AddReport, DocumentView, Format, Library};
use notify::RecursiveMode;
use notify_debouncer_full::{new_debouncer, DebounceEventResult};

use crate::error::AppError;

/// How long a file must be quiet before it is (re-)indexed.
pub const SETTLE: Duration = Duration::from_secs(2);

/// What the watcher did with one path.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchChange {
    Indexed(AddReport),
    Removed(DocumentView),
    Failed { path: String, message: String },
}

/// Watches every watched root of `library` until `shutdown` turns true;
/// `roots_changed` says a folder was added as watched; `on_change` sees
/// each change (the app turns them into events). `catch_up` (finishing an
/// import, the scan of the folders) runs once the folders are watched and
/// before their events are applied: a file created while it runs is then
/// an event waiting, never a file missed until the next start.
pub async fn watch_folders(
    library: Arc<Library>,
    settle: Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
    roots_changed: Arc<tokio::sync::Notify>,
    on_change: impl Fn(WatchChange) + Send + Sync + 'static,
    catch_up: impl std::future::Future<Output = ()>,
) -> Result<(), AppError> {
    let mut roots = library.watched_roots().await?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<PathBuf>>();
    let mut debouncer = new_debouncer(settle, None, move |result: DebounceEventResult| match result {
        Ok(events) => {
            let paths: Vec<PathBuf> = events.into_iter().flat_map(|e| e.event.paths).collect();
            if tx.send(paths).is_err() {
                tracing::debug!("folder watcher stopped");
            }
        }
        Err(errors) => errors.iter().for_each(|e| tracing::warn!(error = %e, "folder watch error")),
    })
    .map_err(|e| AppError::new("WATCH_FAILED", format!("Cannot watch folders: {e}")))?;
    for root in &roots {
        // A folder that cannot be watched is said, not silently missed
        // (inotify's per-user limit, a folder deleted meanwhile).
        if let Err(e) = debouncer.watch(root, RecursiveMode::Recursive) {
            on_change(WatchChange::Failed { path: root.display().to_string(), message: format!("cannot watch: {e}") });
        }
    }
    catch_up.await;
    loop {
        tokio::select! {
            () = roots_changed.notified() => {
                for root in library.watched_roots().await? {
                    if roots.contains(&root) {
                        continue;
                    }
                    match debouncer.watch(&root, RecursiveMode::Recursive) {
                        Ok(()) => roots.push(root),
                        Err(e) => on_change(WatchChange::Failed { path: root.display().to_string(), message: format!("cannot watch: {e}") }),
                    }
                }
            }
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    break;
                }
            }
            paths = rx.recv() => {
                let Some(mut paths) = paths else { break };
                paths.sort();
                paths.dedup();
                for path in paths {
                    apply(&library, &roots, &path, &on_change).await;
                }
            }
        }
    }
    drop(debouncer);
    Ok(())
}

async fn apply(library: &Library, roots: &[PathBuf], path: &Path, on_change: &impl Fn(WatchChange)) {
    let root = roots.iter().find(|r| path.starts_with(r));
    // Hidden entries inside the watched folder are skipped (editors' swap
    // files, .git); the folder itself may sit under a hidden one.
    let inside = root.and_then(|r| path.strip_prefix(r).ok()).unwrap_or(path);
    let hidden = inside.components().any(|c| c.as_os_str().to_str().is_some_and(|s| s.starts_with('.')));
    let root = root.map(|r| r.display().to_string());
    if hidden {
        return;
    }
    if path.is_file() {
        if Format::of(path).is_none() || library.is_ignored(path).await.unwrap_or(false) {
            return;
        }
        match library.add_file(path, root.as_deref()).await {
            Ok(r) if r.status == ::library::Status::Unchanged => {}
            Ok(r) => on_change(WatchChange::Indexed(r)),
            Err(e) => on_change(WatchChange::Failed { path: path.display().to_string(), message: e.to_string() }),
        }
        return;
    }
    if path.is_dir() {
        return; // its files arrive as their own events
    }
    // Gone: the file, or a whole folder of them.
    let gone = match library.missing_under(path).await {
        Ok(docs) => docs,
        Err(e) => {
            on_change(WatchChange::Failed { path: path.display().to_string(), message: e.to_string() });
            return;
        }
    };
    for doc in gone {
        match library.remove(&doc.id.to_string()).await {
            Ok(d) => on_change(WatchChange::Removed(d)),
            Err(e) => on_change(WatchChange::Failed { path: doc.path, message: e.to_string() }),
        }
    }
}
