//! The end of a spoken turn, shared by the conversation loop and the
//! desktop's one-turn Talk: the gate says when the person is silent; this
//! decides when a silence ends the turn, from what the recogniser read of
//! the utterance so far (see [`Endpoint`]). It recognises the growing
//! utterance as drafts while the person speaks and takes the whole of it
//! as soon as a silence begins, so the transcript is ready, or nearly, when
//! the turn ends.
//!
//! Times are on the input's timeline (20 ms a frame). Recognition runs on
//! the caller's thread: on a sound card the microphone's frames queue up
//! meanwhile and are read at once after, on the WAV loopback they are read
//! without waiting; either way a take made at `t` that took `d` is ready at
//! `t + d` on the timeline, and the turn may not end on it before then.

use std::time::Instant;

use crate::error::VoiceError;
use crate::stt::{Draft, LanguageChoice, SpeechToText, Transcript};
use crate::vad::{GateConfig, GateEvent, SpeechGate};

/// An end of turn that adapts to what was said, sooner than the gate's
/// silence hold (800 ms) when the words are finished, later when they
/// trail off. While the person speaks, the utterance so far is recognised
/// again every `stream_every_ms` of new audio (greedy, as a draft), so that
/// at the end only its last words are new. After `speculate_ms` of silence
/// that Silero hears as silence (100 ms of any silence at the latest) the
/// utterance is transcribed, from that draft, while the silence runs
/// on (in the background on a live device; on the simulated clock the
/// result is ready when its compute time has passed, after the draft
/// under way, if any, is done); speech that resumes throws it away. The
/// turn then ends after `quick_stop_ms` of silence when the transcript
/// reads as finished (it ends in . ? or ! and not on a word that needs
/// another, such as "the" or "about") and Silero is sure the person
/// stopped (its speech probability under `silero_quiet` over the last
/// 100 ms); after `unmarked_stop_ms` (Silero sure too) when it has no
/// closing mark but ends on a word that may end a sentence (tiny.en often
/// leaves a finished question unmarked: "which is the largest lake in
/// Africa"); after `trailing_stop_ms` when it trails off ("I was thinking
/// that", "so,"); otherwise after the gate's hold, as before.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Endpoint {
    pub speculate_ms: u64,
    pub quick_stop_ms: u64,
    pub trailing_stop_ms: u64,
    /// None: an unmarked ending waits the gate's hold.
    pub unmarked_stop_ms: Option<u64>,
    pub silero_quiet: f32,
    /// None: the utterance is recognised only once the silence begins.
    pub stream_every_ms: Option<u64>,
    /// Words ending without a complement or scope ("What is the
    /// capital?", "Is Lisbon older", "the largest lake") are not taken as
    /// finished (see [`Ending`]).
    pub relations_wait: bool,
}

impl Default for Endpoint {
    fn default() -> Self {
        Self {
            // The take of the whole utterance starts after three quiet
            // frames when Silero already reads them as silence, before its
            // quiet window (100 ms) is full: the take lasts longer than the
            // quick end's 300 ms, so it, not the silence, decided when a
            // finished turn ended. Silero must still be sure of the whole
            // window before the turn ends on it, and speech that resumes
            // throws the take away. After two frames, espeak-ng's voice
            // had gaps between words that Silero heard as silence.
            speculate_ms: 60,
            quick_stop_ms: 300,
            trailing_stop_ms: 1_300,
            // As long as the usual voice agents wait after words that read
            // as finished (LiveKit's minimum endpointing delay). Words
            // that end without their scope ("which is the largest lake",
            // ended by 500 ms in a 700 ms pause before "in Africa?") are
            // not unmarked but open (see `ends_without_scope`).
            unmarked_stop_ms: Some(500),
            silero_quiet: 0.2,
            stream_every_ms: Some(500),
            relations_wait: true,
        }
    }
}

/// The silence after which the take of the utterance starts even when
/// Silero is not yet sure (its quiet window is full then).
const TAKE_BY_MS: u64 = 100;

