//! The provider accounts and models as the shells see them.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct AccountView {
    pub name: String,
    pub base_url: String,
    pub default_model: String,
    pub enabled: bool,
    /// Whether a key for this account is present in the OS keychain. The key
    /// itself never leaves the backend.
    pub has_key: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct NewAccount {
    pub name: String,
    pub base_url: String,
    pub api_key: String,
    pub default_model: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct ModelView {
    /// Spec to store on a persona: `account:model`.
    pub spec: String,
    pub label: String,
    pub local: bool,
    /// False for a model of a server on this machine that is not answering
    /// now (replies on it use the local default meanwhile).
    pub available: bool,
}

/// How a download stands, as the window shows it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, TS, PartialEq, Eq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
#[serde(rename_all = "snake_case")]
pub enum ModelPullState {
    Downloading,
    Retrying,
    Verifying,
    /// Installed; its speed on this computer is being measured.
    Measuring,
    Installed,
    /// The disk is full: the message says how much to free; the bytes
    /// already downloaded are kept for the next try.
    Paused,
    Cancelled,
    Failed,
}
