//! Extraction: after each reply a LOW-priority job reads the human's message
//! and learns from it. Three steps:
//!
//! 1. **scan** — the persona's model lists facts, traits, topics, people and
//!    quotes, as JSON constrained by [`scan_schema`] (a grammar on the local
//!    engine). Unparseable output is retried, then dead-lettered with
//!    `LLM_INVALID_JSON`.
//! 2. **match** — each item is compared with the memories already filed in
//!    the learner's group: candidates from the same hybrid retrieval replies
//!    use, then `memory::similarities` (MiniLM cosine, or word overlap
//!    without the model) against `memory::MERGE_THRESHOLD`.
//! 3. **update** — a match merges (its confidence grows by
//!    [`gain_confidence`], the message joins its sources) instead of
//!    duplicating; a fact about the same subject that does not match
//!    supersedes the older one (which stays in the ledger); anything else is
//!    learned new. Human-confirmed facts are locked: never superseded.
//!
//! Replies never wait behind this: the queue takes high priority first, and
//! a reply that arrives while extraction runs preempts it
//! (`Context::complete_in_background`).

use std::sync::Arc;

use ledger::{Draft, EventBody, Memory, MemoryKind, Message, Persona, QueueItem, QuoteSpan, Validation};
use memory::{group_key, ItemKind, NewItem, Scope};
use providers::{ChatMessage, CompletionRequest, Role};
use serde::{Deserialize, Serialize};

use crate::context::jobs::{Failure, PRIORITY_LOW};
use super::Memories;
use crate::error::AppError;
use crate::models::ModelSpec;
use crate::events::AppEvent;

pub(crate) const EXTRACT_KIND: &str = "extract";
/// How long a conversation must be quiet before its extraction runs.
pub(crate) const DEFAULT_DELAY: std::time::Duration = std::time::Duration::from_secs(90);
const EXTRACT_MAX_TOKENS: u32 = 400;
/// What a memory starts at; each confirmation by a later message adds to it.
pub(crate) const INITIAL_CONFIDENCE: f64 = 0.5;
/// Past this many memories of one kind in a group, only the retrieval's
/// best candidates are compared (embedding every one would not scale).
const COMPARE_ALL_UP_TO: usize = 32;
const RETRIEVED_CANDIDATES: usize = 16;
const MAX_ITEM_CHARS: usize = 200;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct ExtractJob {
    persona_id: String,
    message_id: String,
}

