//! The tool registry: every tool the planner may call, with its argument
//! schema, category, confirmation rule, allowed roles, rate limit and
//! compensating tool. Tools are strong contracts: one tool per job, never a
//! generic "do anything" tool.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Who is asking for the tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The person at the keyboard, through a deterministic intent or the UI.
    Human,
    /// Ei, the built-in system persona with global visibility.
    Ei,
    /// An ordinary persona planning inside its conversation.
    Persona,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Human, Role::Ei, Role::Persona];
}

/// What a tool does to the world; drives confirmation and simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCategory {
    Read,
    Write,
    Destructive,
    External,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub args_schema: Value,
    pub category: ToolCategory,
    pub requires_confirmation: bool,
    pub allowed_roles: Vec<Role>,
    pub rate_limit_per_minute: u32,
    pub compensating_tool: Option<String>,
    /// 0.0–1.0; the office requires a simulation above 0.7.
    pub risk: f32,
    /// A built-in executor runs it now. False for affordances whose
    /// executor is not built yet (documents, the office's governance
    /// tools): they are never offered to a model.
    pub executable: bool,
}

/// Maximum characters in any free-text tool argument.
pub const MAX_TEXT: u64 = 4000;

fn obj(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn text(max: u64, description: &str) -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": max, "description": description})
}

fn year() -> Value {
    json!({"type": "integer", "minimum": 1870, "maximum": 2100, "description": "Release year"})
}

fn uri(description: &str) -> Value {
    json!({"type": "string", "format": "uri", "maxLength": 2048, "description": description})
}

fn id(description: &str) -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": 128, "description": description})
}

struct Def {
    name: &'static str,
    description: &'static str,
    schema: Value,
    category: ToolCategory,
    roles: &'static [Role],
    rate: u32,
    compensating: Option<&'static str>,
    risk: f32,
    executable: bool,
}

const ALL_ROLES: &[Role] = &[Role::Human, Role::Ei, Role::Persona];
/// Binding, signed acts (the office's `submit`): confirmed like destructive ones.
const BINDING: &[&str] = &["submit"];
const HUMAN_ONLY: &[Role] = &[Role::Human];

