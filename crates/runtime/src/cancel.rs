//! Stopping a tool that makes no progress (seed 003 §2.1: EXECUTING →
//! FAILED after 30 s). A thread cannot be killed, so a stopped call is
//! abandoned and disarmed instead: it runs on its own thread with a
//! [`CancelToken`], every write of its effects goes through
//! [`CancelToken::write`], and once the call is stopped every later write
//! is refused. Nothing of a stopped step reaches the ledger afterwards, and
//! the pipeline treats the stop like any failure (the action ends FAILED, a
//! plan's earlier steps are compensated, nothing is retried).
//!
//! Only a monotonic wait is used here (a thread's result or the limit), never
//! the wall clock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::Value;

use crate::pipeline::{ToolError, ToolExecutor};

#[derive(Debug, Default)]
struct Gate {
    cancelled: bool,
    writes: u32,
}

/// One tool call's permission to write. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<Mutex<Gate>>);

impl CancelToken {
    fn gate(&self) -> MutexGuard<'_, Gate> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn is_cancelled(&self) -> bool {
        self.gate().cancelled
    }

    /// Runs `write` (one write of the call's effects) unless the call was
    /// stopped. The write holds the gate, so a stop waits for a write in
    /// progress: each write lands wholly before the stop or not at all.
    pub fn write<T>(&self, write: impl FnOnce() -> Result<T, ToolError>) -> Result<T, ToolError> {
        let mut gate = self.gate();
        if gate.cancelled {
            return Err(ToolError::Cancelled);
        }
        let out = write();
        if out.is_ok() {
            gate.writes += 1;
        }
        out
    }

    /// Stops the call: every later write is refused. Returns how many
    /// writes it had made before.
    pub fn cancel(&self) -> u32 {
        let mut gate = self.gate();
        gate.cancelled = true;
        gate.writes
    }
}

/// Counts a call's thread while it runs.
struct Running(Arc<AtomicUsize>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An executor whose calls are stopped after `limit` without an answer:
/// each call runs on its own thread; at the limit its token is cancelled
/// and the call fails with [`ToolError::Stopped`], whatever the thread
/// does later.
pub struct Stoppable {
    inner: Arc<dyn ToolExecutor>,
    limit: Duration,
    running: Arc<AtomicUsize>,
}

impl Stoppable {
    pub fn new(inner: Arc<dyn ToolExecutor>, limit: Duration) -> Self {
        Self { inner, limit, running: Arc::new(AtomicUsize::new(0)) }
    }

    /// Tool threads still running, stopped ones included (a stopped call
    /// may still be waiting on the network; it can no longer write).
    pub fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }
}