/// The scan's output (the shape [`scan_schema`] asks for).
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
pub(crate) struct Scan {
    #[serde(default)]
    facts: Vec<ScannedFact>,
    #[serde(default)]
    traits: Vec<String>,
    #[serde(default)]
    topics: Vec<String>,
    #[serde(default)]
    people: Vec<ScannedPerson>,
    #[serde(default)]
    quotes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
struct ScannedFact {
    #[serde(default)]
    subject: String,
    text: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
struct ScannedPerson {
    name: String,
    #[serde(default)]
    relation: String,
}

/// The JSON schema of the scan. Lengths are bounded so the grammar always
/// closes within [`EXTRACT_MAX_TOKENS`].
pub(crate) fn scan_schema() -> serde_json::Value {
    let text = |n: u32| serde_json::json!({ "type": "string", "maxLength": n });
    let list = |items: serde_json::Value| serde_json::json!({ "type": "array", "items": items, "maxItems": 3 });
    serde_json::json!({
        "type": "object",
        "properties": {
            "facts": list(serde_json::json!({
                "type": "object",
                "properties": { "subject": text(30), "text": text(100) },
                "required": ["subject", "text"]
            })),
            "traits": list(text(40)),
            "topics": list(text(40)),
            "people": list(serde_json::json!({
                "type": "object",
                "properties": { "name": text(40), "relation": text(40) },
                "required": ["name", "relation"]
            })),
            "quotes": list(text(100))
        },
        "required": ["facts", "traits", "topics", "people", "quotes"]
    })
}

/// The worked examples the scan sees before the message, one per language
/// the app speaks: a small model copies the example's shape (the writer's
/// own name, work and pets as short facts, a relative as a person with a
/// fact of their own) and also its language, so the message gets the
/// example in its own language and its items keep its words ("arquiteta",
/// not "architect").
const SCAN_EXAMPLE_EN: (&str, &str) = (
    "I'm Tom, I fix bikes in Leeds. My son Ben loves chess.",
    r#"{"facts":[{"subject":"name","text":"Is called Tom"},{"subject":"work","text":"Fixes bikes in Leeds"},{"subject":"son","text":"Son Ben loves chess"}],"traits":[],"topics":["bikes"],"people":[{"name":"Ben","relation":"son"}],"quotes":["I fix bikes in Leeds"]}"#,
);
const SCAN_EXAMPLE_PT: (&str, &str) = (
    "Eu sou o Tomás, trabalho como carteiro em Natal. Minha filha Nina adora xadrez.",
    r#"{"facts":[{"subject":"nome","text":"Se chama Tomás"},{"subject":"trabalho","text":"Trabalha como carteiro em Natal"},{"subject":"filha","text":"A filha Nina adora xadrez"}],"traits":[],"topics":["xadrez"],"people":[{"name":"Nina","relation":"filha"}],"quotes":["trabalho como carteiro em Natal"]}"#,
);

/// Whether a message is in Portuguese: more of its words are Portuguese
/// function words than English ones.
fn portuguese(message: &str) -> bool {
    const PT: &[&str] = &[
        "eu", "meu", "minha", "meus", "minhas", "sou", "moro", "tenho", "trabalho", "um", "uma", "o", "os", "as", "de",
        "do", "da", "dos", "das", "em", "no", "na", "que", "não", "é", "e", "com", "para", "pra", "se", "chama", "mas",
        "muito", "hoje", "você", "ele", "ela", "foi", "estou", "está", "como",
    ];
    const EN: &[&str] = &[
        "i", "i'm", "my", "me", "am", "is", "are", "a", "an", "the", "of", "in", "on", "at", "to", "and", "with", "for",
        "but", "very", "today", "you", "he", "she", "it", "was", "have", "has", "called", "as",
    ];
    let words: Vec<String> = message.split(|c: char| !(c.is_alphanumeric() || c == '\'')).map(str::to_lowercase).collect();
    let count = |set: &[&str]| words.iter().filter(|w| set.contains(&w.as_str())).count();
    count(PT) > count(EN)
}

fn scan_ask(message: &str) -> String {
    format!(
        "Message: \"{message}\"\n\nfacts: each thing the message tells about the person: their name, where they live, \
         their work, family, pets, likes, habits, plans (subject in one or two words, and a short sentence in the \
         message's own language, with its names, places and numbers exactly as written).\n\
         traits: what they are like. topics: what they care about. people: people they mention (name and relation).\n\
         quotes: short phrases copied exactly from the message."
    )
}

fn scan_prompt(message: &str) -> Vec<ChatMessage> {
    let example = if portuguese(message) { SCAN_EXAMPLE_PT } else { SCAN_EXAMPLE_EN };
    vec![
        ChatMessage::new(
            Role::System,
            "You read one message a person wrote and note what it says about them. \
             Use only what the message says; leave a list empty when it says nothing of that kind. \
             The writer is not one of the people they mention. Answer in JSON."
                .to_owned(),
        ),
        ChatMessage::new(Role::User, scan_ask(example.0)),
        ChatMessage::new(Role::Assistant, example.1.to_owned()),
        ChatMessage::new(Role::User, scan_ask(message)),
    ]
}

/// What of a message can tell something about its writer: its sentences
/// that are not questions. "Where do I live?" or "Do you like music?"
/// asks; a scan of it only invents (and a fact "invented" from a question
/// about the same subject would supersede the real one). Empty when the
/// message only asks, or says nothing with a content word ("Hi!").
pub(crate) fn statements(message: &str) -> String {
    let mut kept = Vec::new();
    let mut sentence = String::new();
    let mut chars = message.chars().peekable();
    while let Some(c) = chars.next() {
        sentence.push(c);
        let ends = c == '\n' || (matches!(c, '.' | '!' | '?') && chars.peek().is_none_or(|n| n.is_whitespace()));
        if ends || chars.peek().is_none() {
            let s = sentence.trim();
            if !s.ends_with('?') && !stems(s).is_empty() {
                kept.push(s.to_owned());
            }
            sentence.clear();
        }
    }
    kept.join(" ")
}

/// Confidence after another message confirms a memory: a third of the way
/// to certainty, so 0.5 → 0.667 → 0.778 …; never above 1.
pub fn gain_confidence(c: f64) -> f64 {
    (c + (1.0 - c) / 3.0).min(1.0)
}

/// Parses the scan, accepting the JSON object wrapped in prose or a code
/// fence (HTTP models do that); anything else is `LLM_INVALID_JSON`.
pub(crate) fn parse_scan(text: &str) -> Result<Scan, AppError> {
    let invalid = |why: String| AppError::new("LLM_INVALID_JSON", format!("the extraction answer was not the JSON asked for: {why}"));
    let start = text.find('{').ok_or_else(|| invalid("no JSON object".into()))?;
    let end = text.rfind('}').ok_or_else(|| invalid("no JSON object".into()))?;
    if end < start {
        return Err(invalid("no JSON object".into()));
    }
    serde_json::from_str(&text[start..=end]).map_err(|e| invalid(e.to_string()))
}

/// Character offsets of `quote` in `message` (exact, else ignoring case).
pub(crate) fn locate_quote(message: &str, quote: &str) -> Option<(u32, u32)> {
    let quote = quote.trim().trim_matches(|c| c == '"' || c == '\'' || c == '“' || c == '”');
    if quote.chars().count() < 3 {
        return None;
    }
    let byte = message.find(quote).or_else(|| {
        let (lm, lq) = (message.to_lowercase(), quote.to_lowercase());
        // Lower-casing can change byte lengths; only trust it when it did not.
        (lm.len() == message.len()).then(|| lm.find(&lq)).flatten()
    })?;
    let start = message[..byte].chars().count() as u32;
    Some((start, start + quote.chars().count() as u32))
}

/// One item the scan found, cleaned up.
#[derive(Debug, Clone, PartialEq)]
struct Found {
    kind: MemoryKind,
    subject: String,
    text: String,
    quote: Option<QuoteSpan>,
}

fn clean(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(MAX_ITEM_CHARS).collect()
}

fn key(s: &str) -> String {
    s.trim().to_lowercase()
}

/// Words of at least three letters, lower case, cut to their first four
/// letters so "lives" meets "live" and "médica" meets "médico".
fn stems(text: &str) -> std::collections::HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() >= 3 && !GROUNDING_STOPWORDS.contains(&w.as_str()))
        .map(|w| w.chars().take(4).collect())
        .collect()
}

