//! The loop guard: a small model sometimes starts saying the same sentence,
//! or the same run of words, again and again until the token limit. The
//! guard watches a reply as it grows, holds back text that is repeating what
//! the reply already said (so a repeat is never shown while it is still
//! undecided), and calls a loop once a whole sentence or a long run of words
//! has come back; the reply then ends before the repeat.
//!
//! It can also be told the persona's last replies ([`LoopGuard::asked_before`]):
//! a question one of them asked, asked again after something new, ends the
//! reply before it. A small model closes reply after reply with the same
//! question ("Como vai a sua mãe?" ten turns running, "Como posso ajudar
//! você hoje?"), and each time it does the next reply copies it more
//! surely. Only questions: a statement said again may be the answer to a
//! question asked again ("You live in Lisbon.").
//!
//! The same guard ends a conversation reply before a closing offer of
//! service ("How can I help you today?", "Como posso ajudar você hoje?",
//! "Let me know if you need anything else."): instruction-tuned models add
//! them after whatever they said, and a friend does not talk like a help
//! desk. A reply that is nothing but such a line is kept.

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
    /// Questions (normalised words, at least [`LOOP_SENTENCE_WORDS`]) the
    /// persona's last replies asked.
    asked: Vec<Vec<String>>,
    /// Sentences that end the reply before them ([`OFFERS`] for a
    /// conversation reply, none for the plain guard).
    offers: &'static [&'static str],
}

