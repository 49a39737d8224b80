//! A small JSON-Schema validator for the subset our tool schemas use:
//! `type`, `properties`, `required`, `additionalProperties`, `enum`, `const`,
//! `minLength`/`maxLength`, `minimum`/`maximum`, `items`,
//! `minItems`/`maxItems`, `anyOf`, and `format` `uri` / `date-time` (loosely).
//!
//! Unknown keywords are ignored, as JSON Schema says. It never panics on a
//! malformed schema; a schema it cannot read accepts nothing it cannot check.

use serde::Serialize;
use serde_json::{Map, Value};

/// One reason a value does not match its schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SchemaViolation {
    /// JSON-pointer-like path to the offending value (`""` is the root).
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for SchemaViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        write!(f, "{path}: {}", self.message)
    }
}

/// Validates `value` against `schema`; every violation found is returned.
pub fn validate(schema: &Value, value: &Value) -> Result<(), Vec<SchemaViolation>> {
    let mut out = Vec::new();
    check(schema, value, "", &mut out);
    if out.is_empty() {
        Ok(())
    } else {
        Err(out)
    }
}

fn push(out: &mut Vec<SchemaViolation>, path: &str, message: impl Into<String>) {
    out.push(SchemaViolation {
        path: path.to_owned(),
        message: message.into(),
    });
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn has_type(value: &Value, ty: &str) -> bool {
    match ty {
        "integer" => match value {
            Value::Number(n) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        },
        "number" => value.is_number(),
        other => type_name(value) == other,
    }
}

fn check(schema: &Value, value: &Value, path: &str, out: &mut Vec<SchemaViolation>) {
    let Some(schema) = schema.as_object() else {
        // `true` accepts everything, `false` nothing.
        if schema == &Value::Bool(false) {
            push(out, path, "no value is allowed here");
        }
        return;
    };

    if let Some(ty) = schema.get("type") {
        let ok = match ty {
            Value::String(t) => has_type(value, t),
            Value::Array(ts) => ts
                .iter()
                .filter_map(Value::as_str)
                .any(|t| has_type(value, t)),
            _ => true,
        };
        if !ok {
            push(
                out,
                path,
                format!("expected type {ty}, got {}", type_name(value)),
            );
            return; // the remaining keywords would only add noise
        }
    }

    if let Some(Value::Array(allowed)) = schema.get("enum") {
        if !allowed.contains(value) {
            push(
                out,
                path,
                format!(
                    "value {value} is not one of {}",
                    Value::Array(allowed.clone())
                ),
            );
        }
    }
    if let Some(expected) = schema.get("const") {
        if expected != value {
            push(out, path, format!("value must be {expected}"));
        }
    }
    if let Some(Value::Array(options)) = schema.get("anyOf") {
        let any = options.iter().any(|s| {
            let mut scratch = Vec::new();
            check(s, value, path, &mut scratch);
            scratch.is_empty()
        });
        if !any {
            push(out, path, "value matches none of the allowed shapes");
        }
    }

    match value {
        Value::String(s) => check_string(schema, s, path, out),
        Value::Number(n) => {
            if let Some(x) = n.as_f64() {
                if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
                    if x < min {
                        push(out, path, format!("{x} is below the minimum {min}"));
                    }
                }
                if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
                    if x > max {
                        push(out, path, format!("{x} is above the maximum {max}"));
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
                if (items.len() as u64) < min {
                    push(out, path, format!("needs at least {min} items"));
                }
            }
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64) {
                if (items.len() as u64) > max {
                    push(out, path, format!("allows at most {max} items"));
                }
            }
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(item_schema, item, &format!("{path}/{i}"), out);
                }
            }
        }
        Value::Object(map) => check_object(schema, map, path, out),
        Value::Null | Value::Bool(_) => {}
    }
}

