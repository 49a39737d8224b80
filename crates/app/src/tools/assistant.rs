//! The runtime in the app: the planner in the reply path, the
//! deterministic intents, the tool pipeline with confirmations, and the
//! guards on what goes in and out.
//!
//! A persona's reply is one planner JSON object
//! `{action: CALL_TOOL | RESPOND, tool, args, message}`, decoded under the
//! planner's JSON Schema (a grammar on the local engine). A RESPOND message
//! streams while the model writes it ([`RespondStream`]); a tool call goes
//! through the pipeline (parse → validate → authorize → classify → propose
//! or execute → format → audit), every step a `tool_audited` ledger event
//! and a log line with the call's correlation id.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ledger::{EventBody, Ledger, MessageRole, Persona};
use providers::{ChatMessage, Completion, CompletionRequest, FinishReason, Role as ChatRole, ToolCall, ToolDefinition};
use runtime::plan::PlanStep;
use runtime::{
    CallContext, DeterministicIntent, Outcome, Pipeline, PipelineError, Role, Stoppable,
    ToolRegistry, ToolSpec,
};
use serde_json::{Map, Value};
use tokio::runtime::Handle;

use super::Tools;
use crate::error::AppError;
use super::metadata::MetadataService;
use crate::models::ModelSpec;
use super::turns::Conversations;
use super::plans::{LocalPlan, ModelTurn, Plans};
use runtime::state::{ConversationEvent, ConversationState};
use super::exec::{AppTools, LedgerAudit};
use crate::conversation::views::MessageView;
use crate::context::Context;
use crate::events::AppEvent;
use super::outcome::{receipt_of, refusal, role_of, Planned};
use super::views::{ProposalView, ToolResultView, ToolSettingView};
use crate::Result;

pub use runtime::RespondStream;

/// Saved items listed for the planner when it may delete one.
const TARGET_ITEMS: u32 = 10;
/// Tools whose `item_id` must name an existing saved item.
const TARGETED: &[&str] = &["delete_memory", "forget"];

/// Planner replies that may call a tool are decoded greedily: arguments
/// are copied from the message, not invented.
const PLANNER_TEMPERATURE: f32 = 0.0;

/// Test-only override of the 5-minute confirmation lifetime, in seconds.
pub const CONFIRMATION_TTL_ENV: &str = "LEDGERMIND_TEST_CONFIRMATION_TTL_SECS";

/// The runtime setting that switches a tool off (absent: on).
fn tool_setting_key(tool: &str) -> String {
    format!("tool.{tool}.enabled")
}

pub(crate) struct Assistant {
    ctx: Arc<Context>,
    pub(crate) pipeline: Arc<Pipeline>,
    pub(crate) plans: Plans,
    pub(crate) conversations: Arc<Conversations>,
    pub(crate) tools: Arc<AppTools>,
    pub(crate) metadata: Arc<MetadataService>,
    /// Runs each tool call on its own thread and stops it at the stall limit.
    stoppable: Arc<Stoppable>,
    /// Writes of the waiting questions to the ledger, one at a time.
    pub(crate) awaiting_writes: tokio::sync::Mutex<()>,
    /// Conversations whose current turn's prompt quoted document passages:
    /// their tool calls wait for the person's confirmation.
    pub(crate) quoted_turns: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// The ledger's clock (the engine's: tests move a manual one) as the
/// runtime's, for proposal lifetimes and conversation timeouts.
struct LedgerClock(Arc<Ledger>);

impl runtime::Clock for LedgerClock {
    fn now(&self) -> time::OffsetDateTime {
        self.0.now()
    }
}

/// The most tool runs and compensations one pipeline operation may hold
/// (a plan: each step and its undo), each bounded by the stall limit.
const CALLS_PER_OPERATION: u32 = 2 * runtime::plan::MAX_PLAN_STEPS as u32 + 1;

impl Assistant {
    /// Must be called inside the tokio runtime.
    pub(crate) fn new(ctx: Arc<Context>, stall_limit: std::time::Duration, metadata_timeout: std::time::Duration) -> Self {
        let handle = Handle::current();
        let metadata = Arc::new(MetadataService::new(ctx.clone(), metadata_timeout));
        let tools = Arc::new(AppTools::new(ctx.clone(), handle.clone(), metadata.clone()));
        let audit = Arc::new(LedgerAudit::new(ctx.clone(), handle));
        // A tool without an answer for the stall limit is stopped (its
        // later writes refused), not only reported.
        let stoppable = Arc::new(Stoppable::new(tools.clone(), stall_limit));
        let clock: Arc<dyn runtime::Clock> = Arc::new(LedgerClock(ctx.ledger.clone()));
        let mut pipeline = Pipeline::new(Arc::new(ToolRegistry::builtin()), clock.clone(), audit, stoppable.clone());
        if let Some(secs) = std::env::var(CONFIRMATION_TTL_ENV).ok().and_then(|v| v.parse::<i64>().ok()) {
            tracing::warn!(secs, "confirmation lifetime overridden for tests");
            pipeline = pipeline.with_confirmation_ttl(time::Duration::seconds(secs.max(1)));
        }
        Self {
            ctx,
            pipeline: Arc::new(pipeline),
            plans: Plans::default(),
            conversations: Arc::new(Conversations::new(clock, stall_limit)),
            tools,
            metadata,
            stoppable,
            awaiting_writes: tokio::sync::Mutex::new(()),
            quoted_turns: std::sync::Mutex::default(),
        }
    }

