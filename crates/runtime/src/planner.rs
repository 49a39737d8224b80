//! The planner contract: the LLM answers with exactly one JSON object
//! `{action: CALL_TOOL | RESPOND | NOOP, tool?, args?, message?}`. This module
//! parses that object leniently out of model text and validates it strictly.
//! It never executes anything: a valid reply is only a request.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use thiserror::Error;

use crate::tools::{ToolRegistry, ToolSpec};

/// Longest user-facing message the planner may write (≈ 2 000 tokens).
pub const MAX_MESSAGE_CHARS: usize = 8000;

/// A validated planner reply.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PlannerReply {
    CallTool {
        tool: String,
        args: Map<String, Value>,
        /// Optional text shown alongside the call (e.g. "Saving it now").
        message: Option<String>,
    },
    Respond {
        message: String,
    },
    Noop,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PlannerError {
    #[error("the planner reply is not a JSON object: {0}")]
    InvalidJson(String),
    #[error("unknown action `{0}` (expected CALL_TOOL, RESPOND or NOOP)")]
    UnknownAction(String),
    #[error("CALL_TOOL needs a tool name")]
    MissingTool,
    #[error("the planner asked for unknown tool `{0}`")]
    UnknownTool(String),
    #[error("CALL_TOOL needs `args` to be a JSON object")]
    ArgsNotObject,
    #[error("RESPOND needs a non-empty message")]
    EmptyMessage,
    #[error("the message is longer than {MAX_MESSAGE_CHARS} characters")]
    MessageTooLong,
    #[error("NOOP must not carry a message")]
    NoopWithMessage,
}

impl PlannerError {
    /// The boundary error code (PRODUCT.md §3 / §5).
    pub fn code(&self) -> &'static str {
        match self {
            PlannerError::InvalidJson(_) => "LLM_INVALID_JSON",
            PlannerError::UnknownTool(_) => "TOOL_UNKNOWN",
            _ => "LLM_INVALID_REPLY",
        }
    }

    /// Worth asking the model again (the caller retries, then gives up).
    pub fn is_retryable(&self) -> bool {
        true
    }
}

#[derive(Deserialize)]
struct RawReply {
    action: Value,
    #[serde(default)]
    tool: Option<Value>,
    #[serde(default)]
    args: Option<Value>,
    #[serde(default)]
    message: Option<Value>,
}

/// Parses and validates a planner reply out of raw model text: code fences
/// are stripped and the first balanced `{…}` is taken.
pub fn parse_planner_reply(
    text: &str,
    registry: &ToolRegistry,
) -> Result<PlannerReply, PlannerError> {
    let candidate = extract_json_object(text)
        .ok_or_else(|| PlannerError::InvalidJson("no JSON object found".into()))?;
    let raw: RawReply =
        serde_json::from_str(candidate).map_err(|e| PlannerError::InvalidJson(e.to_string()))?;
    validate_raw(raw, registry)
}

fn non_empty_str(v: Option<Value>) -> Option<String> {
    match v {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s),
        _ => None,
    }
}

fn validate_raw(raw: RawReply, registry: &ToolRegistry) -> Result<PlannerReply, PlannerError> {
    let action = raw
        .action
        .as_str()
        .unwrap_or_default()
        .trim()
        .to_ascii_uppercase();
    let message_too_long = |m: &Option<String>| {
        m.as_ref()
            .is_some_and(|m| m.chars().count() > MAX_MESSAGE_CHARS)
    };
    match action.as_str() {
        "CALL_TOOL" => {
            let tool = non_empty_str(raw.tool).ok_or(PlannerError::MissingTool)?;
            if registry.get(&tool).is_none() {
                return Err(PlannerError::UnknownTool(tool));
            }
            let args = match raw.args {
                Some(Value::Object(m)) => m,
                // A tool with no arguments may omit `args`.
                None | Some(Value::Null) => Map::new(),
                Some(_) => return Err(PlannerError::ArgsNotObject),
            };
            let message = non_empty_str(raw.message);
            if message_too_long(&message) {
                return Err(PlannerError::MessageTooLong);
            }
            Ok(PlannerReply::CallTool {
                tool,
                args,
                message,
            })
        }
        "RESPOND" => {
            let message = non_empty_str(raw.message).ok_or(PlannerError::EmptyMessage)?;
            if message.chars().count() > MAX_MESSAGE_CHARS {
                return Err(PlannerError::MessageTooLong);
            }
            Ok(PlannerReply::Respond { message })
        }
        "NOOP" => match raw.message {
            None | Some(Value::Null) => Ok(PlannerReply::Noop),
            Some(Value::String(s)) if s.is_empty() => Ok(PlannerReply::Noop),
            Some(_) => Err(PlannerError::NoopWithMessage),
        },
        _ => Err(PlannerError::UnknownAction(raw.action.to_string())),
    }
}

/// Finds the first balanced `{…}` in `text`, skipping braces inside strings.
/// Code fences need no special handling: they are outside the object.
pub fn extract_json_object(text: &str) -> Option<&str> {
    let start = text.find('{')?;
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in text[start..].char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&text[start..start + i + 1]);
                }
            }
            _ => {}
        }
    }
    None
}

