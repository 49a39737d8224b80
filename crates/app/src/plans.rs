//! Multi-step plans in the app (issue #6): when a model answers with
//! several tool calls (native function calling), they become one plan of at
//! most five steps. Steps run one at a time, in order; a step that needs
//! confirmation stops the plan until the user confirms it (the proposal
//! card says "step k of n"); a step that fails makes the runtime undo the
//! completed steps with their compensating tools. Every step is a `plan`
//! audit record in the ledger under the plan's correlation id.

use std::collections::HashMap;
use std::sync::Mutex;

use ledger::{MessageRole, Persona};
use runtime::plan::{Compensation, PlanRun, PlanStatus, PlanStep, StepOutcome, MAX_PLAN_STEPS};
use runtime::{CallContext, Outcome, Pipeline, Role};

use crate::assistant::{receipt_of, role_of, Planned, ProposalView, ToolResultView};
use crate::engine::Engine;
use crate::error::AppError;
use crate::views::AppEvent;
use crate::Result;

/// A plan waiting for the user to confirm one of its steps.
struct Waiting {
    plan: PlanRun,
    /// The role the plan was made under: later steps run with it, never
    /// with the confirming human's.
    role: Role,
    correlation_id: String,
}

/// The plans waiting for a confirmation, one per conversation.
#[derive(Default)]
pub(crate) struct Plans(Mutex<HashMap<String, Waiting>>);

impl Plans {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn take(&self, persona_id: &str) -> Option<Waiting> {
        self.lock().remove(persona_id)
    }

    fn put(&self, persona_id: &str, waiting: Waiting) {
        self.lock().insert(persona_id.to_owned(), waiting);
    }

    /// The nonce the waiting plan of this conversation expects.
    pub(crate) fn awaiting(&self, persona_id: &str) -> Option<String> {
        self.lock().get(persona_id).and_then(|w| w.plan.awaiting().map(str::to_owned))
    }

    /// (nonce, step, total) of the waiting plan.
    pub(crate) fn waiting(&self, persona_id: &str) -> Option<(String, usize, usize)> {
        let map = self.lock();
        let w = map.get(persona_id)?;
        let (step, total) = w.plan.position();
        w.plan.awaiting().map(|n| (n.to_owned(), step, total))
    }

    /// Cancels the waiting plan; returns where it stood (step, total).
    pub(crate) fn cancel(&self, persona_id: &str) -> Option<(usize, usize)> {
        self.take(persona_id).map(|w| w.plan.position())
    }
}

/// Runs steps until the plan finishes, fails or waits for a confirmation;
/// with `nonce`, first confirms the waiting step.
fn drive(plan: &mut PlanRun, pipeline: &Pipeline, ctx: &CallContext<'_>, nonce: Option<&str>) -> Vec<StepOutcome> {
    let mut out = Vec::new();
    let mut next = match nonce {
        Some(n) => plan.confirm(pipeline, ctx, n).ok(),
        None => plan.advance(pipeline, ctx).ok(),
    };
    while let Some(outcome) = next.take() {
        let go_on = matches!(outcome, StepOutcome::Done { .. });
        out.push(outcome);
        if go_on && *plan.status() == PlanStatus::Running {
            next = plan.advance(pipeline, ctx).ok();
        }
    }
    out
}

fn compensation_line(c: &Compensation) -> String {
    match c {
        Compensation::Undone { step, tool, by } => format!("Step {step} (`{tool}`) was undone by `{by}`."),
        Compensation::Manual { step, tool } => {
            format!("Step {step} (`{tool}`) cannot be undone automatically; check it yourself.")
        }
        Compensation::UndoFailed { step, tool, error } => format!("Undoing step {step} (`{tool}`) failed: {error}"),
    }
}

