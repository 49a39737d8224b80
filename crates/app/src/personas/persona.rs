//! Persona management: creating a persona from a short
//! description that the local model fills in (traits, topics, a longer
//! description — the human's own words are kept verbatim as the short
//! description), editing, pausing until a time, the archived list, and the
//! chat state the human sets per message (context status, recall of a
//! message whose reply has not started).
//!
//! The fill is queued work at normal priority, constrained by
//! [`fill_schema`]; when the model fails for good the persona keeps the
//! human's words and its profile is marked `fallback` (nothing invented).

use std::sync::Arc;

use ledger::{ContextStatus, Draft, EventBody, PersonaGroups, PersonaTopic, QueueItem, HUMAN_ENTITY};
use providers::{ChatMessage, CompletionRequest, Role};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::context::jobs::{Failure, MAX_ATTEMPTS, PRIORITY_HIGH, PRIORITY_LOW, PRIORITY_NORMAL, REPLY_KIND};
use super::Personas;
use crate::error::AppError;
use crate::models::ModelSpec;
use crate::events::AppEvent;
use super::rules::parse_json_object;
use super::views::PersonaView;
use crate::models::DEFAULT_LOCAL_MODEL;
use crate::Result;

pub(crate) const FILL_KIND: &str = "persona_fill";
const FILL_MAX_TOKENS: u32 = 360;
const MAX_TRAITS: usize = 8;
const MAX_TOPICS: usize = 8;
const MAX_ITEM: usize = 80;
const MAX_LONG: usize = 4_000;
const MAX_NAME: usize = 80;
const MAX_SHORT: usize = 4_000;
/// A week of minutes / a year of hours: larger values are typing mistakes.
const MAX_HEARTBEAT_MINUTES: u32 = 7 * 24 * 60;
const MAX_CONTEXT_WINDOW_HOURS: u32 = 24 * 365;

/// Everything the persona editor shows.
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct PersonaProfileView {
    pub id: String,
    pub name: String,
    /// The human's own words, verbatim.
    pub short_description: String,
    pub long_description: String,
    pub traits: Vec<String>,
    pub topics: Vec<PersonaTopic>,
    /// none | pending (the model is filling it) | llm | human | fallback
    pub profile_source: String,
    /// RFC 3339 UTC; null when not paused.
    pub paused_until: Option<String>,
    pub heartbeat_minutes: u32,
    pub context_window_hours: u32,
    pub group_primary: String,
    pub groups_visible: Vec<String>,
    pub sees_all: bool,
    pub is_system: bool,
    pub archived: bool,
    /// The latest conversation summary (every 10 messages), read-only.
    pub summary: Option<String>,
    /// llm | fallback (written without a model)
    pub summary_source: Option<String>,
}

