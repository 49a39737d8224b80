//! CSV: rows in groups, the header repeated at the top of every group so a
//! passage stands alone; the section cites the row range.

use super::{Block, ExtractError, Extraction, Result};

/// Rows per block (a block is chunked further when it is long).
const ROWS_PER_BLOCK: usize = 20;

pub fn csv(bytes: &[u8]) -> Result<Extraction> {
    if bytes.iter().take(8192).any(|b| *b == 0) {
        return Err(ExtractError::Binary("CSV"));
    }
    let mut reader = csv::ReaderBuilder::new().flexible(true).has_headers(true).from_reader(bytes);
    let header: Vec<String> =
        reader.headers()?.iter().map(str::to_owned).collect();
    let mut blocks = Vec::new();
    let mut text = String::new();
    let mut first_row = 2; // 1-based line numbers, the header is row 1
    let mut row_no = 1;
    for record in reader.records() {
        let record = record?;
        row_no += 1;
        let cells: Vec<String> = record
            .iter()
            .enumerate()
            .filter(|(_, v)| !v.trim().is_empty())
            .map(|(i, v)| match header.get(i).filter(|h| !h.trim().is_empty()) {
                Some(h) => format!("{h}: {v}"),
                None => v.to_owned(),
            })
            .collect();
        text.push_str(&cells.join("; "));
        text.push('\n');
        if row_no - first_row + 1 == ROWS_PER_BLOCK {
            blocks.push(Block { page: None, section: Some(format!("rows {first_row}–{row_no}")), text: std::mem::take(&mut text) });
            first_row = row_no + 1;
        }
    }
    if !text.trim().is_empty() {
        blocks.push(Block { page: None, section: Some(format!("rows {first_row}–{row_no}")), text });
    }
    Ok(Extraction::Text { pages: None, blocks })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_row_names_its_columns_and_blocks_cite_their_rows() {
        let mut data = String::from("city,country\n");
        for i in 0..25 {
            data.push_str(&format!("c{i},x{i}\n"));
        }
        let Ok(Extraction::Text { blocks, .. }) = csv(data.as_bytes()) else { panic!("not text") };
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0].section.as_deref(), Some("rows 2–21"));
        assert_eq!(blocks[1].section.as_deref(), Some("rows 22–26"));
        assert!(blocks[0].text.starts_with("city: c0; country: x0\n"));
    }
}
