//! The loop guard: a small model sometimes starts saying the same sentence,
//! or the same run of words, again and again until the token limit. The
//! guard watches a reply as it grows, holds back text that is repeating what
//! the reply already said (so a repeat is never shown while it is still
//! undecided), and calls a loop once a whole sentence or a long run of words
//! has come back; the reply then ends before the repeat.

/// A repeated run of this many words is a loop, sentence or not.
pub const LOOP_WORDS: usize = 8;
/// A repeated whole sentence of at least this many words is a loop.
pub const LOOP_SENTENCE_WORDS: usize = 3;

/// Watches one reply.
#[derive(Debug, Default)]
pub struct LoopGuard {
    text: String,
    /// Bytes of `text` already released to the reader.
    shown: usize,
    looped: bool,
}

/// What a new piece of the reply allows.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Text safe to show now (may be empty: held back).
    Show(String),
    /// The reply is looping: show this last text, then stop generating.
    Loop(String),
}

impl LoopGuard {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a piece of the reply.
    pub fn push(&mut self, piece: &str) -> Step {
        if self.looped {
            return Step::Loop(String::new());
        }
        self.text.push_str(piece);
        let words = words(&self.text);
        // The last word may still be growing: judge complete words only.
        let complete = if self.text.ends_with(char::is_whitespace) {
            words.len()
        } else {
            words.len().saturating_sub(1)
        };
        let judged = &words[..complete];
        let repeat = repeated_suffix(judged);
        if repeat >= LOOP_WORDS || is_repeated_sentence(judged, repeat) {
            self.looped = true;
            let cut = judged[complete - repeat].start;
            let end = self.text[..cut].trim_end().len().max(self.shown);
            let out = self.text[self.shown..end].to_owned();
            self.shown = end;
            self.text.truncate(end);
            return Step::Loop(out);
        }
        // Hold back a repeat in progress (even one word: it may open a
        // sentence said before) and the word still being written.
        let hold_from = if repeat >= 1 {
            judged[complete - repeat].start
        } else if complete < words.len() {
            words[complete].start
        } else {
            self.text.len()
        };
        // Space before held text waits with it: a reply cut there ends clean.
        let release = self.text[..hold_from].trim_end().len().max(self.shown);
        let out = self.text[self.shown..release].to_owned();
        self.shown = release;
        Step::Show(out)
    }

    /// The end of the reply: what is still held back is shown.
    pub fn finish(&mut self) -> String {
        let out = self.text[self.shown.min(self.text.len())..].to_owned();
        self.shown = self.text.len();
        out
    }

    pub fn looped(&self) -> bool {
        self.looped
    }

    /// The reply as shown (trimmed of the repeat once looped).
    pub fn text(&self) -> &str {
        &self.text
    }
}

#[derive(Debug, Clone)]
struct Word {
    start: usize,
    norm: String,
    /// Ends a sentence (".", "!", "?", "…").
    ends_sentence: bool,
}

