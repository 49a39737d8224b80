use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use ledger::{FileKeyStore, Ledger, LedgerOptions};
use rand::Rng;

fn writer_path() -> std::path::PathBuf {
    // tests run from target/<profile>/deps; examples live beside deps. With
    // a separate build directory (`build.build-dir`) the test runs from
    // there while the example is put in the workspace's target/<profile>.
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let name = format!("crash_writer{}", std::env::consts::EXE_SUFFIX);
    let beside = dir.join("examples").join(&name);
    if beside.exists() {
        return beside;
    }
    let profile = dir.file_name().expect("profile dir");
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR").map(std::path::PathBuf::from).unwrap_or_else(|| workspace.join("target"));
    let uplifted = target.join(profile).join("examples").join(&name);
    if uplifted.exists() { uplifted } else { beside }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_appends_loses_no_acknowledged_event() {
    let exe = writer_path();
    assert!(exe.exists(), "build the example first: cargo test builds it ({})", exe.display());
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("ledger.db");
    let keys_dir = dir.path().join("keys");
    let mut rng = rand::thread_rng();
    let mut max_acked = 0i64;
    for round in 0..24 {
        let mut child = Command::new(&exe)
            .arg(&db)
            .arg(&keys_dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the writer");
        let stdout = child.stdout.take().expect("stdout");
        let (first_tx, first_rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut acked = Vec::new();
            for line in BufReader::new(stdout).lines() {
                match line.ok().and_then(|l| l.trim().parse::<i64>().ok()) {
                    Some(seq) => {
                        if acked.is_empty() {
                            let _ = first_tx.send(());
                        }
                        acked.push(seq);
                    }
                    None => break,
                }
            }
            acked
        });
        // Odd rounds kill at any moment from the start (opening, migrating,
        // appending); even rounds once appends are under way, so the burst
        // makes progress however loaded the machine is.
        if round % 2 == 0 {
            let _ = first_rx.recv_timeout(Duration::from_secs(60));
        }
        std::thread::sleep(Duration::from_millis(rng.gen_range(30..250)));
        child.kill().expect("SIGKILL"); // Child::kill is SIGKILL on Unix
        let _ = child.wait();
        let acked = reader.join().expect("reader");
        if let Some(&last) = acked.last() {
            max_acked = max_acked.max(last);
        }
        let ledger = Ledger::open(LedgerOptions::new(&db), Arc::new(FileKeyStore::new(&keys_dir)))
            .await
            .unwrap_or_else(|e| panic!("round {round}: open after kill: {e}"));
        let report = ledger.verify().await.expect("verify");
        assert!(report.ok(), "round {round}: {report:?}");
        let (head, _) = ledger.head().await;
        assert!(head >= max_acked, "round {round}: acknowledged {max_acked} but the ledger ends at {head}");
        drop(ledger);
    }
    assert!(max_acked > 50, "the writer made too little progress ({max_acked})");
}

/// A closed ledger has checkpointed its WAL into the file and released it:
/// a caller may move `ledger.db` alone. (sqlx's `Pool::close` could return
/// with a reader still open; then the `-wal` stayed and held the last writes.)
#[tokio::test]
async fn a_closed_ledger_leaves_no_wal_behind() {
    for round in 0..20 {
        let f = crate::Fixture::new().await;
        let before = f.ledger.event_count().await.expect("count");
        for i in 0..20 {
            f.ledger.append(ledger::HUMAN_ENTITY, crate::say("p", &format!("m{i}"), "hello")).await.expect("append");
        }
        // Reads on several pooled connections, dropped just before the close.
        let l = &f.ledger;
        let counts = tokio::join!(l.event_count(), l.event_count(), l.event_count(), l.event_count());
        for n in [counts.0, counts.1, counts.2, counts.3] {
            assert_eq!(n.expect("count"), before + 20);
        }
        let path = f.db_path();
        f.ledger.close().await;
        let wal = path.with_file_name("ledger.db-wal");
        assert!(!wal.exists() || std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0) == 0, "round {round}: -wal left");
    }
}
