//! How a reply's prompt is chosen and kept for the model that reads it:
//! the compact prompt's window of turns, the prompt profile per model, and
//! the note when a persona's language is beyond its model.

use providers::ModelCapability;

use super::Conversation;
use crate::error::AppError;
use crate::prompt::{compact, ChosenProfile, PromptProfile};
use crate::prompt::profile::{choose, language_warning, OVERRIDE_PREFIX};
use crate::Result;

/// How many of the persona's latest messages are looked at to tell the
/// person's words from the persona's among recalled lines.
const SAID_LOOKUP: u32 = 1_000;

impl Conversation {
    /// The compact prompt of `persona`'s next reply (see [`compact`]); keeps
    /// where its window of turns starts for the next turn.
    pub(crate) async fn compact_messages(
        &self,
        persona: &ledger::Persona,
        history: &[ledger::Message],
        memories: &crate::memory::ReplyMemories,
    ) -> Vec<providers::ChatMessage> {
        self.compact_messages_kept(persona, history, memories, true).await
    }

    /// [`Conversation::compact_messages`]; `keep`: whether its layout is
    /// kept for the next turn (not for a draft, which may never be sent).
    pub(crate) async fn compact_messages_kept(
        &self,
        persona: &ledger::Persona,
        history: &[ledger::Message],
        memories: &crate::memory::ReplyMemories,
        keep: bool,
    ) -> Vec<providers::ChatMessage> {
        let (language, said) = tokio::join!(self.ctx.ledger.persona_language(&persona.id), self.ctx.ledger.messages(&persona.id, Some(SAID_LOOKUP)));
        let setting = language.ok().flatten().map(|l| ::office::Language::parse(&l)).unwrap_or_default();
        // People are answered in the language they write in; the persona's
        // setting decides only when the message does not tell.
        let newest = history.iter().rev().find(|m| m.role == ledger::MessageRole::Human);
        let language = newest.and_then(|m| ::office::Language::detect(&m.content)).unwrap_or(setting);
        // Recall also finds the persona's own past replies; only what the
        // person said (or a remembered fact about them) is offered as a fact.
        let said: std::collections::HashSet<String> = said
            .unwrap_or_default()
            .into_iter()
            .filter(|m| m.role == ledger::MessageRole::Human)
            .map(|m| m.id)
            .collect();
        let recalled = memories
            .lines
            .iter()
            .zip(&memories.item_ids)
            .map(|(line, id)| (line.clone(), line.starts_with("[known about them]") || said.contains(id)))
            .collect();
        let kept = self.prompt_layout(&persona.id);
        let input = compact::CompactInput { persona, language, history, layout: &kept, recalled };
        let (messages, layout) = compact::messages(&input);
        if keep && layout != kept {
            self.keep_prompt_layout(&persona.id, &layout);
        }
        messages
    }
}

impl Conversation {
    /// What the next reply's compact prompt will start with (see
    /// [`compact::next_turn_prefix`]), in the language the person wrote in
    /// last; the window's start is not moved. It ends with the opening of
    /// the remembered lines ([`compact::facts_opening`]), which a question
    /// about something said earlier brings.
    pub(crate) async fn next_turn_prefix(&self, persona: &ledger::Persona, history: &[ledger::Message]) -> Vec<providers::ChatMessage> {
        let setting = self.ctx.ledger.persona_language(&persona.id).await.ok().flatten().map(|l| ::office::Language::parse(&l)).unwrap_or_default();
        let newest = history.iter().rev().find(|m| m.role == ledger::MessageRole::Human);
        let language = newest.and_then(|m| ::office::Language::detect(&m.content)).unwrap_or(setting);
        let kept = self.prompt_layout(&persona.id);
        // The history as the next message will find it: once it is sent,
        // the oldest message may no longer be read for the prompt, and what
        // the person said before the window would then be told without it.
        let mut history = history.to_vec();
        crate::office::make_room_for_one(&mut history);
        let input = compact::CompactInput { persona, language, history: &history, layout: &kept, recalled: Vec::new() };
        let mut prefix = compact::next_turn_prefix(&input);
        prefix.push(compact::facts_opening(language));
        prefix
    }

