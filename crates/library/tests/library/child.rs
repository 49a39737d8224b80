//! The extraction child: hangs are stopped at the deadline, crashes and
//! garbage become a failed status, and bad PDFs get a clear status.

use std::time::{Duration, Instant};

use library::{Extraction, Extractor};

use crate::{pdf_with, worker};

fn sh(script: &str, timeout: Duration) -> Extractor {
    Extractor::Child { program: "sh".into(), args: vec!["-c".into(), script.into()], timeout }
}

#[test]
fn a_hanging_extractor_is_stopped_at_its_deadline() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("a.pdf");
    std::fs::write(&file, b"%PDF-1.4").expect("write");
    let start = Instant::now();
    let x = sh("sleep 30", Duration::from_millis(300)).extract(&file);
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
    assert!(matches!(&x, Extraction::Failed { reason } if reason.contains("longer than")), "{x:?}");
}

#[test]
fn a_crashing_extractor_fails_the_document_with_a_reason() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("a.pdf");
    std::fs::write(&file, b"%PDF-1.4").expect("write");
    let x = sh("kill -SEGV $$", Duration::from_secs(10)).extract(&file);
    assert!(matches!(&x, Extraction::Failed { reason } if reason.contains("crashed")), "{x:?}");
    let x = sh("echo not json", Duration::from_secs(10)).extract(&file);
    assert!(matches!(&x, Extraction::Failed { reason } if reason.contains("unreadable")), "{x:?}");
}

#[test]
fn the_worker_reads_pdf_pages_and_flags_pages_without_text() {
    let dir = tempfile::tempdir().expect("tmp");
    let text = dir.path().join("text.pdf");
    std::fs::write(&text, pdf_with(&["The first page talks about turtles.", "Page two covers ocean currents."]))
        .expect("write");
    match worker().extract(&text) {
        Extraction::Text { pages, blocks } => {
            assert_eq!(pages, Some(2));
            let two = blocks.iter().find(|b| b.text.contains("ocean")).expect("page two text");
            assert_eq!(two.page, Some(2));
        }
        other => panic!("expected text, got {other:?}"),
    }
    let scan = dir.path().join("scan.pdf");
    std::fs::write(&scan, pdf_with(&["", ""])).expect("write");
    assert_eq!(worker().extract(&scan), Extraction::NoText { pages: Some(2) });
    let fake = dir.path().join("fake.pdf");
    std::fs::write(&fake, b"PK\x03\x04 this is a zip renamed to pdf").expect("write");
    assert!(matches!(worker().extract(&fake), Extraction::Failed { .. }));
    let truncated = dir.path().join("truncated.pdf");
    let whole = pdf_with(&["Some text that will be cut off."]);
    std::fs::write(&truncated, &whole[..whole.len() / 3]).expect("write");
    let x = worker().extract(&truncated);
    assert!(!matches!(x, Extraction::NeedsPassword { .. }), "{x:?}");
}
