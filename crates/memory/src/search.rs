//! Ranking: FTS5 query sanitising, visibility, weighted Reciprocal Rank
//! Fusion and the recency re-rank. Pure functions, so the reply pipeline,
//! the CLI and the benchmark rank with exactly the same code.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

/// Who may see what. One function decides it ([`Scope::for_viewer`]): the
/// index stores a visibility key on every row (a persona id for a message,
/// [`group_key`] for a memory) and a scope is the set of keys a viewer may read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Everything (the built-in Ei).
    All,
    /// Only rows with these visibility keys.
    Keys(Vec<String>),
}

/// The visibility key of a memory filed under `group`.
pub fn group_key(group: &str) -> String {
    format!("group:{group}")
}

impl Scope {
    /// The visibility rule, and the security boundary between personas: a
    /// persona reads its own conversation and the memories filed under its
    /// groups (`group_primary ∪ groups_visible`), nothing else; Ei (the
    /// system persona) reads everything.
    pub fn for_viewer(persona_id: &str, is_system: bool, groups: &[String]) -> Self {
        if is_system || persona_id == ledger::EI_PERSONA_ID {
            Self::All
        } else {
            Self::Keys(std::iter::once(persona_id.to_owned()).chain(groups.iter().map(|g| group_key(g))).collect())
        }
    }

    pub fn allows(&self, key: &str) -> bool {
        match self {
            Self::All => true,
            Self::Keys(keys) => keys.iter().any(|k| k == key),
        }
    }
}

/// How the two retrievers' results are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fusion {
    /// Weighted Reciprocal Rank Fusion: Σ weight / (k + rank). Ranks only.
    Rrf,
    /// A weighted sum of both scores of every candidate, on absolute
    /// scales: the cosine (negative = 0) and the BM25 score saturated as
    /// `bm25 / (bm25 + keyword_saturation)`. A candidate found by one
    /// retriever gets its other score looked up, so a turn that matches
    /// the words *and* the meaning rises above one that matches only one
    /// of them. Unlike dividing by the best score of the query, a query
    /// whose words only match common words (low BM25) cannot push its
    /// keyword hits up: a rare word such as a name (BM25 ≈ 8–12) counts
    /// about three times as much as one common word (≈ 1–3).
    Scores,
}

/// The fusion and re-rank settings. Defaults were tuned on our recall
/// benchmark (see `examples/recall_bench` and the README of this crate).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RecallSettings {
    pub fusion: Fusion,
    pub vector_weight: f32,
    pub keyword_weight: f32,
    /// RRF constant: score = Σ weight / (k + rank) (RRF only).
    pub rrf_k: f32,
    /// BM25 score that counts half (score fusion only).
    pub keyword_saturation: f32,
    /// Share of the final score given to recency (seed: 0.15).
    pub recency_weight: f32,
    /// How many candidates each retriever contributes.
    pub candidates: usize,
    /// Hubness correction: the cosine used to rank is
    /// `cosine - density_weight · density` (like CSLS in cross-lingual
    /// word retrieval). Rows in dense clusters of near-identical turns are
    /// nearest neighbours of almost every query; this lets a turn that is
    /// specifically about the question outrank them. 0 = plain cosine.
    #[serde(default)]
    pub density_weight: f32,
    /// Share of the previous and the next turn's BM25 added to a turn's
    /// own before saturation (`[before, after]`). A chat turn is short and
    /// often only makes sense with its neighbours: "Yes! Last Saturday"
    /// answers the question asked just before it. Neighbours are the
    /// conversation's turns before and after in time, at most
    /// [`CONTEXT_GAP_MS`] apart; memories have none.
    #[serde(default)]
    pub keyword_context: [f32; 2],
    /// The same for the cosine (`[before, after]`).
    #[serde(default)]
    pub vector_context: [f32; 2],
    /// The query is embedded without its proper names (capitalised words
    /// inside the sentence), which still count by keyword. In a chat
    /// between two people nearly every turn is by or to one of them, and
    /// a sentence embedding of "When did Caroline go to the support group?"
    /// sits nearest the turns that greet Caroline by name; without the name
    /// it sits nearest the turns about the support group. Off by default:
    /// in one user's own chats the names are often what the question is
    /// about, and without them recall on sets A and B fell (see the README).
    #[serde(default)]
    pub names_by_keyword: bool,
    /// The query is embedded without those of its proper names that are
    /// in at least this share of the viewer's items (and in at least
    /// [`COMMON_NAME_MIN_ITEMS`] of them); rarer names stay in. A name in
    /// a large share of one conversation is one of the people talking (or
    /// greeted): it tells no turn apart by meaning and pulls the query
    /// toward greetings, while a name said in a few turns is what those
    /// turns are about. 0 = off; [`Self::names_by_keyword`] leaves out all.
    #[serde(default)]
    pub common_name_share: f32,
    /// Weight of "said by the one the question names" beside the keyword
    /// and cosine weights (score fusion only). A chat turn rarely names
    /// its own speaker: "What did Caroline research?" is answered by
    /// Caroline's "I've been looking into adoption agencies", while the
    /// turns that hold "Caroline" are the other side's, greeting her. The
    /// persona's side is named only by the persona's own name. The
    /// person's name is read from who says it: a name the persona says in
    /// at least [`NAMED_BY_OTHER_SHARE`] of the items holding it (and in
    /// at least [`COMMON_NAME_MIN_ITEMS`]) is the person's — people call
    /// the one they talk to by name, and rarely themselves. The converse
    /// does not hold: a name only the person says is as often a third
    /// person the persona never met ("Why did Dr. Demir cancel on me?")
    /// as the persona. 0 = off.
    #[serde(default)]
    pub speaker_weight: f32,
    /// Share of the turn before's scores added, on top of
    /// [`Self::keyword_context`] and [`Self::vector_context`], when that
    /// turn asks a question: a reply ("We went camping with the kids")
    /// holds the answer in the words of the question it answers ("What did
    /// you do last weekend?"). 0 = off.
    #[serde(default)]
    pub answer_context: f32,
    /// Taken from the score of a turn that asks a question: it asks for a
    /// fact rather than telling it, yet shares the words of a question
    /// about that fact. 0 = off.
    #[serde(default)]
    pub question_penalty: f32,
    /// Weight of "said within a date the question names" beside the
    /// keyword and cosine weights (score fusion only), when the question
    /// names a day or a month with its year ("What did Maria donate in
    /// December 2023?", "Who did she have dinner with on May 3, 2023?"; see
    /// [`query_dates`]). Such a date is when the thing was told, and every
    /// message keeps the time it was said, while no word or meaning of the
    /// turn holds the date. 0 = off.
    #[serde(default)]
    pub date_weight: f32,
}

