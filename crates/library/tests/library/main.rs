//! The library end to end on real files in a temporary folder: the hashing
//! embedder stands in for MiniLM (no model files needed), extraction runs
//! in the crate's own worker executable as in production.

mod child;
mod documents;
mod e5;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use library::{Extractor, Library, WordEstimate, DEFAULT_TIMEOUT, WORKER_ARG};
use memory::{Embedder, HashingEmbedder, MemoryError};

/// The hashing embedder, counting the texts it embeds.
#[derive(Default)]
pub struct Counting {
    inner: HashingEmbedder,
    pub texts: AtomicUsize,
}

impl Embedder for Counting {
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn model_id(&self) -> String {
        self.inner.model_id()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, MemoryError> {
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        self.inner.embed(texts)
    }
}

pub fn worker() -> Extractor {
    Extractor::Child {
        program: env!("CARGO_BIN_EXE_library-extract").into(),
        args: vec![WORKER_ARG.into()],
        timeout: DEFAULT_TIMEOUT,
    }
}

pub async fn open(dir: &Path) -> (Library, Arc<Counting>) {
    let embedder = Arc::new(Counting::default());
    let lib = Library::open(dir, embedder.clone(), Arc::new(WordEstimate), worker()).await.expect("open library");
    (lib, embedder)
}

/// A one-page PDF with `text` in Helvetica (empty text: a page without a
/// text layer), with a correct cross-reference table.
pub fn pdf_with(pages: &[&str]) -> Vec<u8> {
    let n = pages.len();
    let mut objects: Vec<String> = vec![
        "<< /Type /Catalog /Pages 2 0 R >>".into(),
        format!(
            "<< /Type /Pages /Kids [{}] /Count {n} >>",
            (0..n).map(|i| format!("{} 0 R", 4 + 2 * i)).collect::<Vec<_>>().join(" ")
        ),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".into(),
    ];
    for (i, text) in pages.iter().enumerate() {
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
            5 + 2 * i
        ));
        let stream = if text.is_empty() { String::new() } else { format!("BT /F1 12 Tf 72 700 Td ({text}) Tj ET") };
        objects.push(format!("<< /Length {} >>\nstream\n{stream}\nendstream", stream.len()));
    }
    let mut out = String::from("%PDF-1.4\n");
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.push_str(&format!("{} 0 obj\n{body}\nendobj\n", i + 1));
    }
    let xref = out.len();
    out.push_str(&format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1));
    for o in offsets {
        out.push_str(&format!("{o:010} 00000 n \n"));
    }
    out.push_str(&format!("trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n", objects.len() + 1));
    out.into_bytes()
}