/// How a transcript ends, for the end of turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// A finished sentence or question.
    Finished,
    /// Trailing off: a word that needs another after it, a comma, dots.
    Trailing,
    /// No closing mark, on a word that may end a sentence ("which is the
    /// largest lake in Africa").
    Unmarked,
    /// Neither: words that end without their complement or scope ("What
    /// is the capital?", "is Lisbon older", "which is the largest lake").
    Open,
}

/// Words after which a sentence is not over, English and Portuguese
/// (articles, prepositions, conjunctions, auxiliaries, fillers).
const TRAILING_WORDS: [&str; 80] = [
    "a", "an", "the", "and", "or", "but", "so", "because", "that", "which", "who", "whose", "of", "to", "in", "on",
    "at", "for", "with", "about", "from", "into", "by", "is", "are", "was", "were", "be", "am", "my", "your", "his",
    "her", "their", "our", "its", "if", "when", "than", "as", "um", "uh", "like", "i", "i'm", "we", "you", "it's", "e",
    "ou", "mas", "porque", "que", "o", "os", "as", "um", "uma", "de", "do", "da", "dos", "das", "em", "no", "na",
    "nos", "nas", "para", "pra", "com", "por", "se", "quando", "então", "tipo", "é", "eu", "meu", "minha",
];

/// Nouns that name a relation to something else ("the capital" of what?):
/// after a definite article at the very end of a question they are most
/// often waiting for their complement ("What is the capital ... of
/// France?"), so a finished reading of them is not trusted for an early
/// end. English and Portuguese.
#[rustfmt::skip]
const RELATIONAL_NOUNS: [&str; 44] = [
    "capital", "name", "population", "size", "height", "length", "width", "weight", "price", "cost", "age", "colour",
    "color", "meaning", "author", "owner", "president", "mayor", "founder", "rest", "middle", "end", "number",
    "address", "distance", "difference", "nome", "população", "tamanho", "altura", "comprimento", "peso", "preço",
    "custo", "idade", "cor", "significado", "autor", "dono", "presidente", "prefeito", "fundador", "resto", "número",
];

/// Comparatives that most often wait for their "than" ("Is Lisbon older
/// ... than Rome?"); with "more"/"less"/"mais"/"menos" before any word, and
/// the Portuguese irregular ones, as [`ends_without_scope`] reads them.
#[rustfmt::skip]
const COMPARATIVES: [&str; 44] = [
    "older", "younger", "bigger", "smaller", "larger", "taller", "shorter", "longer", "higher", "lower", "faster",
    "slower", "better", "worse", "cheaper", "richer", "poorer", "warmer", "colder", "hotter", "cooler", "heavier",
    "lighter", "easier", "harder", "stronger", "weaker", "closer", "farther", "further", "deeper", "wider", "newer",
    "healthier", "safer", "busier", "happier", "louder", "quieter", "more", "less", "maior", "menor", "melhor",
];

/// Words ending in "est" that are not superlatives.
#[rustfmt::skip]
const NOT_SUPERLATIVES: [&str; 24] = [
    "west", "rest", "test", "forest", "interest", "request", "guest", "nest", "chest", "quest", "contest", "protest",
    "harvest", "honest", "modest", "pest", "vest", "crest", "suggest", "arrest", "invest", "digest", "conquest",
    "manifest",
];

fn is_superlative(word: &str) -> bool {
    matches!(word, "best" | "worst" | "most" | "least" | "maior" | "menor" | "melhor" | "pior")
        || word.len() > 4 && word.ends_with("est") && !NOT_SUPERLATIVES.contains(&word)
}