/// The share of a name's items said by one side that makes the name the
/// other side's (see [`RecallSettings::speaker_weight`]).
pub const NAMED_BY_OTHER_SHARE: f64 = 0.8;

/// Items holding a name read to tell whose name it is (the first ones the
/// keyword index gives): enough to see who says it, few enough to read
/// quickly when a name is in thousands of turns.
pub const NAME_SAMPLE: i64 = 200;

/// Whether a name is the person's, from `items` holding it of which
/// `by_human` were said by the person (see [`RecallSettings::speaker_weight`]):
/// the persona says it nearly always.
pub fn is_persons_name(items: i64, by_human: i64) -> bool {
    items >= COMMON_NAME_MIN_ITEMS && (items - by_human) as f64 >= NAMED_BY_OTHER_SHARE * items as f64
}

/// Whether `name` (one of [`query_names`]) is the persona called
/// `persona_name`: one of the words of its name, as written.
pub fn is_persona_name(name: &str, persona_name: &str) -> bool {
    persona_name.split(|c: char| !c.is_alphanumeric()).any(|w| w == name)
}

/// Fewest items a name must be in to count as common (see
/// [`RecallSettings::common_name_share`]): in a short conversation a
/// name said twice is already a large share, yet it is still about
/// something.
pub const COMMON_NAME_MIN_ITEMS: i64 = 10;

/// Turns further apart than this are not each other's context (another
/// session of the conversation).
pub const CONTEXT_GAP_MS: i64 = 6 * 3_600_000;

impl RecallSettings {
    /// The seed's values (RRF, 0.7 vector / 0.3 keyword, k = 60, 15 % recency).
    pub const SEED: Self = Self {
        fusion: Fusion::Rrf,
        vector_weight: 0.7,
        keyword_weight: 0.3,
        rrf_k: 60.0,
        keyword_saturation: 4.0,
        recency_weight: 0.15,
        candidates: 100,
        density_weight: 0.0,
        keyword_context: [0.0, 0.0],
        vector_context: [0.0, 0.0],
        names_by_keyword: false,
        common_name_share: 0.0,
        speaker_weight: 0.0,
        answer_context: 0.0,
        question_penalty: 0.0,
        date_weight: 0.0,
    };
    pub fn keyword_only(self) -> Self {
        Self { vector_weight: 0.0, keyword_weight: 1.0, ..self }
    }
    pub fn vector_only(self) -> Self {
        Self { vector_weight: 1.0, keyword_weight: 0.0, ..self }
    }
    /// Whether any neighbour counts (see [`Self::keyword_context`]).
    pub fn uses_context(&self) -> bool {
        self.keyword_context.iter().chain(&self.vector_context).any(|w| *w > 0.0)
    }
    /// The text the query is embedded from (see [`Self::names_by_keyword`]
    /// and [`Self::common_name_share`]): `common` says whether one of the
    /// query's names (as [`query_names`] gives it) is common in the
    /// viewer's items.
    pub fn meaning_text(&self, query: &str, common: impl Fn(&str) -> bool) -> String {
        if self.names_by_keyword {
            without_names(query)
        } else if self.common_name_share > 0.0 {
            without_names_if(query, common)
        } else {
            query.to_owned()
        }
    }
    /// Whether the names' counts are needed to embed a query.
    pub fn uses_name_counts(&self) -> bool {
        !self.names_by_keyword && self.common_name_share > 0.0
    }
    /// Whether a name in `items` of a scope's `scope_items` is common
    /// (see [`Self::common_name_share`]).
    pub fn is_common_name(&self, items: i64, scope_items: i64) -> bool {
        self.common_name_share > 0.0 && items >= self.common_name_items(scope_items)
    }
    /// The fewest items a name must be in, of a scope's `scope_items`, to
    /// be common ([`Self::is_common_name`]): counting a name's items can
    /// stop there.
    pub fn common_name_items(&self, scope_items: i64) -> i64 {
        COMMON_NAME_MIN_ITEMS.max((self.common_name_share as f64 * scope_items as f64).ceil() as i64)
    }
    /// The cosine `rank` uses for `row` (see [`Self::density_weight`]).
    pub fn similarity(&self, c: &Candidates, row: i64) -> Option<f32> {
        let cos = *c.cosine.get(&row)?;
        Some(cos - self.density_weight * c.density.get(&row).copied().unwrap_or(0.0))
    }
    /// The vector hits best first by [`Self::similarity`], the first `candidates`.
    pub fn vector_hits(&self, c: &Candidates) -> Vec<i64> {
        let mut rows = c.vector.clone();
        if self.density_weight != 0.0 {
            let sim = |r: &i64| self.similarity(c, *r).unwrap_or(f32::MIN);
            rows.sort_by(|a, b| sim(b).total_cmp(&sim(a)).then(b.cmp(a)));
        }
        rows.truncate(self.candidates);
        rows
    }
}

impl Default for RecallSettings {
    fn default() -> Self {
        crate::DEFAULT_SETTINGS
    }
}

/// The seed's four recency bands, by age in days.
pub fn recency_bonus(age_days: f64) -> f32 {
    if age_days < 30.0 {
        1.0
    } else if age_days < 90.0 {
        0.7
    } else if age_days < 365.0 {
        0.4
    } else {
        0.1
    }
}

