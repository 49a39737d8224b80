//! The vault: save slots, erasure, export and import, verification,
//! receipts and proofs, as wrappers over the ledger's vault API with the UI
//! events they cause.
//!
//! Public surface: [`Vault`] and the views in `views` (events, verify,
//! receipts, checkpoints, export, import). It calls the memory capability
//! (an erasure also leaves the search index) and the keys (verify names
//! the key epochs), nothing above them.

pub(crate) mod views;

use std::path::Path;
use std::sync::Arc;

use ledger::{CheckpointInfo, Erasure, ExportSummary, LedgerOptions, Proof, Receipt, SignedTreeHead};

use crate::context::Context;
use crate::error::AppError;
use crate::events::AppEvent;
use crate::keys::Keys;
use crate::memory::Memories;
use crate::Result;
pub use views::{CheckpointView, EventView, ExportView, ImportView, ReceiptView, VerifyView};

/// The ledger's vault as the shells use it.
pub struct Vault {
    ctx: Arc<Context>,
    memory: Arc<Memories>,
    keys: Arc<Keys>,
}

/// Shortest passphrase the desktop accepts for an export.
const MIN_PASSPHRASE: usize = 8;

impl Vault {
    pub fn new(ctx: Arc<Context>, memory: Arc<Memories>, keys: Arc<Keys>) -> Self {
        Self { ctx, memory, keys }
    }

    pub async fn verify(&self) -> Result<VerifyView> {
        let mut report = self.ctx.ledger.verify().await?;
        let key_epochs = self.keys.epoch_views(std::mem::take(&mut report.key_epochs)).await;
        Ok(VerifyView {
            ok: report.ok(),
            events: report.events,
            first_bad_seq: report.failure.as_ref().map(|f| f.seq),
            reason: report.failure.map(|f| f.reason),
            millis: report.millis,
            key_epochs,
        })
    }

    pub async fn list_events(&self, before_seq: Option<i64>, limit: u32) -> Result<Vec<EventView>> {
        let limit = limit.clamp(1, 500);
        Ok(self.ctx.ledger.events(before_seq, limit).await?.into_iter().map(EventView::from).collect())
    }

    pub async fn list_checkpoints(&self) -> Result<Vec<CheckpointInfo>> {
        Ok(self.ctx.ledger.checkpoints().await?)
    }

    /// Runs one checkpoint operation between a start event and its end event,
    /// so the UI can hold interactions meanwhile.
    async fn checkpoint_op<T>(
        &self,
        op: &str,
        slot: Option<u8>,
        work: impl std::future::Future<Output = std::result::Result<T, ledger::LedgerError>>,
    ) -> Result<T> {
        self.ctx.emit(AppEvent::CheckpointStarted { op: op.to_owned(), slot });
        match work.await {
            Ok(v) => Ok(v),
            Err(e) => {
                let e: crate::AppError = e.into();
                self.ctx.emit(AppEvent::CheckpointFailed { op: op.to_owned(), slot, error: e.view() });
                Err(e)
            }
        }
    }

    pub async fn save_checkpoint(&self, slot: i64, name: &str) -> Result<CheckpointInfo> {
        let info = self.checkpoint_op("save", u8::try_from(slot).ok(), self.ctx.ledger.save_checkpoint(slot, name)).await?;
        self.ctx.emit(AppEvent::CheckpointCreated { checkpoint: info.clone().into() });
        Ok(info)
    }

    pub async fn delete_checkpoint(&self, slot: i64) -> Result<()> {
        let s = u8::try_from(slot).ok();
        self.checkpoint_op("delete", s, self.ctx.ledger.delete_checkpoint(slot)).await?;
        if let Some(slot) = s {
            self.ctx.emit(AppEvent::CheckpointDeleted { slot });
        }
        Ok(())
    }

    pub async fn restore_checkpoint(&self, slot: i64) -> Result<Receipt> {
        let s = u8::try_from(slot).ok();
        let r = self.checkpoint_op("restore", s, self.ctx.ledger.restore_checkpoint(slot)).await?;
        self.ctx.emit(AppEvent::CheckpointRestored { slot: s, receipt: r.clone().into() });
        Ok(r)
    }

    /// Undoes the latest restore (itself a restore: nothing is lost).
    pub async fn undo_restore(&self) -> Result<Receipt> {
        let r = self.checkpoint_op("undo", None, self.ctx.ledger.undo_restore()).await?;
        self.ctx.emit(AppEvent::CheckpointRestored { slot: None, receipt: r.clone().into() });
        Ok(r)
    }

    /// Call every few seconds from a timer; saves when the policy says so.
    pub async fn autosave_tick(&self) -> Result<Option<CheckpointInfo>> {
        let saved = self.ctx.ledger.autosave_if_changed().await?;
        if let Some(info) = &saved {
            // Auto-saves are quick and never hold the UI: only announce the result.
            self.ctx.emit(AppEvent::CheckpointCreated { checkpoint: info.clone().into() });
        }
        Ok(saved)
    }

