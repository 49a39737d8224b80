//! Save slots, erasure, export and import, proofs: the engine's wrappers
//! over the ledger's vault API, with the UI events they cause.

use std::path::Path;
use std::sync::Arc;

use ledger::{CheckpointInfo, Erasure, ExportSummary, LedgerOptions, Proof, Receipt, SignedTreeHead};

use crate::engine::Engine;
use crate::error::AppError;
use crate::views::AppEvent;
use crate::Result;

/// Shortest passphrase the desktop accepts for an export.
const MIN_PASSPHRASE: usize = 8;

impl Engine {
    pub async fn list_checkpoints(&self) -> Result<Vec<CheckpointInfo>> {
        Ok(self.ledger.checkpoints().await?)
    }

    /// Runs one checkpoint operation between a start event and its end event,
    /// so the UI can hold interactions meanwhile.
    async fn checkpoint_op<T>(
        &self,
        op: &str,
        slot: Option<u8>,
        work: impl std::future::Future<Output = std::result::Result<T, ledger::LedgerError>>,
    ) -> Result<T> {
        self.emit(AppEvent::CheckpointStarted { op: op.to_owned(), slot });
        match work.await {
            Ok(v) => Ok(v),
            Err(e) => {
                let e: crate::AppError = e.into();
                self.emit(AppEvent::CheckpointFailed { op: op.to_owned(), slot, error: e.view() });
                Err(e)
            }
        }
    }

    pub async fn save_checkpoint(&self, slot: i64, name: &str) -> Result<CheckpointInfo> {
        let info = self.checkpoint_op("save", u8::try_from(slot).ok(), self.ledger.save_checkpoint(slot, name)).await?;
        self.emit(AppEvent::CheckpointCreated { checkpoint: info.clone().into() });
        Ok(info)
    }

    pub async fn delete_checkpoint(&self, slot: i64) -> Result<()> {
        let s = u8::try_from(slot).ok();
        self.checkpoint_op("delete", s, self.ledger.delete_checkpoint(slot)).await?;
        if let Some(slot) = s {
            self.emit(AppEvent::CheckpointDeleted { slot });
        }
        Ok(())
    }

    pub async fn restore_checkpoint(&self, slot: i64) -> Result<Receipt> {
        let s = u8::try_from(slot).ok();
        let r = self.checkpoint_op("restore", s, self.ledger.restore_checkpoint(slot)).await?;
        self.emit(AppEvent::CheckpointRestored { slot: s, receipt: r.clone().into() });
        Ok(r)
    }

    /// Undoes the latest restore (itself a restore: nothing is lost).
    pub async fn undo_restore(&self) -> Result<Receipt> {
        let r = self.checkpoint_op("undo", None, self.ledger.undo_restore()).await?;
        self.emit(AppEvent::CheckpointRestored { slot: None, receipt: r.clone().into() });
        Ok(r)
    }

    /// Call every few seconds from a timer; saves when the policy says so.
    pub async fn autosave_tick(&self) -> Result<Option<CheckpointInfo>> {
        let saved = self.ledger.autosave_if_changed().await?;
        if let Some(info) = &saved {
            // Auto-saves are quick and never hold the UI: only announce the result.
            self.emit(AppEvent::CheckpointCreated { checkpoint: info.clone().into() });
        }
        Ok(saved)
    }

    /// Spawns the auto-save timer: every 15 s it saves if the 60 s policy says so.
    pub fn spawn_autosave(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        self.spawn_timer(std::time::Duration::from_secs(15), false, |engine| async move {
            if let Err(e) = engine.autosave_tick().await {
                tracing::warn!(error = %e, "auto-save failed");
            }
        })
    }

    /// Deletes one message for real (see `ledger::Ledger::erase_message`).
    pub async fn forget_message(&self, message_id: &str) -> Result<()> {
        let message = self.ledger.message(message_id).await?.ok_or_else(|| {
            AppError::new("STORAGE_LOAD_FAILED", format!("there is no message {message_id} (already deleted?)"))
        })?;
        self.erase_message(message_id).await?;
        self.emit(AppEvent::PersonaChanged { persona: self.ledger.persona(&message.persona_id).await?.into() });
        Ok(())
    }

    pub async fn archive_persona(&self, persona: &str, archived: bool) -> Result<()> {
        let r = self.ledger.archive_persona(persona, archived).await?;
        self.emit(AppEvent::LedgerAppended { seq: r.seq, kind: r.kind });
        let p = self.ledger.find_persona(persona).await?;
        self.emit(AppEvent::PersonaChanged { persona: p.into() });
        Ok(())
    }

    pub async fn delete_persona(&self, persona: &str, with_human_data: bool) -> Result<Erasure> {
        let e = self.ledger.delete_persona(persona, with_human_data).await?;
        self.forget_in_index().await;
        self.emit_erasure(&e);
        Ok(e)
    }

    pub async fn erase_message(&self, message_id: &str) -> Result<Receipt> {
        let r = self.ledger.erase_message(message_id).await?;
        self.forget_in_index().await;
        self.emit(AppEvent::LedgerAppended { seq: r.seq, kind: r.kind.clone() });
        Ok(r)
    }