/// Ranked lists from both retrievers (row ids, best first), each
/// candidate's scores from both retrievers, and its timestamp for the
/// recency re-rank.
#[derive(Debug, Clone, Default)]
pub struct Candidates {
    pub keyword: Vec<i64>,
    pub vector: Vec<i64>,
    /// False when no query vector could be made (no model): keyword only.
    pub vector_available: bool,
    pub ts_ms: HashMap<i64, i64>,
    /// BM25 relevance (higher is better; absent = the query's words are not in it).
    pub keyword_score: HashMap<i64, f32>,
    /// Cosine similarity to the query (absent = not embedded yet).
    pub cosine: HashMap<i64, f32>,
    /// How crowded each candidate's neighbourhood is: the mean cosine of
    /// its [`DENSITY_NEIGHBOURS`] nearest rows among the query's vector
    /// hits (`vector`, up to [`DENSITY_POOL`] rows). Small talk said a
    /// hundred times ("today I slept badly…") sits in a crowd; a fact said
    /// once does not. See [`RecallSettings::density_weight`].
    pub density: HashMap<i64, f32>,
    /// Each candidate message's turn before and after in its conversation
    /// (see [`RecallSettings::keyword_context`]).
    pub neighbours: HashMap<i64, [Option<i64>; 2]>,
    /// Turns that are candidates only because a neighbour is a hit.
    pub context: Vec<i64>,
    /// Who said each candidate message: true the person, false the
    /// persona (absent: a memory, or not known).
    pub by_human: HashMap<i64, bool>,
    /// The side the question names (see [`RecallSettings::speaker_weight`]):
    /// true the person, false the persona, `None` neither or both.
    pub named: Option<bool>,
    /// The candidates (and context turns) that ask a question (see
    /// [`asks_a_question`]).
    pub asks: HashSet<i64>,
    /// The times the question names, `[start, end)` in unix ms (see
    /// [`query_dates`] and [`RecallSettings::date_weight`]).
    pub dates: Vec<(i64, i64)>,
}

const MONTHS: [[&str; 2]; 12] = [
    ["january", "janeiro"],
    ["february", "fevereiro"],
    ["march", "março"],
    ["april", "abril"],
    ["may", "maio"],
    ["june", "junho"],
    ["july", "julho"],
    ["august", "agosto"],
    ["september", "setembro"],
    ["october", "outubro"],
    ["november", "novembro"],
    ["december", "dezembro"],
];

const DAY_MS: i64 = 86_400_000;

/// The days and months a question names with their year, as time ranges
/// `[start, end)` in unix ms: "on 7 July, 2023", "October 13th, 2023", "the
/// 3rd of June 2023", "em 7 de julho de 2023" name a day; "in December
/// 2023", "em julho de 2023" a month. A day's range is a day wider on each
/// side, since the question's day is the asker's and a message's time is
/// kept in UTC. A month or a day without its year names no range: which
/// year would be a guess.
pub fn query_dates(text: &str) -> Vec<(i64, i64)> {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !["de", "of", "the"].contains(&w.as_str()))
        .collect();
    let month = |w: &str| MONTHS.iter().position(|names| names.contains(&w)).and_then(|m| time::Month::try_from(m as u8 + 1).ok());
    let day = |w: &str| {
        let digits = w.trim_end_matches(|c: char| c.is_alphabetic());
        let suffix = &w[digits.len()..];
        let d: u8 = digits.parse().ok()?;
        (["", "st", "nd", "rd", "th", "º"].contains(&suffix) && (1..=31).contains(&d)).then_some(d)
    };
    let year = |w: &str| -> Option<i32> { (w.len() == 4).then(|| w.parse().ok()).flatten().filter(|y| (1900..=2200).contains(y)) };
    let midnight = |y: i32, m: time::Month, d: u8| {
        time::Date::from_calendar_date(y, m, d).ok().map(|d| d.midnight().assume_utc().unix_timestamp() * 1000)
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = |k: usize| words.get(i + k).map(String::as_str).unwrap_or_default();
        let named_day = match (day(w(0)), month(w(1)), month(w(0)), day(w(1)), year(w(2))) {
            (Some(d), Some(m), _, _, Some(y)) | (_, _, Some(m), Some(d), Some(y)) => Some(midnight(y, m, d)),
            _ => None,
        };
        if let Some(start) = named_day {
            out.extend(start.map(|t| (t - DAY_MS, t + 2 * DAY_MS)));
            i += 3;
        } else if let (Some(m), Some(y)) = (month(w(0)), year(w(1))) {
            let next = if m == time::Month::December { midnight(y + 1, time::Month::January, 1) } else { midnight(y, m.next(), 1) };
            out.extend(midnight(y, m, 1).zip(next));
            i += 2;
        } else {
            i += 1;
        }
    }
    out
}

/// Whether a turn asks a question: its text ends with a question mark.
pub fn asks_a_question(text: &str) -> bool {
    text.trim_end().ends_with(['?', '？'])
}

/// Vector hits kept per query to measure each candidate's crowding.
pub const DENSITY_POOL: usize = 200;
/// Nearest rows averaged for a candidate's density.
pub const DENSITY_NEIGHBOURS: usize = 10;

/// Fuses both retrievers (see [`Fusion`]) into a relevance in 0..1, then
/// `(1 - r) · relevance + r · recency`. Ties: newer row first.
pub fn rank(c: &Candidates, s: &RecallSettings, now_ms: i64) -> Vec<(i64, f32)> {
    let wv = if c.vector_available { s.vector_weight.max(0.0) } else { 0.0 };
    let wk = s.keyword_weight.max(0.0);
    let fused = match s.fusion {
        Fusion::Rrf => fuse_ranks(c, s, wk, wv),
        Fusion::Scores => fuse_scores(c, s, wk, wv),
    };
    let r = s.recency_weight.clamp(0.0, 1.0);
    let mut out: Vec<(i64, f32)> = fused
        .into_iter()
        .map(|(row, relevance)| {
            let ts = c.ts_ms.get(&row).copied().unwrap_or(now_ms);
            let age_days = (now_ms - ts) as f64 / 86_400_000.0;
            (row, (1.0 - r) * relevance + r * recency_bonus(age_days))
        })
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    out
}