    /// Runs one pipeline operation on a blocking thread (the executors and
    /// the audit sink block on the ledger).
    pub(crate) async fn run<T, F>(&self, persona_id: &str, role: Role, correlation_id: &str, op: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Pipeline, &CallContext<'_>) -> T + Send + 'static,
    {
        self.tools.bind(correlation_id, persona_id);
        let pipeline = self.pipeline.clone();
        // Tools switched off in Settings are refused (TOOL_DISABLED).
        let disabled = self.disabled_tools().await?;
        let conversation = persona_id.to_owned();
        let quoted_untrusted = self.quoted_turns.lock().is_ok_and(|q| q.contains(persona_id));
        let (persona_id, correlation_id) = (persona_id.to_owned(), correlation_id.to_owned());
        let task = tokio::task::spawn_blocking(move || {
            let enabled = |name: &str| !disabled.contains(name);
            let ctx = CallContext { enabled: &enabled, quoted_untrusted, ..CallContext::new(&persona_id, role, &correlation_id) };
            op(&pipeline, &ctx)
        });
        // Each tool call inside is stopped at the stall limit and fails like
        // any failure (a plan's earlier steps are undone), so a running
        // operation is progress for the conversation's watchdog. The whole
        // operation is bounded too, as a backstop (the ledger writes of
        // its audit could hang): then it cannot be abandoned, and the
        // timeout is reported, never retried.
        let limit = self.conversations.stall_limit();
        let backstop = limit * CALLS_PER_OPERATION;
        let every = (limit / 4).max(std::time::Duration::from_millis(50));
        let mut task = std::pin::pin!(tokio::time::timeout(backstop, task));
        let joined = loop {
            tokio::select! {
                joined = &mut task => break joined,
                () = tokio::time::sleep(every) => self.conversations.progress(&conversation),
            }
        };
        match joined {
            Ok(joined) => joined.map_err(|e| AppError::new("TOOL_FAILED", format!("the tool runner stopped: {e}"))),
            Err(_) => {
                self.conversations.time_out(&conversation);
                Err(AppError::new(
                    "TOOL_TIMEOUT",
                    format!(
                        "The action did not finish in {} s. It was not retried; if it finishes, its result is recorded in the ledger.",
                        backstop.as_secs()
                    ),
                ))
            }
        }
    }

    /// Tool threads still running, stopped ones included (tests wait for
    /// a stopped call's thread to end).
    pub(crate) fn tools_running(&self) -> usize {
        self.stoppable.running()
    }
}

impl Assistant {
    /// The executable tools switched off in Settings: one query for all
    /// of them (it runs twice before every reply's first token).
    async fn disabled_tools(&self) -> Result<HashSet<String>> {
        let settings: HashMap<String, String> = self.ctx.ledger.runtime_settings_with_prefix("tool.").await?.into_iter().collect();
        Ok(self
            .pipeline
            .registry()
            .all()
            .iter()
            .filter(|t| t.executable && settings.get(&tool_setting_key(&t.name)).map(String::as_str) == Some("false"))
            .map(|t| t.name.clone())
            .collect())
    }
}

/// The planner request for a reply, how to decode its stream, and (a
/// local model, a message with several commands) the plan it starts.
pub(crate) struct PlannerTurn {
    pub request: CompletionRequest,
    pub stream: RespondStream,
    pub local_plan: Option<LocalPlan>,
}

impl PlannerTurn {
    fn single(request: CompletionRequest, stream: RespondStream) -> Self {
        Self { request, stream, local_plan: None }
    }
}

impl From<PipelineError> for AppError {
    fn from(e: PipelineError) -> Self {
        AppError::new(e.code(), e.to_string())
    }
}

// ----- the planner prompt -----

/// One line per tool: `name(arg, optional?): description`.
fn tool_line(t: &ToolSpec) -> String {
    let required: Vec<&str> = t.args_schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let args: Vec<String> = t.args_schema["properties"]
        .as_object()
        .map(|p| {
            p.keys().map(|k| if required.contains(&k.as_str()) { k.clone() } else { format!("{k}?") }).collect()
        })
        .unwrap_or_default();
    format!("- {}({}): {}", t.name, args.join(", "), t.description)
}

/// The instructions for a model with native function calling: the tools
/// themselves travel as the provider's `tools`.
fn native_instructions() -> String {
    "Call one of the offered tools when the user asks for what it does, with the user's own words in its \
     arguments; otherwise answer in words."
        .to_owned()
}

/// The offered tools in the provider's function-calling form, with the
/// argument schemas of the planner schema (which may narrow them, e.g. the
/// item ids a delete may name).
fn native_tools(schema: &Value, tools: &[ToolSpec]) -> Vec<ToolDefinition> {
    let shapes = schema["anyOf"].as_array().map(Vec::as_slice).unwrap_or_default();
    tools
        .iter()
        .map(|t| {
            let parameters = shapes
                .iter()
                .find(|s| s["properties"]["tool"]["const"] == t.name.as_str())
                .map_or_else(|| t.args_schema.clone(), |s| s["properties"]["args"].clone());
            ToolDefinition { name: t.name.clone(), description: t.description.clone(), parameters }
        })
        .collect()
}

/// What a reply's native function calls amount to.
enum NativeCalls {
    None,
    /// One call, as a planner CALL_TOOL object (same pipeline as JSON).
    One(String),
    /// Several calls: a multi-step plan, in order.
    Plan(Vec<PlanStep>),
}

/// Arguments that are not a JSON object are invalid output (retried, then
/// LLM_INVALID_JSON).
fn native_calls(calls: &[ToolCall]) -> Result<NativeCalls> {
    let parse = |call: &ToolCall| -> Result<Map<String, Value>> {
        let text = if call.arguments.trim().is_empty() { "{}" } else { call.arguments.as_str() };
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(args)) => Ok(args),
            Ok(_) => Err(AppError::new("LLM_INVALID_JSON", format!("the model's arguments for {} are not a JSON object", call.name))),
            Err(e) => Err(AppError::new("LLM_INVALID_JSON", format!("the model's arguments for {} are not JSON: {e}", call.name))),
        }
    };
    match calls {
        [] => Ok(NativeCalls::None),
        [call] => {
            let args = parse(call)?;
            Ok(NativeCalls::One(serde_json::json!({"action": "CALL_TOOL", "tool": call.name, "args": args}).to_string()))
        }
        calls => Ok(NativeCalls::Plan(
            calls.iter().map(|c| Ok(PlanStep { tool: c.name.clone(), args: parse(c)?, message: None })).collect::<Result<_>>()?,
        )),
    }
}

