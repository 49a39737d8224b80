//! One-time confirmations (seed 003 §2.2, §2.5): a proposal carries a random
//! 128-bit nonce that lives 5 minutes; a conversation has at most one pending
//! proposal, and a new one cancels the old one. Taking a proposal removes it
//! under a mutex, so a nonce confirms exactly once even when two confirms race.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use rand::RngCore;
use serde::Serialize;
use serde_json::Value;
use thiserror::Error;
use time::{Duration, OffsetDateTime};

use crate::clock::Clock;

/// How long a proposal waits for the user (fixed, seed 003).
pub const CONFIRMATION_TTL: Duration = Duration::minutes(5);

/// How many spent nonces are remembered to tell "reused" from "unknown".
const SPENT_MEMORY: usize = 4096;

/// An action waiting for the user's yes. The UI shows `tool` and the exact `args`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Proposal {
    pub nonce: String,
    pub conversation_id: String,
    pub tool: String,
    pub args: Value,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub expires_at: OffsetDateTime,
    pub correlation_id: String,
}

/// The result of proposing: the new proposal, and the one it cancelled.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Proposed {
    pub proposal: Proposal,
    /// "Previous proposal cancelled by a new request" — say so to the user.
    pub superseded: Option<Proposal>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ConfirmError {
    #[error("no pending proposal has this nonce")]
    UnknownNonce,
    #[error("the proposal expired; ask again")]
    Expired,
    #[error("this confirmation was already used")]
    AlreadyUsed,
    #[error("the proposal was replaced by a newer one")]
    Superseded,
    #[error("the proposal was cancelled")]
    Cancelled,
}

impl ConfirmError {
    pub fn code(self) -> &'static str {
        match self {
            Self::UnknownNonce => "CONFIRMATION_UNKNOWN",
            Self::Expired => "CONFIRMATION_EXPIRED",
            Self::AlreadyUsed => "CONFIRMATION_REUSED",
            Self::Superseded => "CONFIRMATION_SUPERSEDED",
            Self::Cancelled => "CONFIRMATION_CANCELLED",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Used,
    Expired,
    Superseded,
    Cancelled,
}

impl From<Fate> for ConfirmError {
    fn from(f: Fate) -> Self {
        match f {
            Fate::Used => ConfirmError::AlreadyUsed,
            Fate::Expired => ConfirmError::Expired,
            Fate::Superseded => ConfirmError::Superseded,
            Fate::Cancelled => ConfirmError::Cancelled,
        }
    }
}

#[derive(Default)]
struct Book {
    pending: HashMap<String, Proposal>,
    spent: HashMap<(String, String), Fate>,
    spent_order: VecDeque<(String, String)>,
}

impl Book {
    fn retire(&mut self, p: &Proposal, fate: Fate) {
        let key = (p.conversation_id.clone(), p.nonce.clone());
        if self.spent.insert(key.clone(), fate).is_none() {
            self.spent_order.push_back(key);
        }
        while self.spent_order.len() > SPENT_MEMORY {
            if let Some(old) = self.spent_order.pop_front() {
                self.spent.remove(&old);
            }
        }
    }
}

/// All pending confirmations of the app.
pub struct ConfirmationBook {
    clock: Arc<dyn Clock>,
    ttl: Duration,
    book: Mutex<Book>,
}

impl std::fmt::Debug for ConfirmationBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfirmationBook").finish_non_exhaustive()
    }
}

/// A fresh random 128-bit nonce, hex-encoded.
pub fn new_nonce() -> String {
    let mut bytes = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    hex::encode(bytes)
}