/// Function words that ground nothing: an item sharing only these with the
/// message was not said in it.
const GROUNDING_STOPWORDS: &[&str] = &[
    "the", "and", "for", "with", "that", "this", "are", "was", "has", "have", "had", "his", "her", "their", "they",
    "very", "who", "what", "into", "from", "person", "user", "writer", "likes", "like", "que", "uma", "com", "para",
    "por", "dos", "das", "ele", "ela", "pessoa", "usuário", "gosta",
    // Words any item may carry without the message having said anything
    // of it ("Is named …", "Their name is …", "Se chama …").
    "name", "named", "called", "you", "your", "not", "but", "all", "some", "about", "also", "just", "will", "can",
    "does", "did", "him", "them", "our", "its", "may", "might", "would", "should", "could", "must", "shall", "nome", "chama", "chamado", "chamada", "seu", "sua", "meu", "minha",
    "você", "não", "mas", "também", "muito", "isso", "esse", "essa", "este", "esta", "está", "são", "foi", "tem",
];

/// Whether an item the model wrote holds something the message said: a
/// small model adds plausible items no one said ("friendly" after a message
/// about a brother and a piano), which would then be "remembered".
/// Two words are the same word for it when they are equal, or share their
/// first five letters (the whole shorter word when it is shorter, at least
/// four): "lives" meets "live", "médica" "médico", "tiredness" "tired";
/// a model's own derivation does not ("nursing" is not "nurse",
/// "staycation" is not "stayed").
fn grounded(item: &str, message: &str) -> bool {
    let words = |text: &str| -> Vec<Vec<char>> {
        text.split(|c: char| !c.is_alphanumeric())
            .map(str::to_lowercase)
            .filter(|w| w.chars().count() >= 3 && !GROUNDING_STOPWORDS.contains(&w.as_str()))
            .map(|w| w.chars().collect())
            .collect()
    };
    let said = words(message);
    words(item).iter().any(|w| {
        said.iter().any(|v| {
            let shared = w.iter().zip(v).take_while(|(a, b)| a == b).count();
            w == v || (w.len().min(v.len()) >= 4 && shared >= 5.min(w.len()).min(v.len()))
        })
    })
}

/// The name a fact gives the writer ("Is called Ravi", "Name: Ravi", "Se
/// chama Nina"), if that is all it says. A small model copies "Is called
/// Tom" onto a brother or a cat ("My cat is called Pimenta"): such a fact
/// is kept only when the message gives the writer that name.
fn claimed_name(fact: &str) -> Option<String> {
    const LEADS: &[&str] = &["is called ", "is named ", "name is ", "name: ", "se chama ", "chama-se ", "nome é ", "nome: "];
    let lower = fact.trim().to_lowercase();
    let rest = LEADS.iter().find_map(|lead| lower.strip_prefix(lead))?;
    let rest = rest.trim_matches(|c: char| !c.is_alphanumeric());
    (!rest.is_empty() && rest.split_whitespace().count() <= 2).then(|| rest.to_owned())
}

/// Whether `name` is the writer's own ("My name is Marta", "Eu sou a Ana",
/// "me chamo Ana"): the writer is not a person they mention.
fn is_writer(name: &str, message: &str) -> bool {
    let name = name.trim().to_lowercase();
    let text = message.to_lowercase();
    ["my name is ", "i am ", "i'm ", "call me ", "meu nome é ", "me chamo ", "eu sou ", "eu sou a ", "eu sou o "]
        .iter()
        .any(|lead| text.contains(&format!("{lead}{name}")))
}