/// What the editor sends back. Every field is the new whole value.
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct PersonaEdit {
    pub name: String,
    pub short_description: String,
    pub long_description: String,
    pub traits: Vec<String>,
    pub topics: Vec<PersonaTopic>,
    pub heartbeat_minutes: u32,
    pub context_window_hours: u32,
    pub group_primary: String,
    pub groups_visible: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct FillJob {
    persona_id: String,
}

/// What the model is asked to produce (the shape of [`fill_schema`]).
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
pub(crate) struct Fill {
    #[serde(default)]
    long_description: String,
    #[serde(default)]
    traits: Vec<String>,
    #[serde(default)]
    topics: Vec<FillTopic>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
struct FillTopic {
    name: String,
    #[serde(default)]
    perspective: String,
}

/// Character words a trait is chosen from. A small local model asked for
/// free-text traits wrote none, or its own name, or field names; held to a
/// list by the grammar it picks words that are traits. (The human edits
/// them freely in the editor.)
const TRAIT_WORDS: &[&str] = &[
    "adventurous", "blunt", "calm", "careful", "caring", "cheerful", "creative", "curious", "dreamy", "easygoing",
    "energetic", "friendly", "funny", "generous", "gentle", "grumpy", "hardworking", "honest", "loyal", "nostalgic",
    "optimistic", "organised", "passionate", "patient", "playful", "practical", "proud", "quiet", "romantic",
    "sceptical", "serious", "shy", "stubborn", "storyteller", "talkative", "thoughtful", "warm", "wise", "witty",
];

/// Words that separate the subjects in a description ("a baker from Beirut
/// who loves sourdough" → "baker", "Beirut", "sourdough"): articles,
/// pronouns, prepositions, conjunctions and the verbs people use to say
/// what someone likes or does.
const TOPIC_BREAKS: &[&str] = &[
    "a", "an", "the", "and", "or", "but", "who", "that", "which", "with", "from", "by", "of", "in", "on", "at", "to",
    "for", "about", "into", "as", "is", "was", "are", "has", "had", "have", "his", "her", "their", "its", "my", "your",
    "he", "she", "they", "very", "really", "loves", "love", "likes", "like", "enjoys", "enjoy", "adores", "hates",
    "plays", "grows", "collects", "makes", "fixes", "reads", "writes", "cooks", "bakes", "paints", "teaches", "studies",
    "works", "lives", "lived", "travels", "watches", "builds", "knits", "sings", "dances", "runs", "misses", "always",
    "never", "often", "also", "all", "long-time",
];

/// The subjects a description names, in its own words (at most four words
/// each, without the persona's name): what a topic is chosen from.
fn topic_candidates(description: &str, name: &str) -> Vec<String> {
    let name_words: Vec<String> = name.to_lowercase().split_whitespace().map(str::to_owned).collect();
    let mut out: Vec<String> = Vec::new();
    let mut phrase: Vec<&str> = Vec::new();
    let flush = |phrase: &mut Vec<&str>, out: &mut Vec<String>| {
        let text = phrase.join(" ");
        let lower = text.to_lowercase();
        let named = phrase.iter().any(|w| name_words.contains(&w.to_lowercase()));
        if (1..=4).contains(&phrase.len()) && !named && !out.iter().any(|o| o.to_lowercase() == lower) {
            out.push(text);
        }
        phrase.clear();
    };
    for token in description.split_inclusive(|c: char| c.is_whitespace() || ",.;:!?()\"".contains(c)) {
        let word = token.trim_matches(|c: char| !c.is_alphanumeric() && c != '-' && c != '\'');
        let ends_clause = token.trim_end().ends_with(|c: char| ",.;:!?()\"".contains(c));
        if word.is_empty() || TOPIC_BREAKS.contains(&word.to_lowercase().as_str()) {
            flush(&mut phrase, &mut out);
        } else {
            phrase.push(word);
        }
        if ends_clause {
            flush(&mut phrase, &mut out);
        }
    }
    flush(&mut phrase, &mut out);
    out.truncate(12);
    out
}

/// Bounded so the grammar always closes within [`FILL_MAX_TOKENS`]. Traits
/// come from [`TRAIT_WORDS`], topics from the subjects the description
/// names (free text when it names none).
pub(crate) fn fill_schema(name: &str, description: &str) -> serde_json::Value {
    let text = |n: u32| serde_json::json!({ "type": "string", "maxLength": n });
    let subjects = topic_candidates(description, name);
    let topic_name = if subjects.is_empty() { text(30) } else { serde_json::json!({ "enum": subjects }) };
    serde_json::json!({
        "type": "object",
        "properties": {
            "long_description": text(300),
            "traits": { "type": "array", "items": { "enum": TRAIT_WORDS }, "minItems": 2, "maxItems": 4 },
            "topics": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": { "name": topic_name, "perspective": text(80) },
                    "required": ["name", "perspective"]
                },
                "minItems": 1,
                "maxItems": 3
            }
        },
        "required": ["long_description", "traits", "topics"]
    })
}

/// The worked example shown to the model (one exchange, another persona).
const FILL_EXAMPLE_ASK: (&str, &str) = ("Tomas", "a retired sailor who fixes old radios");
const FILL_EXAMPLE: &str = r#"{"long_description":"Tomas spent thirty years at sea and now brings old radios back to life in his small workshop. He is patient and loves telling stories from his voyages.","traits":["patient","storyteller","practical"],"topics":[{"name":"vintage radios","perspective":"every old set deserves a second life"},{"name":"life at sea","perspective":"the ocean taught him patience"}]}"#;

fn fill_ask(name: &str, description: &str) -> String {
    format!(
        "Name: {name}\nDescription: \"{description}\"\n\
         Write long_description (two sentences about {name}), traits (two to four single words for \
         {name}'s character) and topics (subjects {name} likes to talk about, each with {name}'s view of it). \
         A topic is a subject such as a hobby, a craft or a place, never a person's name."
    )
}

/// Few-shot: one worked example, then the persona to fill.
fn fill_prompt(name: &str, description: &str) -> Vec<ChatMessage> {
    vec![
        ChatMessage::new(
            Role::System,
            "You design a character for a chat companion app from the user's short description. \
             Keep to what the description says and fill in only what fits it. Answer in JSON."
                .to_owned(),
        ),
        ChatMessage::new(Role::User, fill_ask(FILL_EXAMPLE_ASK.0, FILL_EXAMPLE_ASK.1)),
        ChatMessage::new(Role::Assistant, FILL_EXAMPLE.to_owned()),
        ChatMessage::new(Role::User, fill_ask(name, description)),
    ]
}

