//! Passages: blocks cut into chunks of at most `max_tokens` MiniLM word
//! pieces, whole paragraphs where they fit (`text-splitter` cuts the
//! longer ones by sentence, then word). A chunk never crosses a heading,
//! so it has one heading path; it may cross a page break (consecutive
//! pages under one heading, as a PDF's pages are), so that a paragraph cut
//! by the break is one passage, not two halves each missing the other's
//! words. Such a chunk keeps where each of its pages starts in its text
//! ([`Chunk::page_marks`]): a search cites the page of the part its query
//! matches ([`crate::search::matched_page`]). Its SHA-256 keys its vectors,
//! so an edit re-embeds only the chunks whose text changed.

use sha2::{Digest, Sha256};
use text_splitter::{ChunkConfig, ChunkSizer, TextSplitter};

use crate::extract::Block;

/// Counts model tokens (the sizer of the splitter).
pub trait TokenCounter: Send + Sync {
    fn tokens(&self, text: &str) -> usize;
}

/// The embedder's own tokenizer: chunk sizes are what the model sees.
impl TokenCounter for memory::WordPiece {
    fn tokens(&self, text: &str) -> usize {
        self.encode(text).len().saturating_sub(2)
    }
}

/// Words × 4/3: an estimate for tests without the model files.
pub struct WordEstimate;

impl TokenCounter for WordEstimate {
    fn tokens(&self, text: &str) -> usize {
        text.split_whitespace().count() * 4 / 3
    }
}

struct Sizer<'a>(&'a dyn TokenCounter);

impl ChunkSizer for Sizer<'_> {
    fn size(&self, chunk: &str) -> usize {
        self.0.tokens(chunk)
    }
}

/// One passage, ready to store.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub ordinal: usize,
    /// The page holding most of the text (cited when no query word decides).
    pub page: Option<u32>,
    /// (byte offset in `text`, page) where each page of a chunk that
    /// crosses a page break starts, the first at 0; empty when the chunk
    /// lies on one page.
    pub page_marks: Vec<(usize, u32)>,
    pub section: Option<String>,
    pub text: String,
    /// SHA-256 of `text`, hex.
    pub hash: String,
}

pub fn sha256_hex(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    hex::encode(h.finalize())
}

/// Cuts `text` into pieces of at most `max_tokens`.
pub fn split(text: &str, counter: &dyn TokenCounter, max_tokens: usize) -> Vec<String> {
    let splitter = TextSplitter::new(ChunkConfig::new(max_tokens.max(8)).with_sizer(Sizer(counter)).with_trim(true));
    splitter.chunks(text).map(str::to_owned).collect()
}

/// A passage being cut: its text and where each of its pages starts.
#[derive(Default)]
struct Piece {
    text: String,
    marks: Vec<(usize, u32)>,
}

impl Piece {
    fn push(&mut self, para: &str, page: Option<u32>) {
        if !self.text.is_empty() {
            self.text.push_str("\n\n");
        }
        if let Some(p) = page {
            if self.marks.last().map(|m| m.1) != Some(p) {
                self.marks.push((self.text.len(), p));
            }
        }
        self.text.push_str(para);
    }
}

/// Cuts paragraphs (each with its page) into passages of at most
/// `max_tokens`. Where a passage ends is decided by the paragraphs
/// themselves (content-defined, as rsync's chunking): once a passage holds
/// a third of the budget, it ends before any paragraph whose hash is even,
/// or before one that would overflow it. Greedy packing would shift every
/// later boundary when a paragraph is inserted, so a one-paragraph edit
/// would re-embed the rest of the document; with boundaries chosen by
/// content, both versions meet again at the next such paragraph. A
/// paragraph longer than the budget is cut by `text-splitter` (sentence,
/// then word); with `carry_tail` its last piece stays open, so the text
/// after it (a PDF page's next page) can join it.
fn pack(paras: &[(&str, Option<u32>)], counter: &dyn TokenCounter, max_tokens: usize, carry_tail: bool) -> Vec<Piece> {
    let max_tokens = max_tokens.max(8);
    let min_tokens = max_tokens / 3;
    let mut out = Vec::new();
    let mut current = Piece::default();
    let mut used = 0usize;
    let flush = |current: &mut Piece, used: &mut usize, out: &mut Vec<Piece>| {
        if !current.text.is_empty() {
            out.push(std::mem::take(current));
        }
        *used = 0;
    };
    for &(para, page) in paras {
        let tokens = counter.tokens(para);
        if tokens > max_tokens {
            flush(&mut current, &mut used, &mut out);
            let mut pieces = split(para, counter, max_tokens);
            let tail = if carry_tail { pieces.pop() } else { None };
            for text in pieces {
                let mut p = Piece::default();
                p.push(&text, page);
                out.push(p);
            }
            if let Some(tail) = tail {
                used = counter.tokens(&tail) + 1;
                current.push(&tail, page);
            }
            continue;
        }
        // Joining adds a separator the sizer may count; one token of slack.
        let overflow = used + tokens + 1 > max_tokens;
        let boundary = used >= min_tokens && Sha256::digest(para.as_bytes())[0] % 2 == 0;
        if overflow || boundary {
            flush(&mut current, &mut used, &mut out);
        }
        current.push(para, page);
        used += tokens + 1;
    }
    flush(&mut current, &mut used, &mut out);
    out
}

