//! The personas and their own rhythm.
//!
//! Inside:
//! - `persona`: creating (with the model's fill), editing, pausing,
//!   choosing a model, the archived list, and the chat state the person sets
//!   per message;
//! - `heartbeat`: a persona reaching out after a quiet while;
//! - `ceremony`: the daily run that decays topics and queues explorations,
//!   and the clock tick that drives it, the heartbeat and the dreams;
//! - `exploration`: a persona widening its own topics;
//! - `rules`: small shared rules (pauses, profile lines, model JSON);
//! - `views`: the persona as the shells see it.
//!
//! Public surface: [`Personas`] and its views. It calls the office (frames,
//! dreams), the memory (indexing what a persona says) and the vault
//! (erasing a recalled message).

pub(crate) mod ceremony;
pub(crate) mod exploration;
pub(crate) mod heartbeat;
pub(crate) mod persona;
pub(crate) mod rules;
pub(crate) mod views;

use std::sync::Arc;

use crate::context::Context;
use crate::memory::Memories;
use crate::office::Office;
use crate::vault::Vault;
pub use ceremony::{ceremony_due, CeremonySettingsView, CeremonyView};
pub use persona::{PersonaEdit, PersonaProfileView};
pub use views::PersonaView;

/// The personas capability.
pub struct Personas {
    pub(crate) ctx: Arc<Context>,
    pub(crate) office: Arc<Office>,
    pub(crate) memory: Arc<Memories>,
    pub(crate) vault: Arc<Vault>,
}

impl Personas {
    pub fn new(ctx: Arc<Context>, office: Arc<Office>, memory: Arc<Memories>, vault: Arc<Vault>) -> Self {
        Self { ctx, office, memory, vault }
    }
}
