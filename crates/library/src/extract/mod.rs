//! Text out of files: one [`Block`] per page (PDF) or per heading section
//! (Markdown, HTML, DOCX, ODT, EPUB) or per group of rows (CSV), so every
//! chunk cut from a block knows its page and heading path.
//!
//! These parsers run on untrusted files and some of the libraries below
//! panic, loop or abort on bad input: production runs them in a child
//! process with a timeout ([`crate::worker`]), never in the app's process.

mod blocks;
mod error;
mod office;
mod pdf;
mod table;

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use blocks::{markdown_blocks, BlockBuilder};
pub use error::ExtractError;
use error::Result;

/// A run of text with one location: its page (1-based, where known) and
/// its heading path ("Chapter › Section").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Block {
    pub page: Option<u32>,
    pub section: Option<String>,
    pub text: String,
}

/// What extraction made of one file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Extraction {
    Text { pages: Option<u32>, blocks: Vec<Block> },
    /// Encrypted with a user password we do not have.
    NeedsPassword { pages: Option<u32> },
    /// Opened, but (almost) no text: a scan without a text layer.
    NoText { pages: Option<u32> },
    Failed { reason: String },
}

/// File formats the library reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Pdf,
    Docx,
    Odt,
    Epub,
    Html,
    Markdown,
    Csv,
    Text,
}

impl Format {
    /// By extension; `None` for files the library does not index.
    pub fn of(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "pdf" => Self::Pdf,
            "docx" => Self::Docx,
            "odt" => Self::Odt,
            "epub" => Self::Epub,
            "html" | "htm" | "xhtml" => Self::Html,
            "md" | "markdown" => Self::Markdown,
            "csv" => Self::Csv,
            "txt" | "text" | "rst" => Self::Text,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Pdf => "pdf",
            Self::Docx => "docx",
            Self::Odt => "odt",
            Self::Epub => "epub",
            Self::Html => "html",
            Self::Markdown => "markdown",
            Self::Csv => "csv",
            Self::Text => "text",
        }
    }
}

/// Fewer visible characters per page than this, over a PDF of several
/// pages, means no text layer.
pub const MIN_CHARS_PER_PAGE: usize = 20;

/// Extracts `bytes` read from `path` (whose extension picks the parser),
/// in this process. May panic or hang on hostile input: see the module
/// docs.
pub fn extract_bytes(path: &Path, bytes: &[u8]) -> Extraction {
    let Some(format) = Format::of(path) else {
        return Extraction::Failed { reason: "not a supported document type".into() };
    };
    if bytes.is_empty() {
        return Extraction::Failed { reason: "the file is empty".into() };
    }
    let extraction = match format {
        Format::Pdf => pdf::extract(bytes),
        Format::Docx => office::docx(bytes),
        Format::Odt => office::odt(bytes),
        Format::Epub => office::epub(bytes),
        Format::Html => html(bytes),
        Format::Markdown => text_of(bytes).map(|t| Extraction::Text { pages: None, blocks: markdown_blocks(&t) }),
        Format::Text => text_of(bytes).map(|t| Extraction::Text { pages: None, blocks: plain_blocks(&t) }),
        Format::Csv => table::csv(bytes),
    };
    match extraction {
        Ok(Extraction::Text { pages, blocks }) => {
            let blocks: Vec<Block> = blocks.into_iter().filter(|b| !b.text.trim().is_empty()).collect();
            let chars: usize = blocks.iter().map(|b| b.text.chars().filter(|c| !c.is_whitespace()).count()).sum();
            // A scan of several pages may carry a few characters (page
            // numbers, a stamp); a one-page PDF with one line is text.
            let pages_n = pages.unwrap_or(1).max(1) as usize;
            let scanned = format == Format::Pdf && pages_n > 1 && chars < MIN_CHARS_PER_PAGE * pages_n;
            if chars == 0 || scanned {
                Extraction::NoText { pages }
            } else {
                Extraction::Text { pages, blocks }
            }
        }
        Ok(other) => other,
        Err(e) => Extraction::Failed { reason: e.to_string() },
    }
}

/// Text files in UTF-8 (with or without BOM), else UTF-16 with a BOM, else
/// Latin-1; a file with NUL bytes in its first 8 KB is binary.
fn text_of(bytes: &[u8]) -> Result<String> {
    if let Some(rest) = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]) {
        return Ok(String::from_utf8_lossy(rest).into_owned());
    }
    if bytes.len() >= 2 && (bytes[..2] == [0xFF, 0xFE] || bytes[..2] == [0xFE, 0xFF]) {
        let le = bytes[0] == 0xFF;
        let units: Vec<u16> = bytes[2..]
            .chunks_exact(2)
            .map(|p| if le { u16::from_le_bytes([p[0], p[1]]) } else { u16::from_be_bytes([p[0], p[1]]) })
            .collect();
        return Ok(String::from_utf16_lossy(&units));
    }
    if bytes.iter().take(8192).any(|b| *b == 0) {
        return Err(ExtractError::Binary("text"));
    }
    Ok(match std::str::from_utf8(bytes) {
        Ok(s) => s.to_owned(),
        Err(_) => bytes.iter().map(|b| *b as char).collect(),
    })
}

fn plain_blocks(text: &str) -> Vec<Block> {
    vec![Block { page: None, section: None, text: text.to_owned() }]
}

/// HTML through Markdown, so headings become the sections' path.
pub(crate) fn html_to_markdown(html: &str) -> Result<String> {
    htmd::HtmlToMarkdown::builder()
        .skip_tags(vec!["script", "style", "head", "nav", "noscript", "svg", "template"])
        .build()
        .convert(html)
        .map_err(ExtractError::Html)
}

fn html(bytes: &[u8]) -> Result<Extraction> {
    let markdown = html_to_markdown(&text_of(bytes)?)?;
    Ok(Extraction::Text { pages: None, blocks: markdown_blocks(&markdown) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_come_from_the_extension_and_unknown_ones_are_refused() {
        assert_eq!(Format::of(Path::new("a/B.PDF")), Some(Format::Pdf));
        assert_eq!(Format::of(Path::new("notes.md")), Some(Format::Markdown));
        assert_eq!(Format::of(Path::new("x.exe")), None);
        assert!(matches!(extract_bytes(Path::new("x.exe"), b"MZ"), Extraction::Failed { .. }));
    }

    #[test]
    fn empty_and_binary_files_fail_with_a_reason() {
        assert_eq!(extract_bytes(Path::new("a.txt"), b""), Extraction::Failed { reason: "the file is empty".into() });
        assert!(matches!(extract_bytes(Path::new("a.txt"), b"ab\0\0cd"), Extraction::Failed { .. }));
        assert!(matches!(extract_bytes(Path::new("a.pdf"), b"not a pdf at all"), Extraction::Failed { .. }));
    }

    #[test]
    fn html_headings_become_the_section_path() {
        let html = b"<html><head><title>T</title><script>var x;</script></head><body><h1>Guide</h1><p>Intro text.</p>\
            <h2>Install</h2><p>Run the installer.</p></body></html>";
        let Extraction::Text { blocks, .. } = extract_bytes(Path::new("g.html"), html) else { panic!("not text") };
        let install = blocks.iter().find(|b| b.text.contains("installer")).expect("install block");
        assert_eq!(install.section.as_deref(), Some("Guide › Install"));
        assert!(!blocks.iter().any(|b| b.text.contains("var x")));
    }
}