fn found_items(scan: Scan, message: &Message) -> Vec<Found> {
    let mut out: Vec<Found> = Vec::new();
    let mut push = |f: Found| {
        let kept = f.kind == MemoryKind::Quote || grounded(&f.text, &message.content);
        if kept && !f.text.is_empty() && !out.iter().any(|o| o.kind == f.kind && key(&o.text) == key(&f.text)) {
            out.push(f);
        }
    };
    for f in scan.facts {
        let (subject, text) = (clean(&f.subject), clean(&f.text));
        let text = labelled(&subject, text);
        if claimed_name(&text).is_some_and(|name| !is_writer(&name, &message.content)) {
            continue;
        }
        push(Found { kind: MemoryKind::Fact, subject, text, quote: None });
    }
    for t in scan.traits {
        push(Found { kind: MemoryKind::Trait, subject: String::new(), text: clean(&t), quote: None });
    }
    for t in scan.topics {
        push(Found { kind: MemoryKind::Topic, subject: String::new(), text: clean(&t), quote: None });
    }
    for p in scan.people {
        let name = clean(&p.name);
        let relation = clean(&p.relation);
        let text = if relation.is_empty() { name.clone() } else { format!("{name} ({relation})") };
        let mentioned = message.content.to_lowercase().contains(&name.to_lowercase());
        if !name.is_empty() && mentioned && !is_writer(&name, &message.content) {
            push(Found { kind: MemoryKind::Person, subject: name, text, quote: None });
        }
    }
    for q in scan.quotes {
        // A quote must really be in the message: the model's paraphrase is not a quote.
        if let Some((start, end)) = locate_quote(&message.content, &q) {
            let text: String = message.content.chars().skip(start as usize).take((end - start) as usize).collect();
            let quote = QuoteSpan { message_id: message.id.clone(), start, end };
            push(Found { kind: MemoryKind::Quote, subject: String::new(), text, quote: Some(quote) });
        }
    }
    out
}

/// A fact the model wrote as a bare value ("Lisbon" about "home") reads
/// as nothing on its own in the list of what is known: it is shown with its
/// subject ("Home: Lisbon"). A sentence, or a value that names its subject,
/// is kept as written.
fn labelled(subject: &str, text: String) -> String {
    const VERBS: &[&str] = &["is", "has", "lives", "works", "likes", "loves", "é", "tem", "mora", "trabalha", "gosta", "ama", "se"];
    let first = text.split_whitespace().next().unwrap_or_default().to_lowercase();
    let bare = text.split_whitespace().count() <= 2 && !VERBS.contains(&first.as_str());
    if !bare || subject.is_empty() || text.to_lowercase().contains(&subject.to_lowercase()) {
        return text;
    }
    let mut label = subject.chars();
    let head: String = label.next().map(|c| c.to_uppercase().collect()).unwrap_or_default();
    format!("{head}{}: {text}", label.as_str())
}

/// Queues extraction of the human's message `message_id`, at low priority,
/// once the conversation has been quiet for the extraction delay (earlier
/// extractions of this conversation wait with it).
pub(crate) async fn enqueue(memory: &Memories, persona_id: &str, message_id: &str) {
    let job = ExtractJob { persona_id: persona_id.to_owned(), message_id: message_id.to_owned() };
    let delay = time::Duration::try_from(memory.extraction_delay).unwrap_or(time::Duration::ZERO);
    let at = memory.ctx.ledger.now() + delay;
    let queued = match serde_json::to_value(&job) {
        Ok(body) => match memory.ctx.ledger.postpone(EXTRACT_KIND, persona_id, at).await {
            Ok(_) => memory.ctx.ledger.enqueue_at(EXTRACT_KIND, PRIORITY_LOW, Some(persona_id), &body, at).await.map(|_| ()),
            Err(e) => Err(e),
        },
        Err(e) => Err(ledger::LedgerError::Invalid(e.to_string())),
    };
    match queued {
        Ok(()) => memory.ctx.wake.notify_one(),
        Err(e) => tracing::warn!(error = %e, "could not queue extraction"),
    }
}