/// Whether the words end on what most often waits for a complement or a
/// scope: a definite article and a relational noun ("What is the capital
/// ... of France?"), a comparative ("Is Lisbon older ... than Rome?",
/// "mais antiga"), or a superlative phrase ("Which is the largest lake ...
/// in Africa?", "o maior lago"). People pause there mid-question, and the
/// words before the pause already read as a question.
fn ends_without_scope(text: &str) -> bool {
    let words: Vec<String> = text
        .split_whitespace()
        .rev()
        .take(4)
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase())
        .collect();
    let article = |w: &str| matches!(w, "the" | "o" | "a" | "os" | "as");
    if let [noun, before, ..] = words.as_slice() {
        if article(before) && RELATIONAL_NOUNS.contains(&noun.as_str()) {
            return true;
        }
    }
    let Some(last) = words.first() else { return false };
    if COMPARATIVES.contains(&last.as_str())
        || words.get(1).is_some_and(|w| matches!(w.as_str(), "more" | "less" | "mais" | "menos"))
    {
        return true;
    }
    // An article among the last four words followed by a superlative: "the
    // largest", "the largest lake", "the most famous city", "o maior lago"
    // (the words are in reverse order).
    (1..words.len()).any(|i| article(&words[i]) && is_superlative(&words[i - 1]))
}

/// How `text` ends (see [`Ending`]).
pub fn ending(text: &str) -> Ending {
    ending_as(text, true)
}

/// How `text` ends; `relations_wait` false reads a question ending on a
/// bare relational noun as finished (the rule before it was added).
pub(crate) fn ending_as(text: &str, relations_wait: bool) -> Ending {
    let t = text.trim_end_matches(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == ')');
    if t.is_empty() {
        return Ending::Open;
    }
    if t.ends_with("...") || t.ends_with(['…', ',', ';', ':', '-', '—']) {
        return Ending::Trailing;
    }
    let last = t
        .rsplit(char::is_whitespace)
        .next()
        .unwrap_or("")
        .trim_matches(|c: char| !c.is_alphanumeric() && c != '\'')
        .to_lowercase();
    if TRAILING_WORDS.contains(&last.as_str()) {
        return Ending::Trailing;
    }
    if relations_wait && ends_without_scope(t) {
        Ending::Open
    } else if t.ends_with(['.', '?', '!']) {
        Ending::Finished
    } else if last.chars().any(char::is_alphanumeric) {
        Ending::Unmarked
    } else {
        Ending::Open
    }
}

/// Whether a transcript reads as a finished sentence.
pub fn reads_finished(text: &str) -> bool {
    ending(text) == Ending::Finished
}

/// A transcript of the utterance so far, made during a silence.
struct Speculation {
    transcript: Transcript,
    /// When it is ready on the input's timeline.
    ready_ms: u64,
    /// Its compute time.
    stt_ms: u64,
}

/// The utterance's transcript once its turn ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Take {
    pub transcript: Transcript,
    /// Its compute time, wherever it ran.
    pub stt_ms: u64,
    /// How long the turn waited for it after the end was decided: all of
    /// `stt_ms` when it was made then, what was left of it when it was
    /// made in the silence (0 when it was ready).
    pub stt_wait_ms: u64,
    /// Made in the silence, before the end was decided.
    pub speculated: bool,
}

/// Who has the floor while an utterance is heard, which decides whether its
/// silences may end the turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Floor {
    /// The person speaks in a turn of their own: silences end it.
    Open,
    /// The utterance began over the persona's voice: not a turn of its own.
    OverReply,
    /// Push-to-talk is held down: the release decides, not a silence.
    Held,
}

impl Floor {
    /// `held` (push-to-talk down) wins over `own_turn` (not begun over the
    /// persona's voice).
    pub fn of(own_turn: bool, held: bool) -> Self {
        match (held, own_turn) {
            (true, _) => Self::Held,
            (false, true) => Self::Open,
            (false, false) => Self::OverReply,
        }
    }
}

