//! What the tools show the shells: proposals waiting for Confirm, tool
//! results, the tool settings, and a question waiting for its answer.

use runtime::Proposal;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::vault::views::ReceiptView;

/// A tool call waiting for the user's Confirm / Reject.
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct ProposalView {
    pub persona_id: String,
    pub nonce: String,
    pub tool: String,
    /// The exact arguments, as pretty JSON.
    pub args: String,
    pub created_at: String,
    pub expires_at: String,
    pub correlation_id: String,
    /// Step k of a multi-step plan (1-based), when the call is one.
    pub step: Option<u32>,
    /// How many steps that plan has.
    pub steps: Option<u32>,
}

/// One tool in Settings → Tools: what it does and whether it is on.
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct ToolSettingView {
    pub name: String,
    pub description: String,
    /// "read", "write", "destructive" or "external".
    pub category: String,
    pub requires_confirmation: bool,
    pub enabled: bool,
}

/// What a confirmed (or direct) tool call did.
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct ToolResultView {
    pub persona_id: String,
    pub tool: String,
    pub summary: String,
    pub correlation_id: String,
    pub receipt: Option<ReceiptView>,
}

pub(crate) fn rfc3339(t: time::OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

impl From<&Proposal> for ProposalView {
    fn from(p: &Proposal) -> Self {
        Self {
            persona_id: p.conversation_id.clone(),
            nonce: p.nonce.clone(),
            tool: p.tool.clone(),
            args: serde_json::to_string_pretty(&p.args).unwrap_or_default(),
            created_at: rfc3339(p.created_at),
            expires_at: rfc3339(p.expires_at),
            correlation_id: p.correlation_id.clone(),
            step: None,
            steps: None,
        }
    }
}

/// A conversation waiting for the user's answer (the chat's state chip).
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct AwaitingInputView {
    pub persona_id: String,
    /// The tool waiting for the answer; None for the persona's own question.
    pub tool: Option<String>,
    /// The arguments still missing, the first one asked for.
    pub missing: Vec<String>,
    pub question: String,
    pub correlation_id: String,
    pub asked_at: String,
    pub expires_at: String,
}

