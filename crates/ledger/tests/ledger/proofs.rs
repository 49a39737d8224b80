use ledger::{check_proof, EI_PERSONA_ID, HUMAN_ENTITY};

use crate::{say, Fixture};

#[tokio::test]
async fn every_event_has_a_proof_that_checks_offline() {
    let f = Fixture::new().await;
    for i in 0..40 {
        f.ledger.append(HUMAN_ENTITY, say(EI_PERSONA_ID, &format!("m{i}"), "x")).await.expect("append");
    }
    let (head, _) = f.ledger.head().await;
    for seq in 1..=head {
        let p = f.ledger.inclusion_proof(seq).await.expect("proof");
        assert_eq!(p.tree_size, head as u64);
        check_proof(&p).unwrap_or_else(|e| panic!("seq {seq}: {e}"));
        // JSON round trip.
        let back: ledger::Proof = serde_json::from_str(&serde_json::to_string(&p).expect("json")).expect("parse");
        check_proof(&back).expect("round trip");
    }
    let p = f.ledger.inclusion_proof(17).await.expect("proof");
    let mut bad = p.clone();
    bad.event_hash = f.ledger.inclusion_proof(18).await.expect("proof").event_hash;
    assert!(check_proof(&bad).is_err(), "another event's hash");
    let mut bad = p.clone();
    bad.audit_path[2] = bad.audit_path[1].clone();
    assert!(check_proof(&bad).is_err(), "tampered path");
    let mut bad = p.clone();
    bad.tree_size += 1;
    assert!(check_proof(&bad).is_err(), "other size");
    let mut bad = p.clone();
    bad.sth_ts.push('1');
    assert!(check_proof(&bad).is_err(), "signature covers the timestamp");
    assert!(f.ledger.inclusion_proof(head + 1).await.is_err());
}

#[tokio::test]
async fn the_python_checker_agrees() {
    let Ok(out) = std::process::Command::new("python3").arg("--version").output() else {
        eprintln!("python3 not found; skipping");
        return;
    };
    assert!(out.status.success());
    let f = Fixture::new().await;
    for i in 0..11 {
        f.ledger.append(HUMAN_ENTITY, say(EI_PERSONA_ID, &format!("m{i}"), "x")).await.expect("append");
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/check_proof.py");
    for seq in [1, 6, 15] {
        let p = f.ledger.inclusion_proof(seq).await.expect("proof");
        let file = f.dir.path().join(format!("p{seq}.json"));
        std::fs::write(&file, serde_json::to_vec(&p).expect("json")).expect("write");
        let out = std::process::Command::new("python3").arg(&script).arg(&file).output().expect("run");
        assert!(out.status.success(), "seq {seq}: {}", String::from_utf8_lossy(&out.stderr));
        let mut bad = p.clone();
        bad.audit_path[0] = bad.root.clone();
        std::fs::write(&file, serde_json::to_vec(&bad).expect("json")).expect("write");
        let out = std::process::Command::new("python3").arg(&script).arg(&file).output().expect("run");
        assert!(!out.status.success(), "a tampered proof must fail");
    }
}

#[tokio::test]
async fn rolling_the_database_back_or_cutting_its_tail_is_detected() {
    let f = Fixture::new().await;
    for i in 0..10 {
        f.ledger.append(HUMAN_ENTITY, say(EI_PERSONA_ID, &format!("m{i}"), "x")).await.expect("append");
    }
    f.ledger.scrub().await.expect("checkpoint the WAL");
    let old = f.dir.path().join("old-copy.db");
    std::fs::copy(f.db_path(), &old).expect("copy");
    for i in 10..20 {
        f.ledger.append(HUMAN_ENTITY, say(EI_PERSONA_ID, &format!("m{i}"), "y")).await.expect("append");
    }
    let sth = f.ledger.publish_sth().await.expect("publish");
    assert_eq!(sth.size, 24);
    let report = f.ledger.verify().await.expect("verify");
    assert!(report.ok(), "{report:?}");
    assert_eq!(report.sth_size, Some(24));

    // Put the older copy back.
    let Fixture { dir, keys, ledger } = f;
    drop(ledger);
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let db = dir.path().join("ledger.db");
    for s in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(dir.path().join(format!("ledger.db{s}")));
    }
    std::fs::copy(&old, &db).expect("restore the old copy");
    let ledger = ledger::Ledger::open(ledger::LedgerOptions::new(&db), keys_clone(&keys)).await.expect("open");
    let f = Fixture { dir, keys, ledger };
    let report = f.ledger.verify().await.expect("verify");
    let failure = report.failure.expect("rollback must be detected");
    assert_eq!(failure.seq, 15, "{failure:?}");
    assert!(failure.reason.contains("rolled back"), "{}", failure.reason);

    // A fork: the old copy grows to the same size with other events.
    for i in 0..10 {
        f.ledger.append(HUMAN_ENTITY, say(EI_PERSONA_ID, &format!("fork{i}"), "z")).await.expect("append");
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(f.ledger.publish_sth().await.is_err(), "the evidence is never overwritten");
    let report = f.ledger.verify().await.expect("verify");
    assert_eq!(report.sth_size, Some(24));
    let failure = report.failure.expect("fork must be detected");
    assert_eq!(failure.seq, 24);
    assert!(failure.reason.contains("another copy"), "{}", failure.reason);
}

fn keys_clone(k: &std::sync::Arc<ledger::MemoryKeyStore>) -> std::sync::Arc<dyn ledger::KeyStore> {
    k.clone()
}

/// A database from before installation ids adopts the per-profile keychain
/// slot it used, so the upgrade keeps its rollback protection.
#[tokio::test]
async fn an_upgraded_database_adopts_the_old_tree_head_slot() {
    let f = Fixture::new().await;
    for i in 0..5 {
        f.ledger.append(HUMAN_ENTITY, say(EI_PERSONA_ID, &format!("m{i}"), "x")).await.expect("append");
    }
    let sth = f.ledger.publish_sth().await.expect("publish");
    let profile = f.ledger.profile_id().to_owned();
    let current = format!("{profile}/sth/{}", f.ledger.installation_id());
    let bytes = ledger::KeyStore::load(f.keys.as_ref(), &current).expect("load").expect("published");
    // Make it look like an older version's database and keychain.
    ledger::KeyStore::store(f.keys.as_ref(), &format!("{profile}/sth"), &bytes).expect("store");
    ledger::KeyStore::delete(f.keys.as_ref(), &current).expect("delete");
    let Fixture { dir, keys, ledger } = f;
    drop(ledger);
    let db = dir.path().join("ledger.db");
    let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&format!("sqlite://{}", db.display()))
        .await
        .expect("connect");
    sqlx::query("DELETE FROM installation").execute(&mut conn).await.expect("forget the installation id");
    drop(conn);
    let ledger = ledger::Ledger::open(ledger::LedgerOptions::new(&db), keys_clone(&keys)).await.expect("open");
    let report = ledger.verify().await.expect("verify");
    assert!(report.ok(), "{report:?}");
    assert_eq!(report.sth_size, Some(sth.size), "the old slot's head is held to");
}