fn builtin_defs() -> Vec<Def> {
    use ToolCategory::*;
    let save_media = |what: &str| {
        obj(
            json!({
                "title": text(200, &format!("Title of the {what}")),
                "year": year(),
                "tmdb_id": {"type": "integer", "minimum": 1, "description": "Metadata provider id"},
                "notes": text(MAX_TEXT, "Free notes"),
            }),
            &["title"],
        )
    };
    let enrich_media = |what: &str| {
        obj(
            json!({"title": text(200, &format!("Title of the {what} to look up")), "year": year()}),
            &["title"],
        )
    };
    vec![
        Def {
            name: "save_note",
            executable: true,
            description: "Save a free-text note to memory.",
            schema: obj(json!({"content": text(MAX_TEXT, "The note")}), &["content"]),
            category: Write,
            roles: ALL_ROLES,
            rate: 30,
            compensating: Some("delete_memory"),
            risk: 0.2,
        },
        Def {
            name: "save_movie",
            executable: true,
            description: "Save a movie to the user's list.",
            schema: save_media("movie"),
            category: Write,
            roles: ALL_ROLES,
            rate: 30,
            compensating: Some("delete_memory"),
            risk: 0.2,
        },
        Def {
            name: "save_tv_show",
            executable: true,
            description: "Save a TV show to the user's list.",
            schema: save_media("TV show"),
            category: Write,
            roles: ALL_ROLES,
            rate: 30,
            compensating: Some("delete_memory"),
            risk: 0.2,
        },
        Def {
            name: "save_video",
            executable: true,
            description: "Save an online video by URL.",
            schema: obj(
                json!({"url": uri("Video URL"), "title": text(200, "Video title")}),
                &["url"],
            ),
            category: Write,
            roles: ALL_ROLES,
            rate: 30,
            compensating: Some("delete_memory"),
            risk: 0.2,
        },
        Def {
            name: "save_link",
            executable: true,
            description: "Save a web link with an optional description.",
            schema: obj(
                json!({"url": uri("Link URL"), "description": text(1000, "What it is")}),
                &["url"],
            ),
            category: Write,
            roles: ALL_ROLES,
            rate: 30,
            compensating: Some("delete_memory"),
            risk: 0.2,
        },
        Def {
            name: "enrich_movie",
            executable: true,
            description: "Look up movie metadata from the configured metadata provider.",
            schema: enrich_media("movie"),
            category: External,
            roles: ALL_ROLES,
            rate: 10,
            compensating: None,
            risk: 0.1,
        },
        Def {
            name: "enrich_tv_show",
            executable: true,
            description: "Look up TV show metadata from the configured metadata provider.",
            schema: enrich_media("TV show"),
            category: External,
            roles: ALL_ROLES,
            rate: 10,
            compensating: None,
            risk: 0.1,
        },
        Def {
            name: "enrich_video",
            executable: true,
            description: "Look up video metadata from the configured metadata provider.",
            schema: obj(json!({"url": uri("Video URL")}), &["url"]),
            category: External,
            roles: ALL_ROLES,
            rate: 10,
            compensating: None,
            risk: 0.1,
        },
        Def {
            name: "search_items",
            executable: true,
            description: "Search saved items; without a query, list everything.",
            schema: obj(
                json!({"query": text(500, "Search text"),
                "limit": {"type": "integer", "minimum": 1, "maximum": 100}}),
                &[],
            ),
            category: Read,
            roles: ALL_ROLES,
            rate: 60,
            compensating: None,
            risk: 0.0,
        },
        Def {
            name: "delete_memory",
            executable: true,
            description: "Delete one saved item by id.",
            schema: obj(
                json!({"item_id": id("Id of the item to delete")}),
                &["item_id"],
            ),
            category: Destructive,
            roles: ALL_ROLES,
            rate: 10,
            compensating: None,
            risk: 0.6,
        },
        Def {
            name: "delete_all_memories",
            executable: true,
            description: "Delete every memory. Only the human may ask for this.",
            schema: obj(json!({}), &[]),
            category: Destructive,
            roles: HUMAN_ONLY,
            rate: 2,
            compensating: None,
            risk: 0.95,
        },
        Def {
            name: "search_documents",
            executable: false,
            description: "Search imported documents; answers cite passages.",
            schema: obj(
                json!({"query": text(500, "Search text"),
                "limit": {"type": "integer", "minimum": 1, "maximum": 20}}),
                &["query"],
            ),
            category: Read,
            roles: ALL_ROLES,
            rate: 60,
            compensating: None,
            risk: 0.0,
        },
        Def {
            name: "remember",
            executable: true,
            description: "Remember a fact about the user.",
            schema: obj(
                json!({"fact": text(1000, "The fact"), "topic": text(100, "Topic")}),
                &["fact"],
            ),
            category: Write,
            roles: ALL_ROLES,
            rate: 30,
            compensating: Some("forget"),
            risk: 0.3,
        },
        Def {
            name: "forget",
            executable: true,
            description: "Erase a remembered item's content (the ledger keeps its hash).",
            schema: obj(
                json!({"item_id": id("Id of the item to forget")}),
                &["item_id"],
            ),
            category: Destructive,
            roles: ALL_ROLES,
            rate: 10,
            compensating: None,
            risk: 0.6,
        },
        Def {
            name: "bookmark",
            executable: true,
            description: "Bookmark a ledger event or message.",
            schema: obj(
                json!({"target_id": id("Event or message id"), "label": text(200, "Label")}),
                &["target_id"],
            ),
            category: Write,
            roles: ALL_ROLES,
            rate: 30,
            compensating: Some("delete_memory"),
            risk: 0.1,
        },
        Def {
            name: "set_reminder",
            executable: true,
            description: "Create an obligation with a deadline.",
            schema: obj(
                json!({"text": text(500, "What to remember"),
                "due": {"type": "string", "format": "date-time", "maxLength": 64, "description": "RFC 3339 deadline"}}),
                &["text", "due"],
            ),
            category: Write,
            roles: ALL_ROLES,
            rate: 20,
            compensating: Some("delete_memory"),
            risk: 0.2,
        },
        // ----- office affordances (seed 000; executors in app/src/tools_exec.rs) -----
        Def {
            name: "submit",
            executable: true,
            description: "Submit a signed intent (commit, fulfil or withdraw an obligation); returns a receipt or an ErrorToken.",
            schema: obj(
                json!({"intent": {"type": "string", "enum": ["commit", "fulfil", "withdraw"], "maxLength": 16, "description": "Intent kind"},
                "payload": {"type": "object", "description": "commit: {text, due}; fulfil: {obligation_id}; withdraw: {obligation_id, reason}",
                    "properties": {"text": text(500, "What you commit to"),
                        "due": {"type": "string", "format": "date-time", "maxLength": 64, "description": "RFC 3339 deadline"},
                        "obligation_id": id("Id of an open obligation"),
                        "reason": text(500, "Why")},
                    "additionalProperties": false}}),
                &["intent", "payload"],
            ),
            category: Write,
            roles: &[Role::Ei, Role::Persona],
            rate: 20,
            compensating: None,
            risk: 0.5,
        },
        Def {
            name: "query",
            executable: true,
            description: "Read-only query of your own ledger facts: obligations, bookmarks, handovers, events, items, constitution or session.",
            schema: obj(
                json!({"about": {"type": "string", "enum": ["obligations", "bookmarks", "handovers", "events", "items", "constitution", "session"], "maxLength": 16},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50}}),
                &["about"],
            ),
            category: Read,
            roles: ALL_ROLES,
            rate: 60,
            compensating: None,
            risk: 0.0,
        },
        Def {
            name: "verify",
            executable: true,
            description: "Verify the ledger's hash chain and every signature.",
            schema: obj(json!({}), &[]),
            category: Read,
            roles: ALL_ROLES,
            rate: 5,
            compensating: None,
            risk: 0.0,
        },
        Def {
            name: "sign",
            executable: true,
            description: "Sign a statement with your key (recorded as a signed event).",
            schema: obj(
                json!({"statement": text(2000, "Text to sign")}),
                &["statement"],
            ),
            category: Write,
            roles: &[Role::Ei, Role::Persona],
            rate: 10,
            compensating: None,
            risk: 0.6,
        },
        Def {
            name: "log_reasoning",
            executable: true,
            description: "Record the reasoning behind a decision.",
            schema: obj(
                json!({"reasoning": text(500, "Reasoning")}),
                &["reasoning"],
            ),
            category: Write,
            roles: &[Role::Ei, Role::Persona],
            rate: 30,
            compensating: None,
            risk: 0.0,
        },
        Def {
            name: "write_note",
            executable: true,
            description: "Write a working note for a later session.",
            schema: obj(json!({"content": text(500, "The note")}), &["content"]),
            category: Write,
            roles: &[Role::Ei, Role::Persona],
            rate: 30,
            compensating: None,
            risk: 0.1,
        },
        Def {
            name: "request_clarification",
            executable: true,
            description: "Ask the user a clarifying question.",
            schema: obj(
                json!({"question": text(500, "The question")}),
                &["question"],
            ),
            category: Read,
            roles: &[Role::Ei, Role::Persona],
            rate: 30,
            compensating: None,
            risk: 0.0,
        },
        Def {
            name: "simulate",
            executable: true,
            description: "Simulate a tool call against a copy of the state: what would change, nothing committed.",
            schema: obj(
                json!({"tool": text(64, "Tool to simulate"),
                "args": {"type": "object", "description": "Arguments for the tool"}}),
                &["tool", "args"],
            ),
            category: Read,
            roles: &[Role::Ei, Role::Persona],
            rate: 10,
            compensating: None,
            risk: 0.0,
        },
        // ----- end office affordances -----
    ]
}