/// The planner's instructions when tools are offered. No example
/// arguments: a tiny model copies them instead of the user's words.
fn planner_instructions(tools: &[ToolSpec]) -> String {
    let lines: Vec<String> = tools.iter().map(tool_line).collect();
    format!(
        "Answer with one JSON object.\n\
         To use a tool: {{\"action\":\"CALL_TOOL\",\"args\":{{...}},\"tool\":\"name\"}}, \
         with the user's own words in args.\n\
         To answer in words: {{\"action\":\"RESPOND\",\"message\":\"...\"}}\n\
         Tools:\n{}",
        lines.join("\n")
    )
}

impl Tools {
    /// The tools offered to this persona's planner: allowed for its role and
    /// executable here. Enrichment stays offered without a configured
    /// service, so asking for it gets the clear "configure one" answer.
    pub(crate) async fn offered_tools(&self, persona: &Persona) -> Vec<ToolSpec> {
        let disabled = self.assistant.disabled_tools().await.unwrap_or_else(|e| {
            // Fail closed: without the settings, offer no tool at all.
            tracing::warn!(error = %e, "tool settings unreadable; no tools offered");
            self.assistant.pipeline.registry().all().iter().map(|t| t.name.clone()).collect()
        });
        let enabled = |name: &str| !disabled.contains(name);
        self.assistant.pipeline.registry().offered(role_of(persona), &enabled).into_iter().cloned().collect()
    }

    /// Turns a chat request into a planner request. The router picks the
    /// plausible tools for the message: none → the only action is RESPOND,
    /// so the model writes the message directly (streamed as is, no JSON
    /// overhead for plain chat); some → one JSON object under the planner
    /// schema (RESPOND or CALL_TOOL with those tools; CALL_TOOL only for a
    /// command such as "save the movie …"). NOOP is never an answer to a
    /// message. Returns the request and the matching stream decoder.
    pub(crate) async fn planner_request(&self, persona: &Persona, request: CompletionRequest) -> PlannerTurn {
        let offered = self.offered_tools(persona).await;
        self.planner_request_offering(persona, &offered, request).await
    }

