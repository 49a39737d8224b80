//! Building blocks from a stream of headings, paragraphs and page breaks.

use super::Block;

/// Separator of a heading path, as shown in citations.
pub const PATH_SEPARATOR: &str = " › ";

/// Collects paragraphs into blocks; a new heading or page starts a new
/// block, so a block has exactly one page and one heading path.
#[derive(Debug, Default)]
pub struct BlockBuilder {
    headings: Vec<(u8, String)>,
    page: Option<u32>,
    text: String,
    /// Whether the text holds more than its heading: a heading followed
    /// directly by a sub-heading makes no passage of its own.
    body: bool,
    blocks: Vec<Block>,
}

impl BlockBuilder {
    /// Starts on page 1 when the format has page markers, else without pages.
    pub fn new(paged: bool) -> Self {
        Self { page: paged.then_some(1), ..Self::default() }
    }

    fn flush(&mut self) {
        if self.body && !self.text.trim().is_empty() {
            let section = (!self.headings.is_empty())
                .then(|| self.headings.iter().map(|(_, h)| h.as_str()).collect::<Vec<_>>().join(PATH_SEPARATOR));
            self.blocks.push(Block { page: self.page, section, text: std::mem::take(&mut self.text) });
        }
        self.text.clear();
        self.body = false;
    }

    /// A heading of `level` (1 = top): it replaces headings at its level
    /// and below, and its text opens the new block (it names the passage).
    pub fn heading(&mut self, level: u8, text: &str) {
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if text.is_empty() {
            return;
        }
        self.flush();
        self.headings.retain(|(l, _)| *l < level);
        self.headings.push((level, text.clone()));
        self.text.push_str(&text);
        self.text.push_str("\n\n");
    }

    pub fn paragraph(&mut self, text: &str) {
        if text.trim().is_empty() {
            return;
        }
        self.text.push_str(text.trim_end());
        self.text.push_str("\n\n");
        self.body = true;
    }

    /// Text inside the current paragraph (no paragraph break after it).
    pub fn push_str(&mut self, text: &str) {
        self.text.push_str(text);
        self.body |= !text.trim().is_empty();
    }

    pub fn page_break(&mut self) {
        if let Some(p) = self.page {
            self.flush();
            self.page = Some(p + 1);
        }
    }

    pub fn pages(&self) -> Option<u32> {
        self.page
    }

    pub fn finish(mut self) -> Vec<Block> {
        self.flush();
        self.blocks
    }
}

/// ATX headings (`# Title`) outside code fences start sections; the rest
/// is kept as written (Markdown is readable as text).
pub fn markdown_blocks(markdown: &str) -> Vec<Block> {
    let mut b = BlockBuilder::new(false);
    let mut fence: Option<&str> = None;
    let mut para = String::new();
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        if let Some(f) = fence {
            para.push_str(line);
            para.push('\n');
            if trimmed.starts_with(f) {
                fence = None;
            }
            continue;
        }
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fence = Some(if trimmed.starts_with("```") { "```" } else { "~~~" });
            para.push_str(line);
            para.push('\n');
            continue;
        }
        let hashes = trimmed.bytes().take_while(|c| *c == b'#').count();
        if (1..=6).contains(&hashes) && trimmed[hashes..].starts_with(' ') && line.len() - trimmed.len() < 4 {
            b.paragraph(&std::mem::take(&mut para));
            let title = trimmed[hashes..].trim().trim_end_matches('#').trim();
            b.heading(hashes as u8, &strip_inline_markup(title));
            continue;
        }
        if trimmed.is_empty() {
            b.paragraph(&std::mem::take(&mut para));
        } else {
            para.push_str(line);
            para.push('\n');
        }
    }
    b.paragraph(&para);
    b.finish()
}

/// `[text](url)` → `text`, and emphasis marks dropped, for heading paths.
fn strip_inline_markup(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '[' => {}
            ']' if chars.peek() == Some(&'(') => {
                for d in chars.by_ref() {
                    if d == ')' {
                        break;
                    }
                }
            }
            '*' | '_' | '`' | '\\' => {}
            _ => out.push(c),
        }
    }
    // Sphinx and friends end headings with a permalink sign.
    out.trim().trim_end_matches('¶').trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_nest_and_a_lower_level_replaces_the_deeper_ones() {
        let md = "# A\n\nintro\n\n## Empty\n\n## B\n\nbee\n\n### C\n\nsea\n\n## D\n\ndee\n\n```\n# not a heading\n```\n";
        let blocks = markdown_blocks(md);
        let sections: Vec<_> = blocks.iter().map(|b| b.section.clone().unwrap_or_default()).collect();
        assert_eq!(sections, ["A", "A › B", "A › B › C", "A › D"]);
        assert!(blocks[3].text.contains("# not a heading"));
        assert!(blocks[1].text.starts_with("B\n\nbee"));
    }

    #[test]
    fn page_breaks_split_blocks_and_count_pages() {
        let mut b = BlockBuilder::new(true);
        b.paragraph("one");
        b.page_break();
        b.paragraph("two");
        assert_eq!(b.pages(), Some(2));
        let blocks = b.finish();
        assert_eq!(blocks.iter().map(|b| b.page).collect::<Vec<_>>(), [Some(1), Some(2)]);
    }

    #[test]
    fn links_and_permalinks_leave_heading_text_only() {
        assert_eq!(strip_inline_markup("[What is *Python*?](#id4)[¶](#what)"), "What is Python?");
    }
}