/// How closing offers of service begin, as normalised words (lower case,
/// letters and digits only, one space between): a sentence after the first
/// that starts this way ends the reply. English and Portuguese, the
/// languages personas speak.
const OFFERS: &[&str] = &[
    "how can i help", "how can i assist", "how may i help", "how may i assist", "is there anything else",
    "is there anything i can", "what else can i help", "what can i do for you",
    "if you have any other questions", "if you have any questions", "do you have any other questions",
    "do you have any questions", "if you need anything else", "feel free to ask", "let me know if you need",
    "let me know if there", "let me know if theres", "let me know if you have", "if theres anything else",
    "if there is anything else", "dont hesitate to", "im here to help", "i am here to help",
    "como posso ajudar", "como posso te ajudar", "como posso ajudálo", "como posso ajudála",
    "em que posso ajudar", "em que posso te ajudar", "posso ajudar em", "posso te ajudar em", "há algo mais",
    "tem mais alguma coisa", "se tiver mais alguma", "se tiver alguma dúvida", "se precisar de mais",
    "se precisar de alguma", "se precisar de algo", "se você precisar de", "se você tiver mais",
    "se você tiver alguma", "se tiver outras perguntas", "se você tiver outras", "fique à vontade para",
    "estou aqui para ajudar", "estou aqui para te ajudar",
];

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

    /// A guard that also ends the reply before a question one of
    /// `replies` asked (see the module's notes). A reply that is nothing
    /// but that question is left whole: an empty reply says less.
    pub fn asked_before<'a>(replies: impl IntoIterator<Item = &'a str>) -> Self {
        let mut asked = Vec::new();
        for reply in replies {
            let mut current: Vec<String> = Vec::new();
            for w in words(reply) {
                let question = w.ends_sentence && w.raw_end == '?';
                current.push(w.norm);
                if w.ends_sentence {
                    if question && current.len() >= LOOP_SENTENCE_WORDS && !asked.contains(&current) {
                        asked.push(std::mem::take(&mut current));
                    }
                    current.clear();
                }
            }
        }
        Self { asked, offers: OFFERS, ..Self::default() }
    }

    /// Adds a piece of the reply.
    pub fn push(&mut self, piece: &str) -> Step {
        if self.looped {
            return Step::Loop(String::new());
        }
        self.text.push_str(piece);
        self.judge(false)
    }

    /// Judges the text so far; `ended`: the last word is whole (the reply
    /// has ended), else it may still be growing.
    fn judge(&mut self, ended: bool) -> Step {
        let words = words(&self.text);
        let complete = if ended || self.text.ends_with(char::is_whitespace) {
            words.len()
        } else {
            words.len().saturating_sub(1)
        };
        let judged = &words[..complete];
        let repeat = repeated_suffix(judged);
        if repeat >= LOOP_WORDS || is_repeated_sentence(judged, repeat) {
            return self.cut(judged[complete - repeat].start);
        }
        // The sentence being written (or just finished), and whether it is
        // one of the questions asked before.
        let finished = complete > 0 && judged[complete - 1].ends_sentence;
        let before = if finished { &judged[..complete - 1] } else { judged };
        let sentence = before.iter().rposition(|w| w.ends_sentence).map_or(0, |i| i + 1);
        let current: Vec<&str> = judged[sentence..].iter().map(|w| w.norm.as_str()).collect();
        let is_asked = |q: &Vec<String>| q.iter().map(String::as_str).eq(current.iter().copied());
        if finished && sentence > 0 && self.asked.iter().any(is_asked) {
            return self.cut(judged[sentence].start);
        }
        // Whether `current` starts with an offer (`whole`) or is the start
        // of one still being written.
        let offers = if sentence > 0 { self.offers } else { &[] };
        let offer = |whole: bool| {
            offers.iter().any(|o| {
                let o: Vec<&str> = o.split(' ').collect();
                if whole {
                    current.len() >= o.len() && o == current[..o.len()]
                } else {
                    o.len() > current.len() && o[..current.len()] == current[..]
                }
            })
        };
        if offer(true) {
            return self.cut(judged[sentence].start);
        }
        // The first sentence is never cut (a reply that is only the question
        // is kept), so it is not held either.
        let opens_asked = !finished
            && sentence > 0
            && !current.is_empty()
            && (self.asked.iter().any(|q| q.len() > current.len() && q.iter().zip(&current).all(|(a, b)| a.as_str() == *b))
                || offer(false));
        // Hold back a repeat in progress (even one word: it may open a
        // sentence said before), a question asked before while it is being
        // asked again, and the word still being written, unless it is the
        // reply's first: no cut starts there, and showing it at once saves
        // the reader one token's wait.
        let mut hold_from = if complete < words.len() && complete > 0 { words[complete].start } else { self.text.len() };
        if repeat >= 1 {
            hold_from = hold_from.min(judged[complete - repeat].start);
        }
        if opens_asked {
            hold_from = hold_from.min(judged[sentence].start);
        }
        // Space before held text waits with it: a reply cut there ends clean.
        let release = self.text[..hold_from].trim_end().len().max(self.shown);
        let out = self.text[self.shown..release].to_owned();
        self.shown = release;
        Step::Show(out)
    }

    /// Ends the reply at byte `at` (where a repeat starts): what comes
    /// before it and was held back is shown, the rest is dropped.
    fn cut(&mut self, at: usize) -> Step {
        self.looped = true;
        let end = self.text[..at].trim_end().len().max(self.shown);
        let out = self.text[self.shown..end].to_owned();
        self.shown = end;
        self.text.truncate(end);
        Step::Loop(out)
    }

    /// The end of the reply: its last word is judged, then what is still
    /// held back is shown (unless it was a repeat, then cut).
    pub fn finish(&mut self) -> String {
        if self.looped {
            return String::new();
        }
        match self.judge(true) {
            Step::Loop(out) => out,
            Step::Show(mut out) => {
                out.push_str(&self.text[self.shown.min(self.text.len())..]);
                self.shown = self.text.len();
                out
            }
        }
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
    /// The word's last character before closing quotes and brackets.
    raw_end: char,
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
                let bare = raw.trim_end_matches(['"', '\'', ')', '*']);
                let ends_sentence = bare.ends_with(['.', '!', '?', '…']);
                let raw_end = bare.chars().last().unwrap_or(' ');
                out.push(Word { start: s, norm: if norm.is_empty() { raw.to_owned() } else { norm }, ends_sentence, raw_end });
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
        feed_to(LoopGuard::new(), text)
    }

    fn feed_to(mut g: LoopGuard, text: &str) -> (String, bool) {
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
        (shown, g.looped())
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
    fn the_first_word_is_shown_while_it_is_written_and_later_words_once_whole() {
        let mut g = LoopGuard::asked_before(["How is your mother?"]);
        // The reply's first piece is shown at once, even a question asked
        // before: a reply that is only that question is kept whole.
        assert_eq!(g.push("How"), Step::Show("How".into()));
        assert_eq!(g.push(" is"), Step::Show(String::new()));
        assert_eq!(g.push(" your"), Step::Show(" is".into()));
        assert_eq!(g.push(" mother? Fine"), Step::Show(" your mother?".into()));
        assert_eq!(g.finish(), " Fine");
        assert!(!g.looped());
    }

    #[test]
    fn one_word_repeated_many_times_is_a_loop() {
        let (shown, looped) = feed("Yes yes yes yes yes yes yes yes yes yes yes yes yes");
        assert!(looped);
        assert!(shown.split_whitespace().count() < 8, "{shown}");
    }

    #[test]
    fn a_question_a_last_reply_asked_ends_the_reply_before_it_is_asked_again() {
        let g = LoopGuard::asked_before(["Que legal! Como vai a sua mãe?", "Que bom! Como vai a sua mãe?"]);
        let (shown, looped) = feed_to(g, "Que ótimo ouvir isso! Como vai a sua mãe?");
        assert!(looped);
        assert_eq!(shown, "Que ótimo ouvir isso!");
        // Never shown while it was being asked, even in part.
        let mut g = LoopGuard::asked_before(["Nice! How is your mother?"]);
        assert_eq!(g.push("Great news. How is "), Step::Show("Great news.".into()));
        assert_eq!(g.push("your mother? "), Step::Loop(String::new()));
        assert_eq!(g.text(), "Great news.");
    }

    #[test]
    fn what_a_last_reply_said_that_is_no_repeated_question_is_kept() {
        // A statement said again may answer a question asked again.
        let g = LoopGuard::asked_before(["You live in Lisbon."]);
        assert_eq!(feed_to(g, "Yes! You live in Lisbon."), ("Yes! You live in Lisbon.".into(), false));
        // A reply that is nothing but the question: an empty reply says less.
        let g = LoopGuard::asked_before(["How is your mother?"]);
        assert_eq!(feed_to(g, "How is your mother?"), ("How is your mother?".into(), false));
        // A question that only starts the same way goes on.
        let mut g = LoopGuard::asked_before(["Oh! How is your mother?"]);
        assert_eq!(g.push("Nice! How is your "), Step::Show("Nice!".into()));
        assert_eq!(g.push("garden? "), Step::Show(" How is your garden?".into()));
        assert!(!g.looped());
        // Two-word questions are too common to count.
        let g = LoopGuard::asked_before(["Nice! Really?"]);
        assert_eq!(feed_to(g, "Wow. Really?"), ("Wow. Really?".into(), false));
    }

    #[test]
    fn a_closing_offer_of_service_ends_the_reply_and_is_never_shown() {
        let g = LoopGuard::asked_before(std::iter::empty());
        assert_eq!(
            feed_to(g, "Você trabalha como professora de música, que lindo! Como posso ajudar você hoje?"),
            ("Você trabalha como professora de música, que lindo!".into(), true)
        );
        let g = LoopGuard::asked_before(std::iter::empty());
        assert_eq!(
            feed_to(g, "Rome is the capital of Italy. If you have any other questions, feel free to ask!"),
            ("Rome is the capital of Italy.".into(), true)
        );
        let g = LoopGuard::asked_before(std::iter::empty());
        assert_eq!(
            feed_to(g, "I'm sorry. Let me know if there's anything else I can help with."),
            ("I'm sorry.".into(), true)
        );
        // Held while it is being said.
        let mut g = LoopGuard::asked_before(std::iter::empty());
        assert_eq!(g.push("Sounds fun! How can "), Step::Show("Sounds fun!".into()));
        assert_eq!(g.push("I help "), Step::Loop(String::new()));
        // A sentence that only starts the same way goes on.
        let mut g = LoopGuard::asked_before(std::iter::empty());
        assert_eq!(g.push("Sounds fun! How can "), Step::Show("Sounds fun!".into()));
        assert_eq!(g.push("you sleep so little? "), Step::Show(" How can you sleep so little?".into()));
        // A reply that is only the offer is kept; the plain guard never cuts one.
        let g = LoopGuard::asked_before(std::iter::empty());
        assert_eq!(feed_to(g, "Como posso ajudar você hoje?"), ("Como posso ajudar você hoje?".into(), false));
        assert_eq!(feed("Sure. How can I help you today?"), ("Sure. How can I help you today?".into(), false));
        let g = LoopGuard::asked_before(std::iter::empty());
        assert_eq!(feed_to(g, "Boa noite! Estou aqui para ajudar."), ("Boa noite!".into(), true));
    }

    #[test]
    fn the_last_word_of_a_reply_is_judged_when_it_ends() {
        // No space follows the end of a reply: a repeat it completes is still cut.
        let (shown, looped) = feed("You are Marta. You live in Lisbon. You are Marta.");
        assert!(looped);
        assert_eq!(shown, "You are Marta. You live in Lisbon.");
    }

    #[test]
    fn repeats_itself_finds_sentences_and_runs() {
        assert!(repeats_itself("Hello there friend. How are you? Hello there friend.", 6));
        assert!(repeats_itself("a b c d e f g a b c d e f g", 6));
        assert!(!repeats_itself("Hello there friend. How are you today?", 6));
        assert!(!repeats_itself("Yes. Yes.", 6), "two-word sentences are not counted");
    }
}
