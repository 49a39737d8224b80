//! The motor: the one part of the voice loop allowed to speak. Its state
//! follows seed 004 (IDLE → THINKING → ACTING → AWAITING_RESPONSE, and
//! ERROR); the floor (who holds the conversation: listening, speaking,
//! interrupted) is tracked beside it. Illegal moves are refused, not
//! silently taken, so a bug in the loop shows up as an error.

use serde::Serialize;

use crate::bus::TurnId;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MotorState {
    Idle,
    Thinking,
    Acting,
    AwaitingResponse,
    Error,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Floor {
    Listening,
    Speaking,
    Interrupted,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the motor cannot go from {from:?} to {to:?}")]
pub struct IllegalMove {
    pub from: MotorState,
    pub to: MotorState,
}

#[derive(Debug)]
pub struct Motor {
    state: MotorState,
    floor: Floor,
    turn: TurnId,
}

impl Default for Motor {
    fn default() -> Self {
        Self { state: MotorState::Idle, floor: Floor::Listening, turn: 0 }
    }
}

impl Motor {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn state(&self) -> MotorState {
        self.state
    }
    pub fn floor(&self) -> Floor {
        self.floor
    }
    pub fn turn(&self) -> TurnId {
        self.turn
    }

    fn go(&mut self, to: MotorState) -> Result<(), IllegalMove> {
        use MotorState::*;
        let ok = matches!(
            (self.state, to),
            (Idle | AwaitingResponse, Thinking)
                | (Thinking, Acting)
                | (Acting, AwaitingResponse)
                | (_, Error)
                | (_, Idle)
        );
        if !ok {
            return Err(IllegalMove { from: self.state, to });
        }
        self.state = to;
        Ok(())
    }

    /// The user finished an utterance: a new turn starts and the persona thinks.
    pub fn user_spoke(&mut self) -> Result<TurnId, IllegalMove> {
        self.go(MotorState::Thinking)?;
        self.turn += 1;
        self.floor = Floor::Listening;
        Ok(self.turn)
    }

    /// The first sentence of the reply is ready: the motor takes the floor.
    pub fn start_speaking(&mut self) -> Result<(), IllegalMove> {
        self.go(MotorState::Acting)?;
        self.floor = Floor::Speaking;
        Ok(())
    }

    /// Whether the motor may send audio to the speaker now.
    pub fn may_speak(&self) -> bool {
        self.state == MotorState::Acting && self.floor == Floor::Speaking
    }

    /// The reply was spoken to the end.
    pub fn finished_speaking(&mut self) -> Result<(), IllegalMove> {
        self.go(MotorState::AwaitingResponse)?;
        self.floor = Floor::Listening;
        Ok(())
    }

    /// The user took the floor while the motor spoke: the turn is over.
    pub fn interrupted(&mut self) -> Result<(), IllegalMove> {
        self.go(MotorState::AwaitingResponse)?;
        self.floor = Floor::Interrupted;
        Ok(())
    }

    pub fn failed(&mut self) {
        self.state = MotorState::Error;
        self.floor = Floor::Listening;
    }

    pub fn reset(&mut self) {
        self.state = MotorState::Idle;
        self.floor = Floor::Listening;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_goes_think_act_await_and_only_acting_speaks() {
        let mut m = Motor::new();
        assert!(!m.may_speak());
        assert_eq!(m.user_spoke(), Ok(1));
        assert!(!m.may_speak());
        m.start_speaking().expect("act");
        assert!(m.may_speak());
        m.finished_speaking().expect("await");
        assert_eq!((m.state(), m.floor()), (MotorState::AwaitingResponse, Floor::Listening));
        assert_eq!(m.user_spoke(), Ok(2));
    }

    #[test]
    fn an_interruption_leaves_the_floor_interrupted_and_the_motor_silent() {
        let mut m = Motor::new();
        m.user_spoke().expect("think");
        m.start_speaking().expect("act");
        m.interrupted().expect("interrupt");
        assert!(!m.may_speak());
        assert_eq!(m.floor(), Floor::Interrupted);
    }

    #[test]
    fn illegal_moves_are_refused() {
        let mut m = Motor::new();
        assert_eq!(m.start_speaking(), Err(IllegalMove { from: MotorState::Idle, to: MotorState::Acting }));
        assert!(m.finished_speaking().is_err());
        m.failed();
        assert_eq!(m.state(), MotorState::Error);
        assert!(m.user_spoke().is_err());
        m.reset();
        assert!(m.user_spoke().is_ok());
    }
}
