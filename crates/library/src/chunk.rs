//! Passages: each block cut into chunks of at most `max_tokens` MiniLM
//! word pieces, whole paragraphs where they fit (`text-splitter` cuts the
//! longer ones by sentence, then word). A chunk never crosses a block, so it has
//! exactly one page and one heading path; its SHA-256 keys its vectors, so
//! an edit re-embeds only the chunks whose text changed.

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
    pub page: Option<u32>,
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

/// Cuts one block into passages of at most `max_tokens`, paragraph by
/// paragraph. Where a passage ends is decided by the paragraphs themselves
/// (content-defined, as rsync's chunking): once a passage holds a third of
/// the budget, it ends before any paragraph whose hash is even, or before
/// one that would overflow it. Greedy packing would shift every later
/// boundary when a paragraph is inserted, so a one-paragraph edit would
/// re-embed the rest of the document; with boundaries chosen by content,
/// both versions meet again at the next such paragraph. A paragraph longer
/// than the budget is cut by `text-splitter` (sentence, then word).
fn split_block(text: &str, counter: &dyn TokenCounter, max_tokens: usize) -> Vec<String> {
    let max_tokens = max_tokens.max(8);
    let min_tokens = max_tokens / 3;
    let mut out = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut used = 0usize;
    let flush = |current: &mut Vec<&str>, used: &mut usize, out: &mut Vec<String>| {
        if !current.is_empty() {
            out.push(current.join("\n\n"));
            current.clear();
        }
        *used = 0;
    };
    for para in text.split("\n\n").map(str::trim).filter(|p| !p.is_empty()) {
        let tokens = counter.tokens(para);
        if tokens > max_tokens {
            flush(&mut current, &mut used, &mut out);
            out.extend(split(para, counter, max_tokens));
            continue;
        }
        // Joining adds a separator the sizer may count; one token of slack.
        let overflow = used + tokens + 1 > max_tokens;
        let boundary = used >= min_tokens && Sha256::digest(para.as_bytes())[0] % 2 == 0;
        if overflow || boundary {
            flush(&mut current, &mut used, &mut out);
        }
        current.push(para);
        used += tokens + 1;
    }
    flush(&mut current, &mut used, &mut out);
    out
}

pub fn chunk_blocks(blocks: &[Block], counter: &dyn TokenCounter, max_tokens: usize) -> Vec<Chunk> {
    let mut out = Vec::new();
    for block in blocks {
        for text in split_block(&block.text, counter, max_tokens) {
            if text.chars().filter(|c| c.is_alphanumeric()).count() < 2 {
                continue;
            }
            out.push(Chunk {
                ordinal: out.len(),
                page: block.page,
                section: block.section.clone(),
                hash: sha256_hex(&[&text]),
                text,
            });
        }
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
