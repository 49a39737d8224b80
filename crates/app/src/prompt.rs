//! The prompt for a persona's reply: the office's narrative (who it is, its
//! obligations, its memory, its constitution last) as the system message,
//! then the recent conversation.

/// How many past messages go into a reply's prompt.
pub const HISTORY: u32 = 12;

/// One implementation for replies and handovers: the office's.
pub use ::office::reply_prompt;
