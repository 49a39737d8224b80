//! Damaged files: a garbled database page and a WAL cut short by a crash.
//! Each gives a clear error or a verify failure naming what happened; nothing
//! panics and nothing half-written is taken for good data.

use ledger::{Ledger, LedgerOptions, EI_PERSONA_ID, HUMAN_ENTITY};

use crate::{say, Fixture};

fn copy_db(from: &std::path::Path, to_dir: &std::path::Path) -> std::path::PathBuf {
    let to = to_dir.join("ledger.db");
    for suffix in ["", "-wal"] {
        let src = std::path::PathBuf::from(format!("{}{suffix}", from.display()));
        if src.exists() {
            std::fs::copy(&src, format!("{}{suffix}", to.display())).expect("copy");
        }
    }
    to
}

#[tokio::test]
async fn a_garbled_database_page_is_reported_not_trusted() {
    let f = Fixture::new().await;
    for i in 0..400 {
        let text = format!("message {i} {}", "with enough words to fill several pages ".repeat(4));
        f.ledger.append(HUMAN_ENTITY, say(EI_PERSONA_ID, &format!("m{i}"), &text)).await.expect("append");
    }
    f.ledger.scrub().await.expect("checkpoint the WAL into the file");
    let Fixture { dir, keys, ledger } = f;
    drop(ledger);
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let db = dir.path().join("ledger.db");
    let mut bytes = std::fs::read(&db).expect("read");
    let pages = bytes.len() / 4096;
    assert!(pages > 20, "the database should span many pages, has {pages}");
    let start = (pages / 2) * 4096;
    for (k, b) in bytes[start..start + 4096].iter_mut().enumerate() {
        *b = (k as u8).wrapping_mul(31) ^ 0xA5;
    }
    std::fs::write(&db, &bytes).expect("write the damage");

    match Ledger::open(LedgerOptions::new(&db), keys).await {
        Err(e) => {
            assert_eq!(e.code(), "STORAGE_LOAD_FAILED", "{e}");
            assert!(e.to_string().contains("damaged"), "the error must say the file is damaged: {e}");
        }
        Ok(ledger) => {
            let outcome = ledger.verify().await;
            match outcome {
                Ok(report) => {
                    let failure = report.failure.expect("a garbled page cannot verify");
                    assert!(!failure.reason.is_empty());
                }
                Err(e) => {
                    assert_eq!(e.code(), "STORAGE_LOAD_FAILED", "{e}");
                    assert!(e.to_string().contains("damaged"), "{e}");
                }
            }
        }
    }
}

#[tokio::test]
async fn a_wal_cut_short_by_a_crash_is_caught_against_the_keychain_head() {
    let f = Fixture::new().await;
    for i in 0..30 {
        f.ledger.append(HUMAN_ENTITY, say(EI_PERSONA_ID, &format!("m{i}"), "before the crash")).await.expect("append");
    }
    let sth = f.ledger.publish_sth().await.expect("publish");
    // The files as a crash would leave them: the WAL not yet checkpointed.
    let crashed = tempfile::tempdir().expect("tempdir");
    let db = copy_db(&f.db_path(), crashed.path());
    let wal = std::path::PathBuf::from(format!("{}-wal", db.display()));
    let len = std::fs::metadata(&wal).expect("the WAL holds the recent commits").len();
    assert!(len > 8192, "WAL of {len} bytes");
    // Cut off the tail: the last commits, one of them mid-frame.
    let file = std::fs::OpenOptions::new().write(true).open(&wal).expect("open WAL");
    file.set_len(len - 6000).expect("truncate");
    drop(file);

    let ledger = Ledger::open(LedgerOptions::new(&db), f.keys.clone()).await.expect("SQLite drops the torn tail");
    let (seq, _) = ledger.head().await;
    assert!((seq as u64) < sth.size, "the torn commits are gone: head {seq}, published {}", sth.size);
    let report = ledger.verify().await.expect("verify");
    let failure = report.failure.expect("a cut tail must be detected");
    assert!(failure.reason.contains("rolled back") || failure.reason.contains("cut"), "{}", failure.reason);
    // What is left is whole: every remaining event chains and verifies up to the head.
    assert_eq!(report.events, seq as u64);
}
