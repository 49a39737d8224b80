//! The document library inside the engine: a folder added as watched is
//! followed while the engine runs and caught up with at the next start.
//! Needs the real embedding model (LEDGERMIND_TEST_EMBEDDER); skipped
//! without it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::Harness;

fn link_embedder(home: &Path) -> bool {
    let Some(model) = std::env::var_os("LEDGERMIND_TEST_EMBEDDER").map(PathBuf::from) else {
        eprintln!("LEDGERMIND_TEST_EMBEDDER is not set: skipped");
        return false;
    };
    let models = home.join("models");
    std::fs::create_dir_all(&models).expect("models dir");
    std::os::unix::fs::symlink(model, models.join(memory::MINILM_DIR)).expect("link the model");
    true
}

async fn wait_for_names(h: &Harness, want: &[&str], what: &str) {
    let start = Instant::now();
    loop {
        let docs = h.engine.library().documents().await.expect("documents");
        let mut names: Vec<String> =
            docs.iter().filter(|d| d.status == "indexed").map(|d| d.name.clone()).collect();
        names.sort();
        if names == want {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{what}: the library holds {names:?}, expected {want:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_folder_is_followed_while_running_and_caught_up_at_start() {
    let h = Harness::new(&[]).await;
    if !link_embedder(h.dir.path()) {
        return;
    }
    let folder = tempfile::tempdir().expect("folder");
    std::fs::write(folder.path().join("a.md"), "# Kites\n\nA kite needs steady wind.").expect("write");
    h.engine.library().import_documents(vec![folder.path().to_path_buf()], true).await.expect("import");
    wait_for_names(&h, &["a.md"], "after the import").await;

    std::fs::write(folder.path().join("b.md"), "# Boats\n\nA boat needs a keel.").expect("write");
    wait_for_names(&h, &["a.md", "b.md"], "a file created in the watched folder").await;
    std::fs::remove_file(folder.path().join("a.md")).expect("remove");
    wait_for_names(&h, &["b.md"], "a file deleted from the watched folder").await;

    // Closed: what changes now is caught by the start-up scan.
    h.engine.shutdown().await;
    std::fs::write(folder.path().join("c.md"), "# Clocks\n\nA clock needs winding.").expect("write");
    std::fs::remove_file(folder.path().join("b.md")).expect("remove");
    let h = h.restart(&[]).await;
    wait_for_names(&h, &["c.md"], "after a restart").await;
    let hits = h.engine.library().search_documents("winding a clock", 3).await.expect("search");
    assert!(hits.first().is_some_and(|hit| hit.document.ends_with("c.md")), "{hits:?}");

    // The ledger holds each change with the file's hash, never its text.
    let start = Instant::now();
    loop {
        let events = h.engine.ledger().events(None, 100).await.expect("events");
        let changes: Vec<String> = events
            .iter()
            .rev()
            .filter(|e| e.kind == "document_changed")
            .filter_map(|e| e.payload.as_ref()?.get("change")?.as_str().map(str::to_owned))
            .collect();
        if changes.len() >= 4 {
            assert_eq!(changes[..3], ["added", "added", "removed"], "{changes:?}");
            assert!(changes[3..].contains(&"added".to_owned()), "{changes:?}");
            let text = serde_json::to_string(&events.iter().map(|e| &e.payload).collect::<Vec<_>>()).expect("json");
            assert!(!text.contains("kite") && !text.contains("a.md"), "a document's text or name reached the ledger");
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "document events: {changes:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The `document_changed` changes in the ledger, oldest first, with the
/// document ids they name.
async fn document_changes(h: &Harness) -> Vec<(String, i64)> {
    let events = h.engine.ledger().events_of_kind("document_changed").await.expect("events");
    events
        .iter()
        .filter_map(|e| {
            let p = e.payload.as_ref()?;
            Some((p.get("change")?.as_str()?.to_owned(), p.get("document_id")?.as_i64()?))
        })
        .collect()
}

async fn wait_for_changes(h: &Harness, want: &[(&str, i64)], what: &str) {
    let start = Instant::now();
    loop {
        let got = document_changes(h).await;
        if got.iter().map(|(c, id)| (c.as_str(), *id)).eq(want.iter().copied()) {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{what}: the ledger holds {got:?}, expected {want:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The library as the command line opens it (without the engine), reading
/// files in this process.
async fn open_alone(data_dir: &app::DataDir) -> library::Library {
    let model_dir = data_dir.models().join(memory::MINILM_DIR);
    let model = memory::MiniLm::load(&model_dir).expect("model");
    let counter = memory::WordPiece::from_file(&model_dir.join("vocab.txt"), usize::MAX / 2).expect("vocab");
    let dir = app::library::library_dir(data_dir);
    library::Library::open(&dir, std::sync::Arc::new(model), std::sync::Arc::new(counter), library::Extractor::InProcess)
        .await
        .expect("library")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_changed_without_the_app_reach_the_ledger_at_its_next_start() {
    let h = Harness::new(&[]).await;
    if !link_embedder(h.dir.path()) {
        return;
    }
    // Added as the command line does: the library alone, no ledger.
    h.engine.shutdown().await;
    let note = h.dir.path().join("note.md");
    std::fs::write(&note, "# Tides\n\nThe tide turns twice a day.").expect("write");
    let data_dir = app::DataDir::new(h.dir.path());
    let library = open_alone(&data_dir).await;
    let added = library.add_file(&note, None).await.expect("add");
    assert_eq!(added.status, library::Status::Indexed, "{added:?}");
    library.close().await;

    let h = h.restart(&[]).await;
    wait_for_changes(&h, &[("added", added.id)], "after a start").await;
    // Nothing new: a second start records nothing more.
    h.engine.shutdown().await;
    let h = h.restart(&[]).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    wait_for_changes(&h, &[("added", added.id)], "after a second start").await;

    h.engine.shutdown().await;
    let library = open_alone(&data_dir).await;
    library.remove(&note.display().to_string()).await.expect("remove");
    library.close().await;
    let h = h.restart(&[]).await;
    wait_for_changes(&h, &[("added", added.id), ("removed", added.id)], "after the removal").await;
}