    /// [`Tools::planner_request`] with the tools offered to the persona
    /// already read (a reply reads them beside its frame).
    pub(crate) async fn planner_request_offering(&self, persona: &Persona, offered: &[ToolSpec], mut request: CompletionRequest) -> PlannerTurn {
        let names: Vec<&str> = offered.iter().map(|t| t.name.as_str()).collect();
        // A cloud model gets the tools through its native function calling
        // (several calls = a plan); a local model's JSON protocol gives one
        // action per reply, so a message with several commands becomes an
        // open plan, planned one command at a time (see plans.rs).
        let native = ModelSpec::parse(&persona.model).is_ok_and(|m| !m.is_local());
        let last_user = request.messages.iter().rposition(|m| m.role == ChatRole::User);
        let message = last_user.and_then(|i| request.messages.get(i)).map(|m| m.content.clone()).unwrap_or_default();
        let parts = if native { Vec::new() } else { runtime::router::command_parts(&message) };
        let local_plan = (parts.len() > 1).then(|| LocalPlan::new(request.clone(), parts.clone()));
        let routed = parts.first().filter(|_| local_plan.is_some()).unwrap_or(&message);
        let routing = runtime::router::route(routed, &names);
        tracing::debug!(?routing, plan_parts = parts.len(), "planner routing for this message");
        if routing.tools.is_empty() {
            return PlannerTurn::single(request, RespondStream::raw());
        }
        // Deleting needs an id the model cannot know: the newest items are
        // listed in the prompt and the grammar allows only their ids.
        let targets = if routing.tools.iter().any(|t| TARGETED.contains(t)) {
            named_targets(self.ctx.ledger.items(None, TARGET_ITEMS).await.unwrap_or_default(), routed)
        } else {
            Vec::new()
        };
        let tools: Vec<ToolSpec> = offered
            .iter()
            .filter(|t| routing.tools.contains(&t.name.as_str()))
            .filter(|t| !targets.is_empty() || !TARGETED.contains(&t.name.as_str()))
            .cloned()
            .collect();
        if tools.is_empty() {
            return PlannerTurn::single(request, RespondStream::raw());
        }
        let refs: Vec<&ToolSpec> = tools.iter().collect();
        let mut schema = runtime::planner_json_schema(&refs);
        if let Some(shapes) = schema["anyOf"].as_array_mut() {
            shapes.retain(|s| {
                let action = &s["properties"]["action"]["const"];
                action == "CALL_TOOL" || (action == "RESPOND" && !routing.must_call)
            });
            let ids: Vec<&str> = targets.iter().map(|i| i.id.as_str()).collect();
            for s in shapes.iter_mut() {
                let targeted = s["properties"]["tool"]["const"].as_str().is_some_and(|t| TARGETED.contains(&t));
                if targeted {
                    s["properties"]["args"]["properties"]["item_id"] = serde_json::json!({"enum": ids});
                }
                // A small local model copies or invents arguments: for a
                // command, they are taken from the command's own words.
                if routing.must_call && !native && s["properties"]["action"]["const"] == "CALL_TOOL" {
                    runtime::router::ground_args(&mut s["properties"]["args"], routed);
                }
                if let Some(p) = s["properties"].as_object_mut() {
                    // A short reply in the tool call's message only slows the model.
                    if p.get("action").is_some_and(|a| a["const"] == "CALL_TOOL") {
                        p.remove("message");
                    }
                }
            }
        }
        if let (Some(i), Some(_)) = (last_user, &local_plan) {
            // The first command of the plan is planned now, the rest later.
            request.messages[i].content = routed.clone();
        }
        if routing.must_call {
            // A command's arguments come from the command itself: earlier
            // turns only give a small model text to copy by mistake.
            let last = last_user;
            let mut i = 0;
            request.messages.retain(|m| {
                let keep = m.role == ChatRole::System || Some(i) == last;
                i += 1;
                keep
            });
        }
        let mut instructions = if native { native_instructions() } else { planner_instructions(&tools) };
        if !targets.is_empty() && tools.iter().any(|t| TARGETED.contains(&t.name.as_str())) {
            instructions.push_str("\nSaved items (item_id: what):");
            for i in &targets {
                instructions.push_str(&format!("\n- {}: {} \"{}\"", i.id, i.kind, i.title));
            }
        }
        match request.messages.iter_mut().find(|m| m.role == ChatRole::System) {
            Some(system) => {
                system.content.push_str("\n\n");
                system.content.push_str(&instructions);
            }
            None => request.messages.insert(0, ChatMessage { role: ChatRole::System, content: instructions }),
        }
        request.temperature = PLANNER_TEMPERATURE;
        if native {
            request.tools = native_tools(&schema, &tools);
            request.tool_required = routing.must_call;
            // Text is the RESPOND message itself and streams as is.
            return PlannerTurn::single(request, RespondStream::raw());
        }
        request.json_schema = Some(schema);
        PlannerTurn { request, stream: RespondStream::new(), local_plan }
    }

