//! The ceremony's persona phases (seed 002): **topic
//! exploration** deepens a persona's topics (fills an empty perspective,
//! approach or personal stake, and may add up to two related topics) and
//! the **description check** rewrites its longer description when it no
//! longer agrees with its traits and topics. One low-priority job per
//! persona, queued by the ceremony only while the queue is idle.
//!
//! The human's words are never touched: the short description stays as
//! written, a topic the human named keeps what it says, and a profile the
//! human edited keeps its longer description.

use std::sync::Arc;

use ledger::{Draft, EventBody, PersonaTopic, QueueItem};
use providers::{ChatMessage, CompletionRequest, Role};
use serde::{Deserialize, Serialize};

use crate::context::jobs::{Failure, PRIORITY_LOW};
use super::Personas;
use crate::error::AppError;
use crate::models::ModelSpec;
use crate::events::AppEvent;

pub(crate) const EXPLORE_KIND: &str = "persona_explore";
const EXPLORE_MAX_TOKENS: u32 = 400;
const MAX_NEW_TOPICS: usize = 2;
const MAX_TOPICS: usize = 8;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ExploreJob {
    pub persona_id: String,
}

#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
pub(crate) struct Exploration {
    #[serde(default)]
    topics: Vec<ExploredTopic>,
    #[serde(default)]
    long_description: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
struct ExploredTopic {
    name: String,
    #[serde(default)]
    perspective: String,
    #[serde(default)]
    approach: String,
    #[serde(default)]
    personal_stake: String,
}

pub(crate) fn explore_schema() -> serde_json::Value {
    let text = |n: u32| serde_json::json!({ "type": "string", "maxLength": n });
    serde_json::json!({
        "type": "object",
        "properties": {
            "topics": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": { "name": text(30), "perspective": text(80), "approach": text(80), "personal_stake": text(80) },
                    "required": ["name", "perspective", "approach", "personal_stake"]
                },
                "maxItems": 4
            },
            "long_description": text(300)
        },
        "required": ["topics", "long_description"]
    })
}

fn explore_prompt(name: &str, short: &str, long: &str, traits: &[String], topics: &[PersonaTopic]) -> Vec<ChatMessage> {
    let topics: Vec<String> = topics.iter().map(|t| format!("{} ({})", t.name, t.perspective)).collect();
    vec![
        ChatMessage::new(
            Role::System,
            "You help a chat companion character grow between conversations. Keep to who the character is. Answer in JSON.".to_owned(),
        ),
        ChatMessage::new(
            Role::User,
            format!(
                "Character: {name}. Described by the user as: \"{short}\".\nLonger description: \"{long}\"\nTraits: {}\nTopics: {}\n\n\
                 topics: for each topic (and at most two new related ones) say how {name} sees it (perspective), \
                 how {name} brings it up (approach) and why it matters to {name} (personal_stake).\n\
                 long_description: two or three sentences about {name} that agree with the traits and topics.",
                traits.join(", "),
                topics.join("; ")
            ),
        ),
    ]
}

fn clean(s: &str, max: usize) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(max).collect()
}

/// Merges what the model explored into the topics: empty fields of known
/// topics are filled (what is there stays), up to [`MAX_NEW_TOPICS`] new
/// ones are added. Returns the topics and whether anything changed.
pub(crate) fn merge_topics(current: &[PersonaTopic], explored: &Exploration) -> (Vec<PersonaTopic>, bool) {
    let mut topics = current.to_vec();
    let mut changed = false;
    let mut added = 0;
    for e in &explored.topics {
        let name = clean(&e.name, 80);
        if name.is_empty() {
            continue;
        }
        let fill = |field: &mut String, value: &str, changed: &mut bool| {
            let value = clean(value, 200);
            if field.trim().is_empty() && !value.is_empty() {
                *field = value;
                *changed = true;
            }
        };
        if let Some(t) = topics.iter_mut().find(|t| t.name.to_lowercase() == name.to_lowercase()) {
            fill(&mut t.perspective, &e.perspective, &mut changed);
            fill(&mut t.approach, &e.approach, &mut changed);
            fill(&mut t.personal_stake, &e.personal_stake, &mut changed);
        } else if added < MAX_NEW_TOPICS && topics.len() < MAX_TOPICS {
            topics.push(PersonaTopic {
                name,
                perspective: clean(&e.perspective, 200),
                approach: clean(&e.approach, 200),
                personal_stake: clean(&e.personal_stake, 200),
                sentiment: 0.5,
                exposure_current: 0.0,
                exposure_desired: 0.5,
            });
            added += 1;
            changed = true;
        }
    }
    (topics, changed)
}