/// The end of the turn under way: drafts of the utterance while it grows,
/// the take in the silence, and when the silence is enough (see
/// [`Endpoint`]). Without an endpoint the gate's hold alone ends the turn
/// and the utterance is recognised once it has.
pub struct EndOfTurn {
    endpoint: Option<Endpoint>,
    /// The gate's hold as configured (what an open ending waits).
    hold_ms: u64,
    rate: u32,
    speculation: Option<Speculation>,
    /// The take was tried in the silence under way (once a silence).
    take_tried: bool,
    /// The recogniser's reading of the utterance under way, and how much
    /// of it that reading covered (samples).
    draft: Draft,
    drafted_len: usize,
    /// The draft before the one under way: what is left when the one under
    /// way is abandoned because the silence began.
    draft_before: Draft,
    /// When the recogniser, busy with a draft or a take, is free again.
    recogniser_free_ms: u64,
    /// The latest reading of the utterance not yet handed out, and the
    /// last one handed out.
    reading: Option<String>,
    told: String,
}

impl EndOfTurn {
    pub fn new(endpoint: Option<Endpoint>, gate: GateConfig) -> Self {
        Self {
            endpoint,
            hold_ms: gate.stop_ms,
            rate: crate::SAMPLE_RATE,
            speculation: None,
            take_tried: false,
            draft: Draft::default(),
            drafted_len: 0,
            draft_before: Draft::default(),
            recogniser_free_ms: 0,
            reading: None,
            told: String::new(),
        }
    }

    /// The gate to run under this end of turn: with an endpoint it holds as
    /// long as a trailing sentence may need, and [`EndOfTurn::frame`] ends
    /// the turn sooner.
    pub fn gate_config(&self, gate: GateConfig) -> GateConfig {
        match self.endpoint {
            Some(ep) => GateConfig { stop_ms: gate.stop_ms.max(ep.trailing_stop_ms), ..gate },
            None => gate,
        }
    }

    /// A new utterance began (the gate's start, a push-to-talk press):
    /// what was read of the one before is forgotten.
    pub fn begin(&mut self) {
        self.speculation = None;
        self.take_tried = false;
        self.draft = Draft::default();
        self.draft_before = Draft::default();
        self.drafted_len = 0;
        self.reading = None;
        self.told.clear();
    }

    /// What was read of the utterance under way since this was last asked,
    /// when it reads differently: for work that can start before the end.
    pub fn new_reading(&mut self) -> Option<String> {
        let text = self.reading.take()?;
        (text != self.told).then(|| {
            self.told = text.clone();
            text
        })
    }

    fn read(&mut self, text: &str) {
        let text = text.trim();
        if !text.is_empty() {
            self.reading = Some(text.to_owned());
        }
    }