    /// Judges the planner's finished reply. `Err` is a reply that must be
    /// retried (invalid JSON); refused tool calls are answered in words.
    /// The conversation moves on to TOOL_PROPOSED or RESPONDING.
    pub(crate) async fn settle_planner_reply(
        &self,
        persona: &Persona,
        completion: &Completion,
        streamed: &RespondStream,
        plan: Option<(LocalPlan, &ModelTurn)>,
    ) -> Result<Planned> {
        let planned = self.judge_planner_reply(persona, completion, streamed, plan).await;
        if planned.is_ok() {
            self.turn_decided(&persona.id);
        }
        planned
    }

    async fn judge_planner_reply(
        &self,
        persona: &Persona,
        completion: &Completion,
        streamed: &RespondStream,
        plan: Option<(LocalPlan, &ModelTurn)>,
    ) -> Result<Planned> {
        let truncated = completion.finish == FinishReason::Length;
        let wrapped;
        let text = completion.text.as_str();
        let text = match native_calls(&completion.tool_calls)? {
            NativeCalls::Plan(steps) => return self.start_plan(persona, steps).await,
            // A native function call is the same planner action as a
            // CALL_TOOL object, and goes through the same pipeline.
            NativeCalls::One(call) => {
                wrapped = call;
                wrapped.as_str()
            }
            // RESPOND was the only action: the message was asked for directly.
            NativeCalls::None if streamed.is_raw() => {
                wrapped = serde_json::json!({"action": "RESPOND", "message": text.trim()}).to_string();
                wrapped.as_str()
            }
            NativeCalls::None => text,
        };
        if truncated && streamed.is_respond() {
            // Cut by the token limit mid-message: keep what was said.
            let mut content = streamed.message().trim().to_owned();
            content.push('…');
            return Ok(Planned { content, role: MessageRole::Persona });
        }
        // A local plan starts with a tool call; any other reply is judged
        // as a single one (an invalid one is retried).
        if let Some((local, turn)) = plan {
            let calls = runtime::parse_planner_reply(text, self.assistant.pipeline.registry())
                .is_ok_and(|r| matches!(r, runtime::PlannerReply::CallTool { .. }));
            if calls {
                return self.start_local_plan(persona, local, text.to_owned(), turn).await;
            }
        }
        let correlation_id = runtime::pipeline::new_correlation_id();
        let owned = text.to_owned();
        let outcome = self
            .assistant
            .run(&persona.id, role_of(persona), &correlation_id, move |p, ctx| p.handle_planner_text(ctx, &owned))
            .await?;
        match outcome {
            Ok(Outcome::Responded { message }) => Ok(Planned { content: self.checked_output(message).await, role: MessageRole::Persona }),
            Ok(Outcome::Noop) => Err(AppError::new("LLM_INVALID_JSON", "the model chose to say nothing")),
            Ok(other) => Ok(self.announce(&persona.id, &correlation_id, other).await),
            // Only required arguments missing: the user is asked for them.
            Err(PipelineError::MissingArgs { tool, args, missing }) => {
                let lang = self.user_language(&persona.id).await;
                let question = self.ask_for(&persona.id, &correlation_id, &tool, args, missing, lang, None).await?;
                Ok(Planned { content: question, role: MessageRole::Persona })
            }
            Err(PipelineError::Planner(e)) if e.code() != "TOOL_UNKNOWN" => {
                tracing::warn!(correlation_id, error = %e, "planner reply rejected");
                Err(AppError::new("LLM_INVALID_JSON", format!("the model's reply was not a valid planner object: {e}")))
            }
            Err(e) => {
                tracing::warn!(correlation_id, code = e.code(), error = %e, "tool call refused");
                Ok(Planned { content: refusal(&e), role: MessageRole::System })
            }
        }
    }

    /// Output validation on a reply: over-long text is cut, unsafe markup
    /// and others' PII are reported in the log (the text is shown as plain
    /// text by the UI, never as HTML).
    pub(crate) async fn checked_output(&self, message: String) -> String {
        let ids: Vec<String> = self.ctx.ledger.items(None, 500).await.map(|v| v.into_iter().map(|i| i.id).collect()).unwrap_or_default();
        let exists = |id: &str| ids.iter().any(|i| i == id);
        let policy = runtime::OutputPolicy::plain(&exists);
        let violations = runtime::validate_output(&message, &policy);
        if violations.is_empty() {
            return message;
        }
        tracing::warn!(?violations, "reply failed output validation");
        let mut out: String = message.chars().take(policy.max_chars).collect();
        if violations.iter().any(|v| matches!(v, runtime::OutputViolation::UnknownReference { .. })) {
            out.push_str("\n\n(Note: this reply mentions an id that does not exist.)");
        }
        out
    }