/// A topic expires (the ceremony's expiry phase, seed 002) when the persona
/// neither talks about it nor wants to any more: both its current and its
/// desired exposure are below this.
pub(crate) const EXPIRE_BELOW: f64 = 0.1;

/// The topics that stay after expiry, and how many expired.
pub(crate) fn unexpired_topics(topics: &[PersonaTopic]) -> (Vec<PersonaTopic>, usize) {
    let kept: Vec<PersonaTopic> = topics
        .iter()
        .filter(|t| t.exposure_current >= EXPIRE_BELOW || t.exposure_desired >= EXPIRE_BELOW)
        .cloned()
        .collect();
    let expired = topics.len() - kept.len();
    (kept, expired)
}

impl Personas {
    /// The ceremony's expiry phase: removes the topics personas no longer
    /// care about (see [`EXPIRE_BELOW`]), one `persona_profile_set` per
    /// persona that lost any. Ei (static) and profiles the human wrote are
    /// left alone; archived personas are not listed. Returns how many topics expired.
    pub(crate) async fn expire_topics(&self) -> crate::Result<usize> {
        let mut expired = 0;
        for p in self.ctx.ledger.personas(false).await? {
            if p.is_system {
                continue;
            }
            let profile = self.ctx.ledger.persona_profile(&p.id).await?;
            if profile.profile_source == "human" {
                continue;
            }
            let (topics, n) = unexpired_topics(&profile.topics);
            if n == 0 {
                continue;
            }
            self.ctx.ledger
                .append_drafts(vec![Draft::by(
                    &p.id,
                    EventBody::PersonaProfileSet {
                        persona_id: p.id.clone(),
                        traits: profile.traits.clone(),
                        topics,
                        source: profile.profile_source.clone(),
                    },
                )])
                .await?;
            tracing::info!(persona = %p.name, expired = n, "ceremony: topics expired");
            if let Ok(persona) = self.ctx.ledger.persona(&p.id).await {
                self.ctx.emit(AppEvent::PersonaChanged { persona: persona.into() });
            }
            expired += n;
        }
        Ok(expired)
    }

    /// Queues the exploration of every persona that has topics to explore
    /// (not Ei, not archived, not paused); returns how many.
    pub(crate) async fn queue_explorations(&self, now: time::OffsetDateTime) -> crate::Result<usize> {
        let queued = self.ctx.ledger.queue_items(None).await?;
        let mut count = 0;
        for p in self.ctx.ledger.personas(false).await? {
            if p.is_system || queued.iter().any(|i| i.kind == EXPLORE_KIND && i.persona_id.as_deref() == Some(p.id.as_str())) {
                continue;
            }
            let profile = self.ctx.ledger.persona_profile(&p.id).await?;
            if profile.topics.is_empty() || crate::personas::rules::paused_at(profile.paused_until.as_deref(), now).is_some() {
                continue;
            }
            let body = serde_json::to_value(ExploreJob { persona_id: p.id.clone() }).map_err(|e| AppError::invalid(e.to_string()))?;
            self.ctx.ledger.enqueue(EXPLORE_KIND, PRIORITY_LOW, Some(&p.id), &body).await?;
            count += 1;
        }
        if count > 0 {
            self.ctx.wake.notify_one();
        }
        Ok(count)
    }
}