fn check_string(schema: &Map<String, Value>, s: &str, path: &str, out: &mut Vec<SchemaViolation>) {
    let len = s.chars().count() as u64;
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64) {
        if len < min {
            push(out, path, format!("must be at least {min} characters"));
        }
    }
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
        if len > max {
            push(
                out,
                path,
                format!("must be at most {max} characters (got {len})"),
            );
        }
    }
    match schema.get("format").and_then(Value::as_str) {
        Some("uri") if !looks_like_uri(s) => push(out, path, "must be an absolute URI"),
        Some("date-time") if !looks_like_date_time(s) => {
            push(out, path, "must be an RFC 3339 date-time")
        }
        _ => {}
    }
}

fn check_object(
    schema: &Map<String, Value>,
    map: &Map<String, Value>,
    path: &str,
    out: &mut Vec<SchemaViolation>,
) {
    if let Some(Value::Array(required)) = schema.get("required") {
        for key in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(key) {
                push(out, path, format!("missing required field `{key}`"));
            }
        }
    }
    let props = schema.get("properties").and_then(Value::as_object);
    for (key, val) in map {
        let child = format!("{path}/{key}");
        match props.and_then(|p| p.get(key)) {
            Some(prop_schema) => check(prop_schema, val, &child, out),
            None => match schema.get("additionalProperties") {
                Some(Value::Bool(false)) => push(out, path, format!("unexpected field `{key}`")),
                Some(extra @ Value::Object(_)) => check(extra, val, &child, out),
                _ => {}
            },
        }
    }
}

/// Loose absolute-URI check: a scheme, a colon, something after it, no spaces.
pub fn looks_like_uri(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    let scheme_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    scheme_ok && !rest.is_empty() && !s.chars().any(char::is_whitespace)
}

/// RFC 3339 date-time, as `time` parses it.
pub fn looks_like_date_time(s: &str) -> bool {
    time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn movie() -> Value {
        json!({
            "type": "object",
            "properties": {
                "title": {"type": "string", "minLength": 1, "maxLength": 10},
                "year": {"type": "integer", "minimum": 1870, "maximum": 2100},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                "kind": {"enum": ["a", "b"]},
                "url": {"type": "string", "format": "uri"},
                "due": {"type": "string", "format": "date-time"}
            },
            "required": ["title"],
            "additionalProperties": false
        })
    }

    #[test]
    fn accepts_a_valid_object() {
        let v = json!({"title": "Heat", "year": 1995, "tags": ["x"], "kind": "a",
            "url": "https://example.com/x", "due": "2025-01-08T10:00:00Z"});
        assert_eq!(validate(&movie(), &v), Ok(()));
    }

    #[test]
    fn reports_each_violation_with_its_path() {
        let v = json!({"year": 1500, "tags": ["x", "y", "z"], "kind": "c", "extra": 1,
            "url": "not a uri", "due": "tomorrow"});
        let errs = validate(&movie(), &v).err().unwrap_or_default();
        let text: Vec<String> = errs.iter().map(ToString::to_string).collect();
        let joined = text.join("\n");
        for needle in [
            "missing required field `title`",
            "/year: 1500 is below the minimum",
            "/tags: allows at most 2",
            "/kind: value \"c\" is not one of",
            "unexpected field `extra`",
            "/url: must be an absolute URI",
            "/due: must be an RFC 3339",
        ] {
            assert!(joined.contains(needle), "missing {needle:?} in {joined}");
        }
    }

    #[test]
    fn wrong_types_are_rejected_including_float_for_integer() {
        assert!(validate(&movie(), &json!({"title": 3})).is_err());
        assert!(validate(&movie(), &json!({"title": "x", "year": 1999.5})).is_err());
        assert!(validate(&movie(), &json!({"title": "x", "year": 1999.0})).is_ok());
        assert!(validate(&movie(), &json!([])).is_err());
    }

    #[test]
    fn max_length_counts_characters_not_bytes() {
        assert!(validate(&movie(), &json!({"title": "ççççççççç"})).is_ok());
        assert!(validate(&movie(), &json!({"title": "ççççççççççç"})).is_err());
    }

    #[test]
    fn any_of_and_const() {
        let s = json!({"anyOf": [{"const": 1}, {"type": "string"}]});
        assert!(validate(&s, &json!(1)).is_ok());
        assert!(validate(&s, &json!("x")).is_ok());
        assert!(validate(&s, &json!(2)).is_err());
    }
}
