use ledger::{LedgerError, EI_PERSONA_ID, HUMAN_ENTITY};

use crate::{say, Fixture};

async fn contents(f: &Fixture) -> Vec<String> {
    f.ledger.messages(EI_PERSONA_ID, None).await.expect("messages").into_iter().map(|m| m.content).collect()
}

#[tokio::test]
async fn slot_rules_and_error_codes() {
    let f = Fixture::new().await;
    let l = &f.ledger;
    assert!(matches!(l.save_checkpoint(15, "x").await, Err(LedgerError::CheckpointInvalidSlot(15))));
    assert!(matches!(l.save_checkpoint(-1, "x").await, Err(LedgerError::CheckpointInvalidSlot(-1))));
    assert!(matches!(l.save_checkpoint(3, "x").await, Err(LedgerError::CheckpointSlotProtected(3))));
    assert!(matches!(l.restore_checkpoint(12).await, Err(LedgerError::CheckpointSlotEmpty(12))));
    assert!(matches!(l.delete_checkpoint(12).await, Err(LedgerError::CheckpointSlotEmpty(12))));
    let e = l.restore_checkpoint(99).await.expect_err("invalid");
    assert_eq!(e.code(), "CHECKPOINT_INVALID_SLOT");
    l.autosave().await.expect("autosave");
    let e = l.delete_checkpoint(0).await.expect_err("protected");
    assert_eq!(e.code(), "CHECKPOINT_SLOT_PROTECTED");
    // Manual slots overwrite and delete.
    l.save_checkpoint(10, "first").await.expect("save");
    l.append(HUMAN_ENTITY, say(EI_PERSONA_ID, "m1", "one")).await.expect("append");
    let second = l.save_checkpoint(10, "second").await.expect("overwrite");
    assert_eq!(l.checkpoint(10).await.expect("slot").name, "second");
    assert_eq!(l.checkpoint(10).await.expect("slot").seq, second.seq);
    l.delete_checkpoint(10).await.expect("delete");
    assert_eq!(l.checkpoint(10).await.expect_err("gone").code(), "CHECKPOINT_SLOT_EMPTY");
}

#[tokio::test]
async fn autosaves_are_fifo_with_slot_0_the_oldest() {
    let f = Fixture::new().await;
    let mut seqs = Vec::new();
    for i in 0..13 {
        let r = f.ledger.append(HUMAN_ENTITY, say(EI_PERSONA_ID, &format!("m{i}"), "x")).await.expect("append");
        f.ledger.autosave().await.expect("autosave");
        seqs.push(r.seq);
    }
    let autos: Vec<_> = f.ledger.checkpoints().await.expect("list").into_iter().filter(|c| c.slot < 10).collect();
    assert_eq!(autos.len(), 10);
    // The three oldest were dropped; slot 0 is the oldest kept.
    let kept: Vec<i64> = autos.iter().map(|c| c.seq).collect();
    assert_eq!(kept, seqs[3..].to_vec());
    assert_eq!(autos.iter().map(|c| c.slot).collect::<Vec<_>>(), (0..10).collect::<Vec<u8>>());
}

#[tokio::test]
async fn autosave_if_changed_only_when_the_ledger_moved() {
    let f = Fixture::new().await;
    assert!(f.ledger.autosave_if_changed().await.expect("first").is_some());
    // Nothing changed: no new slot.
    assert!(f.ledger.autosave_if_changed().await.expect("again").is_none());
    f.ledger.append(HUMAN_ENTITY, say(EI_PERSONA_ID, "m", "x")).await.expect("append");
    // Changed but less than 60 s ago (system clock): not yet.
    assert!(f.ledger.autosave_if_changed().await.expect("soon").is_none());
}

#[tokio::test]
async fn restore_then_undo_loses_nothing_and_replay_agrees() {
    let f = Fixture::new().await;
    let l = &f.ledger;
    l.append(HUMAN_ENTITY, say(EI_PERSONA_ID, "a", "before the save")).await.expect("append");
    let saved = l.save_checkpoint(11, "good state").await.expect("save");
    let digest_saved = l.state_digest().await.expect("digest");
    l.append(HUMAN_ENTITY, say(EI_PERSONA_ID, "b", "after the save")).await.expect("append");
    let digest_before_restore = l.state_digest().await.expect("digest");

    let restore = l.restore_checkpoint(11).await.expect("restore");
    assert_eq!(restore.kind, "checkpoint_restored");
    assert_eq!(contents(&f).await, vec!["before the save"]);
    assert_eq!(l.state_digest().await.expect("digest"), digest_saved);
    assert_eq!(saved.state_digest, digest_saved);
    // The rebuilt projection equals the incremental one.
    l.rebuild_projections().await.expect("rebuild");
    assert_eq!(l.state_digest().await.expect("digest"), digest_saved);

    // New work after the restore survives a later undo? No: an undo goes
    // back to just before the restore. Both stay in the ledger.
    let undo = l.undo_restore().await.expect("undo");
    assert_eq!(undo.seq, restore.seq + 1);
    assert_eq!(contents(&f).await, vec!["before the save", "after the save"]);
    assert_eq!(l.state_digest().await.expect("digest"), digest_before_restore);
    l.rebuild_projections().await.expect("rebuild");
    assert_eq!(l.state_digest().await.expect("digest"), digest_before_restore);

    // Work after the undo chains on; a reopen (replay) gives the same state.
    l.append(HUMAN_ENTITY, say(EI_PERSONA_ID, "c", "after the undo")).await.expect("append");
    let digest = l.state_digest().await.expect("digest");
    let f = f.reopen().await;
    f.ledger.rebuild_projections().await.expect("rebuild");
    assert_eq!(f.ledger.state_digest().await.expect("digest"), digest);
    assert!(f.ledger.verify().await.expect("verify").ok());
    assert_eq!(f.ledger.receipt(restore.seq).await.expect("receipt"), restore);
}

#[tokio::test]
async fn a_restore_never_brings_erased_content_back() {
    let f = Fixture::new().await;
    let l = &f.ledger;
    let marker = "SECRET-MARKER-7f3a-restore";
    l.append(HUMAN_ENTITY, say(EI_PERSONA_ID, "keep", "ordinary")).await.expect("append");
    l.append(HUMAN_ENTITY, say(EI_PERSONA_ID, "gone", marker)).await.expect("append");
    l.save_checkpoint(10, "with the secret").await.expect("save");
    l.erase_message("gone").await.expect("erase");
    l.restore_checkpoint(10).await.expect("restore");
    assert_eq!(contents(&f).await, vec!["ordinary"]);
    l.undo_restore().await.expect("undo");
    assert_eq!(contents(&f).await, vec!["ordinary"]);
    assert!(l.verify().await.expect("verify").ok());
    assert!(crate::files_containing(f.dir.path(), marker.as_bytes()).is_empty());
}
