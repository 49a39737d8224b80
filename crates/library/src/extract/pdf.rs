//! PDF: pdf_oxide first (it read the most files in the research's 73-PDF
//! run, without panics), lopdf when pdf_oxide fails or finds (almost) no
//! text: pdf_oxide returns empty text for AES-256 R5 files and for
//! user-password files, where lopdf reads the first and reports the second.

use super::{Block, ExtractError, Extraction, Result, MIN_CHARS_PER_PAGE};

pub fn extract(bytes: &[u8]) -> Result<Extraction> {
    // The header may follow some junk, within the first kilobyte.
    if !bytes.windows(4).take(1024).any(|w| w == b"%PDF") {
        return Err(ExtractError::NotPdf);
    }
    let oxide = with_oxide(bytes);
    if let Ok(Extraction::Text { pages, blocks }) = &oxide {
        if visible_chars(blocks) >= MIN_CHARS_PER_PAGE * pages.unwrap_or(1).max(1) as usize {
            return oxide;
        }
    }
    let lopdf = with_lopdf(bytes);
    match (oxide, lopdf) {
        // lopdf found more text, or knows the password is missing.
        (_, Ok(Extraction::NeedsPassword { pages })) => Ok(Extraction::NeedsPassword { pages }),
        (Ok(Extraction::Text { pages, blocks }), Ok(Extraction::Text { blocks: lb, .. })) => {
            if visible_chars(&lb) > visible_chars(&blocks) {
                Ok(Extraction::Text { pages, blocks: lb })
            } else {
                Ok(Extraction::Text { pages, blocks })
            }
        }
        (Ok(Extraction::NeedsPassword { pages }), _) => Ok(Extraction::NeedsPassword { pages }),
        (Ok(o), Err(_)) => Ok(o),
        (Err(_), Ok(l)) => Ok(l),
        (Ok(o), Ok(_)) => Ok(o),
        (Err(e), Err(_)) => Err(e),
    }
}

fn visible_chars(blocks: &[Block]) -> usize {
    blocks.iter().map(|b| b.text.chars().filter(|c| !c.is_whitespace()).count()).sum()
}

fn page_blocks(texts: Vec<String>) -> Vec<Block> {
    texts
        .into_iter()
        .enumerate()
        .map(|(i, text)| Block { page: Some(i as u32 + 1), section: None, text })
        .collect()
}

fn with_oxide(bytes: &[u8]) -> Result<Extraction> {
    let doc = pdf_oxide::PdfDocument::from_bytes(bytes.to_vec()).map_err(ExtractError::Pdf)?;
    if doc.is_encrypted() && !doc.authenticate(b"").unwrap_or(false) {
        let pages = doc.page_count().ok().map(|n| n as u32);
        return Ok(Extraction::NeedsPassword { pages });
    }
    let count = doc.page_count().map_err(ExtractError::PdfPages)?;
    // A page that fails alone leaves a gap, not a failed document.
    let texts = (0..count).map(|i| doc.extract_text(i).unwrap_or_default()).collect();
    Ok(Extraction::Text { pages: Some(count as u32), blocks: page_blocks(texts) })
}

fn with_lopdf(bytes: &[u8]) -> Result<Extraction> {
    let mut doc = match lopdf::Document::load_mem(bytes) {
        Ok(d) => d,
        Err(lopdf::Error::Decryption(_)) => return Ok(Extraction::NeedsPassword { pages: None }),
        Err(e) => return Err(ExtractError::PdfStructure(e)),
    };
    if doc.is_encrypted() && doc.decrypt("").is_err() {
        return Ok(Extraction::NeedsPassword { pages: Some(doc.get_pages().len() as u32) });
    }
    let pages: Vec<u32> = doc.get_pages().keys().copied().collect();
    let texts = pages.iter().map(|n| doc.extract_text(&[*n]).unwrap_or_default()).collect();
    Ok(Extraction::Text { pages: Some(pages.len() as u32), blocks: page_blocks(texts) })
}