    /// Brings erasures into the search index at once (not at the next start)
    /// and scrubs its files. Logged, not fatal: the ledger has already
    /// forgotten, and the next start re-derives the index from it.
    pub(crate) async fn forget_in_index(&self) {
        if let Err(e) = self.memory.sync_from_ledger(&self.ledger).await {
            tracing::error!(error = %e, "could not apply an erasure to the search index");
        }
        if let Err(e) = self.memory.scrub().await {
            tracing::error!(error = %e, "could not scrub the search index after an erasure");
        }
        // Evaluated prompts kept on disk were computed from the erased text.
        #[cfg(feature = "local")]
        if let Err(e) = self.local.forget_kept_prompts() {
            tracing::error!(error = %e, "could not delete the kept prompts after an erasure");
        }
    }

    pub async fn delete_all_memories(&self) -> Result<Erasure> {
        let e = self.ledger.delete_all_memories().await?;
        self.forget_in_index().await;
        self.emit_erasure(&e);
        Ok(e)
    }

    fn emit_erasure(&self, e: &Erasure) {
        if let Some(last) = e.receipts.last() {
            self.emit(AppEvent::LedgerAppended { seq: last.seq, kind: last.kind.clone() });
        }
    }

    pub async fn export_profile(&self, file: &Path, passphrase: &str) -> Result<ExportSummary> {
        Ok(self.ledger.export_profile(file, passphrase).await?)
    }

    /// The desktop's export: refuses weak passphrases, relative paths and
    /// overwriting an existing file (an export is often the only backup).
    pub async fn export_to(&self, path: &str, passphrase: &str) -> Result<crate::views::ExportView> {
        if passphrase.chars().count() < MIN_PASSPHRASE {
            return Err(AppError::invalid(format!("the passphrase needs at least {MIN_PASSPHRASE} characters")));
        }
        let file = Path::new(path.trim());
        if !file.is_absolute() || file.file_name().is_none() {
            return Err(AppError::invalid("give the full path of the file to write, e.g. /home/you/ledgermind.lmx"));
        }
        if file.exists() {
            return Err(AppError::new("STORAGE_SAVE_FAILED", format!("{} already exists; choose another name", file.display())));
        }
        if !file.parent().is_some_and(Path::is_dir) {
            return Err(AppError::new("STORAGE_SAVE_FAILED", format!("the folder of {} does not exist", file.display())));
        }
        let summary = self.export_profile(file, passphrase).await?;
        Ok(crate::views::ExportView { path: file.display().to_string(), events: summary.events, bytes: summary.bytes })
    }

    /// Whether this profile holds anything of the user's yet (a persona of
    /// their own or a message): importing over it then needs `replace`.
    pub async fn profile_in_use(&self) -> Result<bool> {
        let personas = self.ledger.personas(true).await?;
        if personas.len() > 1 {
            return Ok(true);
        }
        for p in &personas {
            if !self.ledger.messages(&p.id, Some(1)).await?.is_empty() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The desktop's import: decrypts and fully checks the export into a
    /// staging folder of this home (a wrong passphrase or a damaged file
    /// changes nothing), then the next start puts it in place
    /// (`DataDir::apply_staged_import`). A profile already in use is only
    /// replaced with `replace`, and even then it is kept aside, never deleted.
    pub async fn stage_import(&self, path: &str, passphrase: &str, replace: bool) -> Result<crate::views::ImportView> {
        let file = Path::new(path.trim());
        if !file.is_absolute() {
            return Err(AppError::invalid("give the full path of the export file, e.g. /home/you/ledgermind.lmx"));
        }
        if !file.is_file() {
            return Err(AppError::new("EXPORT_DAMAGED", format!("{} is not a file", file.display())));
        }
        let in_use = self.profile_in_use().await?;
        if in_use && !replace {
            return Err(AppError::new(
                "IMPORT_TARGET_NOT_EMPTY",
                "This profile already has conversations. Confirm to replace it: it is kept in a folder beside your data, not deleted.",
            ));
        }
        let dir = self.data_dir().staged_import();
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| AppError::new("STORAGE_SAVE_FAILED", format!("cannot clear {}: {e}", dir.display())))?;
        }
        std::fs::create_dir_all(&dir)
            .map_err(|e| AppError::new("STORAGE_SAVE_FAILED", format!("cannot create {}: {e}", dir.display())))?;
        let staged = async {
            let imported =
                ledger::import_profile(LedgerOptions::new(dir.join("ledger.db")), self.ledger.keystore().clone(), file, passphrase).await?;
            let report = imported.verify().await?;
            if !report.ok() {
                return Err(AppError::new("EXPORT_DAMAGED", "the imported profile does not verify; nothing was changed"));
            }
            let view = crate::views::ImportView {
                profile_id: imported.profile_id().to_owned(),
                events: report.events,
                replaces_current: in_use,
            };
            imported.close().await;
            Ok(view)
        }
        .await;
        let view = match staged {
            Ok(v) => v,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        let marker = self.data_dir().staged_import_ready();
        let written = std::fs::File::create(&marker).and_then(|f| f.sync_all());
        if let Err(e) = written {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(AppError::new("STORAGE_SAVE_FAILED", format!("cannot finish staging the import: {e}")));
        }
        tracing::info!(profile = %view.profile_id, events = view.events, "import staged for the next start");
        Ok(view)
    }

    pub async fn receipt(&self, seq: i64) -> Result<Receipt> {
        Ok(self.ledger.receipt(seq).await?)
    }

    pub async fn prove(&self, seq: i64) -> Result<Proof> {
        Ok(self.ledger.inclusion_proof(seq).await?)
    }

    /// Writes the current signed tree head to the keychain (call on shutdown).
    pub async fn publish_tree_head(&self) -> Result<SignedTreeHead> {
        Ok(self.ledger.publish_sth().await?)
    }
}
