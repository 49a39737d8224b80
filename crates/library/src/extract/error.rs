//! Why a document's text could not be read. Each cause is its own variant
//! (with the parser's error as its source), so callers can tell a file that
//! is not what its name says from a damaged one; the person sees the
//! rendered message once, as `Extraction::Failed { reason }`.

/// A failed extraction, by cause.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("binary content in a {0} file")]
    Binary(&'static str),
    #[error("unreadable HTML: {0}")]
    Html(#[source] std::io::Error),
    #[error("not a readable zip container: {0}")]
    Container(#[source] zip::result::ZipError),
    #[error("{part} is missing: {source}")]
    MissingPart { part: String, source: zip::result::ZipError },
    #[error("{part} is unreadable: {source}")]
    UnreadablePart { part: String, source: std::io::Error },
    #[error("{part} is not valid XML: {source}")]
    Xml { part: String, source: quick_xml::Error },
    #[error("{0} names no package document")]
    NoPackageDocument(&'static str),
    #[error("not a PDF (no %PDF header)")]
    NotPdf,
    #[error("unreadable PDF: {0}")]
    Pdf(#[source] pdf_oxide::Error),
    #[error("unreadable PDF page tree: {0}")]
    PdfPages(#[source] pdf_oxide::Error),
    #[error("unreadable PDF: {0}")]
    PdfStructure(#[source] lopdf::Error),
    #[error("unreadable CSV: {0}")]
    Csv(#[from] csv::Error),
}

pub type Result<T, E = ExtractError> = std::result::Result<T, E>;