impl ToolExecutor for Stoppable {
    fn execute(&self, tool: &str, args: &Value, correlation_id: &str, _caller: &CancelToken) -> Result<Value, ToolError> {
        let token = CancelToken::default();
        let (tx, rx) = mpsc::sync_channel(1);
        let (inner, call_token) = (self.inner.clone(), token.clone());
        let (tool_owned, args_owned, correlation) = (tool.to_owned(), args.clone(), correlation_id.to_owned());
        self.running.fetch_add(1, Ordering::SeqCst);
        let running = Running(self.running.clone());
        let spawned = std::thread::Builder::new().name(format!("tool {tool}")).spawn(move || {
            let _running = running;
            let result = inner.execute(&tool_owned, &args_owned, &correlation, &call_token);
            // Nobody listens any more after a stop: the result is dropped.
            let _stopped_if_unsent = tx.send(result);
        });
        if let Err(e) = spawned {
            return Err(ToolError::Failed(format!("the tool could not be started: {e}")));
        }
        match rx.recv_timeout(self.limit) {
            Ok(result) => result,
            Err(RecvTimeoutError::Disconnected) => Err(ToolError::Failed("the tool ended without an answer".into())),
            Err(RecvTimeoutError::Timeout) => {
                let written = token.cancel();
                // It may have answered while the stop took effect: then it
                // finished in time.
                if let Ok(result) = rx.try_recv() {
                    return result;
                }
                tracing::warn!(tool, correlation_id, written, "tool made no progress: stopped");
                Err(ToolError::Stopped { after_secs: self.limit.as_secs().max(1), written })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cancelled_token_refuses_writes_and_counts_the_earlier_ones() {
        let t = CancelToken::default();
        assert_eq!(t.write(|| Ok(1)), Ok(1));
        assert_eq!(t.write(|| Err::<(), _>(ToolError::Failed("x".into()))), Err(ToolError::Failed("x".into())));
        assert!(!t.is_cancelled());
        assert_eq!(t.cancel(), 1, "one write succeeded");
        assert!(t.is_cancelled());
        let mut ran = false;
        assert_eq!(
            t.write(|| {
                ran = true;
                Ok(())
            }),
            Err(ToolError::Cancelled)
        );
        assert!(!ran, "a refused write never starts");
    }

    struct Quick;

    impl ToolExecutor for Quick {
        fn execute(&self, tool: &str, _: &Value, _: &str, cancel: &CancelToken) -> Result<Value, ToolError> {
            cancel.write(|| Ok(json!({"tool": tool})))
        }
    }

    #[test]
    fn a_call_within_its_limit_answers() {
        let s = Stoppable::new(Arc::new(Quick), Duration::from_secs(30));
        assert_eq!(s.execute("save_note", &json!({}), "c", &CancelToken::default()), Ok(json!({"tool": "save_note"})));
    }

    /// Saves at once, except `save_movie`, which hangs until released and
    /// then tries to write.
    struct Hanging {
        writes: Mutex<Vec<String>>,
        release: Mutex<Option<mpsc::Receiver<()>>>,
        late: Mutex<Option<mpsc::SyncSender<Result<Value, ToolError>>>>,
        calls: AtomicUsize,
    }

    impl ToolExecutor for Hanging {
        fn execute(&self, tool: &str, args: &Value, _: &str, cancel: &CancelToken) -> Result<Value, ToolError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let write = |what: String| {
                cancel.write(|| {
                    self.writes.lock().unwrap().push(what);
                    Ok(json!({"id": format!("{tool}-{}", self.calls.load(Ordering::SeqCst))}))
                })
            };
            if tool != "save_movie" {
                return write(format!("{tool} {args}"));
            }
            let release = self.release.lock().unwrap().take().expect("one hanging call");
            let _ = release.recv();
            let result = write(format!("{tool} {args}"));
            if let Some(late) = self.late.lock().unwrap().take() {
                let _ = late.send(result.clone());
            }
            result
        }
    }

    #[test]
    fn a_stalled_step_is_stopped_its_late_write_refused_and_the_plan_compensated() {
        use crate::pipeline::{MemoryAudit, Pipeline, Step};
        use crate::plan::{Compensation, PlanRun, PlanStep, StepOutcome};
        use crate::tools::{Role, ToolRegistry};
        let (release_tx, release_rx) = mpsc::channel();
        let (late_tx, late_rx) = mpsc::sync_channel(1);
        let tools = Arc::new(Hanging {
            writes: Mutex::default(),
            release: Mutex::new(Some(release_rx)),
            late: Mutex::new(Some(late_tx)),
            calls: AtomicUsize::new(0),
        });
        let stoppable = Arc::new(Stoppable::new(tools.clone(), Duration::from_millis(150)));
        let audit = Arc::new(MemoryAudit::default());
        let clock = Arc::new(crate::clock::ManualClock::at_epoch());
        let pipeline = Pipeline::new(Arc::new(ToolRegistry::builtin()), clock, audit.clone(), stoppable.clone());
        let step = |tool: &str, args: Value| PlanStep { tool: tool.into(), args: args.as_object().cloned().unwrap_or_default(), message: None };
        let mut plan = PlanRun::new(vec![
            step("save_note", json!({"content": "popcorn"})),
            step("save_movie", json!({"title": "Heat"})),
            step("save_note", json!({"content": "never"})),
        ])
        .unwrap();
        let ctx = crate::pipeline::CallContext::new("conv", Role::Persona, "corr");
        assert!(matches!(plan.advance(&pipeline, &ctx), Ok(StepOutcome::Done { step: 1, .. })));
        let Ok(StepOutcome::Failed { step, code, error, compensations }) = plan.advance(&pipeline, &ctx) else {
            panic!("step 2 must fail")
        };
        assert_eq!((step, code), (2, "TOOL_TIMEOUT"));
        assert!(error.contains("no progress for 1 s and was stopped"), "{error}");
        assert_eq!(compensations, [Compensation::Undone { step: 1, tool: "save_note".into(), by: "delete_memory".into() }]);
        assert!(plan.advance(&pipeline, &ctx).is_err(), "a failed plan runs nothing more");
        // The stalled tool now resumes and tries to write: refused.
        release_tx.send(()).unwrap();
        assert_eq!(late_rx.recv().unwrap(), Err(ToolError::Cancelled));
        let writes = tools.writes.lock().unwrap().clone();
        assert_eq!(writes.len(), 2, "{writes:?}");
        assert!(writes[0].starts_with("save_note") && writes[1].starts_with("delete_memory"), "{writes:?}");
        assert_eq!(tools.calls.load(Ordering::SeqCst), 3, "save, the stalled save, the undo: each once");
        let stopped = audit.records().into_iter().find(|r| r.step == Step::Execute && r.detail.contains("TOOL_TIMEOUT")).expect("audited");
        assert!(stopped.detail.ends_with("action Failed"), "{}", stopped.detail);
    }
}