    /// Tells the UI about a proposal or an executed call; returns the
    /// chat line that records it.
    pub(crate) async fn announce(&self, persona_id: &str, correlation_id: &str, outcome: Outcome) -> Planned {
        match outcome {
            Outcome::Proposed { proposal, superseded, .. } => {
                let view = ProposalView::from(proposal.as_ref());
                if let Some(old) = superseded {
                    self.ctx.emit(AppEvent::ProposalSettled { persona_id: persona_id.to_owned(), nonce: old.nonce.clone(), outcome: "superseded".into() });
                }
                self.ctx.emit(AppEvent::ToolProposed { proposal: view });
                Planned {
                    content: format!("Proposed `{}` with {} — waiting for your confirmation.", proposal.tool, proposal.args),
                    role: MessageRole::System,
                }
            }
            Outcome::Executed { tool, result, summary } => {
                if tool == "request_clarification" {
                    // The persona's own question: the conversation waits for the answer.
                    self.await_answer(persona_id, correlation_id, &summary).await;
                }
                let receipt = receipt_of(&result);
                self.ctx.emit(AppEvent::ToolExecuted {
                    result: ToolResultView {
                        persona_id: persona_id.to_owned(),
                        tool,
                        summary: summary.clone(),
                        correlation_id: correlation_id.to_owned(),
                        receipt,
                    },
                });
                Planned { content: summary, role: MessageRole::System }
            }
            Outcome::Responded { message } => Planned { content: message, role: MessageRole::Persona },
            Outcome::Noop => Planned { content: String::new(), role: MessageRole::System },
        }
    }

    pub(crate) async fn post_system(&self, persona_id: &str, content: &str) -> Result<MessageView> {
        self.post_message(persona_id, MessageRole::System, content).await
    }

    /// A line in the chat written by the runtime (`System`) or, for a
    /// question the runtime asks on its behalf, the persona.
    pub(crate) async fn post_message(&self, persona_id: &str, role: MessageRole, content: &str) -> Result<MessageView> {
        let message_id = uuid::Uuid::now_v7().to_string();
        let receipt = self
            .ctx.ledger
            .append(
                persona_id,
                EventBody::MessageAdded {
                    message_id: message_id.clone(),
                    persona_id: persona_id.to_owned(),
                    role,
                    content: content.to_owned(),
                    external_id: None,
                    said_at: None,
                },
            )
            .await?;
        self.ctx.emit(AppEvent::LedgerAppended { seq: receipt.seq, kind: receipt.kind });
        let view = self
            .ctx.ledger
            .messages(persona_id, Some(1))
            .await?
            .pop()
            .map(MessageView::from)
            .ok_or_else(|| AppError::new("STORAGE_LOAD_FAILED", "the message was not found after saving"))?;
        self.ctx.emit(AppEvent::MessageAdded { message: view.clone() });
        Ok(view)
    }

    /// A deterministic intent (delete all, list all, cancel) answered
    /// without the model. Returns false when the message is not one.
    pub(crate) async fn handle_intent(&self, persona: &Persona, content: &str) -> Result<bool> {
        let Some(intent) = runtime::detect_intent(content) else { return Ok(false) };
        // "cancel" drops a question waiting for its answer (AWAITING_INPUT → IDLE).
        if intent == DeterministicIntent::Cancel && self.cancel_wait(&persona.id).await? {
            return Ok(true);
        }
        let correlation_id = runtime::pipeline::new_correlation_id();
        tracing::info!(correlation_id, ?intent, "deterministic intent");
        let pid = persona.id.clone();
        // "cancel" answers a waiting proposal; anything else is a new turn.
        let answers = intent == DeterministicIntent::Cancel
            && self.assistant.conversations.state(&pid) == ConversationState::ToolProposed;
        if answers {
            self.proposal_answered(&pid, ConversationEvent::Cancel)?;
        } else {
            self.turn_started(&pid);
        }
        let line = match intent {
            DeterministicIntent::Cancel => {
                let rejected = self.assistant.run(&pid, Role::Human, &correlation_id, |p, ctx| p.reject(ctx)).await?;
                let plan = self.assistant.plans.cancel(&pid);
                match rejected {
                    Some(p) => {
                        self.ctx.emit(AppEvent::ProposalSettled { persona_id: pid.clone(), nonce: p.nonce.clone(), outcome: "rejected".into() });
                        rejected_line(&p.tool, plan).replacen("Rejected", "Cancelled", 1)
                    }
                    None => "Nothing to cancel.".to_owned(),
                }
            }
            DeterministicIntent::DeleteAll | DeterministicIntent::ListAll => {
                let tool = if intent == DeterministicIntent::DeleteAll { "delete_all_memories" } else { "search_items" };
                let outcome = self
                    .assistant
                    .run(&pid, Role::Human, &correlation_id, move |p, ctx| p.call(ctx, tool, Map::new(), None))
                    .await?;
                match outcome {
                    Ok(o) => self.announce(&pid, &correlation_id, o).await.content,
                    Err(e) => refusal(&e),
                }
            }
        };
        if !answers {
            self.turn_decided(&pid);
        }
        if self.ctx.ledger.persona(&pid).await.is_ok() {
            self.post_system(&pid, &line).await?;
        }
        self.turn_delivered(&pid);
        Ok(true)
    }