impl Engine {
    /// Starts a plan from the model's tool calls. More than
    /// [`MAX_PLAN_STEPS`] is refused whole: nothing runs.
    pub(crate) async fn start_plan(&self, persona: &Persona, steps: Vec<PlanStep>) -> Result<Planned> {
        let tools: Vec<String> = steps.iter().map(|s| s.tool.clone()).collect();
        let mut plan = match PlanRun::new(steps) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "plan refused");
                return Ok(Planned {
                    content: format!(
                        "The plan was refused (TOOL_PLAN_INVALID): {e}. Ask for at most {MAX_PLAN_STEPS} steps at a time."
                    ),
                    role: MessageRole::System,
                });
            }
        };
        // A new request replaces a plan still waiting in this conversation.
        self.assistant.plans.take(&persona.id);
        let role = role_of(persona);
        let correlation_id = runtime::pipeline::new_correlation_id();
        tracing::info!(correlation_id, steps = ?tools, "plan started");
        let (plan, outcomes) = self
            .assistant
            .run(&persona.id, role, &correlation_id, move |p, ctx| {
                let outcomes = drive(&mut plan, p, ctx, None);
                (plan, outcomes)
            })
            .await?;
        let lines = self.report_steps(&persona.id, &correlation_id, &outcomes, plan.position().1);
        if plan.awaiting().is_some() {
            self.assistant.plans.put(&persona.id, Waiting { plan, role, correlation_id });
        }
        Ok(Planned { content: lines.join("\n"), role: MessageRole::System })
    }

    /// Confirms the step a plan waits for, then runs the plan on. Returns
    /// the confirmed step's result; the lines about every step are posted.
    pub(crate) async fn confirm_plan_step(&self, persona: &Persona, nonce: &str) -> Result<ToolResultView> {
        let Some(Waiting { mut plan, role, correlation_id }) = self.assistant.plans.take(&persona.id) else {
            return Err(AppError::new("CONFIRMATION_UNKNOWN", "no plan step waits for this confirmation"));
        };
        let nonce_owned = nonce.to_owned();
        let (plan, outcomes) = self
            .assistant
            .run(&persona.id, role, &correlation_id, move |p, ctx| {
                let outcomes = drive(&mut plan, p, ctx, Some(&nonce_owned));
                (plan, outcomes)
            })
            .await?;
        self.action_ended(&persona.id, matches!(outcomes.last(), Some(StepOutcome::Done { .. } | StepOutcome::NeedsConfirmation { .. })));
        let settled = match outcomes.first() {
            Some(StepOutcome::Done { .. }) => "confirmed".to_owned(),
            Some(StepOutcome::Failed { code, .. }) if code.starts_with("CONFIRMATION_") => code.to_lowercase(),
            _ => "failed".to_owned(),
        };
        self.emit(AppEvent::ProposalSettled { persona_id: persona.id.clone(), nonce: nonce.to_owned(), outcome: settled });
        let lines = self.report_steps(&persona.id, &correlation_id, &outcomes, plan.position().1);
        if plan.awaiting().is_some() {
            self.assistant.plans.put(&persona.id, Waiting { plan, role, correlation_id: correlation_id.clone() });
        }
        if !lines.is_empty() && self.ledger.persona(&persona.id).await.is_ok() {
            self.post_system(&persona.id, &lines.join("\n")).await?;
        }
        self.turn_delivered(&persona.id);
        match outcomes.into_iter().next() {
            Some(StepOutcome::Done { outcome: Outcome::Executed { tool, result, summary }, .. }) => Ok(ToolResultView {
                persona_id: persona.id.clone(),
                tool,
                summary,
                correlation_id,
                receipt: receipt_of(&result),
            }),
            Some(StepOutcome::Failed { code, error, .. }) => Err(AppError::new(code, error)),
            _ => Err(AppError::new("TOOL_FAILED", "the confirmed step did not run")),
        }
    }

    /// Tells the UI about each step and returns the chat lines for them.
    fn report_steps(&self, persona_id: &str, correlation_id: &str, outcomes: &[StepOutcome], total: usize) -> Vec<String> {
        let mut lines = Vec::new();
        for o in outcomes {
            match o {
                StepOutcome::Done { step, total, outcome: Outcome::Executed { tool, result, summary } } => {
                    self.emit(AppEvent::ToolExecuted {
                        result: ToolResultView {
                            persona_id: persona_id.to_owned(),
                            tool: tool.clone(),
                            summary: summary.clone(),
                            correlation_id: correlation_id.to_owned(),
                            receipt: receipt_of(result),
                        },
                    });
                    lines.push(format!("Step {step} of {total}: {summary}"));
                }
                StepOutcome::Done { step, total, .. } => lines.push(format!("Step {step} of {total}: done.")),
                StepOutcome::NeedsConfirmation { step, total, outcome: Outcome::Proposed { proposal, superseded, .. } } => {
                    if let Some(old) = superseded {
                        self.emit(AppEvent::ProposalSettled {
                            persona_id: persona_id.to_owned(),
                            nonce: old.nonce.clone(),
                            outcome: "superseded".into(),
                        });
                    }
                    let mut view = ProposalView::from(proposal.as_ref());
                    view.step = u32::try_from(*step).ok();
                    view.steps = u32::try_from(*total).ok();
                    self.emit(AppEvent::ToolProposed { proposal: view });
                    lines.push(format!(
                        "Step {step} of {total}: proposed `{}` with {} — waiting for your confirmation.",
                        proposal.tool, proposal.args
                    ));
                }
                StepOutcome::NeedsConfirmation { step, total, .. } => {
                    lines.push(format!("Step {step} of {total} waits for your confirmation."))
                }
                StepOutcome::Failed { step, code, error, compensations } => {
                    lines.push(format!("Step {step} of {total} failed ({code}): {error}"));
                    lines.extend(compensations.iter().map(compensation_line));
                    if *step < total {
                        lines.push("The rest of the plan was cancelled.".to_owned());
                    }
                }
            }
        }
        lines
    }
}