/// Weighted RRF, divided by the best possible score.
fn fuse_ranks(c: &Candidates, s: &RecallSettings, wk: f32, wv: f32) -> HashMap<i64, f32> {
    let mut fused: HashMap<i64, f32> = HashMap::new();
    let mut best = 0.0;
    let vector = s.vector_hits(c);
    for (list, w) in [(&c.keyword, wk), (&vector, wv)] {
        if w <= 0.0 || list.is_empty() {
            continue;
        }
        best += w / (s.rrf_k + 1.0);
        for (i, &row) in list.iter().take(s.candidates).enumerate() {
            *fused.entry(row).or_insert(0.0) += w / (s.rrf_k + 1.0 + i as f32);
        }
    }
    if best <= 0.0 {
        return HashMap::new();
    }
    fused.values_mut().for_each(|v| *v /= best);
    fused
}

/// Weighted sum of both scores (see [`Fusion::Scores`]) over the union of
/// each retriever's first `candidates` (and, with context weights, the
/// turns next to them). With context, a turn's BM25 is its own plus the
/// weighted BM25 of its neighbours (then saturated), and its cosine its
/// own plus their weighted cosines.
fn fuse_scores(c: &Candidates, s: &RecallSettings, wk: f32, wv: f32) -> HashMap<i64, f32> {
    if wk + wv <= 0.0 {
        return HashMap::new();
    }
    let take = |list: Vec<i64>, w: f32| if w > 0.0 { list.into_iter().take(s.candidates).collect() } else { Vec::new() };
    let sat = s.keyword_saturation.max(f32::EPSILON);
    let kw = |row: i64| c.keyword_score.get(&row).copied().unwrap_or(0.0).max(0.0);
    let cos = |row: i64| s.similarity(c, row).unwrap_or(0.0).max(0.0);
    let context = s.uses_context();
    let around = |row: i64, score: &dyn Fn(i64) -> f32, w: [f32; 2]| -> f32 {
        let own = score(row);
        if !context {
            return own;
        }
        let Some(n) = c.neighbours.get(&row) else { return own };
        let answers = n[0].is_some_and(|r| c.asks.contains(&r));
        let w = [w[0] + if answers { s.answer_context } else { 0.0 }, w[1]];
        own + n.iter().zip(w).map(|(r, w)| r.map_or(0.0, |r| w * score(r))).sum::<f32>()
    };
    let asks = |row: i64| if c.asks.contains(&row) { s.question_penalty } else { 0.0 };
    let extra = if context { c.context.clone() } else { Vec::new() };
    let ws = if c.named.is_some() { s.speaker_weight.max(0.0) } else { 0.0 };
    let said = |row: i64| if c.named.is_some() && c.by_human.get(&row).copied() == c.named { 1.0 } else { 0.0 };
    let wd = if c.dates.is_empty() { 0.0 } else { s.date_weight.max(0.0) };
    let dated = |row: i64| {
        let within = c.ts_ms.get(&row).is_some_and(|t| c.dates.iter().any(|(start, end)| (*start..*end).contains(t)));
        if within { 1.0 } else { 0.0 }
    };
    take(c.keyword.clone(), wk)
        .into_iter()
        .chain(take(s.vector_hits(c), wv))
        .chain(extra)
        .map(|row| {
            let k = around(row, &kw, s.keyword_context);
            let v = around(row, &cos, s.vector_context);
            let lifts = ws * said(row) + wd * dated(row);
            (row, ((wk * k / (k + sat) + wv * v + lifts) / (wk + wv + ws + wd) - asks(row)).max(0.0))
        })
        .collect()
}

/// `text` without its proper names: words that start with a capital
/// letter anywhere but at the start of a sentence (and their possessive
/// `'s`). The pronoun "I" stays. When nothing else would be left, the text
/// is returned as it is.
pub fn without_names(text: &str) -> String {
    without_names_if(text, |_| true)
}

/// `text` without those of its proper names (see [`without_names`]) for
/// which `leave_out(name)` holds; `name` is the bare word, without
/// punctuation or possessive `'s`.
pub fn without_names_if(text: &str, leave_out: impl Fn(&str) -> bool) -> String {
    let mut kept = Vec::new();
    for (word, name) in words_and_names(text) {
        if !name.is_some_and(&leave_out) {
            kept.push(word);
        }
    }
    if kept.iter().all(|w| w.chars().all(|c| !c.is_alphanumeric())) {
        return text.to_owned();
    }
    kept.join(" ")
}