fn words(text: &str) -> Vec<Word> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices().chain(std::iter::once((text.len(), ' '))) {
        match (c.is_whitespace(), start) {
            (false, None) => start = Some(i),
            (true, Some(s)) => {
                let raw = &text[s..i];
                let norm: String = raw.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect();
                let ends_sentence = raw.trim_end_matches(['"', '\'', ')', '*']).ends_with(['.', '!', '?', '…']);
                out.push(Word { start: s, norm: if norm.is_empty() { raw.to_owned() } else { norm }, ends_sentence });
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// The length of the longest run of words ending the text that also occurs
/// earlier (ending earlier; overlapping allowed, so "a b a b a b" repeats 4).
fn repeated_suffix(words: &[Word]) -> usize {
    let n = words.len();
    let mut best = 0;
    for end in 1..n {
        let mut l = 0;
        while l < end && words[end - 1 - l].norm == words[n - 1 - l].norm {
            l += 1;
        }
        best = best.max(l);
    }
    best
}

/// Whether the repeated run is a whole sentence said before.
fn is_repeated_sentence(words: &[Word], repeat: usize) -> bool {
    let n = words.len();
    if repeat < LOOP_SENTENCE_WORDS || !words[n - 1].ends_sentence {
        return false;
    }
    // The shortest whole sentence at the end that was said before.
    let mut start = n - 1;
    while start > 0 && !words[start - 1].ends_sentence {
        start -= 1;
    }
    let len = n - start;
    len >= LOOP_SENTENCE_WORDS && len <= repeat
}

/// Whether a finished text repeats itself: a sentence of three or more
/// words said twice, or a run of `min_words` words said twice. Used by
/// benchmarks to count looping replies independently of the guard's cut.
pub fn repeats_itself(text: &str, min_words: usize) -> bool {
    let words = words(text);
    if min_words > 0 && words.len() >= 2 * min_words {
        let mut seen = std::collections::HashSet::new();
        for w in words.windows(min_words) {
            let key: Vec<&str> = w.iter().map(|w| w.norm.as_str()).collect();
            if !seen.insert(key) {
                return true;
            }
        }
    }
    let mut sentences = std::collections::HashSet::new();
    let mut current: Vec<&str> = Vec::new();
    for w in &words {
        current.push(&w.norm);
        if w.ends_sentence {
            if current.len() >= LOOP_SENTENCE_WORDS && !sentences.insert(current.clone()) {
                return true;
            }
            current.clear();
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(text: &str) -> (String, bool) {
        let mut g = LoopGuard::new();
        let mut shown = String::new();
        // Token-sized pieces, as a model streams them.
        let chars: Vec<char> = text.chars().collect();
        for piece in chars.chunks(3) {
            match g.push(&piece.iter().collect::<String>()) {
                Step::Show(s) => shown.push_str(&s),
                Step::Loop(s) => {
                    shown.push_str(&s);
                    return (shown, true);
                }
            }
        }
        shown.push_str(&g.finish());
        (shown, false)
    }

    #[test]
    fn a_repeated_sentence_ends_the_reply_before_the_repeat() {
        let (shown, looped) = feed("You are Marta. You live in Lisbon. You are Marta. You live in Lisbon. You are");
        assert!(looped);
        assert_eq!(shown, "You are Marta. You live in Lisbon.");
    }

    #[test]
    fn a_long_repeated_run_of_words_without_full_stops_is_a_loop() {
        let (shown, looped) =
            feed("I like the sea and the sun and the long walks by the river and the sea and the sun and the long walks by the river and");
        assert!(looped);
        assert!(!repeats_itself(&shown, 8), "{shown}");
        assert!(shown.starts_with("I like the sea and the sun and the long walks by the river"), "{shown}");
    }

    #[test]
    fn a_reply_that_does_not_repeat_is_shown_whole() {
        let text = "You live in Lisbon, Marta. You told me you run on Mondays and Thursdays, and that you love the sea.";
        let (shown, looped) = feed(text);
        assert!(!looped);
        assert_eq!(shown, text);
    }

    #[test]
    fn a_short_repeat_is_held_back_then_released_when_it_goes_somewhere_else() {
        let mut g = LoopGuard::new();
        assert_eq!(g.push("I think so. "), Step::Show("I think so.".into()));
        // "I think" repeats: held back while undecided.
        assert_eq!(g.push("I think "), Step::Show(String::new()));
        assert_eq!(g.push("you are right. "), Step::Show(" I think you are right.".into()));
        assert_eq!(g.finish(), " ");
        assert!(!g.looped());
    }

    #[test]
    fn one_word_repeated_many_times_is_a_loop() {
        let (shown, looped) = feed("Yes yes yes yes yes yes yes yes yes yes yes yes yes");
        assert!(looped);
        assert!(shown.split_whitespace().count() < 8, "{shown}");
    }

    #[test]
    fn repeats_itself_finds_sentences_and_runs() {
        assert!(repeats_itself("Hello there friend. How are you? Hello there friend.", 6));
        assert!(repeats_itself("a b c d e f g a b c d e f g", 6));
        assert!(!repeats_itself("Hello there friend. How are you today?", 6));
        assert!(!repeats_itself("Yes. Yes.", 6), "two-word sentences are not counted");
    }
}
