//! The deterministic agent runtime and its security guards.
//!
//! **Owns**: validating what the planner (an LLM) says, the tool registry and
//! the tool pipeline (parse → validate → authorize → rate limit → classify →
//! propose or execute → format → audit), one-time confirmations, multi-step
//! plans with compensation, the conversation and action state machines, the
//! deterministic intents that skip the LLM, and the guards: prompt-injection
//! detection, PII scrubbing and data classification, output validation.
//!
//! **Must never**: call an LLM, touch the disk, the network or the ledger
//! directly, or read the wall clock outside [`clock::SystemClock`] (a
//! stopped tool is timed by a monotonic wait in [`cancel::Stoppable`]). The
//! outside world is reached only through the traits [`clock::Clock`],
//! [`pipeline::AuditSink`] and [`pipeline::ToolExecutor`], so every rule here
//! is a pure, testable function of its inputs. It must never execute a tool
//! that requires confirmation without a valid, unexpired, unused nonce.

pub mod cancel;
pub mod clock;
pub mod confirm;
pub mod guard;
pub mod intents;
pub mod output;
pub mod pii;
pub mod pipeline;
pub mod plan;
pub mod planner;
pub mod respond_stream;
pub mod router;
pub mod schema;
pub mod slots;
pub mod state;
pub mod text;
pub mod tools;

pub use cancel::{CancelToken, Stoppable};
pub use clock::{Clock, ManualClock, SystemClock};
pub use confirm::{ConfirmError, ConfirmationBook, Proposal};
pub use guard::{analyze, analyze_document, sanitize, sanitize_document, Action, Category, Finding, GuardReport, RiskLevel};
pub use intents::{detect_intent, DeterministicIntent};
pub use output::{validate_output, ExpectedFormat, OutputPolicy, OutputViolation};
pub use pii::{classify, prepare_for_cloud, scrub, DataClass, PiiKind, Removal, Scrubbed};
pub use pipeline::{
    AuditRecord, AuditSink, CallContext, Outcome, Pipeline, PipelineError, Step, ToolError,
    ToolExecutor,
};
pub use planner::{parse_planner_reply, planner_json_schema, PlannerError, PlannerReply};
pub use respond_stream::RespondStream;
pub use tools::{Role, ToolCategory, ToolRegistry, ToolSpec};