    /// Before a cloud (OpenAI-compatible) provider sees a request: PII is
    /// replaced by placeholders, and a message that is still personal or
    /// sensitive after that is withheld. What was removed is recorded in a
    /// `pii_scrubbed` event (kinds, placeholders and hashes, never values).
    /// The local engine gets the request untouched.
    pub(crate) async fn prepare_for_cloud(&self, provider: &str, request: &mut CompletionRequest) -> Result<()> {
        let mut removed = Vec::new();
        let mut withheld = 0u32;
        for m in &mut request.messages {
            match runtime::prepare_for_cloud(&m.content) {
                Ok(clean) => {
                    removed.extend(clean.removed.iter().map(|r| format!("{:?} {} sha256:{}", r.kind, r.placeholder, r.hash)));
                    m.content = clean.text;
                }
                Err(refusal) => {
                    withheld += 1;
                    tracing::info!(class = ?refusal.0, "message withheld from a cloud provider");
                    m.content = "[withheld: private content stays on this device]".to_owned();
                }
            }
        }
        if removed.is_empty() && withheld == 0 {
            return Ok(());
        }
        let correlation_id = runtime::pipeline::new_correlation_id();
        tracing::info!(correlation_id, provider, removed = removed.len(), withheld, "PII scrubbed before a cloud call");
        let receipt = self
            .ctx.ledger
            .append(
                ledger::HUMAN_ENTITY,
                EventBody::PiiScrubbed { correlation_id, provider: provider.to_owned(), removed, withheld_messages: withheld },
            )
            .await?;
        self.ctx.emit(AppEvent::LedgerAppended { seq: receipt.seq, kind: receipt.kind });
        Ok(())
    }

    // ----- the user's answer to a proposal -----

    pub async fn pending_proposal(&self, persona: &str) -> Result<Option<ProposalView>> {
        let p = self.ctx.ledger.find_persona(persona).await?;
        let mut view = self.assistant.pipeline.confirmations().pending(&p.id).as_ref().map(ProposalView::from);
        if let (Some(v), Some((nonce, step, steps))) = (view.as_mut(), self.assistant.plans.waiting(&p.id)) {
            if v.nonce == nonce {
                v.step = u32::try_from(step).ok();
                v.steps = steps.and_then(|n| u32::try_from(n).ok());
            }
        }
        Ok(view)
    }

    /// Confirms with the one-time nonce: the call runs exactly once, and
    /// its result (with the ledger receipt) is returned and posted.
    pub async fn confirm_proposal(&self, persona: &str, nonce: &str) -> Result<ToolResultView> {
        let p = self.ctx.ledger.find_persona(persona).await?;
        // Only a conversation waiting for this very proposal may run it;
        // a stale nonce is answered by the confirmation book below.
        let current = self.assistant.pipeline.confirmations().pending(&p.id).is_some_and(|x| x.nonce == nonce);
        if current {
            self.proposal_answered(&p.id, ConversationEvent::Confirmed)?;
        }
        if self.assistant.plans.awaiting(&p.id).as_deref() == Some(nonce) {
            return self.confirm_plan_step(&p, nonce).await;
        }
        let correlation_id = runtime::pipeline::new_correlation_id();
        let nonce_owned = nonce.to_owned();
        let outcome = self
            .assistant
            .run(&p.id, Role::Human, &correlation_id, move |pl, ctx| pl.confirm(ctx, &nonce_owned))
            .await?;
        if current {
            self.action_ended(&p.id, outcome.is_ok());
        }
        let outcome = match outcome {
            Ok(o) => o,
            Err(e) => {
                if matches!(e, PipelineError::Confirmation(_)) {
                    self.ctx.emit(AppEvent::ProposalSettled { persona_id: p.id.clone(), nonce: nonce.to_owned(), outcome: e.code().to_lowercase() });
                } else {
                    self.ctx.emit(AppEvent::ProposalSettled { persona_id: p.id.clone(), nonce: nonce.to_owned(), outcome: "failed".into() });
                    if self.ctx.ledger.persona(&p.id).await.is_ok() {
                        self.post_system(&p.id, &refusal(&e)).await?;
                    }
                }
                self.turn_delivered(&p.id);
                return Err(e.into());
            }
        };
        self.ctx.emit(AppEvent::ProposalSettled { persona_id: p.id.clone(), nonce: nonce.to_owned(), outcome: "confirmed".into() });
        let Outcome::Executed { tool, result, summary } = outcome else {
            return Err(AppError::new("TOOL_FAILED", "the confirmed call did not run"));
        };
        let receipt = receipt_of(&result);
        let view = ToolResultView { persona_id: p.id.clone(), tool, summary: summary.clone(), correlation_id, receipt };
        self.ctx.emit(AppEvent::ToolExecuted { result: view.clone() });
        // "Delete all" may have erased this very conversation.
        if self.ctx.ledger.persona(&p.id).await.is_ok() {
            self.post_system(&p.id, &summary).await?;
        }
        self.turn_delivered(&p.id);
        Ok(view)
    }

