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
mod bench;
mod checkpoint;
mod epochs;
mod erase;
mod export;
mod keys;
mod memories;
mod merkle;
mod office;
mod project;
mod proof;
mod query;
mod queue;
mod signing;
mod store;
mod verify;

pub use body::{EventBody, HandoverAuthor, KeyAuthority, MessageRole, ObligationKind};
pub use body::{ContextStatus, MemoryKind, PersonaTopic, QuoteSpan, Validation};
pub use memories::{Memory, PersonaGroups, PersonaProfile, Summary, DEFAULT_GROUP};
pub use clock::{Clock, SystemClock};
#[cfg(any(test, feature = "test-support"))]
pub use clock::ManualClock;
pub use error::{is_corrupt, is_disk_full, no_room_in, LedgerError};
pub use store::close_pool;
pub use event::{EventHeader, HASH_LEN};
#[cfg(any(test, feature = "test-support"))]
pub use keys::MemoryKeyStore;
pub use bench::{bench_ledger, BenchReport};
pub use checkpoint::{autosave_due, CheckpointInfo, CheckpointKind, AUTOSAVE_INTERVAL, AUTO_SLOTS, MANUAL_SLOTS};
pub use export::{import_profile, ExportOptions, ExportSummary, EXPORT_VERSION};
#[cfg(any(test, feature = "test-support"))]
pub use keys::FileKeyStore;
pub use keys::{KeyStore, KeyStoreError, KeyringStore, KEYCHAIN_TIMEOUT, KEY_READ_TIMEOUT};
pub use epochs::{EntityKeyStatus, KeyReplacement, PrivateKeyState, LOST_KEY_REASON};
pub use merkle::{leaf_hash, node_hash};
pub use proof::{check_proof, sth_message, Proof, SignedTreeHead};
pub use office::{
    Baseline, Bookmark, Constitution, DreamState, GovernanceNote, Handover, Period, Reminder, ReplyFrame, SimulatedChanges,
    TokenDay,
};
pub use query::{Account, Item, Message, Persona, StoredEvent};
pub use queue::{NewJob, QueueItem, QueueState};
pub use erase::Erasure;
pub use store::{format_ts, Draft, Ledger, LedgerOptions, Receipt, EI_PERSONA_ID, HUMAN_ENTITY};
pub use verify::{key_proof_message, KeyEpoch, VerifyFailure, VerifyReport};

pub type Result<T, E = LedgerError> = std::result::Result<T, E>;
