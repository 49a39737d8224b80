//! A disk that fills while the app runs. The test re-runs itself inside a
//! private mount namespace (`unshare`) whose data folder is a 16 MB tmpfs,
//! so a real "no space left on device" reaches SQLite.

use std::process::Command;
use std::sync::Arc;

use app::{DataDir, Engine, EngineConfig};
use ledger::MemoryKeyStore;
use providers::ScriptedProvider;

use crate::await_reply;

const INSIDE: &str = "LEDGERMIND_TEST_FULL_DISK_HOME";
const NAME: &str = "disk::a_disk_that_fills_while_the_app_runs_loses_nothing";

#[tokio::test]
async fn a_disk_that_fills_while_the_app_runs_loses_nothing() {
    if let Ok(home) = std::env::var(INSIDE) {
        return inside(std::path::PathBuf::from(home)).await;
    }
    let outer = tempfile::tempdir().expect("tempdir");
    let home = outer.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let as_root = Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let mut cmd = Command::new("unshare");
    if !as_root.unwrap_or(false) {
        cmd.args(["--user", "--map-root-user"]);
    }
    let out = cmd
        .args(["--mount", "--propagation", "private"])
        .arg(std::env::current_exe().expect("test binary"))
        .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
        .env(INSIDE, &home)
        .output()
        .expect("run unshare (util-linux)");
    let text = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the run on a full disk failed:\n{text}");
    assert!(text.contains("1 passed"), "the inner run did not run the test:\n{text}");
}

async fn inside(home: std::path::PathBuf) {
    let mounted = Command::new("mount").args(["-t", "tmpfs", "-o", "size=16m", "tmpfs"]).arg(&home).status();
    assert!(mounted.is_ok_and(|s| s.success()), "cannot mount a tmpfs (needs root or user namespaces)");
    let keys = Arc::new(MemoryKeyStore::default());
    let provider = Arc::new(ScriptedProvider::with_replies("fake", ["Hello Ada here.", "Back again."]));
    let mut config = EngineConfig::new(DataDir::new(&home), keys);
    config.provider_override = Some(provider);
    let engine = Engine::start(config).await.expect("engine starts");
    let mut rx = engine.subscribe();
    engine.personas().create_persona("Ada", "A patient tutor").await.expect("persona");
    engine.conversation().send_message("Ada", "hello before the disk fills").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");

    // Fill the disk while the app runs.
    let filler = home.join("filler");
    let mut f = std::fs::File::create(&filler).expect("filler");
    let chunk = vec![0u8; 256 * 1024];
    loop {
        use std::io::Write;
        if let Err(e) = f.write_all(&chunk).and_then(|()| f.sync_all()) {
            assert_eq!(e.raw_os_error(), Some(28), "filling stopped for another reason: {e}");
            break;
        }
    }
    drop(f);
    let events = engine.ledger().event_count().await.expect("count on a full disk");

    let e = engine.personas().create_persona("Bo", "Made on a full disk").await.expect_err("cannot write on a full disk");
    assert_eq!(e.code, "STORAGE_SAVE_FAILED", "{e:?}");
    assert!(e.message.contains("disk is full"), "the message must say so: {}", e.message);
    let e = engine.conversation().send_message("Ada", "a message on a full disk").await.expect_err("cannot send on a full disk");
    assert!(e.message.contains("disk is full"), "{}", e.message);

    // The app keeps running and reading; nothing was half-written.
    let names: Vec<String> = engine.personas().list_personas().await.expect("list").into_iter().map(|p| p.name).collect();
    assert!(names.contains(&"Ada".to_owned()) && !names.contains(&"Bo".to_owned()), "{names:?}");
    let ada = engine.personas().list_personas().await.expect("list").into_iter().find(|p| p.name == "Ada").expect("Ada");
    let messages = engine.conversation().list_messages(&ada.id).await.expect("messages");
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(engine.ledger().event_count().await.expect("count"), events, "no event was added");
    assert!(engine.ledger().verify().await.expect("verify on a full disk").ok());

    // Space comes back: everything works again.
    std::fs::remove_file(&filler).expect("free the space");
    // (Before the writer connection was reset after a failed COMMIT, this
    // write "succeeded" into a savepoint that never committed.)
    engine.personas().create_persona("Bo", "Made after space was freed").await.expect("persona");
    assert!(engine.ledger().event_count().await.expect("count") >= events + 2, "readers see the new persona");
    engine.conversation().send_message("Ada", "hello again").await.expect("send");
    await_reply(&mut rx).await.1.expect("reply");
    let report = engine.ledger().verify().await.expect("verify");
    assert!(report.ok(), "{report:?}");
    engine.shutdown().await;
}
