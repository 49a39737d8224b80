use std::sync::Arc;

use ledger::{import_profile, LedgerOptions, MemoryKeyStore, EI_PERSONA_ID, HUMAN_ENTITY};

use crate::{say, Fixture};

const PASS: &str = "correct horse battery staple";

async fn populated() -> Fixture {
    let f = Fixture::new().await;
    for i in 0..30 {
        f.ledger.append(HUMAN_ENTITY, say(EI_PERSONA_ID, &format!("m{i}"), &format!("message {i}"))).await.expect("append");
    }
    f.ledger.erase_message("m3").await.expect("erase");
    f.ledger.save_checkpoint(12, "exported slot").await.expect("save");
    f
}

#[tokio::test]
async fn export_import_round_trip_gives_the_same_state_and_keeps_signing() {
    let f = populated().await;
    let file = f.dir.path().join("profile.lmx");
    let summary = f.ledger.export_profile(&file, PASS).await.expect("export");
    assert_eq!(summary.erased_payloads, 1);
    let bytes = std::fs::read(&file).expect("read");
    assert!(!bytes.windows(9).any(|w| w == b"message 1"), "the export is encrypted");

    let home = tempfile::tempdir().expect("tempdir");
    let keys = Arc::new(MemoryKeyStore::default());
    let imported = import_profile(LedgerOptions::new(home.path().join("ledger.db")), keys.clone(), &file, PASS)
        .await
        .expect("import");
    assert_eq!(imported.state_digest().await.expect("d"), f.ledger.state_digest().await.expect("d"));
    assert_eq!(imported.head().await, f.ledger.head().await);
    assert_eq!(imported.profile_id(), f.ledger.profile_id());
    assert_eq!(imported.checkpoints().await.expect("slots"), f.ledger.checkpoints().await.expect("slots"));
    assert!(imported.verify().await.expect("verify").ok());
    // The imported profile can keep appending under the same keys.
    imported.append(HUMAN_ENTITY, say(EI_PERSONA_ID, "new", "after import")).await.expect("append");
    assert!(imported.verify().await.expect("verify").ok());

    // Not into a home that has a ledger.
    let again = import_profile(LedgerOptions::new(home.path().join("ledger.db")), keys, &file, PASS).await;
    assert_eq!(again.err().map(|e| e.code()), Some("IMPORT_TARGET_NOT_EMPTY"));
}

/// An import beside the original on the same machine (same keychain): each
/// copy keeps its own signed tree head, so neither looks rolled back when
/// the other grows.
#[tokio::test]
async fn two_copies_of_one_profile_on_one_machine_keep_separate_tree_heads() {
    let f = populated().await;
    let file = f.dir.path().join("profile.lmx");
    f.ledger.export_profile(&file, PASS).await.expect("export");
    let home = tempfile::tempdir().expect("tempdir");
    let shared: Arc<dyn ledger::KeyStore> = f.keys.clone();
    let copy = import_profile(LedgerOptions::new(home.path().join("ledger.db")), shared, &file, PASS)
        .await
        .expect("import beside the original");
    assert_eq!(copy.profile_id(), f.ledger.profile_id());
    assert_ne!(copy.installation_id(), f.ledger.installation_id());
    for i in 0..5 {
        copy.append(HUMAN_ENTITY, say(EI_PERSONA_ID, &format!("c{i}"), "only in the copy")).await.expect("append");
    }
    copy.publish_sth().await.expect("the copy publishes its own head");
    let original = f.reopen().await;
    let report = original.ledger.verify().await.expect("verify");
    assert!(report.ok(), "the original must not look rolled back: {report:?}");
    original.ledger.publish_sth().await.expect("the original still publishes");
    let report = copy.verify().await.expect("verify");
    assert!(report.ok(), "{report:?}");
}

#[tokio::test]
async fn wrong_passphrase_damaged_file_and_newer_version_change_nothing() {
    let f = populated().await;
    let file = f.dir.path().join("profile.lmx");
    f.ledger.export_profile(&file, PASS).await.expect("export");
    let home = tempfile::tempdir().expect("tempdir");
    let target = home.path().join("ledger.db");
    let keys = Arc::new(MemoryKeyStore::default());

    let e = import_profile(LedgerOptions::new(&target), keys.clone(), &file, "wrong passphrase!").await.err();
    assert_eq!(e.map(|e| e.code()), Some("EXPORT_BAD_PASSPHRASE"));

    let mut bytes = std::fs::read(&file).expect("read");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    let damaged = home.path().join("damaged.lmx");
    std::fs::write(&damaged, &bytes).expect("write");
    let e = import_profile(LedgerOptions::new(&target), keys.clone(), &damaged, PASS).await.err();
    assert_eq!(e.map(|e| e.code()), Some("EXPORT_DAMAGED"));

    let mut bytes = std::fs::read(&file).expect("read");
    bytes.truncate(bytes.len() - 100);
    std::fs::write(&damaged, &bytes).expect("write");
    let e = import_profile(LedgerOptions::new(&target), keys.clone(), &damaged, PASS).await.err();
    assert_eq!(e.map(|e| e.code()), Some("EXPORT_DAMAGED"));

    let mut bytes = std::fs::read(&file).expect("read");
    bytes[8] = 0;
    bytes[9] = 9;
    std::fs::write(&damaged, &bytes).expect("write");
    let e = import_profile(LedgerOptions::new(&target), keys.clone(), &damaged, PASS).await.err();
    assert_eq!(e.map(|e| e.code()), Some("EXPORT_NEWER_VERSION"));

    // Nothing was written: no database, no keys.
    let left: Vec<_> = std::fs::read_dir(home.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("ledger"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(keys.accounts().is_empty());
}
