//! The ledger: Ledgermind's memory as a signed, hash-chained, append-only log
//! of events in SQLite, and the projections (personas, messages, accounts)
//! rebuilt from it.
//!
//! It owns every SQL statement in the product and the signing keys' use. It
//! must never let an event be changed or removed (triggers enforce it), never
//! keep a private key in the database, and never commit an event whose
//! projection failed: an append is one transaction or nothing.

mod body;
mod clock;
mod error;
mod event;
mod keys;
mod project;
mod query;
mod queue;
mod store;
mod verify;

pub use body::{EventBody, MessageRole};
pub use clock::{Clock, SystemClock};
#[cfg(any(test, feature = "test-support"))]
pub use clock::ManualClock;
pub use error::LedgerError;
pub use event::{EventHeader, HASH_LEN};
#[cfg(any(test, feature = "test-support"))]
pub use keys::MemoryKeyStore;
pub use keys::{KeyStore, KeyStoreError, KeyringStore};
pub use query::{Account, Message, Persona, StoredEvent};
pub use queue::{QueueItem, QueueState};
pub use store::{Draft, Ledger, LedgerOptions, Receipt, EI_PERSONA_ID, HUMAN_ENTITY};
pub use verify::{VerifyFailure, VerifyReport};

pub type Result<T, E = LedgerError> = std::result::Result<T, E>;