/// Whether `next` continues `prev` across a page break: the next page,
/// under the same heading.
fn continues(prev: &Block, next: &Block) -> bool {
    matches!((prev.page, next.page), (Some(a), Some(b)) if b > a) && prev.section == next.section
}

/// The page holding most of `text`'s bytes, by its page marks.
fn main_page(text: &str, marks: &[(usize, u32)]) -> Option<u32> {
    let ends = marks.iter().skip(1).map(|m| m.0).chain(std::iter::once(text.len()));
    marks.iter().zip(ends).max_by_key(|((start, _), end)| end.saturating_sub(*start)).map(|((_, p), _)| *p)
}

/// Passages of `blocks`; consecutive pages under one heading are cut as
/// one text, so a passage may cross a page break (the library's own
/// default is [`chunk_blocks_with`] without it: `Library::cross_pages`).
pub fn chunk_blocks(blocks: &[Block], counter: &dyn TokenCounter, max_tokens: usize) -> Vec<Chunk> {
    chunk_blocks_with(blocks, counter, max_tokens, true)
}

/// As [`chunk_blocks`]; without `across_pages` every passage stays on its
/// block's page (how passages were cut before they could cross pages).
pub fn chunk_blocks_with(blocks: &[Block], counter: &dyn TokenCounter, max_tokens: usize, across_pages: bool) -> Vec<Chunk> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < blocks.len() {
        let mut j = i + 1;
        while across_pages && j < blocks.len() && continues(&blocks[j - 1], &blocks[j]) {
            j += 1;
        }
        let run = &blocks[i..j];
        let paras: Vec<(&str, Option<u32>)> = run
            .iter()
            .flat_map(|b| b.text.split("\n\n").map(str::trim).filter(|p| !p.is_empty()).map(move |p| (p, b.page)))
            .collect();
        for piece in pack(&paras, counter, max_tokens, run.len() > 1) {
            let text = piece.text;
            if text.chars().filter(|c| c.is_alphanumeric()).count() < 2 {
                continue;
            }
            let page = main_page(&text, &piece.marks).or(run[0].page);
            let page_marks = if piece.marks.len() > 1 { piece.marks } else { vec![] };
            out.push(Chunk {
                ordinal: out.len(),
                page,
                page_marks,
                section: run[0].section.clone(),
                hash: sha256_hex(&[&text]),
                text,
            });
        }
        i = j;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paragraphs(n: usize) -> String {
        (0..n).map(|i| format!("Paragraph {i} talks about topic {i} in a few plain words.")).collect::<Vec<_>>().join("\n\n")
    }

    #[test]
    fn chunks_fit_the_budget_and_keep_their_block_location() {
        let blocks = vec![
            Block { page: Some(3), section: Some("A".into()), text: paragraphs(40) },
            Block { page: Some(4), section: None, text: "Short page.".into() },
        ];
        let chunks = chunk_blocks(&blocks, &WordEstimate, 64);
        assert!(chunks.len() > 5);
        assert!(chunks.iter().all(|c| WordEstimate.tokens(&c.text) <= 64));
        assert!(chunks[..chunks.len() - 1].iter().all(|c| c.page == Some(3) && c.section.as_deref() == Some("A")));
        assert_eq!(chunks.last().map(|c| (c.page, c.text.as_str())), Some((Some(4), "Short page.")));
        assert_eq!(chunks.iter().map(|c| c.ordinal).collect::<Vec<_>>(), (0..chunks.len()).collect::<Vec<_>>());
    }

    #[test]
    fn a_passage_crosses_a_page_break_and_marks_where_each_page_starts() {
        let blocks = vec![
            Block { page: Some(1), section: None, text: "The end of a sentence on page one.".into() },
            Block { page: Some(2), section: None, text: "Its continuation on page two, longer than the first part.".into() },
        ];
        let chunks = chunk_blocks(&blocks, &WordEstimate, 64);
        assert_eq!(chunks.len(), 1, "{chunks:?}");
        let c = &chunks[0];
        let second = c.text.find("Its continuation").expect("both pages");
        assert_eq!(c.page_marks, [(0, 1), (second, 2)]);
        assert_eq!(c.page, Some(2), "the page holding most of the text");
        // As before: one passage per page.
        let apart = chunk_blocks_with(&blocks, &WordEstimate, 64, false);
        assert_eq!(apart.iter().map(|c| (c.page, c.page_marks.len())).collect::<Vec<_>>(), [(Some(1), 0), (Some(2), 0)]);
        // A new heading still ends a passage.
        let headed = vec![blocks[0].clone(), Block { section: Some("B".into()), ..blocks[1].clone() }];
        assert_eq!(chunk_blocks(&headed, &WordEstimate, 64).len(), 2);
    }

    #[test]
    fn an_inserted_paragraph_changes_only_the_chunks_around_it() {
        let before = paragraphs(200);
        let mut parts: Vec<&str> = before.split("\n\n").collect();
        parts.insert(100, "A new paragraph written in the middle of the document.");
        let after = parts.join("\n\n");
        let hashes = |t: &str| {
            chunk_blocks(&[Block { page: None, section: None, text: t.into() }], &WordEstimate, 100)
                .into_iter()
                .map(|c| c.hash)
                .collect::<std::collections::HashSet<_>>()
        };
        let (old, new) = (hashes(&before), hashes(&after));
        let changed = new.difference(&old).count();
        assert!(changed <= 3, "{changed} of {} chunks changed", new.len());
    }
}