    /// The layout `persona`'s last compact prompt was sent with; empty when
    /// none is kept (a first turn, after an erasure) or it cannot be read.
    fn prompt_layout(&self, persona_id: &str) -> compact::Layout {
        let path = self.layout_file(persona_id);
        std::fs::read(&path).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok()).unwrap_or_default()
    }

    /// Keeps `layout` for the next turn, which may run in another process.
    /// A layout that cannot be kept only costs the next turn some reading.
    fn keep_prompt_layout(&self, persona_id: &str, layout: &compact::Layout) {
        let bytes = serde_json::to_vec(layout).unwrap_or_default();
        if let Err(e) = crate::paths::write_atomically(&self.layout_file(persona_id), &bytes) {
            tracing::debug!(error = %e, "the prompt layout could not be kept");
        }
    }

    fn layout_file(&self, persona_id: &str) -> std::path::PathBuf {
        // Persona ids are generated here, but a file name takes no chances.
        let name: String = persona_id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
        self.ctx.data_dir().prompt_layouts().join(format!("{name}.json"))
    }
}

impl Conversation {
    /// Posts [`language_warning`] to the conversation once (it is looked
    /// for among the persona's recent messages).
    pub(crate) async fn warn_language_once(&self, persona_id: &str, chosen: &ChosenProfile) {
        let language = self.ctx.ledger.persona_language(persona_id).await.ok().flatten().map(|l| ::office::Language::parse(&l)).unwrap_or_default();
        let Some(warning) = language_warning(&chosen.capability, language) else { return };
        let recent = self.ctx.ledger.messages(persona_id, Some(200)).await.unwrap_or_default();
        if recent.iter().any(|m| m.role == ledger::MessageRole::System && m.content == warning) {
            return;
        }
        if let Err(e) = self.tools.post_system(persona_id, &warning).await {
            tracing::warn!(code = e.code, "could not post the model-language note");
        }
    }

    /// Posts `notice` in the chat unless it is already the latest note
    /// there (a reply per message must not repeat it under each one).
    pub(crate) async fn say_once(&self, persona_id: &str, notice: &str) {
        let recent = self.ctx.ledger.messages(persona_id, Some(50)).await.unwrap_or_default();
        if recent.iter().rev().find(|m| m.role == ledger::MessageRole::System).is_some_and(|m| m.content == notice) {
            return;
        }
        if let Err(e) = self.tools.post_system(persona_id, notice).await {
            tracing::warn!(code = e.code, "could not post a note in the chat");
        }
    }

    /// Forces `model`'s prompt profile (`compact`, `full`), or back to the
    /// automatic choice with `auto`.
    pub async fn set_prompt_profile(&self, model: &str, profile: &str) -> Result<()> {
        let value = match profile.trim().to_lowercase().as_str() {
            "auto" => None,
            p if PromptProfile::parse(p).is_some() => Some(p.to_owned()),
            other => return Err(AppError::invalid(format!("unknown prompt profile {other:?}: use compact, full or auto"))),
        };
        let key = format!("{OVERRIDE_PREFIX}{model}");
        self.ctx.ledger.append(ledger::HUMAN_ENTITY, ledger::EventBody::RuntimeSettingSet { key, value }).await?;
        Ok(())
    }

    /// The profile for a reply of `model` on `provider`.
    pub(crate) async fn prompt_profile(&self, provider: &dyn providers::Provider, model: &str, local: bool) -> ChosenProfile {
        let forced = self.ctx.ledger.runtime_setting(&format!("{OVERRIDE_PREFIX}{model}")).await.ok().flatten();
        let capability = if local { provider.capability(model).await } else { ModelCapability::default() };
        choose(&capability, local, model, forced.as_deref())
    }
}
