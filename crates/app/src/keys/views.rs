//! Signing keys as the shells see them.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// One signing entity: `private_key` is `present`, `missing` or `locked`.
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct KeyStatusView {
    pub entity: String,
    pub name: String,
    pub public_key: String,
    pub private_key: String,
}

/// One key a new epoch replaced.
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct KeyReplacementView {
    pub entity: String,
    pub name: String,
    pub old_public_key: String,
    pub new_public_key: String,
    #[ts(type = "number")]
    pub seq: i64,
    pub self_certified: bool,
}

/// One key epoch boundary found by verify ("keys replaced on …").
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct KeyEpochView {
    #[ts(type = "number")]
    pub seq: i64,
    pub ts: String,
    pub entity_id: String,
    /// The entity's name as shown to the person ("You" for the human).
    pub name: String,
    pub old_public_key: String,
    pub new_public_key: String,
    pub reason: String,
    pub self_certified: bool,
}