/// Runs one exploration (topics, then the description check).
pub(crate) async fn run(personas: &Arc<Personas>, item: &QueueItem) -> Result<(), Failure> {
    let job: ExploreJob = serde_json::from_value(item.body.clone())
        .map_err(|e| Failure::Final(AppError::invalid(format!("unreadable job: {e}"))))?;
    let persona = personas.ctx.ledger.persona(&job.persona_id).await.map_err(|e| Failure::Final(e.into()))?;
    if persona.archived {
        return Ok(());
    }
    let profile = personas.ctx.ledger.persona_profile(&persona.id).await.map_err(|e| Failure::Retry(e.into()))?;
    let spec = ModelSpec::parse(&persona.model).map_err(Failure::Final)?;
    let served = personas.ctx.serving(&spec).await.map_err(Failure::Final)?;
    let (spec, provider) = (served.spec, served.provider);
    let prompt = explore_prompt(&persona.name, &persona.short_description, &persona.long_description, &profile.traits, &profile.topics);
    let mut request = CompletionRequest::chat(spec.model.clone(), prompt);
    request.max_tokens = EXPLORE_MAX_TOKENS;
    request.temperature = 0.5;
    request.json_schema = Some(explore_schema());
    let completion = personas.ctx.complete_in_background(provider.as_ref(), request).await?;
    let explored: Exploration = crate::personas::rules::parse_json_object(&completion.text, "exploration").map_err(Failure::Retry)?;

    // The human may have edited while the model ran: merge into what is there now.
    let now_profile = personas.ctx.ledger.persona_profile(&persona.id).await.map_err(|e| Failure::Retry(e.into()))?;
    let (topics, topics_changed) = merge_topics(&now_profile.topics, &explored);
    let mut drafts = Vec::new();
    if topics_changed {
        let source = match now_profile.profile_source.as_str() {
            "human" => "human",
            _ => "llm",
        };
        drafts.push(Draft::by(
            &persona.id,
            EventBody::PersonaProfileSet {
                persona_id: persona.id.clone(),
                traits: now_profile.traits.clone(),
                topics,
                source: source.into(),
            },
        ));
    }
    // Description check: a longer description the human did not shape is
    // brought in line with the traits and topics.
    let long = clean(&explored.long_description, 4_000);
    let current = personas.ctx.ledger.persona(&persona.id).await.map_err(|e| Failure::Retry(e.into()))?;
    if now_profile.profile_source != "human" && !long.is_empty() && long != current.long_description {
        drafts.push(Draft::by(&persona.id, EventBody::persona_long_description(&persona.id, long)));
    }
    if drafts.is_empty() {
        return Ok(());
    }
    personas.ctx.ledger.append_drafts(drafts).await.map_err(|e| Failure::Retry(e.into()))?;
    if let Ok(p) = personas.ctx.ledger.persona(&persona.id).await {
        personas.ctx.emit(AppEvent::PersonaChanged { persona: p.into() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(name: &str, perspective: &str) -> PersonaTopic {
        PersonaTopic {
            name: name.into(),
            perspective: perspective.into(),
            approach: String::new(),
            personal_stake: String::new(),
            sentiment: 0.0,
            exposure_current: 0.3,
            exposure_desired: 0.6,
        }
    }

    fn explored(name: &str, perspective: &str, approach: &str) -> ExploredTopic {
        ExploredTopic { name: name.into(), perspective: perspective.into(), approach: approach.into(), personal_stake: "stake".into() }
    }

    #[test]
    fn exploration_fills_empty_fields_keeps_what_is_there_and_adds_at_most_two_topics() {
        let current = vec![topic("Chess", "a lifelong love")];
        let e = Exploration {
            topics: vec![
                explored("chess", "REPLACED?", "asks about openings"),
                explored("Go", "the other board game", "compares it with chess"),
                explored("Puzzles", "daily habit", "sends one"),
                explored("Poker", "too random", "avoids it"),
                explored(" ", "nameless", "none"),
            ],
            long_description: String::new(),
        };
        let (topics, changed) = merge_topics(&current, &e);
        assert!(changed);
        assert_eq!(topics.len(), 3, "two new at most");
        assert_eq!(topics[0].perspective, "a lifelong love", "what the topic says stays");
        assert_eq!(topics[0].approach, "asks about openings");
        assert_eq!(topics[0].personal_stake, "stake");
        assert_eq!((topics[0].exposure_current, topics[0].exposure_desired), (0.3, 0.6));
        assert_eq!(topics[1].name, "Go");
        let (_, again) = merge_topics(&topics, &Exploration { topics: vec![explored("Go", "x", "y")], long_description: String::new() });
        assert!(!again, "nothing empty left to fill: no change");
    }
}
