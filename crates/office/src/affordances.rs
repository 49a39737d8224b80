//! The office's affordances (seed 000, "How do I act?"): the intents a
//! persona may submit, and the structured `ErrorToken` every rejection
//! comes back as. The executors live in the app; this is the contract.

use serde::Serialize;
use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// The seed's error categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCategory {
    Precondition,
    Authorization,
    Validation,
    State,
    Temporal,
    System,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RemediationType {
    Retry,
    AcquireResource,
    RequestPermission,
    Wait,
    Escalate,
    Abandon,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Remediation {
    #[serde(rename = "type")]
    pub kind: RemediationType,
    pub automatic: bool,
    pub steps: Vec<String>,
}

/// A structured rejection: never an ambiguous error.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorToken {
    pub category: ErrorCategory,
    /// `OFFICE_…`, stable.
    pub code: &'static str,
    pub message: String,
    pub remediation: Remediation,
}

impl ErrorToken {
    pub fn new(category: ErrorCategory, code: &'static str, message: impl Into<String>, kind: RemediationType, steps: &[&str]) -> Self {
        Self {
            category,
            code,
            message: message.into(),
            remediation: Remediation { kind, automatic: false, steps: steps.iter().map(|s| (*s).to_owned()).collect() },
        }
    }

    /// The executor's answer for a rejected act: status, the token, and a
    /// one-line message for the chat.
    pub fn to_result(&self) -> Value {
        serde_json::json!({
            "status": "rejected",
            "error": self,
            "message": format!("Rejected ({}): {}", self.code, self.message),
        })
    }
}

/// What a persona may submit. Every one is a signed `intent_submitted`
/// event plus its effect on the obligations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Intent {
    /// Take on a commitment with a deadline (RFC 3339).
    Commit { text: String, due_at: String },
    /// Mark an open obligation as kept.
    Fulfil { obligation_id: String },
    /// Give up an open commitment (critical: always simulated first).
    Withdraw { obligation_id: String, reason: String },
}

pub const INTENTS: &[&str] = &["commit", "fulfil", "withdraw"];

fn field<'a>(payload: &'a Value, key: &str) -> Result<&'a str, ErrorToken> {
    payload.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty()).ok_or_else(|| {
        ErrorToken::new(
            ErrorCategory::Validation,
            "OFFICE_PAYLOAD_INVALID",
            format!("the payload needs a non-empty string `{key}`"),
            RemediationType::Retry,
            &["add the missing field to the payload and submit again"],
        )
    })
}

impl Intent {
    /// Reads `{intent, payload}`; a bad one is a validation ErrorToken.
    pub fn parse(args: &Value) -> Result<Self, ErrorToken> {
        let intent = args.get("intent").and_then(Value::as_str).unwrap_or_default().trim().to_lowercase();
        let payload = args.get("payload").unwrap_or(&Value::Null);
        match intent.as_str() {
            "commit" => {
                let due = field(payload, "due")?;
                let due_at = OffsetDateTime::parse(due, &Rfc3339)
                    .ok()
                    .and_then(|t| t.to_offset(time::UtcOffset::UTC).format(&Rfc3339).ok())
                    .ok_or_else(|| {
                        ErrorToken::new(
                            ErrorCategory::Validation,
                            "OFFICE_PAYLOAD_INVALID",
                            format!("“{due}” is not an RFC 3339 date and time"),
                            RemediationType::Retry,
                            &["give `due` as e.g. 2030-01-31T18:00:00Z"],
                        )
                    })?;
                Ok(Self::Commit { text: field(payload, "text")?.to_owned(), due_at })
            }
            "fulfil" | "fulfill" => Ok(Self::Fulfil { obligation_id: field(payload, "obligation_id")?.to_owned() }),
            "withdraw" => Ok(Self::Withdraw {
                obligation_id: field(payload, "obligation_id")?.to_owned(),
                reason: field(payload, "reason")?.to_owned(),
            }),
            other => Err(ErrorToken::new(
                ErrorCategory::Validation,
                "OFFICE_UNKNOWN_INTENT",
                format!("“{other}” is not an intent this office knows"),
                RemediationType::Abandon,
                &["submit one of: commit, fulfil, withdraw"],
            )),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Self::Commit { .. } => "commit",
            Self::Fulfil { .. } => "fulfil",
            Self::Withdraw { .. } => "withdraw",
        }
    }

