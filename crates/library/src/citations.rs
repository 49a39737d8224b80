//! What a reply cited: the passages it was given, kept per message so the window
//! can show them under the reply and open each one. A citation's snippet
//! is document text, so removing the document removes its citations.

use serde::{Deserialize, Serialize};
use sqlx::Row;

use crate::error::{LibraryError, Result};
use crate::library::Library;

/// One passage a reply was given, as the window shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Citation {
    /// 1 for "[1]".
    pub label: u32,
    pub document_id: i64,
    pub chunk_id: i64,
    pub document: String,
    pub page: Option<u32>,
    pub section: Option<String>,
    pub snippet: String,
}

/// A passage opened from a citation or a search result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Passage {
    pub chunk_id: i64,
    pub document_id: i64,
    pub document: String,
    pub page: Option<u32>,
    pub section: Option<String>,
    pub text: String,
}

impl Library {
    /// Files a document under `groups` (none: every persona may use it).
    pub async fn set_groups(&self, path_or_id: &str, groups: &[String]) -> Result<()> {
        let doc = self.find(path_or_id).await?.ok_or_else(|| LibraryError::NotFound(path_or_id.to_owned()))?;
        let clean: Vec<&str> = groups.iter().map(|g| g.trim()).filter(|g| !g.is_empty() && !g.contains(',')).collect();
        let stored = (!clean.is_empty()).then(|| clean.join(","));
        sqlx::query("UPDATE documents SET groups = ? WHERE id = ?").bind(stored).bind(doc.id).execute(&self.pool).await?;
        Ok(())
    }

    /// Records the passages a reply cited (replacing any earlier record).
    pub async fn record_citations(&self, message_id: &str, citations: &[Citation]) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM citations WHERE message_id = ?").bind(message_id).execute(&mut *tx).await?;
        for c in citations {
            sqlx::query(
                "INSERT INTO citations (message_id, label, document_id, chunk_id, document, page, section, snippet)
                 SELECT ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM documents WHERE id = ?)",
            )
            .bind(message_id)
            .bind(i64::from(c.label))
            .bind(c.document_id)
            .bind(c.chunk_id)
            .bind(&c.document)
            .bind(c.page.map(i64::from))
            .bind(&c.section)
            .bind(&c.snippet)
            .bind(c.document_id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The passages a reply cited, by label.
    pub async fn citations(&self, message_id: &str) -> Result<Vec<Citation>> {
        let rows = sqlx::query(
            "SELECT label, document_id, chunk_id, document, page, section, snippet FROM citations
             WHERE message_id = ? ORDER BY label",
        )
        .bind(message_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(|r| Citation {
                label: r.get::<i64, _>(0) as u32,
                document_id: r.get(1),
                chunk_id: r.get(2),
                document: r.get(3),
                page: r.get::<Option<i64>, _>(4).map(|p| p as u32),
                section: r.get(5),
                snippet: r.get(6),
            })
            .collect())
    }

    /// The whole passage behind a citation; `None` once its document was
    /// removed or re-indexed without it.
    pub async fn passage(&self, chunk_id: i64) -> Result<Option<Passage>> {
        let row = sqlx::query(
            "SELECT c.id, d.id, d.path, c.page, c.section, c.text FROM chunks c JOIN documents d ON d.id = c.document_id
             WHERE c.id = ?",
        )
        .bind(chunk_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|r| Passage {
            chunk_id: r.get(0),
            document_id: r.get(1),
            document: r.get(2),
            page: r.get::<Option<i64>, _>(3).map(|p| p as u32),
            section: r.get(4),
            text: r.get(5),
        }))
    }
}