impl Memories {
    /// Runs the extraction work that waits for a quiet conversation now
    /// (all personas', or `persona`'s) and returns once none is left queued
    /// or running, or `limit` has passed. Returns how many jobs were waiting.
    pub async fn extract_now(&self, persona: Option<&str>, limit: std::time::Duration) -> crate::Result<usize> {
        let only = match persona {
            Some(p) => Some(self.ctx.ledger.find_persona(p).await?.id),
            None => None,
        };
        let waiting = |items: &[QueueItem]| {
            items
                .iter()
                .filter(|i| i.kind == EXTRACT_KIND && only.as_ref().is_none_or(|p| i.persona_id.as_ref() == Some(p)))
                .filter(|i| matches!(i.state, ledger::QueueState::Pending | ledger::QueueState::Running))
                .count()
        };
        let items = self.ctx.ledger.queue_items(None).await?;
        let found = waiting(&items);
        let now = self.ctx.ledger.now();
        let personas: std::collections::BTreeSet<String> = items
            .iter()
            .filter(|i| i.kind == EXTRACT_KIND && i.state == ledger::QueueState::Pending)
            .filter_map(|i| i.persona_id.clone())
            .filter(|p| only.as_ref().is_none_or(|o| o == p))
            .collect();
        for p in &personas {
            self.ctx.ledger.postpone(EXTRACT_KIND, p, now).await?;
        }
        self.ctx.wake.notify_one();
        let until = std::time::Instant::now() + limit;
        while waiting(&self.ctx.ledger.queue_items(None).await?) > 0 {
            if std::time::Instant::now() >= until {
                return Err(AppError::new("TIMEOUT", format!("extraction was still running after {} s", limit.as_secs())));
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        Ok(found)
    }
}

/// Runs one extraction job (the queue worker calls it).
pub(crate) async fn run(memory: &Arc<Memories>, item: &QueueItem) -> Result<(), Failure> {
    let job: ExtractJob = serde_json::from_value(item.body.clone())
        .map_err(|e| Failure::Final(AppError::invalid(format!("unreadable job: {e}"))))?;
    let persona = memory.ctx.ledger.persona(&job.persona_id).await.map_err(|e| Failure::Final(e.into()))?;
    let Some(message) = memory.ctx.ledger.message(&job.message_id).await.map_err(|e| Failure::Retry(e.into()))? else {
        return Ok(()); // erased meanwhile: nothing left to learn from
    };
    let said = statements(&message.content);
    if said.is_empty() {
        return Ok(()); // only questions or greetings: nothing to learn about the writer
    }
    let spec = ModelSpec::parse(&persona.model).map_err(Failure::Final)?;
    let served = memory.ctx.serving(&spec).await.map_err(Failure::Final)?;
    let (spec, provider) = (served.spec, served.provider);
    let mut request = CompletionRequest::chat(spec.model.clone(), scan_prompt(&said));
    request.max_tokens = EXTRACT_MAX_TOKENS;
    request.temperature = 0.2;
    request.json_schema = Some(scan_schema());
    let completion = memory.ctx.complete_in_background(provider.as_ref(), request).await?;
    let scan = parse_scan(&completion.text).map_err(Failure::Retry)?;
    let learned = learn(memory, &persona, &message, scan).await.map_err(Failure::Retry)?;
    if learned > 0 {
        memory.ctx.emit(AppEvent::MemoriesChanged { persona_id: Some(persona.id.clone()) });
    }
    Ok(())
}

/// Steps 2 and 3 for every item the scan found: one atomic append, signed
/// by the persona. Returns how many events were written.
pub(crate) async fn learn(memory: &Memories, persona: &Persona, message: &Message, scan: Scan) -> Result<usize, AppError> {
    let found = found_items(scan, message);
    if found.is_empty() {
        return Ok(0);
    }
    memory.ensure_embedder().await;
    let group = memory.ctx.ledger.persona_groups(&persona.id).await?.group_primary;
    let mut known = memory.ctx.ledger.memories(Some(std::slice::from_ref(&group)), false).await?;
    let mut drafts = Vec::new();
    let mut to_index = Vec::new();
    let mut superseded = Vec::new();
    for f in found {
        let same_kind: Vec<&Memory> = known.iter().filter(|m| m.kind == f.kind).collect();
        let candidates = candidates(memory, &group, &f.text, same_kind).await?;
        let texts: Vec<String> = candidates.iter().map(|m| m.text.clone()).collect();
        let embedder = memory.index.embedder();
        let text = f.text.clone();
        let scores = tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            memory::similarities(&text, &refs, embedder.as_deref())
        })
        .await
        .map_err(|e| AppError::new("STORAGE_LOAD_FAILED", e.to_string()))??;
        let best = scores
            .iter()
            .enumerate()
            .filter(|(_, s)| **s >= memory::MERGE_THRESHOLD)
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(i, _)| candidates[i].clone())
            // The same person by name is the same person.
            .or_else(|| {
                (f.kind == MemoryKind::Person)
                    .then(|| candidates.iter().find(|m| key(&m.subject) == key(&f.subject)).cloned())
                    .flatten()
            });
        if let Some(m) = best {
            drafts.push(Draft::by(
                &persona.id,
                EventBody::MemoryUpdated {
                    memory_id: m.id.clone(),
                    text: None,
                    confidence: Some(gain_confidence(m.confidence)),
                    validation: None,
                    superseded_by: None,
                    add_source_ids: vec![message.id.clone()],
                },
            ));
            continue;
        }
        let memory_id = uuid::Uuid::now_v7().to_string();
        drafts.push(Draft::by(
            &persona.id,
            EventBody::MemoryLearned {
                memory_id: memory_id.clone(),
                memory_kind: f.kind,
                subject: f.subject.clone(),
                text: f.text.clone(),
                group: group.clone(),
                learned_by: persona.id.clone(),
                source_ids: vec![message.id.clone()],
                quote: f.quote.clone(),
                confidence: INITIAL_CONFIDENCE,
            },
        ));
        // A newer fact about the same subject supersedes the older one,
        // unless the human confirmed the older one (it is locked).
        if f.kind == MemoryKind::Fact && !f.subject.is_empty() {
            for old in known.iter().filter(|m| {
                m.kind == MemoryKind::Fact && supersedes(&f.subject, &f.text, m) && m.validation != Validation::Human
            }) {
                drafts.push(Draft::by(
                    &persona.id,
                    EventBody::MemoryUpdated {
                        memory_id: old.id.clone(),
                        text: None,
                        confidence: None,
                        validation: None,
                        superseded_by: Some(memory_id.clone()),
                        add_source_ids: Vec::new(),
                    },
                ));
                superseded.push(old.id.clone());
            }
            known.retain(|m| !superseded.contains(&m.id));
        }
        to_index.push(NewItem {
            item_id: memory_id.clone(),
            kind: ItemKind::Memory,
            persona_id: group_key(&group),
            external_id: None,
            source_ids: vec![message.id.clone()],
            text: f.text.clone(),
            ts_ms: memory::now_ms(),
            seq: None,
            role: None,
        });
        // Later items of this scan match against it too.
        known.push(Memory {
            id: memory_id,
            kind: f.kind,
            subject: f.subject,
            text: f.text,
            group: group.clone(),
            learned_by: persona.id.clone(),
            source_ids: vec![message.id.clone()],
            quote: f.quote,
            confidence: INITIAL_CONFIDENCE,
            validation: Validation::None,
            superseded_by: None,
            exposure: 1.0,
            learned_ts: String::new(),
            created_seq: 0,
            updated_seq: 0,
        });
    }
    // The person may have deleted the message while the model was reading
    // it: what was learned from it must not bring its words back. The ledger
    // checks under the same lock erasure takes, so there is no window.
    let n = drafts.len();
    let Some(receipts) = memory.ctx.ledger.append_drafts_citing(drafts, std::slice::from_ref(&message.id)).await? else {
        return Ok(0);
    };
    // The index rows carry the seq of their `memory_learned` event (erasure finds them by it).
    let learned_seqs = receipts.iter().filter(|r| r.kind == "memory_learned").map(|r| r.seq);
    for (item, seq) in to_index.iter_mut().zip(learned_seqs) {
        item.seq = Some(seq);
    }
    if let Err(e) = memory.index.index_items(&to_index).await {
        tracing::warn!(error = %e, "could not index new memories; they are indexed on the next start");
    }
    for id in superseded {
        if let Err(e) = memory.index.remove_item(&id).await {
            tracing::warn!(error = %e, "could not drop a superseded memory from the index");
        }
    }
    Ok(n)
}