    /// After the gate saw the frame at `now_ms` (its `event`, if any) and
    /// `utterance` grew by it: drafts the utterance while it grows, takes it
    /// whole when a silence begins, and returns the gate's end when the
    /// silence is enough for what was said, as far as `floor` lets the
    /// silence decide.
    #[allow(clippy::too_many_arguments)]
    pub fn frame(
        &mut self,
        gate: &mut SpeechGate,
        event: Option<GateEvent>,
        utterance: Option<&[f32]>,
        now_ms: u64,
        floor: Floor,
        stt: &mut dyn SpeechToText,
        language: LanguageChoice,
    ) -> Option<GateEvent> {
        let ep = self.endpoint?;
        let held = floor == Floor::Held;
        if held || !gate.is_speaking() && event.is_none() || gate.is_speaking() && gate.silence_ms() == 0 {
            // Speech resumed (or the floor changed hands): start over.
            self.speculation = None;
            self.take_tried = false;
        }
        let plain_turn = floor == Floor::Open && event.is_none();
        if let (Some(step), Some(audio)) = (ep.stream_every_ms, utterance) {
            let step = (step * u64::from(self.rate) / 1000) as usize;
            if plain_turn
                && gate.is_speaking()
                && gate.silence_ms() == 0
                && now_ms >= self.recogniser_free_ms
                // Less than a second (half of it the pre-roll) has too little to read.
                && audio.len() >= (self.drafted_len + step).max(self.rate as usize)
            {
                let started = Instant::now();
                self.draft_before = self.draft.clone();
                // A failed draft only means the last take starts from further back.
                if let Ok(t) = stt.transcribe_partial(audio, language, &mut self.draft) {
                    self.drafted_len = audio.len();
                    self.read(&t.text);
                }
                self.recogniser_free_ms = now_ms + started.elapsed().as_millis() as u64;
            }
        }
        // The take starts after `speculate_ms` of silence that Silero already
        // hears as silence, and at `TAKE_BY_MS` whatever it hears: a gap
        // between words, where Silero still hears speech, costs no take.
        let silent = gate.silence_ms();
        let sure_so_far = gate.silence_peak_so_far().is_some_and(|p| p < ep.silero_quiet);
        let take_now = silent == ep.speculate_ms.max(TAKE_BY_MS)
            || silent >= ep.speculate_ms && silent < TAKE_BY_MS && sure_so_far;
        if plain_turn && gate.is_speaking() && take_now && !self.take_tried {
            if let Some(audio) = utterance {
                self.take_tried = true;
                let started = Instant::now();
                // A draft still under way when the silence begins is
                // abandoned, not waited for: the take of the whole
                // utterance starts now from the draft before it (on a
                // loaded machine a draft can take longer than the
                // person's pause).
                self.abandon_draft(now_ms);
                // A failure here is not the turn's: the hold runs out and it is tried again.
                if let Ok(transcript) = stt.transcribe_drafted(audio, language, &mut self.draft) {
                    let stt_ms = started.elapsed().as_millis() as u64;
                    self.read(&transcript.text);
                    self.recogniser_free_ms = now_ms + stt_ms;
                    self.speculation = Some(Speculation { transcript, ready_ms: now_ms + stt_ms, stt_ms });
                }
            }
        }
        let sure_quiet = gate.silence_peak().is_some_and(|p| p < ep.silero_quiet);
        let ready = self.speculation.as_ref().filter(|s| now_ms >= s.ready_ms);
        let needed = match ready.map(|s| ending_as(&s.transcript.text, ep.relations_wait)) {
            Some(Ending::Finished) if plain_turn && sure_quiet => ep.quick_stop_ms,
            Some(Ending::Unmarked) if plain_turn && sure_quiet => {
                ep.unmarked_stop_ms.map_or(self.hold_ms, |ms| ms.min(self.hold_ms))
            }
            Some(Ending::Trailing) if plain_turn => self.hold_ms.max(ep.trailing_stop_ms),
            _ => self.hold_ms,
        };
        if event.is_none() && !held && gate.is_speaking() && gate.silence_ms() >= needed {
            return gate.end_now();
        }
        None
    }

    /// A draft still being made at `now_ms` (in the background on the
    /// timeline) is given up: the next take starts from the one before.
    fn abandon_draft(&mut self, now_ms: u64) {
        if now_ms < self.recogniser_free_ms {
            self.draft = std::mem::take(&mut self.draft_before);
            self.recogniser_free_ms = now_ms;
        }
    }

    /// Forgets the take made in the silence (the utterance was cut by a
    /// release or its length, not by a silence): the end is recognised anew.
    pub fn forget_take(&mut self) {
        self.speculation = None;
    }

    /// The transcript of `audio`, the utterance whose turn ended at
    /// `now_ms`: the take made in the silence when it still holds, else a
    /// take now, from the drafts (tried again on failure, as the turn's).
    pub fn transcript(
        &mut self,
        audio: &[f32],
        now_ms: u64,
        stt: &mut dyn SpeechToText,
        language: LanguageChoice,
    ) -> Result<Take, VoiceError> {
        if let Some(s) = self.speculation.take() {
            let waited = s.ready_ms.saturating_sub(now_ms);
            return Ok(Take { transcript: s.transcript, stt_ms: s.stt_ms, stt_wait_ms: waited, speculated: true });
        }
        self.abandon_draft(now_ms);
        let started = Instant::now();
        let draft = &mut self.draft;
        let transcript = crate::retry::with_retries(|| stt.transcribe_drafted(audio, language, draft))?;
        let stt_ms = started.elapsed().as_millis() as u64;
        Ok(Take { transcript, stt_ms, stt_wait_ms: stt_ms, speculated: false })
    }
}