    /// Spawns the auto-save timer: every 15 s it saves if the 60 s policy says so.
    pub fn spawn_autosave(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        self.ctx.spawn_timer(self, std::time::Duration::from_secs(15), false, |vault| async move {
            if let Err(e) = vault.autosave_tick().await {
                tracing::warn!(error = %e, "auto-save failed");
            }
        })
    }

    /// Deletes one message for real (see `ledger::Ledger::erase_message`).
    pub async fn forget_message(&self, message_id: &str) -> Result<()> {
        let message = self.ctx.ledger.message(message_id).await?.ok_or_else(|| {
            AppError::new("STORAGE_LOAD_FAILED", format!("there is no message {message_id} (already deleted?)"))
        })?;
        self.erase_message(message_id).await?;
        self.ctx.emit(AppEvent::PersonaChanged { persona: self.ctx.ledger.persona(&message.persona_id).await?.into() });
        Ok(())
    }

    pub async fn archive_persona(&self, persona: &str, archived: bool) -> Result<()> {
        let r = self.ctx.ledger.archive_persona(persona, archived).await?;
        self.ctx.emit(AppEvent::LedgerAppended { seq: r.seq, kind: r.kind });
        let p = self.ctx.ledger.find_persona(persona).await?;
        self.ctx.emit(AppEvent::PersonaChanged { persona: p.into() });
        Ok(())
    }

    pub async fn delete_persona(&self, persona: &str, with_human_data: bool) -> Result<Erasure> {
        let e = self.ctx.ledger.delete_persona(persona, with_human_data).await?;
        self.memory.forget_in_index().await;
        self.emit_erasure(&e);
        Ok(e)
    }

    pub async fn erase_message(&self, message_id: &str) -> Result<Receipt> {
        let r = self.ctx.ledger.erase_message(message_id).await?;
        self.memory.forget_in_index().await;
        self.ctx.emit(AppEvent::LedgerAppended { seq: r.seq, kind: r.kind.clone() });
        Ok(r)
    }

    pub async fn delete_all_memories(&self) -> Result<Erasure> {
        let e = self.ctx.ledger.delete_all_memories().await?;
        self.memory.forget_in_index().await;
        self.emit_erasure(&e);
        Ok(e)
    }

    fn emit_erasure(&self, e: &Erasure) {
        if let Some(last) = e.receipts.last() {
            self.ctx.emit(AppEvent::LedgerAppended { seq: last.seq, kind: last.kind.clone() });
        }
    }

    pub async fn export_profile(&self, file: &Path, passphrase: &str) -> Result<ExportSummary> {
        Ok(self.ctx.ledger.export_profile(file, passphrase).await?)
    }

    /// The desktop's export: refuses weak passphrases, relative paths and
    /// overwriting an existing file (an export is often the only backup).
    pub async fn export_to(&self, path: &str, passphrase: &str) -> Result<views::ExportView> {
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
        Ok(views::ExportView { path: file.display().to_string(), events: summary.events, bytes: summary.bytes })
    }

    /// Whether this profile holds anything of the user's yet (a persona of
    /// their own or a message): importing over it then needs `replace`.
    pub async fn profile_in_use(&self) -> Result<bool> {
        let personas = self.ctx.ledger.personas(true).await?;
        if personas.len() > 1 {
            return Ok(true);
        }
        for p in &personas {
            if !self.ctx.ledger.messages(&p.id, Some(1)).await?.is_empty() {
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
    pub async fn stage_import(&self, path: &str, passphrase: &str, replace: bool) -> Result<views::ImportView> {
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
        let dir = self.ctx.data_dir().staged_import();
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| AppError::new("STORAGE_SAVE_FAILED", format!("cannot clear {}: {e}", dir.display())))?;
        }
        std::fs::create_dir_all(&dir)
            .map_err(|e| AppError::new("STORAGE_SAVE_FAILED", format!("cannot create {}: {e}", dir.display())))?;
        let staged = async {
            let imported =
                ledger::import_profile(LedgerOptions::new(dir.join("ledger.db")), self.ctx.ledger.keystore().clone(), file, passphrase).await?;
            let report = imported.verify().await?;
            if !report.ok() {
                return Err(AppError::new("EXPORT_DAMAGED", "the imported profile does not verify; nothing was changed"));
            }
            let view = views::ImportView {
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
        let marker = self.ctx.data_dir().staged_import_ready();
        let written = std::fs::File::create(&marker).and_then(|f| f.sync_all());
        if let Err(e) = written {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(AppError::new("STORAGE_SAVE_FAILED", format!("cannot finish staging the import: {e}")));
        }
        tracing::info!(profile = %view.profile_id, events = view.events, "import staged for the next start");
        Ok(view)
    }

    pub async fn receipt(&self, seq: i64) -> Result<Receipt> {
        Ok(self.ctx.ledger.receipt(seq).await?)
    }

    pub async fn prove(&self, seq: i64) -> Result<Proof> {
        Ok(self.ctx.ledger.inclusion_proof(seq).await?)
    }

    /// Writes the current signed tree head to the keychain (call on shutdown).
    pub async fn publish_tree_head(&self) -> Result<SignedTreeHead> {
        Ok(self.ctx.ledger.publish_sth().await?)
    }
}