/// The proper names of `text` as [`without_names`] finds them (bare, in
/// order, each once).
pub fn query_names(text: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for name in words_and_names(text).filter_map(|(_, n)| n) {
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// Each whitespace-separated word of `text`, with its bare form when it is
/// a proper name: capitalised, longer than one letter, not at the start of
/// a sentence.
fn words_and_names(text: &str) -> impl Iterator<Item = (&str, Option<&str>)> {
    let mut sentence_start = true;
    text.split_whitespace().map(move |word| {
        let bare = word.trim_matches(|c: char| !c.is_alphanumeric());
        let bare = bare.strip_suffix("'s").or_else(|| bare.strip_suffix("’s")).unwrap_or(bare);
        let capitalised = bare.chars().next().is_some_and(char::is_uppercase) && bare.chars().count() > 1;
        let name = (!sentence_start && capitalised).then_some(bare);
        sentence_start = word.ends_with(['.', '?', '!', ':']) || bare.is_empty() && sentence_start;
        (word, name)
    })
}

const STOPWORDS: &[&str] = &[
    "a", "about", "am", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can", "could", "did",
    "do", "does", "for", "from", "had", "has", "have", "he", "her", "him", "his", "how", "i", "if", "in", "into",
    "is", "it", "its", "me", "my", "of", "on", "or", "our", "she", "so", "that", "the", "their", "them", "then",
    "there", "they", "this", "to", "was", "we", "were", "what", "when", "where", "which", "who", "why", "will",
    "with", "would", "you", "your", "ever", "again", "remember", "tell", "told", "said", "did", "mentioned",
    // Brazilian Portuguese (the app's other language).
    "o", "os", "as", "um", "uma", "uns", "umas", "de", "do", "da", "dos", "das", "em", "no", "na", "nos", "nas",
    "ao", "aos", "à", "às", "pelo", "pela", "para", "pra", "por", "com", "sem", "e", "ou", "mas", "que", "qual",
    "quais", "quando", "onde", "como", "quem", "eu", "me", "mim", "meu", "minha", "meus", "minhas", "você", "voce",
    "ele", "ela", "eles", "elas", "seu", "sua", "dele", "dela", "nós", "nosso", "nossa", "gente", "se", "é", "foi",
    "era", "está", "esta", "estava", "tem", "tinha", "ser", "isso", "esse", "essa", "este", "aquele", "lhe", "já",
    "ainda", "mais", "muito", "lembra", "disse", "falei",
];

/// The words of any user text as FTS5 terms: letters and digits only,
/// lower-cased, each once, at most 32; common words are dropped unless
/// nothing else is left. Operators, quotes, `*`, `:`, `^`, parentheses and
/// column filters cannot survive, so each term is safe quoted alone.
pub fn fts_terms(text: &str) -> Vec<String> {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let mut kept: Vec<&String> = words.iter().filter(|w| !STOPWORDS.contains(&w.as_str())).collect();
    if kept.is_empty() {
        kept = words.iter().collect();
    }
    let mut seen = std::collections::HashSet::new();
    kept.into_iter().filter(|w| seen.insert(w.as_str())).take(32).cloned().collect()
}

/// `terms` as one FTS5 MATCH expression, each quoted, joined by OR;
/// `None` when there is none.
pub fn fts_or<S: AsRef<str>>(terms: &[S]) -> Option<String> {
    if terms.is_empty() {
        return None;
    }
    Some(terms.iter().map(|t| format!("\"{}\"", t.as_ref())).collect::<Vec<_>>().join(" OR "))
}

/// Makes any user text safe for FTS5 MATCH: [`fts_terms`] joined by
/// [`fts_or`]. `None` when no word remains.
pub fn fts_query(text: &str) -> Option<String> {
    fts_or(&fts_terms(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_persona_sees_its_conversation_and_its_groups_only() {
        let s = Scope::for_viewer("ada", false, &["Work".into(), "General".into()]);
        assert!(s.allows("ada") && s.allows("group:Work") && s.allows("group:General"));
        assert!(!s.allows("bob") && !s.allows("group:Family") && !s.allows("group:work"));
        assert!(!Scope::for_viewer("ada", false, &[]).allows("group:General"));
        assert_eq!(Scope::for_viewer("x", true, &[]), Scope::All);
        assert_eq!(Scope::for_viewer(ledger::EI_PERSONA_ID, false, &[]), Scope::All);
    }

    #[test]
    fn fts_queries_are_quoted_words_without_operators() {
        assert_eq!(fts_query("Where did I park the car?").as_deref(), Some("\"park\" OR \"car\""));
        assert_eq!(fts_query("NEAR(a b) OR x* AND \"y\" col:z ^w").as_deref(), Some("\"near\" OR \"b\" OR \"x\" OR \"y\" OR \"col\" OR \"z\" OR \"w\""));
        assert_eq!(fts_query("the of"), Some("\"the\" OR \"of\"".into()));
        assert_eq!(fts_query("?!  ()"), None);
        assert_eq!(fts_query("Ça été"), Some("\"ça\" OR \"été\"".into()));
        assert_eq!(fts_query("Para qual cidade a Joana foi morar?").as_deref(), Some("\"cidade\" OR \"joana\" OR \"morar\""));
    }

    #[test]
    fn recency_bands_follow_the_seed() {
        assert_eq!(recency_bonus(0.0), 1.0);
        assert_eq!(recency_bonus(29.9), 1.0);
        assert_eq!(recency_bonus(30.0), 0.7);
        assert_eq!(recency_bonus(89.0), 0.7);
        assert_eq!(recency_bonus(90.0), 0.4);
        assert_eq!(recency_bonus(364.0), 0.4);
        assert_eq!(recency_bonus(365.0), 0.1);
    }

    #[test]
    fn rrf_prefers_items_found_by_both_and_respects_weights() {
        let now = 1_000 * 86_400_000;
        let mut c = Candidates { keyword: vec![1, 2, 3], vector: vec![3, 4, 1], vector_available: true, ..Default::default() };
        for r in 1..=4 {
            c.ts_ms.insert(r, now);
        }
        let s = RecallSettings {
            fusion: Fusion::Rrf,
            vector_weight: 0.5,
            keyword_weight: 0.5,
            rrf_k: 60.0,
            keyword_saturation: 4.0,
            recency_weight: 0.0,
            candidates: 10,
            density_weight: 0.0,
            ..RecallSettings::SEED
        };
        // 1 and 3 tie (ranks 1+3 and 3+1): the newer row wins.
        let r = rank(&c, &s, now);
        assert_eq!((r[0].0, r[1].0), (3, 1));
        assert!((r[0].1 - r[1].1).abs() < 1e-6);
        // Keyword weighted higher: 1 (keyword rank 1) wins.
        let s = RecallSettings { vector_weight: 0.4, keyword_weight: 0.6, ..s };
        let r = rank(&c, &s, now);
        assert_eq!((r[0].0, r[1].0), (1, 3));
        assert!((r[0].1 - 1.0).abs() < 0.05);
        let kw = rank(&c, &s.keyword_only(), now);
        assert_eq!(kw.iter().map(|x| x.0).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert!((kw[0].1 - 1.0).abs() < 1e-6);
        let vec_only = rank(&c, &s.vector_only(), now);
        assert_eq!(vec_only.iter().map(|x| x.0).collect::<Vec<_>>(), vec![3, 4, 1]);
        // Without a query vector the vector weight is ignored.
        c.vector_available = false;
        assert_eq!(rank(&c, &s, now).iter().map(|x| x.0).collect::<Vec<_>>(), vec![1, 2, 3]);
    }

    #[test]
    fn score_fusion_uses_both_scores_of_every_candidate() {
        let now = 1_000 * 86_400_000;
        // 1: a rare word, weak meaning; 2: the meaning, no word; 3: both
        // (found only by keyword, its cosine looked up); 4: one common word.
        let mut c = Candidates {
            keyword: vec![1, 3, 4],
            vector: vec![2, 1],
            vector_available: true,
            keyword_score: [(1, 12.0), (3, 8.0), (4, 1.0)].into_iter().collect(),
            cosine: [(1, 0.2), (2, 0.6), (3, 0.55), (4, 0.3)].into_iter().collect(),
            ..Default::default()
        };
        for r in 1..=4 {
            c.ts_ms.insert(r, now);
        }
        let s = RecallSettings { fusion: Fusion::Scores, recency_weight: 0.0, candidates: 10, ..RecallSettings::SEED };
        let s = RecallSettings { vector_weight: 0.5, keyword_weight: 0.5, keyword_saturation: 4.0, ..s };
        let r = rank(&c, &s, now);
        assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), vec![3, 1, 2, 4]);
        // Exactly 0.5 · 8 / (8 + 4) + 0.5 · 0.55, in 0..1.
        assert!((r[0].1 - (0.5 * 8.0 / 12.0 + 0.5 * 0.55)).abs() < 1e-6, "{r:?}");
        // A common word alone (BM25 1) does not outweigh the meaning.
        assert!(r[2].1 > r[3].1);
        // One retriever alone orders by its own score.
        assert_eq!(rank(&c, &s.keyword_only(), now).iter().map(|x| x.0).collect::<Vec<_>>(), vec![1, 3, 4]);
        assert_eq!(rank(&c, &s.vector_only(), now).iter().map(|x| x.0).collect::<Vec<_>>(), vec![2, 1]);
        // No query vector: keyword only, whatever the weights.
        c.vector_available = false;
        assert_eq!(rank(&c, &s, now).iter().map(|x| x.0).collect::<Vec<_>>(), vec![1, 3, 4]);
        // Only the first `candidates` of each list take part.
        c.vector_available = true;
        let top1 = rank(&c, &RecallSettings { candidates: 1, ..s }, now);
        assert_eq!(top1.iter().map(|x| x.0).collect::<Vec<_>>(), vec![1, 2]);
    }

    #[test]
    fn recency_reorders_equal_relevance() {
        let now = 1_000 * 86_400_000i64;
        let mut c = Candidates { keyword: vec![1, 2], vector_available: false, ..Default::default() };
        c.ts_ms.insert(1, now - 400 * 86_400_000);
        c.ts_ms.insert(2, now - 86_400_000);
        let s = RecallSettings { recency_weight: 0.5, ..RecallSettings::SEED };
        assert_eq!(rank(&c, &s, now)[0].0, 2);
        let s = RecallSettings { recency_weight: 0.0, ..RecallSettings::SEED };
        assert_eq!(rank(&c, &s, now)[0].0, 1);
    }

    #[test]
    fn names_are_left_to_the_keywords_when_embedding_the_query() {
        assert_eq!(without_names("When did Caroline go to the LGBTQ support group?"), "When did go to the support group?");
        assert_eq!(without_names("What is Melanie's favourite book? Tell me."), "What is favourite book? Tell me.");
        assert_eq!(without_names("Did I tell you about Lisbon?"), "Did I tell you about");
        assert_eq!(without_names("where did i park"), "where did i park");
        // Only names: nothing would be left to embed.
        assert_eq!(without_names("Caroline Smith?"), "Caroline");
        assert_eq!(without_names("Ada"), "Ada");
        // `names_by_keyword` leaves out every name, whatever the counts.
        let s = RecallSettings { names_by_keyword: true, common_name_share: 0.0, ..crate::DEFAULT_SETTINGS };
        assert_eq!(s.meaning_text("Ask Bob", |_| false), "Ask");
        let s = RecallSettings { names_by_keyword: false, common_name_share: 0.0, ..crate::DEFAULT_SETTINGS };
        assert_eq!(s.meaning_text("Ask Bob", |_| true), "Ask Bob");
    }

    #[test]
    fn only_common_names_are_left_out_of_the_query_embedding() {
        let q = "Did Caroline meet Tomás's sister? Caroline said so.";
        assert_eq!(query_names(q), vec!["Caroline", "Tomás"]);
        assert_eq!(query_names("Caroline went home"), Vec::<&str>::new());
        let s = RecallSettings { names_by_keyword: false, common_name_share: 0.05, ..crate::DEFAULT_SETTINGS };
        assert!(s.uses_name_counts());
        assert_eq!(s.meaning_text(q, |n| n == "Caroline"), "Did meet Tomás's sister? Caroline said so.");
        // In 30 of 400 items: common. In 3 of 400, or 9 of 20: not (too
        // few items to be a participant).
        assert!(s.is_common_name(30, 400));
        assert!(!s.is_common_name(3, 400));
        assert!(!s.is_common_name(9, 20));
        assert!(!s.is_common_name(19, 400));
        assert!(s.is_common_name(21, 400));
        let off = RecallSettings { common_name_share: 0.0, ..s };
        assert!(!off.uses_name_counts() && !off.is_common_name(400, 400));
        assert_eq!(off.meaning_text(q, |_| true), q);
    }

    #[test]
    fn a_turn_rises_with_its_neighbours_scores() {
        let now = 1_000 * 86_400_000i64;
        // 1 asks the question (keyword hit), 2 answers it without its words
        // (found only as 1's neighbour), 3 is an unrelated turn with a weak cosine.
        let c = Candidates {
            keyword: vec![1],
            vector: vec![3],
            vector_available: true,
            keyword_score: [(1, 8.0)].into_iter().collect(),
            cosine: [(1, 0.3), (2, 0.25), (3, 0.3)].into_iter().collect(),
            neighbours: [(1, [None, Some(2)]), (2, [Some(1), None]), (3, [None, None])].into_iter().collect(),
            context: vec![2],
            ..Default::default()
        };
        let flat = RecallSettings {
            fusion: Fusion::Scores,
            vector_weight: 0.5,
            keyword_weight: 0.5,
            keyword_saturation: 4.0,
            recency_weight: 0.0,
            candidates: 10,
            density_weight: 0.0,
            ..RecallSettings::SEED
        };
        let rows = |s: &RecallSettings| rank(&c, s, now).into_iter().map(|x| x.0).collect::<Vec<_>>();
        // Without context weights the neighbour is not a candidate.
        assert_eq!(rows(&flat), vec![1, 3]);
        let s = RecallSettings { keyword_context: [0.5, 0.3], vector_context: [0.3, 0.3], ..flat };
        assert_eq!(rows(&s), vec![1, 2, 3]);
        let r = rank(&c, &s, now);
        // Row 2: BM25 0 + 0.5 · 8 = 4 → 0.5; cosine 0.25 + 0.3 · 0.3.
        let two = r.iter().find(|x| x.0 == 2).map(|x| x.1).unwrap_or_default();
        assert!((two - (0.5 * 0.5 + 0.5 * (0.25 + 0.3 * 0.3))).abs() < 1e-6, "{r:?}");
    }

    #[test]
    fn a_turn_said_by_the_one_the_question_names_rises() {
        let now = 1_000 * 86_400_000i64;
        // 1: the persona greets Caroline by name (a keyword hit); 2: Caroline's
        // own line, a little nearer in meaning but without her name.
        let mut c = Candidates {
            keyword: vec![1],
            vector: vec![2, 1],
            vector_available: true,
            keyword_score: [(1, 6.0)].into_iter().collect(),
            cosine: [(1, 0.4), (2, 0.45)].into_iter().collect(),
            by_human: [(1, false), (2, true)].into_iter().collect(),
            named: Some(true),
            ..Default::default()
        };
        let s = RecallSettings { density_weight: 0.0, keyword_context: [0.0; 2], vector_context: [0.0; 2], ..crate::DEFAULT_SETTINGS };
        let rows = |c: &Candidates, s: &RecallSettings| rank(c, s, now).into_iter().map(|x| x.0).collect::<Vec<_>>();
        assert_eq!(rows(&c, &s), vec![2, 1]);
        // (0.7 · 0.45 + 0.15) / 1.15: still a score in 0..1.
        let r = rank(&c, &s, now);
        assert!((r[0].1 - (0.7 * 0.45 + 0.15) / 1.15).abs() < 1e-6, "{r:?}");
        assert_eq!(rows(&c, &RecallSettings { speaker_weight: 0.0, ..s }), vec![1, 2]);
        // The persona named, or nobody: the greeting stays first.
        c.named = Some(false);
        assert_eq!(rows(&c, &s), vec![1, 2]);
        c.named = None;
        assert_eq!(rows(&c, &s), vec![1, 2]);
    }

    #[test]
    fn a_reply_takes_more_of_the_question_it_answers_and_a_question_less_of_its_own() {
        let now = 1_000 * 86_400_000i64;
        // 1 asks what was done at the weekend (the query's words), 2 answers
        // it in other words; 3 tells something else, and 4 is 3's question.
        let mut c = Candidates {
            keyword: vec![1],
            vector: vec![1, 3, 2],
            vector_available: true,
            keyword_score: [(1, 10.0)].into_iter().collect(),
            cosine: [(1, 0.5), (2, 0.3), (3, 0.56), (4, 0.0)].into_iter().collect(),
            neighbours: [(1, [None, Some(2)]), (2, [Some(1), None]), (3, [Some(4), None])].into_iter().collect(),
            context: vec![4],
            ..Default::default()
        };
        let s = RecallSettings { density_weight: 0.0, ..crate::DEFAULT_SETTINGS };
        assert!(s.answer_context > 0.0 && s.question_penalty > 0.0);
        let rows = |c: &Candidates, s: &RecallSettings| rank(c, s, now).into_iter().map(|x| x.0).collect::<Vec<_>>();
        let before = RecallSettings { answer_context: 0.0, question_penalty: 0.0, ..s };
        // The question's own words put it first, and the other turn above the reply.
        assert_eq!(rows(&c, &before)[..3], [1, 3, 2]);
        c.asks.insert(1);
        let r = rows(&c, &s);
        assert_eq!(r[..3], [1, 2, 3], "the reply rises above the other turn");
        // The reply's score: its cosine plus 0.3 + 0.1 of the question's, its
        // BM25 0.25 + 0.1 of the question's, and nothing taken.
        let k = (0.25 + 0.1) * 10.0;
        let want = 0.7 * (0.3 + 0.4 * 0.5) + 0.3 * k / (k + 12.0);
        let two = rank(&c, &s, now).into_iter().find(|x| x.0 == 2).map(|x| x.1).unwrap_or_default();
        assert!((two - want).abs() < 1e-6, "{two} vs {want}");
        // A question loses `question_penalty`.
        let one = |s: &RecallSettings| rank(&c, s, now).into_iter().find(|x| x.0 == 1).map(|x| x.1).unwrap_or_default();
        assert!((one(&RecallSettings { question_penalty: 0.0, ..s }) - one(&s) - s.question_penalty).abs() < 1e-6);
        assert!(asks_a_question("Where did you go? ") && asks_a_question("Onde você foi？"));
        assert!(!asks_a_question("I went to Rome. Why? Work.") && !asks_a_question(""));
    }

    #[test]
    fn a_question_names_days_and_months_with_their_year() {
        let day = |y: i32, m: time::Month, d: u8| {
            time::Date::from_calendar_date(y, m, d).unwrap().midnight().assume_utc().unix_timestamp() * 1000
        };
        let july7 = (day(2023, time::Month::July, 6), day(2023, time::Month::July, 9));
        for q in [
            "What natural disaster affected John's old area on 7 July, 2023?",
            "What happened on July 7, 2023?",
            "What happened on July 7th 2023?",
            "What happened on the 7th of July, 2023?",
            "O que aconteceu em 7 de julho de 2023?",
        ] {
            assert_eq!(query_dates(q), vec![july7], "{q}");
        }
        assert_eq!(
            query_dates("What did Maria donate to a homeless shelter in December 2023?"),
            vec![(day(2023, time::Month::December, 1), day(2024, time::Month::January, 1))]
        );
        assert_eq!(
            query_dates("Onde fui em fevereiro de 2024 e em March 2024?"),
            vec![
                (day(2024, time::Month::February, 1), day(2024, time::Month::March, 1)),
                (day(2024, time::Month::March, 1), day(2024, time::Month::April, 1))
            ]
        );
        // No year, no date; "may" the verb; a day that does not exist.
        for q in ["When did Melanie go camping in June?", "What may 2 people do?", "On 30 February, 2023?", "In 2023?", ""] {
            assert_eq!(query_dates(q), vec![], "{q}");
        }
    }

    #[test]
    fn a_turn_said_on_the_day_the_question_names_rises() {
        let now = 1_000 * 86_400_000i64;
        let july7 = 1_688_688_000_000; // 2023-07-07 00:00 UTC
        // 1: the same kind of news told on another day, a little nearer in
        // meaning; 2: the one told on the day asked about (in the afternoon).
        let mut c = Candidates {
            vector: vec![1, 2],
            vector_available: true,
            cosine: [(1, 0.5), (2, 0.45)].into_iter().collect(),
            ts_ms: [(1, july7 - 40 * 86_400_000), (2, july7 + 14 * 3_600_000)].into_iter().collect(),
            dates: query_dates("What did Maria plan to do later on the evening of 7 July, 2023?"),
            ..Default::default()
        };
        let s = RecallSettings { density_weight: 0.0, keyword_context: [0.0; 2], vector_context: [0.0; 2], ..crate::DEFAULT_SETTINGS };
        assert!(s.date_weight > 0.0);
        let rows = |c: &Candidates, s: &RecallSettings| rank(c, s, now).into_iter().map(|x| x.0).collect::<Vec<_>>();
        assert_eq!(rows(&c, &s), vec![2, 1]);
        // (0.7 · 0.45 + 0.1) / 1.1, and the other turn 0.7 · 0.5 / 1.1.
        let r = rank(&c, &s, now);
        assert!((r[0].1 - (0.7 * 0.45 + 0.1) / 1.1).abs() < 1e-6, "{r:?}");
        assert!((r[1].1 - 0.7 * 0.5 / 1.1).abs() < 1e-6, "{r:?}");
        assert_eq!(rows(&c, &RecallSettings { date_weight: 0.0, ..s }), vec![1, 2]);
        // A question naming no date: the nearer turn first, scored as before.
        c.dates.clear();
        assert_eq!(rows(&c, &s), vec![1, 2]);
        assert!((rank(&c, &s, now)[0].1 - 0.7 * 0.5).abs() < 1e-6);
    }

    #[test]
    fn the_persons_name_is_the_one_the_persona_says() {
        // Said by the persona in 18 of 20 items: the person's name.
        assert!(is_persons_name(20, 2));
        assert!(is_persons_name(10, 2));
        // Said by the person: the persona, or a third person only the
        // person knows; nobody's side by this rule.
        assert!(!is_persons_name(20, 18));
        // Both say it: a third person, nobody's side.
        assert!(!is_persons_name(20, 10));
        // Too few items to tell.
        assert!(!is_persons_name(9, 0));
        assert!(!is_persons_name(0, 0));
    }

    #[test]
    fn the_persona_is_named_by_a_word_of_its_own_name() {
        assert!(is_persona_name("Noor", "Noor Haddad"));
        assert!(is_persona_name("Haddad", "Noor Haddad"));
        assert!(is_persona_name("Ada", "Ada"));
        assert!(!is_persona_name("Ad", "Ada"));
        assert!(!is_persona_name("ada", "Ada"));
        assert!(!is_persona_name("Aurelie", "Ada"));
    }

    #[test]
    fn the_density_correction_lifts_a_lone_turn_above_a_crowd() {
        let now = 1_000 * 86_400_000i64;
        // Rows 1-3: small talk said many times (cosine 0.44-0.46, crowded);
        // row 9: the fact, said once (cosine 0.40, alone).
        let c = Candidates {
            vector: vec![1, 2, 3, 9],
            vector_available: true,
            cosine: [(1, 0.46), (2, 0.45), (3, 0.44), (9, 0.40)].into_iter().collect(),
            density: [(1, 0.9), (2, 0.9), (3, 0.9), (9, 0.2)].into_iter().collect(),
            ..Default::default()
        };
        let s = RecallSettings { density_weight: 0.0, ..crate::DEFAULT_SETTINGS };
        assert_eq!(rank(&c, &s, now)[0].0, 1);
        let s = crate::DEFAULT_SETTINGS;
        assert!(s.density_weight > 0.0);
        let r = rank(&c, &s, now);
        assert_eq!(r[0].0, 9, "{r:?}");
        // The cosine's share of (0.40 − 0.5 · 0.2), no keyword score.
        let share = s.vector_weight / (s.vector_weight + s.keyword_weight);
        assert!((r[0].1 - share * (0.40 - s.density_weight * 0.2)).abs() < 1e-6, "{r:?}");
        // The first `candidates` vector hits are taken after the correction.
        assert_eq!(RecallSettings { candidates: 1, ..s }.vector_hits(&c), vec![9]);
        assert_eq!(RecallSettings { candidates: 1, density_weight: 0.0, ..s }.vector_hits(&c), vec![1]);
    }
}