/// The catalogue of tools, in a stable order.
#[derive(Debug, Clone)]
pub struct ToolRegistry {
    tools: Vec<ToolSpec>,
}

impl ToolRegistry {
    /// The registry with every built-in tool.
    pub fn builtin() -> Self {
        let tools = builtin_defs()
            .into_iter()
            .map(|d| ToolSpec {
                name: d.name.to_owned(),
                description: d.description.to_owned(),
                args_schema: d.schema,
                requires_confirmation: d.category == ToolCategory::Destructive || BINDING.contains(&d.name),
                category: d.category,
                allowed_roles: d.roles.to_vec(),
                rate_limit_per_minute: d.rate,
                compensating_tool: d.compensating.map(str::to_owned),
                risk: d.risk,
                executable: d.executable,
            })
            .collect();
        Self { tools }
    }

    /// A registry of exactly these tools (for tests and plug-ins).
    pub fn from_specs(tools: Vec<ToolSpec>) -> Self {
        Self { tools }
    }

    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|t| t.name == name)
    }

    pub fn all(&self) -> &[ToolSpec] {
        &self.tools
    }

    /// The tools offered to `role` now: executable, allowed for the role
    /// and enabled in the user's settings (the feature-flag filter of seed
    /// 003 §3.1).
    pub fn offered(&self, role: Role, settings_enabled: &dyn Fn(&str) -> bool) -> Vec<&ToolSpec> {
        self.tools
            .iter()
            .filter(|t| t.executable && t.allowed_roles.contains(&role) && settings_enabled(&t.name))
            .collect()
    }

    /// Function-calling format (`{"type":"function","function":{…}}`).
    pub fn to_openai_tools(tools: &[&ToolSpec]) -> Value {
        Value::Array(
            tools
                .iter()
                .map(|t| {
                    json!({
                        "type": "function",
                        "function": {
                            "name": t.name,
                            "description": t.description,
                            "parameters": t.args_schema,
                        }
                    })
                })
                .collect(),
        )
    }

    /// What `ledgermind tools --json` prints: the tools as offered to the model.
    pub fn to_json(tools: &[&ToolSpec]) -> Value {
        Value::Array(
            tools
                .iter()
                .map(|t| {
                    json!({
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.args_schema,
                        "category": t.category,
                        "requires_confirmation": t.requires_confirmation,
                        "allowed_roles": t.allowed_roles,
                        "rate_limit_per_minute": t.rate_limit_per_minute,
                        "compensating_tool": t.compensating_tool,
                    })
                })
                .collect(),
        )
    }
}

