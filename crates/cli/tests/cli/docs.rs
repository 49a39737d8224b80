//! `docs`: the document library's command-line contract (the issue's JSON
//! shapes), with the real MiniLM and extraction in the child process.

use std::path::Path;

use super::{stdout, Home};

/// A home with the embedding model (LEDGERMIND_MINILM_DIR, which
/// scripts/test.sh sets).
fn home_with_embedder() -> Home {
    let home = Home::new();
    let model = std::env::var("LEDGERMIND_MINILM_DIR")
        .unwrap_or_else(|_| panic!("set LEDGERMIND_MINILM_DIR to all-MiniLM-L6-v2 (scripts/test.sh does)"));
    let target = home.path().join("models").join("all-MiniLM-L6-v2");
    std::fs::create_dir_all(&target).expect("model dir");
    for f in ["config.json", "model.safetensors", "vocab.txt"] {
        let from = Path::new(&model).join(f);
        std::fs::hard_link(&from, target.join(f)).or_else(|_| std::fs::copy(&from, target.join(f)).map(|_| ())).expect("model file");
    }
    home
}

fn lines(o: &std::process::Output) -> Vec<serde_json::Value> {
    stdout(o).lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

fn keys_of(v: &serde_json::Value) -> Vec<String> {
    let mut keys: Vec<String> = v.as_object().expect("object").keys().cloned().collect();
    keys.sort();
    keys
}

#[test]
fn docs_add_search_list_and_remove_keep_the_issue_contract() {
    let home = home_with_embedder();
    let docs = tempfile::tempdir().expect("docs");
    std::fs::write(
        docs.path().join("bike.md"),
        "# Bicycle care\n\n## Chain\n\nOil the chain every two weeks with a drop per link.\n\n## Tyres\n\nPump the tyres to 4 bar before a long ride.\n",
    )
    .expect("write");
    std::fs::write(docs.path().join("broken.pdf"), b"%PDF-1.4 this file was cut short").expect("write");
    let folder = docs.path().to_str().expect("utf-8 path");
    let added = home.run(&["docs", "add", folder, "--json"]);
    assert!(added.status.success(), "{}", String::from_utf8_lossy(&added.stderr));
    let reports = lines(&added);
    assert_eq!(reports.len(), 2, "{reports:?}");
    for r in &reports {
        assert_eq!(keys_of(r), ["chunks", "document", "error", "id", "pages", "status"], "{r}");
    }
    let bike = reports.iter().find(|r| r["document"].as_str().is_some_and(|d| d.ends_with("bike.md"))).expect("bike");
    assert_eq!(bike["status"], "indexed");
    assert!(bike["chunks"].as_u64().is_some_and(|c| c >= 2) && bike["pages"].is_null() && bike["error"].is_null());
    let broken = reports.iter().find(|r| r["document"].as_str().is_some_and(|d| d.ends_with("broken.pdf"))).expect("pdf");
    assert_eq!(broken["status"], "failed");
    assert!(broken["error"].as_str().is_some_and(|e| !e.is_empty()));

    let again = lines(&home.run(&["docs", "add", folder, "--json"]));
    assert!(again.iter().all(|r| r["status"] == "unchanged"), "{again:?}");

    let found = lines(&home.run(&["docs", "search", "how often should I oil my chain", "--k", "2", "--json"]));
    assert_eq!(found.len(), 1);
    let top = &found[0]["results"][0];
    assert_eq!(keys_of(top), ["document", "id", "page", "score", "section", "snippet"]);
    assert_eq!(top["section"], "Bicycle care › Chain");
    assert!(top["snippet"].as_str().is_some_and(|s| s.contains("Oil the chain")));

    let queries = docs.path().join("q.jsonl");
    std::fs::write(&queries, "{\"query\": \"tyre pressure\"}\n{\"query\": \"chain oil\"}\n").expect("write");
    let batch = lines(&home.run(&["docs", "search", "--queries", queries.to_str().expect("path"), "--k", "1", "--json"]));
    assert_eq!(batch.len(), 2);
    assert_eq!(batch[0]["query"], "tyre pressure");
    assert_eq!(batch[0]["results"][0]["section"], "Bicycle care › Tyres");

    let list = stdout(&home.run(&["docs", "list"]));
    assert!(list.contains("indexed") && list.contains("bike.md") && list.contains("failed"), "{list}");
    let id = bike["id"].to_string();
    assert!(home.run(&["docs", "remove", &id]).status.success());
    let after = lines(&home.run(&["docs", "search", "oil the chain", "--json"]));
    assert!(after[0]["results"].as_array().expect("results").iter().all(|r| !r["document"].as_str().unwrap_or("").ends_with("bike.md")));
    assert!(!home.run(&["docs", "remove", &id]).status.success(), "removing twice fails");
}

/// The library's e5 embedder when chosen (LEDGERMIND_LIBRARY_EMBEDDER=e5)
/// and installed: a library indexed with MiniLM is re-embedded with it at
/// the next command, and with MiniLM again when it is not chosen.
#[test]
fn a_library_follows_the_installed_embedder() {
    let Some(e5) = std::env::var_os("LEDGERMIND_CACHE")
        .map(|c| Path::new(&c).join("models").join("multilingual-e5-small"))
        .filter(|d| d.join("e5-small-enpt-q4.bin").is_file())
    else {
        eprintln!("the e5 model is not installed (scripts/setup.sh): skipped");
        return;
    };
    let home = home_with_embedder();
    let docs = tempfile::tempdir().expect("docs");
    std::fs::write(docs.path().join("pao.md"), "# Pão caseiro\n\nSove a massa por dez minutos e deixe crescer por uma hora.\n")
        .expect("write");
    std::fs::write(docs.path().join("bike.md"), "# Bicycle care\n\nPump the tyres to 4 bar before a long ride.\n").expect("write");
    assert!(home.run(&["docs", "add", docs.path().to_str().expect("path"), "--json"]).status.success());
    let db = home.path().join("library").join("library.db");
    let models = |db: &Path| {
        let out = std::process::Command::new("sqlite3").arg(db).arg("SELECT DISTINCT model FROM vectors").output().expect("sqlite3");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(models(&db), "all-MiniLM-L6-v2");
    let target = home.path().join("models").join("multilingual-e5-small");
    std::fs::create_dir_all(&target).expect("dir");
    let file = "e5-small-enpt-q4.bin";
    std::fs::hard_link(e5.join(file), target.join(file)).or_else(|_| std::fs::copy(e5.join(file), target.join(file)).map(|_| ())).expect("model");
    // Installed but not chosen: MiniLM stays.
    assert!(home.run(&["docs", "search", "tyre pressure", "--json"]).status.success());
    assert_eq!(models(&db), "all-MiniLM-L6-v2");
    let chosen = [("LEDGERMIND_LIBRARY_EMBEDDER", "e5")];
    let found = lines(&home.run_with(&["docs", "search", "quanto tempo devo sovar a massa?", "--k", "1", "--json"], &chosen));
    assert!(found[0]["results"][0]["document"].as_str().is_some_and(|d| d.ends_with("pao.md")), "{found:?}");
    assert_eq!(models(&db), "e5-small/e5-small-enpt-q4");
    let found = lines(&home.run(&["docs", "search", "tyre pressure", "--k", "1", "--json"]));
    assert!(found[0]["results"][0]["document"].as_str().is_some_and(|d| d.ends_with("bike.md")), "{found:?}");
    assert_eq!(models(&db), "all-MiniLM-L6-v2");
}
