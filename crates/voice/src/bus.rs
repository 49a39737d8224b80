//! The signal bus: everything the voice loop learns (speech started, a
//! transcript, a barge-in, an engine error) is a signal on one of two
//! lanes. The intervention lane (stop, barge-in, push-to-talk) is always
//! served before the context lane; within a lane higher priority first,
//! then arrival order. Each signal carries the turn it belongs to, and
//! once a turn is cancelled its late signals are dropped, never acted on.

use std::collections::VecDeque;

use serde::Serialize;

/// A turn of the conversation; they only increase.
pub type TurnId = u64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    Low,
    Medium,
    High,
    Critical,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Lane {
    Context,
    Intervention,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Microphone,
    Vad,
    Recogniser,
    Persona,
    Synthesiser,
    Speaker,
    User,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
pub enum SignalKind {
    SpeechStarted,
    SpeechEnded,
    Transcript(String),
    ReplySentence(String),
    PlaybackFinished,
    BargeIn,
    StopWord,
    PushToTalk,
    EngineError(String),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Signal {
    pub source: Source,
    #[serde(flatten)]
    pub kind: SignalKind,
    /// On the loop's clock (simulated for files).
    pub at_ms: u64,
    pub turn: TurnId,
    pub priority: Priority,
    pub lane: Lane,
}

#[derive(Debug, Default)]
pub struct SignalBus {
    context: VecDeque<Signal>,
    intervention: VecDeque<Signal>,
    /// Every turn up to this one is cancelled.
    cancelled_through: Option<TurnId>,
    dropped: u64,
}

impl SignalBus {
    pub fn new() -> Self {
        Self::default()
    }

    fn is_cancelled(&self, turn: TurnId) -> bool {
        self.cancelled_through.is_some_and(|c| turn <= c)
    }

    /// Queues `signal`; returns false (and drops it) when its turn was cancelled.
    pub fn publish(&mut self, signal: Signal) -> bool {
        if self.is_cancelled(signal.turn) {
            self.dropped += 1;
            return false;
        }
        match signal.lane {
            Lane::Context => self.context.push_back(signal),
            Lane::Intervention => self.intervention.push_back(signal),
        }
        true
    }

    /// The next signal to act on: the intervention lane first, the highest
    /// priority within a lane, the oldest among equals.
    pub fn next(&mut self) -> Option<Signal> {
        for lane in [&mut self.intervention, &mut self.context] {
            let best = lane.iter().enumerate().fold(None::<(usize, Priority)>, |best, (i, s)| match best {
                Some((_, p)) if p >= s.priority => best,
                _ => Some((i, s.priority)),
            });
            if let Some((i, _)) = best {
                return lane.remove(i);
            }
        }
        None
    }

    /// Cancels `turn` and every earlier one: what is queued for them goes,
    /// and what arrives for them later is dropped.
    pub fn cancel_through(&mut self, turn: TurnId) {
        self.cancelled_through = Some(self.cancelled_through.map_or(turn, |c| c.max(turn)));
        let before = self.context.len() + self.intervention.len();
        self.context.retain(|s| s.turn > turn);
        self.intervention.retain(|s| s.turn > turn);
        self.dropped += (before - self.context.len() - self.intervention.len()) as u64;
    }

    /// Signals dropped as belonging to a cancelled turn.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(kind: SignalKind, turn: TurnId, priority: Priority, lane: Lane) -> Signal {
        Signal { source: Source::Vad, kind, at_ms: 0, turn, priority, lane }
    }

    #[test]
    fn interventions_come_first_then_priority_then_arrival() {
        let mut bus = SignalBus::new();
        bus.publish(sig(SignalKind::Transcript("a".into()), 1, Priority::Medium, Lane::Context));
        bus.publish(sig(SignalKind::Transcript("b".into()), 1, Priority::High, Lane::Context));
        bus.publish(sig(SignalKind::Transcript("c".into()), 1, Priority::High, Lane::Context));
        bus.publish(sig(SignalKind::BargeIn, 1, Priority::Low, Lane::Intervention));
        let order: Vec<SignalKind> = std::iter::from_fn(|| bus.next()).map(|s| s.kind).collect();
        assert_eq!(
            order,
            vec![
                SignalKind::BargeIn,
                SignalKind::Transcript("b".into()),
                SignalKind::Transcript("c".into()),
                SignalKind::Transcript("a".into())
            ]
        );
    }

    #[test]
    fn late_signals_of_a_cancelled_turn_are_dropped() {
        let mut bus = SignalBus::new();
        bus.publish(sig(SignalKind::ReplySentence("first".into()), 3, Priority::Medium, Lane::Context));
        bus.publish(sig(SignalKind::SpeechStarted, 4, Priority::High, Lane::Context));
        bus.cancel_through(3);
        assert!(!bus.publish(sig(SignalKind::ReplySentence("late".into()), 3, Priority::Medium, Lane::Context)));
        assert!(!bus.publish(sig(
            SignalKind::ReplySentence("older".into()),
            2,
            Priority::Critical,
            Lane::Intervention
        )));
        assert_eq!(bus.next().map(|s| s.kind), Some(SignalKind::SpeechStarted));
        assert!(bus.next().is_none());
        assert_eq!(bus.dropped(), 3);
    }
}