impl Default for ToolRegistry {
    fn default() -> Self {
        Self::builtin()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::validate;

    const EXPECTED: [&str; 24] = [
        "save_note",
        "save_movie",
        "save_tv_show",
        "save_video",
        "save_link",
        "enrich_movie",
        "enrich_tv_show",
        "enrich_video",
        "search_items",
        "delete_memory",
        "delete_all_memories",
        "search_documents",
        "remember",
        "forget",
        "bookmark",
        "set_reminder",
        "submit",
        "query",
        "verify",
        "sign",
        "log_reasoning",
        "write_note",
        "request_clarification",
        "simulate",
    ];

    #[test]
    fn builtin_registry_has_every_tool_once() {
        let reg = ToolRegistry::builtin();
        let names: Vec<&str> = reg.all().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, EXPECTED);
    }

    #[test]
    fn destructive_tools_require_confirmation_and_others_do_not() {
        for t in ToolRegistry::builtin().all() {
            assert_eq!(
                t.requires_confirmation,
                t.category == ToolCategory::Destructive || t.name == "submit",
                "{}",
                t.name
            );
        }
    }

    #[test]
    fn every_schema_is_a_closed_object_and_compensators_exist() {
        let reg = ToolRegistry::builtin();
        for t in reg.all() {
            assert_eq!(t.args_schema["type"], "object", "{}", t.name);
            assert_eq!(t.args_schema["additionalProperties"], false, "{}", t.name);
            if let Some(c) = &t.compensating_tool {
                assert!(
                    reg.get(c).is_some(),
                    "{} compensates with unknown {c}",
                    t.name
                );
            }
            assert!((0.0..=1.0).contains(&t.risk));
        }
    }

    #[test]
    fn save_movie_schema_matches_the_contract() {
        let reg = ToolRegistry::builtin();
        let s = &reg.get("save_movie").unwrap().args_schema;
        assert!(validate(s, &json!({"title": "Inception", "year": 2010})).is_ok());
        assert!(validate(s, &json!({"year": 2010})).is_err());
        assert!(validate(s, &json!({"title": "x".repeat(201)})).is_err());
        assert!(validate(s, &json!({"title": "x", "year": 1869})).is_err());
        assert!(validate(s, &json!({"title": "x", "year": "2010"})).is_err());
        let r = &reg.get("set_reminder").unwrap().args_schema;
        assert!(validate(
            r,
            &json!({"text": "pay rent", "due": "2025-02-01T09:00:00-03:00"})
        )
        .is_ok());
        assert!(validate(r, &json!({"text": "pay rent", "due": "next friday"})).is_err());
    }

    #[test]
    fn offered_filters_by_role_and_settings() {
        let reg = ToolRegistry::builtin();
        let persona = reg.offered(Role::Persona, &|_| true);
        assert!(persona.iter().all(|t| t.name != "delete_all_memories"));
        assert!(persona.iter().any(|t| t.name == "save_movie"));
        // Tools without an executor yet are never offered.
        assert!(reg.get("search_documents").is_some_and(|t| !t.executable));
        assert!(persona.iter().all(|t| t.executable && t.name != "search_documents"));
        assert!(persona.iter().any(|t| t.name == "sign"));
        let human = reg.offered(Role::Human, &|name| !name.starts_with("enrich_"));
        assert!(human.iter().any(|t| t.name == "delete_all_memories"));
        assert!(human
            .iter()
            .all(|t| !t.name.starts_with("enrich_") && t.name != "sign"));
        assert_eq!(reg.all().iter().filter(|t| t.executable).count(), 23);
    }

    #[test]
    fn json_exports_have_the_documented_shape() {
        let reg = ToolRegistry::builtin();
        let offered = reg.offered(Role::Persona, &|_| true);
        let cli = ToolRegistry::to_json(&offered);
        let first = &cli[0];
        for key in [
            "name",
            "description",
            "parameters",
            "category",
            "requires_confirmation",
            "allowed_roles",
            "rate_limit_per_minute",
            "compensating_tool",
        ] {
            assert!(first.get(key).is_some(), "missing {key}");
        }
        assert_eq!(first["category"], "write");
        assert_eq!(first["allowed_roles"][0], "human");
        let oa = ToolRegistry::to_openai_tools(&offered);
        assert_eq!(oa[0]["type"], "function");
        assert_eq!(oa[0]["function"]["name"], "save_note");
        assert_eq!(oa[0]["function"]["parameters"]["type"], "object");
    }
}
