//! Import inside the app: staged, fully checked, put in place at the next start.

use std::sync::Arc;

use crate::{await_reply, start, Harness};

const PASS: &str = "correct horse battery staple";

#[tokio::test]
async fn an_export_imported_in_the_app_opens_after_a_restart_with_nothing_lost() {
    // The profile to move: a persona, a conversation, exported.
    let source = Harness::new(&["Hello Ada."]).await;
    source.engine.personas().create_persona("Ada", "A patient tutor").await.expect("persona");
    let mut rx = source.engine.subscribe();
    source.engine.conversation().send_message("Ada", "hi there, remember the lighthouse").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    let file = source.dir.path().join("profile.lmx");
    source.engine.vault().export_to(file.to_str().expect("utf-8 path"), PASS).await.expect("export");
    let digest = source.engine.ledger().state_digest().await.expect("digest");

    // A fresh install.
    let target = Harness::new(&[]).await;
    let path = file.to_str().expect("utf-8 path");

    // A wrong passphrase and a damaged file change nothing.
    let e = target.engine.vault().stage_import(path, "wrong passphrase!", false).await.expect_err("refused");
    assert_eq!(e.code, "EXPORT_BAD_PASSPHRASE", "{e:?}");
    let damaged = target.dir.path().join("damaged.lmx");
    let mut bytes = std::fs::read(&file).expect("read");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    std::fs::write(&damaged, bytes).expect("write");
    let e = target.engine.vault().stage_import(damaged.to_str().expect("path"), PASS, false).await.expect_err("refused");
    assert_eq!(e.code, "EXPORT_DAMAGED", "{e:?}");
    assert!(!target.dir.path().join("import-staged").exists(), "nothing is left staged");

    let staged = target.engine.vault().stage_import(path, PASS, false).await.expect("stage");
    assert!(!staged.replaces_current);
    assert_eq!(staged.profile_id, source.engine.ledger().profile_id());
    // Until the restart the app keeps working on the profile it has.
    assert_eq!(target.engine.personas().list_personas().await.expect("personas").len(), 1);

    target.engine.shutdown().await;
    let Harness { dir, keys, provider, engine } = target;
    drop(engine);
    let engine = start(&dir, keys, provider).await;
    assert_eq!(engine.ledger().profile_id(), source.engine.ledger().profile_id());
    assert_eq!(engine.ledger().state_digest().await.expect("digest"), digest);
    assert!(engine.ledger().verify().await.expect("verify").ok());
    let names: Vec<String> = engine.personas().list_personas().await.expect("personas").into_iter().map(|p| p.name).collect();
    assert!(names.contains(&"Ada".to_owned()), "{names:?}");
    // The search index was rebuilt from the imported ledger.
    let found = engine.memory().recall("Ada", "lighthouse", 5).await.expect("recall");
    assert!(found.results.iter().any(|r| r.text.contains("lighthouse")), "{found:?}");
    // The replaced (empty) profile is kept aside, not deleted.
    let kept: Vec<_> = std::fs::read_dir(dir.path())
        .expect("read home")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("replaced-"))
        .collect();
    assert_eq!(kept.len(), 1);
    assert!(kept[0].path().join("ledger.db").exists());
    engine.shutdown().await;
}

#[tokio::test]
async fn importing_over_a_profile_in_use_needs_confirmation_and_keeps_it() {
    let source = Harness::new(&[]).await;
    source.engine.personas().create_persona("Bo", "From the export").await.expect("persona");
    let file = source.dir.path().join("bo.lmx");
    source.engine.vault().export_to(file.to_str().expect("path"), PASS).await.expect("export");

    let h = Harness::new(&[]).await;
    h.engine.personas().create_persona("Cy", "Already here").await.expect("persona");
    let before = h.engine.ledger().state_digest().await.expect("digest");
    let e = h.engine.vault().stage_import(file.to_str().expect("path"), PASS, false).await.expect_err("needs confirmation");
    assert_eq!(e.code, "IMPORT_TARGET_NOT_EMPTY");
    let staged = h.engine.vault().stage_import(file.to_str().expect("path"), PASS, true).await.expect("confirmed");
    assert!(staged.replaces_current);

    h.engine.shutdown().await;
    let Harness { dir, keys, provider, engine } = h;
    drop(engine);
    let engine = start(&dir, keys.clone(), provider.clone()).await;
    let names: Vec<String> = engine.personas().list_personas().await.expect("personas").into_iter().map(|p| p.name).collect();
    assert!(names.contains(&"Bo".to_owned()) && !names.contains(&"Cy".to_owned()), "{names:?}");
    engine.shutdown().await;
    drop(engine);

    // The replaced profile is intact in its folder: open it there.
    let kept = std::fs::read_dir(dir.path())
        .expect("read home")
        .filter_map(|e| e.ok())
        .find(|e| e.file_name().to_string_lossy().starts_with("replaced-"))
        .expect("kept aside");
    let old = ledger::Ledger::open(ledger::LedgerOptions::new(kept.path().join("ledger.db")), keys as Arc<dyn ledger::KeyStore>)
        .await
        .expect("the old profile opens");
    assert_eq!(old.state_digest().await.expect("digest"), before);
}
