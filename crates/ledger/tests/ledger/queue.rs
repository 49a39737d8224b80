use ledger::QueueState;
use serde_json::json;

use crate::Fixture;

#[tokio::test]
async fn the_queue_serves_priority_then_age_and_survives_reopen() {
    let f = Fixture::new().await;
    let low = f.ledger.enqueue("extract", 2, None, &json!({"n": 1})).await.expect("enqueue");
    let normal = f.ledger.enqueue("reply", 1, Some("ei"), &json!({"n": 2})).await.expect("enqueue");
    let high = f.ledger.enqueue("reply", 0, Some("ei"), &json!({"n": 3})).await.expect("enqueue");
    let now = f.ledger.now();
    let first = f.ledger.take_next(now).await.expect("take").expect("item");
    assert_eq!(first.id, high.id);
    assert_eq!(first.state, QueueState::Running);
    // Crash while running: on reopen it is pending again.
    let f = f.reopen().await;
    assert_eq!(f.ledger.requeue_running().await.expect("requeue"), 1);
    let now = f.ledger.now();
    let again = f.ledger.take_next(now).await.expect("take").expect("item");
    assert_eq!(again.id, high.id);
    assert_eq!(again.attempts, 2);
    f.ledger.finish_item(&again.id).await.expect("finish");
    let next = f.ledger.take_next(now).await.expect("take").expect("item");
    assert_eq!(next.id, normal.id);
    f.ledger.dead_letter(&next.id, "LLM_INVALID_JSON").await.expect("dead");
    let last = f.ledger.take_next(now).await.expect("take").expect("item");
    assert_eq!(last.id, low.id);
    let dead = f.ledger.queue_items(Some(QueueState::Dead)).await.expect("dead list");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].last_error.as_deref(), Some("LLM_INVALID_JSON"));
}

#[tokio::test]
async fn a_retry_waits_until_its_time_which_the_worker_can_sleep_until() {
    let f = Fixture::new().await;
    assert_eq!(f.ledger.next_not_before().await.expect("next"), None, "nothing pending");
    let item = f.ledger.enqueue("reply", 1, None, &json!({})).await.expect("enqueue");
    let now = f.ledger.now();
    let taken = f.ledger.take_next(now).await.expect("take").expect("item");
    assert_eq!(f.ledger.next_not_before().await.expect("next"), None, "running work is not pending");
    let due = now + time::Duration::seconds(30);
    f.ledger.retry_item(&taken.id, "LLM_TIMEOUT", due).await.expect("retry");
    f.ledger.enqueue_at("extract", 2, None, &json!({}), now + time::Duration::seconds(90)).await.expect("later work");
    let next = f.ledger.next_not_before().await.expect("next").expect("a due time");
    assert_eq!(next.unix_timestamp_nanos() / 1_000_000, due.unix_timestamp_nanos() / 1_000_000, "the earliest of the two");
    assert!(f.ledger.take_next(now).await.expect("take").is_none());
    let later = f.ledger.take_next(now + time::Duration::seconds(31)).await.expect("take").expect("item");
    assert_eq!(later.id, item.id);
}

#[tokio::test]
async fn preempted_work_is_requeued_without_counting_and_postponed_work_waits() {
    let f = Fixture::new().await;
    let now = f.ledger.now();
    let body = serde_json::json!({});
    // Background work is taken, then a reply arrives: the reply goes first.
    f.ledger.enqueue("extract", 2, Some("p"), &body).await.expect("enqueue");
    let running = f.ledger.take_next(now).await.expect("take").expect("item");
    assert_eq!((running.kind.as_str(), running.attempts), ("extract", 1));
    f.ledger.enqueue("reply", 0, Some("p"), &body).await.expect("enqueue");
    f.ledger.requeue_item(&running.id).await.expect("requeue");
    assert_eq!(f.ledger.take_next(f.ledger.now()).await.expect("take").expect("item").kind, "reply");
    let again = f.ledger.take_next(f.ledger.now()).await.expect("take").expect("item");
    assert_eq!((again.id.as_str(), again.attempts), (running.id.as_str(), 1), "the preemption did not count");
    // Postponed work waits for its time; other personas' work does not.
    let later = now + time::Duration::seconds(90);
    f.ledger.enqueue_at("extract", 2, Some("p"), &body, later).await.expect("enqueue");
    f.ledger.enqueue("extract", 2, Some("q"), &body).await.expect("enqueue");
    f.ledger.postpone("extract", "q", later).await.expect("postpone");
    assert!(f.ledger.take_next(f.ledger.now()).await.expect("take").is_none());
    assert!(f.ledger.take_next(later).await.expect("take").is_some());
}