/// Whether a new fact (`subject`, `text`) replaces the older fact `old`:
/// the same subject, and the two say it in the same frame (they share a
/// content word: "Lives in Lisbon" → "Lives in Porto"). A small model
/// files different things under one label ("name": the writer's "Marta",
/// then the cat's "Pimenta"); without a shared word those are two facts,
/// and the older one must not vanish.
fn supersedes(subject: &str, text: &str, old: &Memory) -> bool {
    key(&old.subject) == key(subject) && stems(text).iter().any(|w| stems(&old.text).contains(w))
}

/// The memories to compare a new item with: all of its kind in the group
/// when they are few, else the retrieval's best candidates among them.
async fn candidates(memory: &Memories, group: &str, text: &str, same_kind: Vec<&Memory>) -> Result<Vec<Memory>, AppError> {
    if same_kind.len() <= COMPARE_ALL_UP_TO {
        return Ok(same_kind.into_iter().cloned().collect());
    }
    let scope = Scope::Keys(vec![group_key(group)]);
    let hits = memory.index.recall(&scope, None, text, RETRIEVED_CANDIDATES, memory::now_ms()).await?;
    Ok(hits.hits.iter().filter_map(|h| same_kind.iter().find(|m| m.id == h.item_id).map(|m| (*m).clone())).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_are_located_by_character_offsets() {
        let m = "Olá! Eu adoro café forte.";
        let (s, e) = locate_quote(m, "adoro café").expect("found");
        assert_eq!(m.chars().skip(s as usize).take((e - s) as usize).collect::<String>(), "adoro café");
        assert_eq!((s, e), (8, 18));
        assert_eq!(locate_quote(m, "\"ADORO CAFÉ\""), Some((8, 18)), "case and quote marks ignored");
        // Lower-casing "İ" changes its byte length: offsets would be wrong, so no match.
        assert_eq!(locate_quote("İstanbul is home", "is home"), Some((9, 16)));
        assert_eq!(locate_quote("İstanbul is home", "IS HOME"), None);
        assert_eq!(locate_quote("I love Tea", "love tea"), Some((2, 10)));
        assert_eq!(locate_quote(m, "chá"), None);
    }

    #[test]
    fn confidence_gains_a_third_of_the_way_each_time() {
        assert!((gain_confidence(0.5) - 2.0 / 3.0).abs() < 1e-9);
        assert!((gain_confidence(gain_confidence(0.5)) - 7.0 / 9.0).abs() < 1e-9);
        assert_eq!(gain_confidence(1.0), 1.0);
    }

    #[test]
    fn items_the_message_never_said_and_the_writer_as_a_person_are_dropped() {
        let message = Message {
            id: "m".into(),
            persona_id: "p".into(),
            role: ledger::MessageRole::Human,
            content: "My name is Marta and I live in Lisbon. My brother Tomás is a doctor. I love playing the piano.".into(),
            ts: String::new(),
            read: false,
            seq: 1,
            context_status: Default::default(),
        };
        let scan = parse_scan(
            r#"{"facts":[{"subject":"home","text":"Lives in Lisbon"},{"subject":"job","text":"Is a poet"}],
                "traits":["friendly","loves music"],"topics":["piano"],
                "people":[{"name":"Marta","relation":"friend"},{"name":"Tomás","relation":"brother"},{"name":"Ana","relation":"sister"}],
                "quotes":["I love playing the piano"]}"#,
        )
        .expect("parses");
        let texts: Vec<String> = found_items(scan, &message).into_iter().map(|f| f.text).collect();
        assert_eq!(texts, ["Lives in Lisbon", "loves music", "piano", "Tomás (brother)", "I love playing the piano"], "{texts:?}");
    }

    #[test]
    fn only_statements_are_scanned_questions_and_bare_greetings_are_not() {
        assert_eq!(statements("Where do I live?"), "");
        assert_eq!(statements("Do you like music?"), "");
        assert_eq!(statements("Onde mora a minha irmã?"), "");
        assert_eq!(statements("Hi!"), "", "a greeting without a content word says nothing");
        assert_eq!(statements("Hi! My name is Marta and I live in Lisbon."), "My name is Marta and I live in Lisbon.");
        assert_eq!(statements("I just moved to Oslo. Where should I eat?"), "I just moved to Oslo.");
        assert_eq!(statements("Eu trabalho como arquiteta"), "Eu trabalho como arquiteta", "no final stop");
        assert_eq!(statements("It costs 3.50 today"), "It costs 3.50 today", "a dot inside a number ends nothing");
        assert_eq!(statements("Is it? I think so.\nMy dog is Rex!"), "I think so. My dog is Rex!");
    }

    #[test]
    fn the_scan_sees_a_worked_example_in_the_message_language_then_the_message_last() {
        for (message, example) in [("Moro em Manaus e tenho dois gatos.", SCAN_EXAMPLE_PT), ("I live in Oslo with two cats.", SCAN_EXAMPLE_EN)] {
            let prompt = scan_prompt(message);
            assert_eq!(prompt.len(), 4);
            assert!(matches!(prompt[2].role, Role::Assistant));
            assert_eq!(prompt[2].content, example.1, "{message}");
            assert!(prompt[1].content.contains(example.0));
            assert!(prompt[3].content.contains(&format!("\"{message}\"")));
            assert!(!prompt[3].content.contains(example.0));
        }
        // Each example answer is a valid scan in its message's own words.
        for (message, answer) in [SCAN_EXAMPLE_EN, SCAN_EXAMPLE_PT] {
            let example = parse_scan(answer).expect("the example parses");
            assert!(example.facts.iter().all(|f| grounded(&f.text, message)), "{example:?}");
            assert!(example.quotes.iter().all(|q| locate_quote(message, q).is_some()));
        }
        assert!(portuguese("Eu trabalho como arquiteta."));
        assert!(portuguese("Oi! Meu nome é Joana e eu moro em Recife."));
        assert!(!portuguese("My cat is called Pimenta, she is very lazy."));
        assert!(!portuguese("Hi there, my name is Owen."));
    }

    #[test]
    fn a_name_word_alone_does_not_ground_an_item() {
        let m = "My name is Marta.";
        assert!(grounded("Name is Marta", m));
        assert!(!grounded("Is named Bob", m), "only 'name' is shared");
        assert!(!grounded("Se chama Ana", "Meu nome é Joana, me chamo Jo."));
        // "May" the month reads as the modal verb to a word-level check: a
        // bare "May" is not kept, "Emma turns seven in May" is (by "Emma").
        let m = "My daughter Emma turns seven in May.";
        assert!(!grounded("May", m));
        assert!(grounded("Emma turns seven in May", m));
    }

    #[test]
    fn a_fact_supersedes_one_on_its_subject_only_when_said_in_the_same_frame() {
        let fact = |subject: &str, text: &str| Memory {
            id: "m".into(),
            kind: MemoryKind::Fact,
            subject: subject.into(),
            text: text.into(),
            group: "General".into(),
            learned_by: "p".into(),
            source_ids: vec![],
            quote: None,
            confidence: INITIAL_CONFIDENCE,
            validation: Validation::None,
            superseded_by: None,
            exposure: 1.0,
            learned_ts: String::new(),
            created_seq: 0,
            updated_seq: 0,
        };
        assert!(supersedes("home", "Lives in Porto", &fact("home", "Lives in Lisbon")));
        assert!(supersedes("Job", "Works as a pilot", &fact("job", "Works as a nurse")));
        assert!(!supersedes("name", "Cat is named Pimenta", &fact("name", "Name is Marta")), "two things under one label");
        assert!(!supersedes("name", "Pimenta", &fact("name", "Marta")));
        assert!(!supersedes("work", "Lives in Porto", &fact("home", "Lives in Lisbon")), "another subject");
    }

    #[test]
    fn a_fact_given_as_a_bare_value_is_shown_with_its_subject() {
        assert_eq!(labelled("home", "Lisbon".into()), "Home: Lisbon");
        assert_eq!(labelled("cat's name", "Pimenta".into()), "Cat's name: Pimenta");
        assert_eq!(labelled("home", "Lives in Lisbon".into()), "Lives in Lisbon", "a sentence stays");
        assert_eq!(labelled("", "Lisbon".into()), "Lisbon");
        assert_eq!(labelled("job", "Job: nurse".into()), "Job: nurse", "the subject is already there");
        assert_eq!(labelled("name", "Is Marta".into()), "Is Marta", "a short sentence stays");
    }

    #[test]
    fn a_derived_word_the_model_made_up_does_not_ground_an_item() {
        let m = "I work as a nurse. It rained, so I stayed in. I'm a bit tired today.";
        assert!(grounded("Works as a nurse", m));
        assert!(grounded("tiredness", m), "tired → tiredness keeps five letters");
        assert!(!grounded("nursing", m));
        assert!(!grounded("staycation", m));
        assert!(grounded("Mora em Recife", "Eu moro em Recife."));
        assert!(grounded("médico", "Ela é médica."));
        assert!(grounded("Lives in Lisbon", "I live in Lisbon."));
    }

    #[test]
    fn a_name_given_to_the_writer_is_kept_only_when_it_is_theirs() {
        let message = Message {
            id: "m".into(),
            persona_id: "p".into(),
            role: ledger::MessageRole::Human,
            content: "My name is Marta. My cat is called Pimenta and my brother Ravi visits.".into(),
            ts: String::new(),
            read: false,
            seq: 1,
            context_status: Default::default(),
        };
        let scan = parse_scan(
            r#"{"facts":[{"subject":"name","text":"Is called Marta"},{"subject":"name","text":"Is called Pimenta"},
                {"subject":"name","text":"Ravi"},{"subject":"cat","text":"Cat is called Pimenta"}]}"#,
        )
        .expect("parses");
        let texts: Vec<String> = found_items(scan, &message).into_iter().map(|f| f.text).collect();
        assert_eq!(texts, ["Is called Marta", "Cat is called Pimenta"], "{texts:?}");
        assert_eq!(claimed_name("Se chama Tomás."), Some("tomás".into()));
        assert_eq!(claimed_name("Is called Tom and fixes bikes in Leeds"), None, "more than a name");
    }

    #[test]
    fn scans_parse_from_bare_or_wrapped_json_and_fail_with_the_code() {
        let s = parse_scan("Sure! ```json\n{\"facts\":[{\"subject\":\"home\",\"text\":\"Lives in Lisbon\"}]}\n```").expect("parses");
        assert_eq!(s.facts.len(), 1);
        assert!(s.traits.is_empty());
        assert_eq!(parse_scan("not json").expect_err("fails").code, "LLM_INVALID_JSON");
        assert_eq!(parse_scan("{\"facts\": [}").expect_err("fails").code, "LLM_INVALID_JSON");
    }
}