fn constant_time_eq(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

impl ConfirmationBook {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self::with_ttl(clock, CONFIRMATION_TTL)
    }

    /// A book whose proposals live `ttl` (the app takes it from a test-only
    /// environment variable; the product always uses [`CONFIRMATION_TTL`]).
    pub fn with_ttl(clock: Arc<dyn Clock>, ttl: Duration) -> Self {
        Self {
            clock,
            ttl,
            book: Mutex::new(Book::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Book> {
        // The book's invariants hold between statements; a panic elsewhere
        // while holding the lock cannot leave a half-taken proposal.
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a proposal, cancelling any pending one of the conversation.
    pub fn propose(
        &self,
        conversation_id: &str,
        tool: &str,
        args: Value,
        correlation_id: &str,
    ) -> Proposed {
        let now = self.clock.now();
        let proposal = Proposal {
            nonce: new_nonce(),
            conversation_id: conversation_id.to_owned(),
            tool: tool.to_owned(),
            args,
            created_at: now,
            expires_at: now + self.ttl,
            correlation_id: correlation_id.to_owned(),
        };
        let mut book = self.lock();
        let superseded = book
            .pending
            .insert(conversation_id.to_owned(), proposal.clone());
        if let Some(old) = &superseded {
            let fate = if old.expires_at <= now {
                Fate::Expired
            } else {
                Fate::Superseded
            };
            book.retire(old, fate);
            tracing::info!(conversation_id, old_tool = %old.tool, new_tool = tool,
                "previous proposal cancelled by a new request");
        }
        Proposed {
            proposal,
            superseded,
        }
    }

    /// Takes the pending proposal if `nonce` is valid: exactly once.
    pub fn take(&self, conversation_id: &str, nonce: &str) -> Result<Proposal, ConfirmError> {
        let now = self.clock.now();
        let mut book = self.lock();
        let matches = book
            .pending
            .get(conversation_id)
            .is_some_and(|p| constant_time_eq(&p.nonce, nonce));
        if matches {
            let Some(p) = book.pending.remove(conversation_id) else {
                return Err(ConfirmError::UnknownNonce);
            };
            if now >= p.expires_at {
                book.retire(&p, Fate::Expired);
                return Err(ConfirmError::Expired);
            }
            book.retire(&p, Fate::Used);
            return Ok(p);
        }
        match book
            .spent
            .get(&(conversation_id.to_owned(), nonce.to_owned()))
        {
            Some(fate) => Err((*fate).into()),
            None => Err(ConfirmError::UnknownNonce),
        }
    }

    /// The user said no (or "cancel"): drops the pending proposal.
    pub fn cancel(&self, conversation_id: &str) -> Option<Proposal> {
        let mut book = self.lock();
        let p = book.pending.remove(conversation_id)?;
        book.retire(&p, Fate::Cancelled);
        Some(p)
    }

    /// A new message set the pending proposal aside: it is retired as
    /// superseded (a later confirmation says so) and returned.
    pub fn supersede(&self, conversation_id: &str) -> Option<Proposal> {
        let now = self.clock.now();
        let mut book = self.lock();
        let p = book.pending.remove(conversation_id)?;
        let fate = if p.expires_at <= now { Fate::Expired } else { Fate::Superseded };
        book.retire(&p, fate);
        Some(p)
    }

    /// The pending, unexpired proposal of a conversation, for display.
    pub fn pending(&self, conversation_id: &str) -> Option<Proposal> {
        let now = self.clock.now();
        self.lock()
            .pending
            .get(conversation_id)
            .filter(|p| now < p.expires_at)
            .cloned()
    }

    /// Whether no proposal waits for an answer (the expiry timer then has
    /// nothing to do).
    pub fn is_empty(&self) -> bool {
        self.lock().pending.is_empty()
    }

    /// Retires every expired proposal and returns them (for a timer).
    pub fn expire_due(&self) -> Vec<Proposal> {
        let now = self.clock.now();
        let mut book = self.lock();
        let due: Vec<String> = book
            .pending
            .iter()
            .filter(|(_, p)| now >= p.expires_at)
            .map(|(k, _)| k.clone())
            .collect();
        let mut out = Vec::new();
        for key in due {
            if let Some(p) = book.pending.remove(&key) {
                book.retire(&p, Fate::Expired);
                out.push(p);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use serde_json::json;

    fn book() -> (Arc<ManualClock>, ConfirmationBook) {
        let clock = Arc::new(ManualClock::at_epoch());
        let book = ConfirmationBook::new(clock.clone());
        (clock, book)
    }

    #[test]
    fn nonce_is_128_bit_hex_and_unique() {
        let a = new_nonce();
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, new_nonce());
    }

    #[test]
    fn a_nonce_confirms_once_then_is_reported_as_reused() {
        let (_, book) = book();
        let p = book
            .propose("c1", "delete_memory", json!({"item_id": "n1"}), "corr")
            .proposal;
        assert_eq!(p.expires_at - p.created_at, Duration::minutes(5));
        assert_eq!(
            book.take("c1", &p.nonce).map(|p| p.tool),
            Ok("delete_memory".into())
        );
        assert_eq!(book.take("c1", &p.nonce), Err(ConfirmError::AlreadyUsed));
    }

    #[test]
    fn expiry_is_exactly_five_minutes() {
        let (clock, book) = book();
        let p = book.propose("c1", "forget", json!({}), "corr").proposal;
        clock.advance(Duration::minutes(5) - Duration::milliseconds(1));
        assert!(book.pending("c1").is_some());
        clock.advance(Duration::milliseconds(1));
        assert!(book.pending("c1").is_none());
        assert_eq!(book.take("c1", &p.nonce), Err(ConfirmError::Expired));
        assert_eq!(book.take("c1", &p.nonce), Err(ConfirmError::Expired));
    }

    #[test]
    fn a_proposal_set_aside_by_a_new_message_is_refused_as_superseded() {
        let (_, book) = book();
        let p = book.propose("c", "forget", json!({"item_id": "a"}), "corr").proposal;
        assert_eq!(book.supersede("c").map(|x| x.nonce), Some(p.nonce.clone()));
        assert_eq!(book.take("c", &p.nonce), Err(ConfirmError::Superseded));
        assert!(book.supersede("c").is_none(), "nothing left to set aside");
    }

    #[test]
    fn a_new_proposal_supersedes_the_old_one_and_says_so() {
        let (_, book) = book();
        let a = book
            .propose("c1", "forget", json!({"item_id": "a"}), "x")
            .proposal;
        let b = book.propose("c1", "forget", json!({"item_id": "b"}), "y");
        assert_eq!(
            b.superseded.as_ref().map(|p| p.nonce.clone()),
            Some(a.nonce.clone())
        );
        assert_eq!(book.take("c1", &a.nonce), Err(ConfirmError::Superseded));
        assert!(book.take("c1", &b.proposal.nonce).is_ok());
    }

    #[test]
    fn nonces_are_scoped_to_their_conversation() {
        let (_, book) = book();
        let p = book.propose("c1", "forget", json!({}), "x").proposal;
        book.propose("c2", "forget", json!({}), "y");
        assert_eq!(book.take("c2", &p.nonce), Err(ConfirmError::UnknownNonce));
        assert_eq!(book.take("c1", "deadbeef"), Err(ConfirmError::UnknownNonce));
        assert!(book.take("c1", &p.nonce).is_ok());
    }

    #[test]
    fn cancel_and_expire_due_retire_proposals() {
        let (clock, book) = book();
        let p = book.propose("c1", "forget", json!({}), "x").proposal;
        assert_eq!(book.cancel("c1").map(|p| p.nonce), Some(p.nonce.clone()));
        assert_eq!(book.take("c1", &p.nonce), Err(ConfirmError::Cancelled));
        let q = book.propose("c2", "forget", json!({}), "y").proposal;
        clock.advance(Duration::minutes(6));
        assert_eq!(book.expire_due().len(), 1);
        assert_eq!(book.take("c2", &q.nonce), Err(ConfirmError::Expired));
        assert_eq!(ConfirmError::Expired.code(), "CONFIRMATION_EXPIRED");
    }

    #[test]
    fn racing_confirmations_succeed_exactly_once() {
        for _ in 0..20 {
            let (_, book) = book();
            let book = Arc::new(book);
            let nonce = book.propose("c", "forget", json!({}), "x").proposal.nonce;
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    let (book, nonce) = (book.clone(), nonce.clone());
                    std::thread::spawn(move || book.take("c", &nonce).is_ok())
                })
                .collect();
            let wins = handles
                .into_iter()
                .map(|h| h.join().unwrap_or(false))
                .filter(|ok| *ok)
                .count();
            assert_eq!(wins, 1);
        }
    }
}
