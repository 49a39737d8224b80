//! Output validation (seed 003 §10.2): every model reply is checked for
//! length, format, other people's PII, unsafe markup and references to ids
//! that do not exist (hallucinated data). This module only reports; the
//! caller decides to truncate, retry or block.

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use crate::pii::{find_pii, PiiKind};
use crate::text::short_hash;

/// Default maximum reply length in characters (≈ 2 000 tokens).
pub const DEFAULT_MAX_CHARS: usize = 8000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExpectedFormat {
    Plain,
    JsonObject,
}

/// What a reply must respect.
pub struct OutputPolicy<'a> {
    pub max_chars: usize,
    pub format: ExpectedFormat,
    /// PII the reply may contain (the user's own, or what the user typed).
    pub allowed_pii: Vec<String>,
    /// Does this referenced id exist (in the ledger / library)?
    pub id_exists: &'a dyn Fn(&str) -> bool,
}

impl<'a> OutputPolicy<'a> {
    pub fn plain(id_exists: &'a dyn Fn(&str) -> bool) -> Self {
        Self {
            max_chars: DEFAULT_MAX_CHARS,
            format: ExpectedFormat::Plain,
            allowed_pii: Vec::new(),
            id_exists,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum OutputViolation {
    TooLong {
        chars: usize,
        max: usize,
    },
    NotJsonObject {
        error: String,
    },
    /// Someone else's PII; identified by a hash, never the value.
    ForeignPii {
        pii: PiiKind,
        hash: String,
    },
    UnknownReference {
        id: String,
    },
    UnsafeMarkup {
        detail: String,
    },
}

static REFERENCE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)#[a-z][a-z_]*-[a-z0-9_-]*\d[a-z0-9_-]*|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b").ok()
});
static MARKUP: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)<\s*(script|iframe|object|embed)\b|javascript\s*:|\bon[a-z]+\s*=\s*['\x22]")
        .ok()
});

fn pii_key(kind: PiiKind, value: &str) -> String {
    match kind {
        PiiKind::Email | PiiKind::Name => value.trim().to_lowercase(),
        // Phones are written with and without country/area codes: compare
        // the subscriber number.
        PiiKind::Phone => {
            let d: Vec<char> = value.chars().filter(char::is_ascii_digit).collect();
            d[d.len().saturating_sub(8)..].iter().collect()
        }
        _ => value.chars().filter(char::is_ascii_digit).collect(),
    }
}

/// Checks a reply against the policy; an empty list means it is fine.
pub fn validate_output(text: &str, policy: &OutputPolicy<'_>) -> Vec<OutputViolation> {
    let mut out = Vec::new();
    let chars = text.chars().count();
    if chars > policy.max_chars {
        out.push(OutputViolation::TooLong {
            chars,
            max: policy.max_chars,
        });
    }
    if policy.format == ExpectedFormat::JsonObject {
        match serde_json::from_str::<serde_json::Value>(text.trim()) {
            Ok(v) if v.is_object() => {}
            Ok(_) => out.push(OutputViolation::NotJsonObject {
                error: "not an object".into(),
            }),
            Err(e) => out.push(OutputViolation::NotJsonObject {
                error: e.to_string(),
            }),
        }
    }
    let allowed: Vec<String> = policy
        .allowed_pii
        .iter()
        .flat_map(|a| {
            let found = find_pii(a);
            if found.is_empty() {
                vec![a.trim().to_lowercase()]
            } else {
                found.into_iter().map(|(k, v)| pii_key(k, v)).collect()
            }
        })
        .collect();
    for (kind, value) in find_pii(text) {
        if !allowed.contains(&pii_key(kind, value)) {
            out.push(OutputViolation::ForeignPii {
                pii: kind,
                hash: short_hash(value),
            });
        }
    }
    if let Some(re) = REFERENCE.as_ref() {
        for m in re.find_iter(text) {
            let id = m.as_str().trim_start_matches('#');
            if !(policy.id_exists)(id) {
                out.push(OutputViolation::UnknownReference { id: id.to_owned() });
            }
        }
    }
    if let Some(re) = MARKUP.as_ref() {
        for m in re.find_iter(text) {
            out.push(OutputViolation::UnsafeMarkup {
                detail: m.as_str().to_owned(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(id: &str) -> bool {
        matches!(id, "note-123" | "0190a3b2-7c4d-7e8f-9a0b-1c2d3e4f5a6b")
    }

    #[test]
    fn a_clean_reply_passes() {
        let p = OutputPolicy::plain(&known);
        assert_eq!(validate_output("I saved it as #note-123.", &p), vec![]);
    }

    #[test]
    fn length_and_format_are_checked() {
        let mut p = OutputPolicy::plain(&known);
        p.max_chars = 5;
        assert_eq!(
            validate_output("çççççç", &p),
            vec![OutputViolation::TooLong { chars: 6, max: 5 }]
        );
        p.max_chars = 100;
        p.format = ExpectedFormat::JsonObject;
        assert!(validate_output(r#"{"a": 1}"#, &p).is_empty());
        assert!(matches!(
            validate_output("[1]", &p)[..],
            [OutputViolation::NotJsonObject { .. }]
        ));
        assert!(matches!(
            validate_output("{oops", &p)[..],
            [OutputViolation::NotJsonObject { .. }]
        ));
    }

    #[test]
    fn foreign_pii_is_flagged_without_its_value() {
        let mut p = OutputPolicy::plain(&known);
        p.allowed_pii = vec!["me@example.com".into(), "+55 11 98765-4321".into()];
        let v = validate_output(
            "Write to me@example.com or (11) 98765-4321, or to bob@corp.com.",
            &p,
        );
        assert_eq!(v.len(), 1, "{v:?}");
        let OutputViolation::ForeignPii { pii, hash } = &v[0] else {
            panic!("{v:?}")
        };
        assert_eq!(*pii, PiiKind::Email);
        assert_eq!(hash, &short_hash("bob@corp.com"));
    }

    #[test]
    fn unknown_references_and_markup_are_flagged() {
        let p = OutputPolicy::plain(&known);
        let v = validate_output(
            "See #note-999 and 0190a3b2-7c4d-7e8f-9a0b-1c2d3e4f5a6b and ffffffff-ffff-ffff-ffff-ffffffffffff <script>x</script>",
            &p,
        );
        assert_eq!(
            v,
            vec![
                OutputViolation::UnknownReference {
                    id: "note-999".into()
                },
                OutputViolation::UnknownReference {
                    id: "ffffffff-ffff-ffff-ffff-ffffffffffff".into()
                },
                OutputViolation::UnsafeMarkup {
                    detail: "<script".into()
                },
            ]
        );
        assert!(validate_output("Use C# or F#-style code, issue #42", &p).is_empty());
    }
}
