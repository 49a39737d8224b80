//! A lost keychain: sends fail fast with a typed error that names the fix,
//! and a new key epoch makes them work again.

use std::time::{Duration, Instant};

use crate::{await_reply, Harness};

#[tokio::test]
async fn a_wiped_keychain_fails_sends_fast_and_a_new_key_epoch_lets_them_through() {
    let h = Harness::new(&[]).await;
    let mut rx = h.engine.subscribe();
    h.provider.push_reply("hello");
    h.engine.conversation().send_message("Ei", "first").await.expect("send");
    assert!(await_reply(&mut rx).await.1.is_ok());
    h.keys.wipe();
    let h = h.restart(&[]).await;

    let before = h.engine.ledger().event_count().await.expect("count");
    let t = Instant::now();
    let err = h.engine.conversation().send_message("Ei", "are you there?").await.expect_err("the key is gone");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(err.code, "KEY_MISSING");
    assert!(err.message.contains("ledgermind keys rotate --all-missing"), "{}", err.message);
    assert_eq!(h.engine.ledger().event_count().await.expect("count"), before, "nothing written");

    let status = h.engine.keys().key_status().await.expect("status");
    assert_eq!(status.len(), 2);
    assert!(status.iter().all(|s| s.private_key == "missing"), "{status:?}");
    let replaced = h.engine.keys().rotate_missing_keys().await.expect("new epoch");
    assert_eq!(replaced.iter().map(|r| r.entity.as_str()).collect::<Vec<_>>(), ["human", "ei"]);
    assert!(h.engine.keys().key_status().await.expect("status").iter().all(|s| s.private_key == "present"));

    let mut rx = h.engine.subscribe();
    h.provider.push_reply("still here");
    h.engine.conversation().send_message("Ei", "are you there?").await.expect("sending works again");
    assert!(await_reply(&mut rx).await.1.is_ok(), "the persona signs its reply with its new key");
    let verify = h.engine.vault().verify().await.expect("verify");
    assert!(verify.ok, "{verify:?}");
    let names: Vec<(&str, bool)> = verify.key_epochs.iter().map(|e| (e.name.as_str(), e.self_certified)).collect();
    assert_eq!(names, [("You", true), ("Ei", false)]);
}

#[tokio::test]
async fn a_keychain_that_does_not_answer_is_reported_within_seconds() {
    let h = Harness::new(&[]).await;
    let h = h.restart(&[]).await; // no cached keys
    h.keys.set_read_delay(Some(Duration::from_secs(120)));
    let t = Instant::now();
    let err = h.engine.conversation().send_message("Ei", "hello").await.expect_err("locked");
    assert_eq!(err.code, "KEYCHAIN_UNAVAILABLE");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    let t = Instant::now();
    let status = h.engine.keys().key_status().await.expect("status");
    assert!(status.iter().all(|s| s.private_key == "locked"), "{status:?}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    h.keys.set_read_delay(None);
    let mut rx = h.engine.subscribe();
    h.provider.push_reply("ok");
    h.engine.conversation().send_message("Ei", "hello").await.expect("works once the keychain answers");
    assert!(await_reply(&mut rx).await.1.is_ok());
}
