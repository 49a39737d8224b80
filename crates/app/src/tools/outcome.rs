//! How a tool call or a planner turn ended, as the rest of the tools
//! module reports it: the line to commit and who says it, the ledger
//! receipt an executor returned, the role a persona plans under, and the
//! sentence for a refused call.

use ledger::{MessageRole, Persona};
use runtime::{PipelineError, Role};
use serde_json::Value;

use crate::vault::views::ReceiptView;

/// The ledger receipt an executor put in its result, if any.
pub(crate) fn receipt_of(result: &Value) -> Option<ReceiptView> {
    result.get("receipt").cloned().and_then(|r| serde_json::from_value::<ReceiptView>(r).ok())
}

pub(crate) fn role_of(persona: &Persona) -> Role {
    if persona.is_system {
        Role::Ei
    } else {
        Role::Persona
    }
}

/// How a reply ends: the text to commit, and who says it.
pub(crate) struct Planned {
    pub content: String,
    pub role: MessageRole,
}

pub(crate) fn refusal(e: &PipelineError) -> String {
    match e {
        PipelineError::Execution { .. } => format!("The tool call failed ({}): {e}", e.code()),
        _ => format!("The tool call was refused ({}): {e}", e.code()),
    }
}