/// The JSON Schema a constrained decoder should enforce for planner replies
/// offering `tools`: one shape per tool (with that tool's argument schema),
/// plus RESPOND and NOOP.
pub fn planner_json_schema(tools: &[&ToolSpec]) -> Value {
    let mut shapes: Vec<Value> = tools
        .iter()
        .map(|t| {
            json!({
                "type": "object",
                "properties": {
                    "action": {"const": "CALL_TOOL"},
                    "tool": {"const": t.name},
                    "args": t.args_schema,
                    "message": {"type": ["string", "null"], "maxLength": 500},
                },
                "required": ["action", "tool", "args"],
                "additionalProperties": false,
            })
        })
        .collect();
    shapes.push(json!({
        "type": "object",
        "properties": {
            "action": {"const": "RESPOND"},
            "message": {"type": "string", "minLength": 1, "maxLength": MAX_MESSAGE_CHARS},
        },
        "required": ["action", "message"],
        "additionalProperties": false,
    }));
    shapes.push(json!({
        "type": "object",
        "properties": {
            "action": {"const": "NOOP"},
            "message": {"type": "null"},
        },
        "required": ["action"],
        "additionalProperties": false,
    }));
    json!({"anyOf": shapes})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::validate;
    use crate::tools::Role;

    fn reg() -> ToolRegistry {
        ToolRegistry::builtin()
    }

    #[test]
    fn parses_a_fenced_tool_call_with_prose_around_it() {
        let text = "Sure!\n```json\n{\"action\": \"CALL_TOOL\", \"tool\": \"enrich_movie\", \"args\": {\"title\": \"inception {2010}\"}, \"message\": null}\n```\nDone.";
        let reply = parse_planner_reply(text, &reg()).unwrap();
        match reply {
            PlannerReply::CallTool {
                tool,
                args,
                message,
            } => {
                assert_eq!(tool, "enrich_movie");
                assert_eq!(args["title"], "inception {2010}");
                assert_eq!(message, None);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn respond_and_noop_follow_their_rules() {
        let r = parse_planner_reply(r#"{"action":"RESPOND","message":"Hi"}"#, &reg()).unwrap();
        assert_eq!(
            r,
            PlannerReply::Respond {
                message: "Hi".into()
            }
        );
        let n = parse_planner_reply(
            r#"{"action":"NOOP","message":null,"tool":null,"args":null}"#,
            &reg(),
        );
        assert_eq!(n, Ok(PlannerReply::Noop));
        let bad = parse_planner_reply(r#"{"action":"NOOP","message":"x"}"#, &reg());
        assert_eq!(bad, Err(PlannerError::NoopWithMessage));
        let empty = parse_planner_reply(r#"{"action":"RESPOND","message":"  "}"#, &reg());
        assert_eq!(empty, Err(PlannerError::EmptyMessage));
        let long = format!(
            r#"{{"action":"RESPOND","message":"{}"}}"#,
            "a".repeat(MAX_MESSAGE_CHARS + 1)
        );
        assert_eq!(
            parse_planner_reply(&long, &reg()),
            Err(PlannerError::MessageTooLong)
        );
    }

    #[test]
    fn call_tool_needs_a_known_tool_and_object_args() {
        let r = |t: &str| parse_planner_reply(t, &reg());
        assert_eq!(
            r(r#"{"action":"CALL_TOOL"}"#),
            Err(PlannerError::MissingTool)
        );
        assert_eq!(
            r(r#"{"action":"CALL_TOOL","tool":"rm_rf"}"#),
            Err(PlannerError::UnknownTool("rm_rf".into()))
        );
        assert_eq!(
            r(r#"{"action":"CALL_TOOL","tool":"save_note","args":[1]}"#),
            Err(PlannerError::ArgsNotObject)
        );
        assert!(matches!(
            r(r#"{"action":"CALL_TOOL","tool":"verify"}"#),
            Ok(PlannerReply::CallTool { .. })
        ));
        assert!(matches!(
            r(r#"{"action":"DANCE"}"#),
            Err(PlannerError::UnknownAction(_))
        ));
    }

    #[test]
    fn unparseable_text_is_llm_invalid_json() {
        for text in [
            "",
            "no json here",
            "{\"action\": \"RESPOND\"",
            "{not json}",
            "[1,2]",
        ] {
            let err = parse_planner_reply(text, &reg()).unwrap_err();
            assert_eq!(err.code(), "LLM_INVALID_JSON", "{text:?} gave {err:?}");
        }
    }

    #[test]
    fn extraction_skips_braces_in_strings() {
        let t = r#"x {"a": "}{\"", "b": {"c": 1}} y {"d": 2}"#;
        assert_eq!(
            extract_json_object(t),
            Some(r#"{"a": "}{\"", "b": {"c": 1}}"#)
        );
    }

    #[test]
    fn schema_accepts_valid_replies_and_rejects_invalid_ones() {
        let reg = reg();
        let offered = reg.offered(Role::Persona, &|_| true);
        let schema = planner_json_schema(&offered);
        let ok = [
            json!({"action": "CALL_TOOL", "tool": "save_movie", "args": {"title": "Heat", "year": 1995}}),
            json!({"action": "RESPOND", "message": "Hello"}),
            json!({"action": "NOOP", "message": null}),
        ];
        for v in ok {
            assert!(validate(&schema, &v).is_ok(), "{v}");
        }
        let bad = [
            json!({"action": "CALL_TOOL", "tool": "save_movie", "args": {"year": 1995}}),
            json!({"action": "CALL_TOOL", "tool": "delete_all_memories", "args": {}}),
            json!({"action": "RESPOND", "message": ""}),
            json!({"action": "NOOP", "message": "x"}),
        ];
        for v in bad {
            assert!(validate(&schema, &v).is_err(), "{v}");
        }
        // Every string in the schema carries a maxLength (bounded decoding).
        fn strings_bounded(v: &Value) -> bool {
            match v {
                Value::Object(m) => {
                    let is_free_string = m.get("type") == Some(&json!("string"));
                    (!is_free_string || m.contains_key("maxLength"))
                        && m.values().all(strings_bounded)
                }
                Value::Array(a) => a.iter().all(strings_bounded),
                _ => true,
            }
        }
        assert!(strings_bounded(&schema));
    }
}
