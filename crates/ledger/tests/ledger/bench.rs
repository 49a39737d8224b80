/// Smoke test of the benchmark; `LEDGER_BENCH_EVENTS=100000 cargo test -p
/// ledger --release bench -- --ignored --nocapture` prints the real figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_runs_and_reports_every_figure() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = ledger::bench_ledger(dir.path(), 1000).await.expect("bench");
    assert!(r.raw_sign_per_s > 0.0 && r.raw_verify_per_s > 0.0);
    assert!(r.batched_append_per_s > 0.0 && r.verify_per_s > 0.0);
    assert!(r.single_p99_ms >= r.single_p50_ms);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run explicitly"]
async fn bench_full() {
    let n = std::env::var("LEDGER_BENCH_EVENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let dir = tempfile::tempdir_in(std::env::var("LEDGER_BENCH_DIR").unwrap_or_else(|_| ".".into())).expect("tempdir");
    let r = ledger::bench_ledger(dir.path(), n).await.expect("bench");
    println!("{}", serde_json::to_string_pretty(&r).expect("json"));
}