    /// Checks against the time: a commitment due in the past is a
    /// temporal rejection.
    pub fn check_time(&self, now: OffsetDateTime) -> Result<(), ErrorToken> {
        if let Self::Commit { due_at, .. } = self {
            if OffsetDateTime::parse(due_at, &Rfc3339).is_ok_and(|d| d <= now) {
                return Err(ErrorToken::new(
                    ErrorCategory::Temporal,
                    "OFFICE_DEADLINE_PASSED",
                    format!("the deadline {due_at} has already passed"),
                    RemediationType::Retry,
                    &["choose a deadline in the future"],
                ));
            }
        }
        Ok(())
    }
}

/// The token for an obligation that is not open (unknown or already done).
pub fn not_open(obligation_id: &str) -> ErrorToken {
    ErrorToken::new(
        ErrorCategory::State,
        "OFFICE_OBLIGATION_NOT_OPEN",
        format!("no open obligation of yours has the id “{obligation_id}”"),
        RemediationType::Retry,
        &["query your obligations for their ids", "submit again with an open one"],
    )
}

/// The token for an act the session's rules do not allow.
pub fn session_refused(tool: &str, session: &str) -> ErrorToken {
    ErrorToken::new(
        ErrorCategory::Authorization,
        "OFFICE_SESSION_RESTRICTED",
        format!("`{tool}` is not available in a {session} session"),
        RemediationType::RequestPermission,
        &["ask the person to switch the session type"],
    )
}

/// The token for a risky act that was not simulated first.
pub fn simulation_required(kind: &str) -> ErrorToken {
    ErrorToken::new(
        ErrorCategory::Precondition,
        "OFFICE_SIMULATION_REQUIRED",
        format!("`{kind}` is risky: simulate it before doing it"),
        RemediationType::Retry,
        &["call simulate with the same tool and arguments", "then do it again"],
    )
}

/// What `query` may look up, all within the persona's own visibility.
pub const QUERY_TOPICS: &[&str] = &["obligations", "bookmarks", "handovers", "events", "items", "constitution", "session"];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn intents_parse_or_come_back_as_error_tokens() {
        let ok = Intent::parse(&json!({"intent": "Commit", "payload": {"text": "Send the draft", "due": "2030-01-31T18:00:00-03:00"}}));
        assert_eq!(ok, Ok(Intent::Commit { text: "Send the draft".into(), due_at: "2030-01-31T21:00:00Z".into() }));
        let unknown = Intent::parse(&json!({"intent": "terminate_everything", "payload": {}})).unwrap_err();
        assert_eq!((unknown.category, unknown.code), (ErrorCategory::Validation, "OFFICE_UNKNOWN_INTENT"));
        assert_eq!(unknown.remediation.kind, RemediationType::Abandon);
        let missing = Intent::parse(&json!({"intent": "withdraw", "payload": {"obligation_id": "r1"}})).unwrap_err();
        assert_eq!(missing.code, "OFFICE_PAYLOAD_INVALID");
        let bad_date = Intent::parse(&json!({"intent": "commit", "payload": {"text": "x", "due": "friday"}})).unwrap_err();
        assert!(bad_date.message.contains("friday"));
        let past = Intent::Commit { text: "x".into(), due_at: "2000-01-01T00:00:00Z".into() };
        assert_eq!(past.check_time(OffsetDateTime::now_utc()).unwrap_err().category, ErrorCategory::Temporal);
        let result = not_open("r9").to_result();
        assert_eq!(result["status"], "rejected");
        assert_eq!(result["error"]["category"], "state");
        assert_eq!(result["error"]["remediation"]["type"], "retry");
    }
}