/// Whether a trait or topic name from the model is junk for persona `name`
/// described as `description`: the persona's own name (or a part of it),
/// a placeholder or field name, no letters, a sentence rather than a few
/// words, or one of the worked example's topics (specific to Tomas) without
/// the description saying so. Traits are common words: the example's
/// ("patient") may well fit.
fn junk_topic(item: &str, name: &str, description: &str) -> bool {
    let lower = item.trim().to_lowercase();
    let example_topics: Vec<String> = serde_json::from_str::<Fill>(FILL_EXAMPLE)
        .map(|f| f.topics.into_iter().map(|t| t.name.to_lowercase()).collect())
        .unwrap_or_default();
    junk_item(item, name, 5) || (example_topics.contains(&lower) && !description.to_lowercase().contains(&lower))
}

/// A trait said as a sentence about the persona ("Noor is kind") without
/// the name and its verb ("kind").
fn without_name(item: &str, name: &str) -> String {
    let names: Vec<String> = name.to_lowercase().split_whitespace().map(str::to_owned).collect();
    let words: Vec<&str> = item.split_whitespace().collect();
    let starts_with_name = words.first().is_some_and(|w| names.contains(&w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase()));
    if !starts_with_name {
        return item.to_owned();
    }
    words
        .iter()
        .skip_while(|w| names.contains(&w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase()))
        .skip_while(|w| ["is", "was", "has", "a", "an", "very", "'s"].contains(&w.to_lowercase().as_str()))
        .copied()
        .collect::<Vec<_>>()
        .join(" ")
}

/// See [`junk_topic`]; for traits and topics alike.
fn junk_item(item: &str, name: &str, max_words: usize) -> bool {
    let lower = item.to_lowercase();
    let words: Vec<&str> = lower.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let name_words: Vec<String> =
        name.to_lowercase().split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_owned).collect();
    let placeholders = ["name", "description", "long_description", "trait", "traits", "topic", "topics", "perspective", "string", "none", "n/a"];
    words.is_empty()
        || words.len() > max_words
        || words.iter().any(|w| name_words.iter().any(|n| n == w))
        || placeholders.contains(&lower.trim())
}

/// Parses the model's fill, accepting the object wrapped in prose or a
/// code fence; anything else is `LLM_INVALID_JSON`.
pub(crate) fn parse_fill(text: &str) -> std::result::Result<Fill, AppError> {
    parse_json_object(text, "persona fill")
}

fn clean(s: &str, max: usize) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(max).collect()
}

/// Trimmed, non-empty, without case-insensitive duplicates, at most `max`.
fn clean_list(items: &[String], max: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in items {
        let c = clean(item, MAX_ITEM);
        if !c.is_empty() && !out.iter().any(|o| o.to_lowercase() == c.to_lowercase()) {
            out.push(c);
        }
    }
    out.truncate(max);
    out
}

fn clean_topics(topics: &[PersonaTopic]) -> Vec<PersonaTopic> {
    let mut out: Vec<PersonaTopic> = Vec::new();
    for t in topics {
        let name = clean(&t.name, MAX_ITEM);
        if name.is_empty() || out.iter().any(|o| o.name.to_lowercase() == name.to_lowercase()) {
            continue;
        }
        out.push(PersonaTopic {
            name,
            perspective: clean(&t.perspective, 200),
            approach: clean(&t.approach, 200),
            personal_stake: clean(&t.personal_stake, 200),
            sentiment: t.sentiment.clamp(-1.0, 1.0),
            exposure_current: t.exposure_current.clamp(0.0, 1.0),
            exposure_desired: t.exposure_desired.clamp(0.0, 1.0),
        });
    }
    out.truncate(MAX_TOPICS);
    out
}

/// The model's fill for persona `name`, cleaned: junk traits and topics
/// dropped (see [`junk_item`]), the rest bounded and de-duplicated.
fn fill_profile(fill: &Fill, name: &str, description: &str) -> (String, Vec<String>, Vec<PersonaTopic>) {
    let traits: Vec<String> =
        fill.traits.iter().map(|t| without_name(t, name)).filter(|t| !junk_item(t, name, 3)).collect();
    let topics: Vec<PersonaTopic> = fill
        .topics
        .iter()
        .filter(|t| !junk_topic(&t.name, name, description))
        .map(|t| PersonaTopic {
            name: t.name.clone(),
            perspective: t.perspective.clone(),
            approach: String::new(),
            personal_stake: String::new(),
            sentiment: 0.5,
            exposure_current: 0.0,
            exposure_desired: 0.5,
        })
        .collect();
    (clean(&fill.long_description, MAX_LONG), clean_list(&traits, MAX_TRAITS), clean_topics(&topics))
}

fn parse_until(until: &str) -> Result<time::OffsetDateTime> {
    time::OffsetDateTime::parse(until.trim(), &time::format_description::well_known::Rfc3339)
        .map_err(|_| AppError::invalid(format!("\"{until}\" is not a date and time (RFC 3339, e.g. 2026-01-31T18:00:00Z)")))
}

