//! Ledgermind's document library: files and folders the person adds are
//! extracted (in a child process with a deadline), cut into passages that
//! know their page and heading path, screened by the prompt-injection
//! guard, embedded locally and indexed for BM25; search fuses both and
//! cites document, page or section, and a snippet.
//!
//! The library owns `<dir>/library.db` and nothing else. It never sends a
//! passage anywhere: what reaches a prompt is the caller's choice, and a
//! passage the guard blocked has no prompt text at all. Removing a
//! document really deletes its text, chunks and vectors.

mod chunk;
mod citations;
pub mod e5;
mod error;
pub mod extract;
mod library;
mod search;
mod visibility;
mod worker;

pub use citations::{Citation, Passage};
pub use visibility::Visibility;
pub use chunk::{chunk_blocks, chunk_blocks_with, sha256_hex, split, Chunk, TokenCounter, WordEstimate};
pub use error::{LibraryError, Result};
pub use extract::{extract_bytes, Block, ExtractError, Extraction, Format};
pub use library::{
    expand, now_ms, AddReport, DocumentView, Library, Queued, SearchHit, Status, DB_FILE, DEFAULT_CHUNK_TOKENS, EMBED_WINDOW,
    SNIPPET_CHARS,
};
pub use search::{format_page_marks, fuse, is_contents, keyword_expression, matched_page, parse_page_marks, quote_match, recency_bonus, snippet, word_match, SearchMode, SearchSettings, DEFAULT_SEARCH};
pub use worker::{run_if_worker, worker_main, Extractor, DEFAULT_TIMEOUT, MAX_FILE_BYTES, WORKER_ARG};