    /// Rejects the pending proposal (if any).
    pub async fn reject_proposal(&self, persona: &str) -> Result<bool> {
        let p = self.ctx.ledger.find_persona(persona).await?;
        if self.assistant.pipeline.confirmations().pending(&p.id).is_some() {
            self.proposal_answered(&p.id, ConversationEvent::Rejected)?;
        }
        let correlation_id = runtime::pipeline::new_correlation_id();
        let rejected = self.assistant.run(&p.id, Role::Human, &correlation_id, |pl, ctx| pl.reject(ctx)).await?;
        let plan = self.assistant.plans.cancel(&p.id);
        let Some(prop) = rejected else { return Ok(false) };
        self.ctx.emit(AppEvent::ProposalSettled { persona_id: p.id.clone(), nonce: prop.nonce.clone(), outcome: "rejected".into() });
        self.post_system(&p.id, &rejected_line(&prop.tool, plan)).await?;
        self.turn_delivered(&p.id);
        Ok(true)
    }

    // ----- settings -----

    pub async fn metadata_service(&self) -> Result<super::metadata::MetadataServiceView> {
        self.assistant.metadata.view().await
    }

    pub async fn set_metadata_service(&self, base_url: &str, api_key: &str) -> Result<super::metadata::MetadataServiceView> {
        self.assistant.metadata.configure(base_url, api_key).await
    }

    /// Every executable tool with its on/off state (Settings → Tools).
    pub async fn tool_settings(&self) -> Result<Vec<ToolSettingView>> {
        let disabled = self.assistant.disabled_tools().await?;
        Ok(self
            .assistant
            .pipeline
            .registry()
            .all()
            .iter()
            .filter(|t| t.executable)
            .map(|t| ToolSettingView {
                name: t.name.clone(),
                description: t.description.clone(),
                category: serde_json::to_value(t.category).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default(),
                requires_confirmation: t.requires_confirmation,
                enabled: !disabled.contains(&t.name),
            })
            .collect())
    }

    /// Switches a tool on or off: an off tool is not offered to any model
    /// and a call to it is refused with TOOL_DISABLED. Recorded in the
    /// ledger as a runtime setting.
    pub async fn set_tool_enabled(&self, tool: &str, enabled: bool) -> Result<Vec<ToolSettingView>> {
        let known = self.assistant.pipeline.registry().get(tool).is_some_and(|t| t.executable);
        if !known {
            return Err(AppError::new("TOOL_UNKNOWN", format!("there is no tool named `{tool}`")));
        }
        let value = (!enabled).then(|| "false".to_owned());
        let receipt = self.ctx.ledger.append(ledger::HUMAN_ENTITY, EventBody::RuntimeSettingSet { key: tool_setting_key(tool), value }).await?;
        self.ctx.emit(AppEvent::LedgerAppended { seq: receipt.seq, kind: receipt.kind });
        tracing::info!(tool, enabled, "tool setting changed");
        self.tool_settings().await
    }

    /// Tool threads still running, stopped ones included: a stopped call's
    /// thread may still wait on the network, but writes nothing more.
    pub fn tools_running(&self) -> usize {
        self.assistant.tools_running()
    }

    /// The registry as offered to a persona (for the CLI and tests).
    pub async fn tools_for(&self, persona: &str) -> Result<Vec<String>> {
        let p = self.ctx.ledger.find_persona(persona).await?;
        Ok(self.offered_tools(&p).await.into_iter().map(|t| t.name).collect())
    }
}

/// The items a delete may name: those whose title the command mentions
/// (a word of three letters or more), else all the newest. A small model
/// otherwise picks the first id listed.
fn named_targets(items: Vec<ledger::Item>, command: &str) -> Vec<ledger::Item> {
    let said: HashSet<String> = runtime::text::fold_words(command).split(' ').map(str::to_owned).collect();
    let named = |title: &str| runtime::text::fold_words(title).split(' ').any(|w| w.chars().count() >= 3 && said.contains(w));
    let mentioned: Vec<ledger::Item> = items.iter().filter(|i| named(&i.title)).cloned().collect();
    if mentioned.is_empty() {
        items
    } else {
        mentioned
    }
}

/// "Rejected: `tool` will not run." (and the rest of its plan, if any).
fn rejected_line(tool: &str, plan: Option<(usize, usize)>) -> String {
    match plan {
        Some((step, total)) => {
            format!("Rejected: step {step} of {total} (`{tool}`) will not run, nor the rest of the plan.")
        }
        None => format!("Rejected: `{tool}` will not run."),
    }
}