fn rfc3339(t: time::OffsetDateTime) -> String {
    t.to_offset(time::UtcOffset::UTC)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

impl Personas {
    pub async fn list_personas(&self) -> Result<Vec<PersonaView>> {
        Ok(self.ctx.ledger.personas(false).await?.into_iter().map(PersonaView::from).collect())
    }

    pub async fn persona(&self, id_or_name: &str) -> Result<PersonaView> {
        Ok(self.ctx.ledger.find_persona(id_or_name).await?.into())
    }

    /// Creates a persona with the human's words only (no model fill; see
    /// `create_persona_described`).
    pub async fn create_persona(&self, name: &str, description: &str) -> Result<PersonaView> {
        let ledger = &self.ctx.ledger;
        let name = name.trim();
        if name.is_empty() || name.chars().count() > MAX_NAME {
            return Err(AppError::invalid(format!("a persona needs a name of 1 to {MAX_NAME} characters")));
        }
        if description.chars().count() > MAX_SHORT {
            return Err(AppError::invalid(format!("the description is longer than {MAX_SHORT} characters")));
        }
        if ledger.find_persona(name).await.is_ok() {
            return Err(ledger::LedgerError::PersonaExists(name.to_owned()).into());
        }
        let id = uuid::Uuid::now_v7().to_string();
        let public_key = ledger.create_key(&id)?;
        let model = ledger
            .persona(ledger::EI_PERSONA_ID)
            .await
            .map(|ei| ei.model)
            .unwrap_or_else(|_| ModelSpec::local(DEFAULT_LOCAL_MODEL).to_string());
        let signed_by_human = |body| Draft { entity_id: id.clone(), signer: HUMAN_ENTITY.into(), body };
        ledger
            .append_drafts(vec![
                signed_by_human(EventBody::EntityKeyRegistered {
                    entity_id: id.clone(),
                    entity_kind: "persona".into(),
                    public_key,
                }),
                signed_by_human(EventBody::PersonaCreated {
                    persona_id: id.clone(),
                    name: name.to_owned(),
                    short_description: description.trim().to_owned(),
                    long_description: String::new(),
                    model,
                    is_system: false,
                }),
            ])
            .await?;
        let view: PersonaView = ledger.persona(&id).await?.into();
        self.ctx.emit(AppEvent::PersonaChanged { persona: view.clone() });
        Ok(view)
    }

    /// Makes an installed model the one replies use: the profile's default,
    /// Ei's model, and the model of every persona that was on Ei's model
    /// (a persona given a model of its own keeps it). Answers the personas
    /// changed.
    pub async fn use_model(&self, models: &crate::models::Models, id: &str) -> Result<Vec<PersonaView>> {
        let spec = models.choose_default_model(id).await?;
        let ledger = &self.ctx.ledger;
        let before = ledger.persona(ledger::EI_PERSONA_ID).await?.model;
        let mut changed = Vec::new();
        for p in ledger.personas(false).await? {
            if (p.id == ledger::EI_PERSONA_ID || p.model == before) && p.model != spec {
                changed.push(self.set_persona_model(&p.id, &spec).await?);
            }
        }
        Ok(changed)
    }

    pub async fn set_persona_model(&self, persona: &str, model: &str) -> Result<PersonaView> {
        let ledger = &self.ctx.ledger;
        let spec = ModelSpec::parse(model)?;
        if spec.is_local() {
            let path = self.ctx.data_dir().models().join(format!("{}.gguf", spec.model));
            if !path.exists() {
                return Err(AppError::new("MODEL_NOT_FOUND", format!("no local model named {}", spec.model)));
            }
        } else {
            ledger.account(&spec.account).await?;
        }
        let p = ledger.find_persona(persona).await?;
        ledger
            .append(
                HUMAN_ENTITY,
                EventBody::PersonaUpdated {
                    persona_id: p.id.clone(),
                    name: None,
                    short_description: None,
                    long_description: None,
                    model: Some(spec.to_string()),
                },
            )
            .await?;
        let view: PersonaView = ledger.persona(&p.id).await?.into();
        self.ctx.emit(AppEvent::PersonaChanged { persona: view.clone() });
        Ok(view)
    }
}

impl Personas {
    /// Creates a persona from a name and the human's short description (kept
    /// verbatim) and, when there is a description, queues the model's fill
    /// of its traits, topics and longer description.
    pub async fn create_persona_described(&self, name: &str, description: &str) -> Result<PersonaView> {
        let view = self.create_persona(name, description).await?;
        if description.trim().is_empty() {
            return Ok(view);
        }
        let body = serde_json::to_value(FillJob { persona_id: view.id.clone() }).map_err(|e| AppError::invalid(e.to_string()))?;
        self.ctx.ledger
            .append(
                HUMAN_ENTITY,
                EventBody::PersonaProfileSet {
                    persona_id: view.id.clone(),
                    traits: Vec::new(),
                    topics: Vec::new(),
                    source: "pending".into(),
                },
            )
            .await?;
        self.ctx.ledger.enqueue(FILL_KIND, PRIORITY_NORMAL, Some(&view.id), &body).await?;
        self.ctx.wake.notify_one();
        self.ctx.emit_queue().await;
        Ok(view)
    }

    pub async fn persona_profile(&self, persona: &str) -> Result<PersonaProfileView> {
        let p = self.ctx.ledger.find_persona(persona).await?;
        let profile = self.ctx.ledger.persona_profile(&p.id).await?;
        let groups = self.ctx.ledger.persona_groups(&p.id).await?;
        let summary = self.ctx.ledger.summary(&p.id).await?;
        Ok(PersonaProfileView {
            summary_source: summary.as_ref().map(|s| s.source.clone()),
            summary: summary.map(|s| s.text),
            sees_all: p.is_system,
            id: p.id,
            name: p.name,
            short_description: p.short_description,
            long_description: p.long_description,
            traits: profile.traits,
            topics: profile.topics.clone(),
            profile_source: profile.profile_source,
            paused_until: profile.paused_until,
            heartbeat_minutes: profile.heartbeat_minutes,
            context_window_hours: profile.context_window_hours,
            group_primary: groups.group_primary,
            groups_visible: groups.groups_visible,
            is_system: p.is_system,
            archived: p.archived,
        })
    }

    /// Saves the editor's values in one atomic append (only what changed).
    pub async fn update_persona(&self, persona: &str, edit: PersonaEdit) -> Result<PersonaProfileView> {
        let p = self.ctx.ledger.find_persona(persona).await?;
        let before = self.persona_profile(&p.id).await?;
        let name = edit.name.trim();
        if name.is_empty() || name.chars().count() > MAX_NAME {
            return Err(AppError::invalid(format!("a persona needs a name of 1 to {MAX_NAME} characters")));
        }
        if edit.short_description.chars().count() > MAX_SHORT || edit.long_description.chars().count() > MAX_LONG {
            return Err(AppError::invalid(format!("a description is longer than {MAX_LONG} characters")));
        }
        if edit.heartbeat_minutes > MAX_HEARTBEAT_MINUTES {
            return Err(AppError::invalid(format!("the heartbeat delay is at most {MAX_HEARTBEAT_MINUTES} minutes (0 = never)")));
        }
        if edit.context_window_hours > MAX_CONTEXT_WINDOW_HOURS {
            return Err(AppError::invalid(format!("the context window is at most {MAX_CONTEXT_WINDOW_HOURS} hours (0 = no limit)")));
        }
        if name != p.name {
            if let Ok(other) = self.ctx.ledger.find_persona(name).await {
                if other.id != p.id {
                    return Err(ledger::LedgerError::PersonaExists(name.to_owned()).into());
                }
            }
        }
        let short = edit.short_description.trim().to_owned();
        let long = edit.long_description.trim().to_owned();
        let traits = clean_list(&edit.traits, MAX_TRAITS);
        let topics = clean_topics(&edit.topics);
        let human = |body| Draft { entity_id: p.id.clone(), signer: HUMAN_ENTITY.into(), body };
        let mut drafts = Vec::new();
        if name != before.name || short != before.short_description || long != before.long_description {
            drafts.push(human(EventBody::PersonaUpdated {
                persona_id: p.id.clone(),
                name: (name != before.name).then(|| name.to_owned()),
                short_description: (short != before.short_description).then(|| short.clone()),
                long_description: (long != before.long_description).then(|| long.clone()),
                model: None,
            }));
        }
        let before_topics = clean_topics(&before.topics);
        if traits != before.traits || topics != before_topics {
            drafts.push(human(EventBody::PersonaProfileSet {
                persona_id: p.id.clone(),
                traits,
                topics,
                source: "human".into(),
            }));
        }
        if edit.heartbeat_minutes != before.heartbeat_minutes || edit.context_window_hours != before.context_window_hours {
            drafts.push(human(EventBody::PersonaSettingsSet {
                persona_id: p.id.clone(),
                heartbeat_minutes: edit.heartbeat_minutes,
                context_window_hours: edit.context_window_hours,
            }));
        }
        let groups = PersonaGroups::normalised(&edit.group_primary, &edit.groups_visible);
        if groups.group_primary != before.group_primary || groups.groups_visible != before.groups_visible {
            drafts.push(human(EventBody::PersonaGroupsSet {
                persona_id: p.id.clone(),
                group_primary: groups.group_primary,
                groups_visible: groups.groups_visible,
            }));
        }
        if !drafts.is_empty() {
            self.ctx.ledger.append_drafts(drafts).await?;
            self.ctx.emit(AppEvent::PersonaChanged { persona: self.ctx.ledger.persona(&p.id).await?.into() });
            self.ctx.emit(AppEvent::MemoriesChanged { persona_id: Some(p.id.clone()) });
        }
        self.persona_profile(&p.id).await
    }

    /// Pauses a persona until `until` (RFC 3339, in the future), or resumes
    /// it (`None`). While paused it neither replies nor reaches out; what
    /// the human sends meanwhile is answered when the pause ends.
    pub async fn pause_persona(&self, persona: &str, until: Option<&str>) -> Result<PersonaView> {
        let p = self.ctx.ledger.find_persona(persona).await?;
        if p.archived {
            return Err(ledger::LedgerError::PersonaArchived(p.name).into());
        }
        let now = self.ctx.ledger.now();
        let until = match until {
            Some(u) => {
                let t = parse_until(u)?;
                if t <= now {
                    return Err(AppError::invalid("pause until a time in the future"));
                }
                Some(rfc3339(t))
            }
            None => None,
        };
        let resumed = until.is_none();
        self.ctx.ledger
            .append(HUMAN_ENTITY, EventBody::PersonaPaused { persona_id: p.id.clone(), until })
            .await?;
        if resumed {
            // Replies that waited for the pause may run now.
            self.ctx.ledger.postpone(REPLY_KIND, &p.id, now).await?;
            self.ctx.wake.notify_one();
        }
        let view: PersonaView = self.ctx.ledger.persona(&p.id).await?.into();
        self.ctx.emit(AppEvent::PersonaChanged { persona: view.clone() });
        Ok(view)
    }

    /// Archived personas (the sidebar's "Archived" list).
    pub async fn list_archived_personas(&self) -> Result<Vec<PersonaView>> {
        Ok(self.ctx.ledger.personas(true).await?.into_iter().filter(|p| p.archived).map(PersonaView::from).collect())
    }

    /// Sets whether a message goes into the persona's prompts.
    pub async fn set_message_context(&self, message_id: &str, status: &str) -> Result<crate::conversation::views::MessageView> {
        let status = ContextStatus::parse(status)
            .ok_or_else(|| AppError::invalid(format!("context status must be default, always or never, not \"{status}\"")))?;
        let m = self
            .ctx.ledger
            .message(message_id)
            .await?
            .ok_or_else(|| AppError::new("MESSAGE_NOT_FOUND", "that message does not exist (or was deleted)"))?;
        if m.context_status != status {
            self.ctx.ledger
                .append(
                    HUMAN_ENTITY,
                    EventBody::MessageContextSet { persona_id: m.persona_id.clone(), message_id: m.id.clone(), status },
                )
                .await?;
        }
        let m = self
            .ctx.ledger
            .message(message_id)
            .await?
            .ok_or_else(|| AppError::new("MESSAGE_NOT_FOUND", "that message does not exist (or was deleted)"))?;
        let view = crate::conversation::views::MessageView::from(m);
        self.ctx.emit(AppEvent::MessageAdded { message: view.clone() });
        Ok(view)
    }

    /// Takes back a message of the human's whose reply has not started: its
    /// queued reply is removed and the message deleted for real; its text
    /// is returned for editing. Refused once the reply is running or done.
    pub async fn recall_message(&self, message_id: &str) -> Result<String> {
        let m = self
            .ctx.ledger
            .message(message_id)
            .await?
            .ok_or_else(|| AppError::new("MESSAGE_NOT_FOUND", "that message does not exist (or was deleted)"))?;
        if m.role != ledger::MessageRole::Human {
            return Err(AppError::new("MESSAGE_NOT_RECALLABLE", "only your own messages can be recalled"));
        }
        let removed = self.ctx.ledger.remove_pending(REPLY_KIND, "reply_to", &m.id).await?;
        if removed == 0 {
            return Err(AppError::new(
                "MESSAGE_NOT_RECALLABLE",
                "the reply to this message has already started, so it can no longer be recalled",
            ));
        }
        self.vault.erase_message(&m.id).await?;
        self.ctx.emit_queue().await;
        Ok(m.content)
    }

    /// Changes the priority of pending background work ("high", "normal",
    /// "low"). Replies are always first and cannot be changed.
    pub async fn set_queue_priority(&self, id: &str, priority: &str) -> Result<()> {
        let value = match priority {
            "high" => PRIORITY_HIGH,
            "normal" => PRIORITY_NORMAL,
            "low" => PRIORITY_LOW,
            other => return Err(AppError::invalid(format!("priority must be high, normal or low, not \"{other}\""))),
        };
        let item = self
            .ctx.ledger
            .queue_items(None)
            .await?
            .into_iter()
            .find(|i| i.id == id)
            .ok_or_else(|| AppError::new("QUEUE_ITEM_NOT_FOUND", "that work is no longer queued"))?;
        if item.kind == REPLY_KIND {
            return Err(AppError::invalid("replies always run first; their priority cannot be changed"));
        }
        if !self.ctx.ledger.set_priority(id, value).await? {
            return Err(AppError::new("QUEUE_BUSY", "that work is already running or has failed; only pending work can be reordered"));
        }
        self.ctx.emit_queue().await;
        Ok(())
    }
}

/// Runs one fill job (the queue worker calls it). On a final failure the
/// persona keeps the human's words and its profile is marked `fallback`.
pub(crate) async fn run_fill(personas: &Arc<Personas>, item: &QueueItem) -> std::result::Result<(), Failure> {
    let job: FillJob = serde_json::from_value(item.body.clone())
        .map_err(|e| Failure::Final(AppError::invalid(format!("unreadable job: {e}"))))?;
    let outcome = fill(personas, &job).await;
    let final_failure = match &outcome {
        Err(Failure::Final(_)) => true,
        Err(Failure::Retry(_)) => item.attempts >= MAX_ATTEMPTS,
        _ => false,
    };
    if final_failure {
        settle_fallback(personas, &job.persona_id).await;
    }
    outcome
}

async fn fill(personas: &Arc<Personas>, job: &FillJob) -> std::result::Result<(), Failure> {
    let persona = personas.ctx.ledger.persona(&job.persona_id).await.map_err(|e| Failure::Final(e.into()))?;
    if persona.archived {
        return Err(Failure::Final(ledger::LedgerError::PersonaArchived(persona.name).into()));
    }
    let profile = personas.ctx.ledger.persona_profile(&persona.id).await.map_err(|e| Failure::Retry(e.into()))?;
    if profile.profile_source != "pending" {
        return Ok(()); // the human filled it meanwhile: theirs wins
    }
    let spec = ModelSpec::parse(&persona.model).map_err(Failure::Final)?;
    let served = personas.ctx.serving(&spec).await.map_err(Failure::Final)?;
    let (spec, provider) = (served.spec, served.provider);
    let mut request = CompletionRequest::chat(spec.model.clone(), fill_prompt(&persona.name, &persona.short_description));
    request.max_tokens = FILL_MAX_TOKENS;
    request.temperature = 0.4;
    request.json_schema = Some(fill_schema(&persona.name, &persona.short_description));
    let completion = personas.ctx.complete_in_background(provider.as_ref(), request).await?;
    tracing::debug!(persona = %persona.name, raw = %completion.text, "persona fill: the model's answer");
    let parsed = parse_fill(&completion.text).map_err(Failure::Retry)?;
    let (long, traits, topics) = fill_profile(&parsed, &persona.name, &persona.short_description);
    if traits.is_empty() && topics.is_empty() {
        return Err(Failure::Retry(AppError::new("LLM_INVALID_JSON", "the persona fill named no traits and no topics")));
    }
    // The human may have edited while the model ran.
    let profile = personas.ctx.ledger.persona_profile(&persona.id).await.map_err(|e| Failure::Retry(e.into()))?;
    if profile.profile_source != "pending" {
        return Ok(());
    }
    let current = personas.ctx.ledger.persona(&persona.id).await.map_err(|e| Failure::Retry(e.into()))?;
    let mut drafts = vec![Draft::by(
        &persona.id,
        EventBody::PersonaProfileSet { persona_id: persona.id.clone(), traits, topics, source: "llm".into() },
    )];
    if current.long_description.is_empty() && !long.is_empty() {
        drafts.push(Draft::by(&persona.id, EventBody::persona_long_description(&persona.id, long)));
    }
    personas.ctx.ledger.append_drafts(drafts).await.map_err(|e| Failure::Retry(e.into()))?;
    if let Ok(p) = personas.ctx.ledger.persona(&persona.id).await {
        personas.ctx.emit(AppEvent::PersonaChanged { persona: p.into() });
    }
    Ok(())
}

async fn settle_fallback(personas: &Personas, persona_id: &str) {
    let pending = matches!(personas.ctx.ledger.persona_profile(persona_id).await, Ok(p) if p.profile_source == "pending");
    if !pending {
        return;
    }
    let body = EventBody::PersonaProfileSet {
        persona_id: persona_id.to_owned(),
        traits: Vec::new(),
        topics: Vec::new(),
        source: "fallback".into(),
    };
    match personas.ctx.ledger.append(HUMAN_ENTITY, body).await {
        Ok(_) => {
            if let Ok(p) = personas.ctx.ledger.persona(persona_id).await {
                personas.ctx.emit(AppEvent::PersonaChanged { persona: p.into() });
            }
        }
        Err(e) => tracing::warn!(error = %e, "could not record the persona fill's fallback"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::personas::rules::paused_at;

    #[test]
    fn a_fill_in_prose_or_a_fence_parses_and_garbage_is_llm_invalid_json() {
        let f = parse_fill("Sure! ```json\n{\"long_description\":\"A baker.\",\"traits\":[\"warm\"],\"topics\":[{\"name\":\"bread\",\"perspective\":\"loves it\"}]}\n```")
            .expect("parses");
        assert_eq!(f.traits, vec!["warm".to_owned()]);
        assert_eq!(f.topics[0].name, "bread");
        assert_eq!(parse_fill("no json here").map(|_| ()).expect_err("not json").code, "LLM_INVALID_JSON");
        assert_eq!(parse_fill("{\"traits\": [1, 2]}").map(|_| ()).expect_err("wrong shape").code, "LLM_INVALID_JSON");
    }

    #[test]
    fn the_fill_is_cleaned_deduplicated_and_bounded() {
        let fill = Fill {
            long_description: "  A   patient   teacher. ".into(),
            traits: vec!["Kind".into(), " kind ".into(), "".into(), "curious".into()],
            topics: vec![
                FillTopic { name: "Chess".into(), perspective: "a lifelong love".into() },
                FillTopic { name: "chess".into(), perspective: "again".into() },
                FillTopic { name: "  ".into(), perspective: "nameless".into() },
            ],
        };
        let (long, traits, topics) = fill_profile(&fill, "Ada", "a teacher");
        assert_eq!(long, "A patient teacher.");
        assert_eq!(traits, vec!["Kind".to_owned(), "curious".to_owned()]);
        assert_eq!(topics.len(), 1);
        assert_eq!(topics[0].perspective, "a lifelong love");
        assert!(topics[0].exposure_desired > topics[0].exposure_current);
    }

    #[test]
    fn junk_from_a_small_model_is_dropped_from_the_fill() {
        let topic = |name: &str| FillTopic { name: name.into(), perspective: "p".into() };
        let fill = Fill {
            long_description: "Noor bakes bread.".into(),
            traits: vec!["Noor".into(), "warm".into(), "trait".into(), "she is very very kind to everyone".into(), "patient".into(), "Noor is a curious".into()],
            topics: vec![topic("Noor"), topic("Noor Haddad"), topic("sourdough bread"), topic("vintage radios"), topic("!!"), topic("topics")],
        };
        let (_, traits, topics) = fill_profile(&fill, "Noor Haddad", "a baker from Beirut");
        assert_eq!(traits, ["warm", "patient", "curious"], "the name, a field name and a sentence go; \"Noor is a curious\" is \"curious\"");
        assert_eq!(topics.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), vec!["sourdough bread"]);
        // A topic the description names is kept even when the example has it too.
        let (_, _, topics) = fill_profile(&fill, "Noor", "a radio fan who loves vintage radios");
        assert!(topics.iter().any(|t| t.name == "vintage radios"));
    }

    #[test]
    fn the_fill_prompt_shows_one_worked_example_then_the_persona() {
        let p = fill_prompt("Noor", "a baker from Beirut");
        assert_eq!(p.len(), 4);
        assert!(p[2].content.contains("vintage radios") && serde_json::from_str::<Fill>(&p[2].content).is_ok());
        assert!(p[3].content.contains("Noor") && p[3].content.contains("a baker from Beirut"));
        assert!(p[3].content.contains("never a person's name"));
    }

    #[test]
    fn topics_are_chosen_from_the_subjects_the_description_names() {
        assert_eq!(
            topic_candidates("a baker from Beirut who loves sourdough and long walks by the sea", "Noor"),
            ["baker", "Beirut", "sourdough", "long walks", "sea"]
        );
        assert_eq!(
            topic_candidates("Noor Haddad, a nurse who plays the violin; grows tomatoes.", "Noor Haddad"),
            ["nurse", "violin", "tomatoes"],
            "the persona's name is no topic"
        );
        assert!(topic_candidates("the a of", "X").is_empty());
        let schema = fill_schema("Noor", "a baker who loves sourdough");
        let topic_name = &schema["properties"]["topics"]["items"]["properties"]["name"];
        assert_eq!(topic_name["enum"], serde_json::json!(["baker", "sourdough"]));
        assert_eq!(fill_schema("Noor", "")["properties"]["topics"]["items"]["properties"]["name"]["type"], "string");
        let traits: Vec<String> = serde_json::from_value(schema["properties"]["traits"]["items"]["enum"].clone()).expect("enum");
        // The worked example's traits are in the list the grammar allows.
        let example: Fill = serde_json::from_str(FILL_EXAMPLE).expect("example");
        assert!(example.traits.iter().all(|t| traits.contains(t)), "{:?}", example.traits);
    }

    #[test]
    fn a_pause_in_the_past_is_over() {
        let now = time::OffsetDateTime::from_unix_timestamp(1_800_000_000).expect("time");
        let later = rfc3339(now + time::Duration::hours(1));
        let earlier = rfc3339(now - time::Duration::hours(1));
        assert!(paused_at(Some(&later), now).is_some());
        assert!(paused_at(Some(&earlier), now).is_none());
        assert!(paused_at(None, now).is_none());
    }
}
