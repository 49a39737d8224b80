//! Narrows the planner's choice before the model runs: from the user's
//! message (English and Portuguese cue words), which of the offered tools
//! are plausible. The planner then decides between RESPOND and only those
//! tools; a message with no cue gets a RESPOND-only schema (no tool list in
//! the prompt, a smaller grammar, so plain chat is not slowed down).
//!
//! This never executes anything and never forces a call: the model may
//! still answer in words, and every call still goes through the pipeline.

use std::sync::LazyLock;

use regex::Regex;

use crate::text::fold_words;

/// A tool and the cue pattern (on folded words) that makes it plausible.
struct Route {
    tool: &'static str,
    cue: &'static str,
}

pub(crate) const SAVE: &str = r"(?:save|saves|saving|add|keep|store|put|salva|salve|salvar|adiciona|adicione|adicionar|guarda|guarde|guardar|coloca|coloque|anota|anote|anotar)";

const ROUTES: &[Route] = &[
    Route {
        tool: "save_movie",
        cue: r"\b(?:movie|movies|film|films|filme|filmes)\b",
    },
    Route {
        tool: "save_tv_show",
        cue: r"\b(?:tv show|show|series|serie|series|seriado|novela)\b",
    },
    Route {
        tool: "save_video",
        cue: r"\b(?:video|videos|youtube|youtu be|vimeo)\b",
    },
    Route {
        tool: "save_link",
        cue: r"\b(?:link|links|url|site|website|page|pagina|https?)\b",
    },
    Route {
        tool: "save_note",
        cue: r"\b(?:note|notes|nota|notas|write down|jot|anota|anote|anotar|lembrete)\b",
    },
    Route {
        tool: "remember",
        // An order, not a question ("do you remember …?").
        cue: r"(?:^|\b(?:please|pls|por favor|and|e|can you|could you)\s+)(?:remember|memorize|lembre|lembra|memoriza)\b|\b(?:don t forget|nao esqueca)\b",
    },
    Route {
        tool: "set_reminder",
        // "remind me to …", not "remind me of …" (tell me again).
        cue: r"\bremind me (?:to|at|on|in|by|tomorrow|tonight|next|every|that)\b|\b(?:reminder|me lembre de|me lembra de|me lembre que|lembrete|alarme|alarm)\b",
    },
    Route {
        tool: "bookmark",
        cue: r"\b(?:bookmark|bookmarks|favorite|favourite|favorito|favoritos|marca|marcar)\b",
    },
    Route {
        tool: "search_items",
        cue: r"\b(?:find|search|look for|list|show me|what did i save|which|busca|buscar|procura|procurar|encontra|lista|listar|mostra|quais)\b|\b(?:what|which)\b.*\b(?:did i|have i)\s+(?:save|store|keep|bookmark)\b|\b(?:o que|que|qual|quais)\b.*\b(?:salvei|guardei|anotei)\b",
    },
    Route {
        tool: "delete_memory",
        cue: r"\b(?:delete|remove|erase|apaga|apague|apagar|remova|remover|exclui|exclua|excluir|deleta)\b",
    },
    Route {
        tool: "forget",
        cue: r"\b(?:forget|esquece|esqueca|esquecer)\b",
    },
    Route {
        tool: "enrich_movie",
        cue: r"\b(?:look up|lookup|details|info|information|about the movie|sinopse|detalhes|informacoes|pesquisa)\b",
    },
    Route {
        tool: "enrich_tv_show",
        cue: r"\b(?:look up|lookup|details|info|information|detalhes|informacoes|pesquisa)\b.*\b(?:show|series|serie|seriado)\b",
    },
    Route {
        tool: "enrich_video",
        cue: r"\b(?:look up|lookup|details|info|information|detalhes|informacoes)\b.*\b(?:video|youtube)\b",
    },
    // ----- office affordances -----
    Route {
        tool: "submit",
        cue: r"\b(?:commit to|commitment|promise|fulfil|fulfill|fulfilled|withdraw|comprometa|compromisso|prometa|promessa|cumpri|cumprida|retire|retirar)\b",
    },
    Route {
        tool: "query",
        cue: r"\b(?:obligations|commitments|handovers|my session|obrigacoes|compromissos|passagens)\b",
    },
    Route {
        tool: "verify",
        cue: r"\b(?:verify|verifica|verifique|verificar)\b",
    },
    Route {
        tool: "sign",
        cue: r"\b(?:sign|assina|assine|assinar)\b",
    },
    Route {
        tool: "log_reasoning",
        cue: r"\b(?:log|record|registre|registra)\b.*\b(?:reasoning|raciocinio)\b",
    },
    Route {
        tool: "write_note",
        cue: r"\bnote (?:for|to) (?:yourself|later|next time|the next session)\b|\bnota para (?:voce|depois|a proxima)\b",
    },
    Route {
        tool: "request_clarification",
        cue: r"\b(?:ask me|clarify|clarification|pergunte|esclareca|esclarecimento)\b",
    },
    Route {
        tool: "simulate",
        cue: r"\b(?:simulate|simulation|what would happen|simula|simule|simular|simulacao|o que aconteceria)\b",
    },
    // ----- end office affordances -----
];

/// Save tools need a save verb as well as their object word.
fn needs_save_verb(tool: &str) -> bool {
    matches!(tool, "save_movie" | "save_tv_show" | "save_video" | "save_link")
}

static COMPILED: LazyLock<Vec<(&'static str, Option<Regex>)>> =
    LazyLock::new(|| ROUTES.iter().map(|r| (r.tool, Regex::new(r.cue).ok())).collect());
static SAVE_VERB: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(&format!(r"\b{SAVE}\b")).ok());

/// The offered tools the message plausibly asks for, in registry order.
pub fn candidate_tools<'a>(message: &str, offered: &[&'a str]) -> Vec<&'a str> {
    let text = fold_words(message);
    let has_save = SAVE_VERB.as_ref().is_some_and(|r| r.is_match(&text));
    let mut hits: Vec<&str> = COMPILED
        .iter()
        .filter(|(tool, re)| {
            re.as_ref().is_some_and(|r| r.is_match(&text)) && (!needs_save_verb(tool) || has_save)
        })
        .map(|(tool, _)| *tool)
        .collect();
    // "save this: …" with no object word is a note.
    if has_save && !hits.iter().any(|t| t.starts_with("save_")) {
        hits.push("save_note");
    }
    offered.iter().copied().filter(|t| hits.contains(t)).collect()
}

/// What the planner may do for one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routing<'a> {
    /// The tools offered for this message (empty: RESPOND only).
    pub tools: Vec<&'a str>,
    /// The message is a command ("save …", "apaga …"): the planner must
    /// call one of `tools` (it still chooses which, and the arguments).
    pub must_call: bool,
}

static COMMAND: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(&format!(
        r"^(?:(?:please|pls|ok|okay|hey|ei|oi|por favor|can you|could you|would you|voce pode|pode|poderia|quero que voce)\s+)*(?:{SAVE}|remember|memorize|lembre|lembra|memoriza|delete|remove|erase|apaga|apague|exclua|exclui|deleta|forget|esquece|esqueca|find|search|busca|procura|list|lista|bookmark|remind me|me lembre|me lembra|look up)\b"
    ))
    .ok()
});

// office affordances: their commands.
static OFFICE_COMMAND: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"^(?:(?:please|pls|ok|okay|now|por favor|agora)\s+)*(?:verify|verifica|verifique|simulate|simula|simule|sign|assina|assine|commit to|comprometa se|log your reasoning|registre seu raciocinio|leave a note|deixe uma nota)\b",
    )
    .ok()
});

/// A question's opening words (on folded words): what, which, where, do,
/// can, o que, qual, onde, você … A command phrased as a question ("can you
/// save …") is caught as a command first.
static QUESTION_START: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"^(?:and\s+|e\s+|so\s+|entao\s+)?(?:what|whats|which|where|wheres|when|who|whom|whose|why|how|hows|do|does|did|is|isnt|are|arent|was|were|am|have|has|had|can|could|would|should|will|any|o que|oque|que|qual|quais|onde|aonde|quando|quem|por que|porque|pq|como|quanto|quantos|quanta|quantas|voce|vc|sera|sabe|lembra|tem|existe)\b",
    )
    .ok()
});

/// Words that point at things the person saved (notes, movies, links,
/// reminders…): a question with them may ask for a search of saved items.
static SAVED_THINGS: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"\b(?:saved|save|stored|bookmarked|bookmarks|my (?:notes|movies|films|shows|series|links|videos|reminders|items|list|obligations|commitments|tasks|promises|appointments)|salvei|salvou|salvamos|salvos|salvas|guardei|guardou|guardados|guardadas|anotei|anotou|favoritos|lembretes|(?:minhas|meus) (?:notas|filmes|series|links|videos|lembretes|itens|favoritos|obrigações|obrigacoes|compromissos|tarefas|promessas))\b",
    )
    .ok()
});

/// Whether `message` is a question (not a command) about something other
/// than what the person saved: it gets no tools, so it is answered in words.
fn is_plain_question(message: &str, text: &str) -> bool {
    let asks = message.trim_end().ends_with('?') || matches(&QUESTION_START, text);
    asks && !matches(&SAVED_THINGS, text)
}

/// The tools offered for `message`, and whether it is a command. A question
/// is never routed to a tool unless it is a command ("can you save …?") or
/// asks about saved things ("which movies did I save?").
pub fn route<'a>(message: &str, offered: &[&'a str]) -> Routing<'a> {
    let text = fold_words(message);
    let command = [&COMMAND, &OFFICE_COMMAND].iter().any(|re| re.as_ref().is_some_and(|r| r.is_match(&text)));
    if !command && is_plain_question(message, &text) {
        return Routing { tools: Vec::new(), must_call: false };
    }
    let mut tools = candidate_tools(message, offered);
    // A question about saved things asks for a read, nothing else: a search
    // of saved items or the office's read-only query of its own records.
    if !command && (message.trim_end().ends_with('?') || matches(&QUESTION_START, &text)) {
        tools.retain(|t| matches!(*t, "search_items" | "query"));
    }
    // "Can you list three facts about cats?" lists nothing saved.
    if command && !matches(&SAVED_THINGS, &text) && !matches(&ITEM_WORDS, &text) {
        tools.retain(|t| *t != "search_items");
    }
    let must_call = !tools.is_empty() && command;
    Routing { tools, must_call }
}

/// Kinds of saved item, for a search command ("find my notes", "lista os filmes").
static ITEM_WORDS: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"\b(?:notes?|movies?|films?|shows?|series|links?|videos?|bookmarks?|reminders?|items?|notas?|filmes?|serie|links?|videos?|lembretes?|itens?|favoritos?|everything|tudo)\b",
    )
    .ok()
});

/// Where one command may end and the next begin: "…, then", "… and then",
/// "… and also", "…, e também", "… e depois", "… and", "…,". Whether a
/// part does begin there depends on the words after it ([`command_parts`]).
static CONNECTIVE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\s*[,;]\s*(?:(?:and|e)\s+)?(?:then\s+|also\s+|after\s+that\s+|depois\s+|tamb[eé]m\s+|em\s+seguida\s+)?|\s+(?:and|e)\s+(?:then\s+|also\s+|after\s+that\s+|depois\s+|tamb[eé]m\s+|em\s+seguida\s+)?|\s+(?:then|afterwards|after\s+that|depois|em\s+seguida)\s+",
    )
    .ok()
});

/// A connective that says "next" even inside a note's own words.
static STRONG: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i);|\b(?:then|also|after\s+that|afterwards|depois|tamb[eé]m|em\s+seguida)\b").ok());

pub(crate) const POLITE: &str = r"(?:(?:please|pls|ok|okay|hey|ei|oi|por favor|can you|could you|would you|voce pode|pode|poderia|quero que voce)\s+)*";

/// A verb that carries over to the next object named without one ("save
/// the movie Heat and the show Dark"), on folded words.
static CARRIED_VERB: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(&format!(
        r"^{POLITE}(?P<verb>{SAVE}|delete|remove|erase|apaga|apague|exclua|exclui|deleta|forget|esquece|esqueca)\b"
    ))
    .ok()
});

/// Words after a connective that name another object: "the show Dark",
/// "a série Dark", "a note: …" (on folded words).
static OBJECT_START: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"^(?:(?:the|a|an|my|this|o|os|as|um|uma|meu|minha|meus|minhas)\s+)?(?:tv show|movies?|films?|shows?|series|serie|seriados?|videos?|links?|notes?|notas?|filmes?)\b",
    )
    .ok()
});

/// A command whose words are the user's own text (a note, a fact, a
/// reminder): inside it only a strong connective starts a new part, so "save
/// a note: buy milk and eggs" stays one note. On [`fold`]ed text (keeps ':').
static FREE_TEXT: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(&format!(
        r"^{POLITE}(?:(?:anota|anote|anotar|remember|memorize|lembre|lembra|memoriza|remind me|me lembre|me lembra)\b|(?:{SAVE})\b.*(?::|\b(?:note|notes|nota|notas|lembrete)\b))"
    ))
    .ok()
});

/// "save the movies Heat, Alien and Dune": a save verb, a plural object
/// word and a list (on the original text, accents allowed).
static PLURAL_LIST: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^(?:(?:please|pls|por\s+favor)\s+)*(?P<verb>[\p{L}]+)\s+(?:(?:the|my|these|those|os|as|meus|minhas|estes|estas|esses|essas)\s+)?(?P<object>tv\s+shows|movies|films|shows|series|s[ée]ries|videos|v[íi]deos|links|notes|notas|filmes)\s*:?\s+(?P<list>.+)$",
    )
    .ok()
});

/// Where a list's items part: ", ", ", and ", " and ", " e ".
static LIST_SEPARATOR: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)\s*,\s*(?:(?:and|e)\s+)?|\s+(?:and|e)\s+").ok());

fn matches(re: &LazyLock<Option<Regex>>, text: &str) -> bool {
    re.as_ref().is_some_and(|r| r.is_match(text))
}

fn is_command(text: &str) -> bool {
    matches(&COMMAND, &fold_words(text))
}

/// The verb of `part` that carries over to a next object, if any.
fn carried_verb(part: &str) -> Option<String> {
    let words = fold_words(part);
    CARRIED_VERB.as_ref()?.captures(&words).and_then(|c| c.name("verb")).map(|m| m.as_str().to_owned())
}

/// The singular of a plural object word, lowercased.
fn singular(object: &str) -> String {
    let lower = object.to_lowercase();
    match lower.as_str() {
        "series" => lower,
        "séries" => "série".to_owned(),
        _ => lower.strip_suffix('s').map_or_else(|| lower.clone(), str::to_owned),
    }
}

/// "save the movies Heat, Alien and Dune" → "save movie Heat", "save movie
/// Alien", "save movie Dune"; any other part stays as it is.
fn expand_list(part: String) -> Vec<String> {
    let (Some(re), Some(sep)) = (PLURAL_LIST.as_ref(), LIST_SEPARATOR.as_ref()) else {
        return vec![part];
    };
    let Some(c) = re.captures(&part) else { return vec![part] };
    let (Some(verb), Some(object), Some(list)) = (c.name("verb"), c.name("object"), c.name("list")) else {
        return vec![part];
    };
    if !matches(&SAVE_VERB, &fold_words(verb.as_str())) {
        return vec![part];
    }
    let items: Vec<&str> = sep.split(list.as_str()).map(str::trim).filter(|i| !i.is_empty()).collect();
    if items.len() < 2 {
        return vec![part];
    }
    let object = singular(object.as_str());
    let colon = if object.starts_with("not") { ":" } else { "" };
    items.iter().map(|item| format!("{} {object}{colon} {item}", verb.as_str())).collect()
}

/// The commands in one message, in order, for a local model whose JSON
/// protocol gives one action per reply (each part is one step of a plan,
/// planned after the previous step's result). The message must start with
/// a command; a new part begins at a connective followed by
/// - another command ("… and then list all", "…, remember that …"), or
/// - another object, the verb carrying over ("save the movie Heat and the
///   show Dark" → "save the movie Heat", "save the show Dark");
///
/// and a plural list makes one part per item ("save the movies Heat and
/// Alien"). Inside a note's or a fact's own words only a strong connective
/// ("then", "also", "depois", "também", ";") starts a part: "save a note:
/// buy milk and eggs" is one note, "save a note: buy milk, then list all"
/// two commands. Otherwise the message is one part.
pub fn command_parts(message: &str) -> Vec<String> {
    let whole = vec![message.trim().to_owned()];
    let Some(re) = CONNECTIVE.as_ref() else {
        return whole;
    };
    if !is_command(message) {
        return whole;
    }
    let mut parts: Vec<String> = Vec::new();
    let mut start = 0;
    // The current part, with a carried verb when it was named without one.
    let mut verb_prefix = String::new();
    for m in re.find_iter(message) {
        if m.start() <= start {
            continue;
        }
        let current = format!("{verb_prefix}{}", &message[start..m.start()]);
        let rest = &message[m.end()..];
        let strong = matches(&STRONG, m.as_str());
        if matches(&FREE_TEXT, &crate::text::fold(current.trim())) && !strong {
            continue;
        }
        let next_prefix = if is_command(rest) {
            String::new()
        } else if let (true, Some(verb)) = (matches(&OBJECT_START, &fold_words(rest)), carried_verb(&current)) {
            format!("{verb} ")
        } else {
            continue;
        };
        parts.push(current.trim().to_owned());
        start = m.end();
        verb_prefix = next_prefix;
    }
    parts.push(format!("{verb_prefix}{}", &message[start..]).trim().to_owned());
    let parts: Vec<String> = parts.into_iter().filter(|p| !p.is_empty()).flat_map(expand_list).collect();
    if parts.is_empty() {
        whole
    } else {
        parts
    }
}

/// Words that say what to do rather than what with: never part of an
/// argument taken from a command.
const COMMAND_WORDS: &[&str] = &[
    "save", "saves", "saving", "add", "keep", "store", "put", "salva", "salve", "salvar", "adiciona", "adicione",
    "adicionar", "guarda", "guarde", "guardar", "coloca", "coloque", "anota", "anote", "anotar", "movie", "movies",
    "film", "films", "filme", "filmes", "note", "notes", "nota", "notas", "show", "series", "serie", "seriado",
    "video", "videos", "link", "links", "remember", "memorize", "lembre", "lembra", "memoriza", "remind",
    "reminder", "lembrete", "delete", "remove", "erase", "apaga", "apague", "apagar", "remova", "exclua", "deleta",
    "forget", "esquece", "esqueca", "look", "lookup", "search", "find", "busca", "procura", "bookmark", "please",
    "pls", "favor",
];

/// Words an argument does not start or end with.
const EDGE_WORDS: &[&str] = &[
    "the", "a", "an", "of", "from", "to", "that", "and", "then", "about", "for", "in", "on", "at", "with", "o", "os",
    "as", "um", "uma", "de", "do", "da", "dos", "das", "que", "e", "em", "no", "na", "para", "pra", "com", "sobre",
    "me", "this", "isso", "esse", "essa", "up",
];

/// Most spans offered for one argument; a longer command is not narrowed.
const MAX_SPANS: usize = 160;
/// Longest span, in words.
const MAX_SPAN_WORDS: usize = 16;

/// The spans of a command's own words an argument may be: contiguous
/// words, without the command's verbs and object words, not starting or
/// ending with an article or preposition, edge punctuation trimmed.
/// "save a note: buy popcorn" → ["buy", "buy popcorn", "popcorn"].
pub fn argument_spans(command: &str) -> Vec<String> {
    let trim = |w: &str| w.trim_matches(|c: char| !c.is_alphanumeric()).to_owned();
    let words: Vec<(usize, usize)> = {
        let mut out = Vec::new();
        let mut start = None;
        for (i, c) in command.char_indices() {
            match (c.is_whitespace(), start) {
                (false, None) => start = Some(i),
                (true, Some(s)) => {
                    out.push((s, i));
                    start = None;
                }
                _ => {}
            }
        }
        if let Some(s) = start {
            out.push((s, command.len()));
        }
        out
    };
    let folded: Vec<String> = words.iter().map(|&(s, e)| fold_words(&command[s..e])).collect();
    let command_word = |i: usize| folded[i].split(' ').any(|w| COMMAND_WORDS.contains(&w));
    let edge = |i: usize| folded[i].is_empty() || EDGE_WORDS.contains(&folded[i].as_str());
    let mut spans: Vec<String> = Vec::new();
    for i in 0..words.len() {
        if command_word(i) || edge(i) {
            continue;
        }
        for j in i..words.len().min(i + MAX_SPAN_WORDS) {
            if command_word(j) {
                break;
            }
            if edge(j) {
                continue;
            }
            let span = trim(&command[words[i].0..words[j].1]);
            if !span.is_empty() && !spans.contains(&span) {
                spans.push(span);
            }
        }
    }
    spans
}

/// The numbers written in a command.
fn numbers(command: &str) -> Vec<i64> {
    command
        .split(|c: char| !c.is_ascii_digit())
        .filter(|d| !d.is_empty() && d.len() <= 12)
        .filter_map(|d| d.parse().ok())
        .collect()
}

/// Text arguments a small model writes from the user's words.
const GROUNDED_TEXT: &[&str] = &["title", "content", "fact", "text", "description", "query", "label", "topic"];

/// Narrows a tool's argument schema to what the command itself says, for a
/// small local model that otherwise copies or invents text: a text
/// argument must be one of the command's [`argument_spans`], a number one
/// of its numbers, and an optional text or number the command says nothing
/// for is left out (no invented year, no free notes). Validation still uses
/// the tool's own schema.
pub fn ground_args(args_schema: &mut serde_json::Value, command: &str) {
    let spans = argument_spans(command);
    let numbers = numbers(command);
    let required: Vec<String> = args_schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    let Some(props) = args_schema["properties"].as_object_mut() else {
        return;
    };
    let names: Vec<String> = props.keys().cloned().collect();
    for name in names {
        let Some(prop) = props.get_mut(&name) else { continue };
        let is_plain_text = prop["type"] == "string" && prop.get("format").is_none() && prop.get("enum").is_none();
        let is_number = prop["type"] == "integer" || prop["type"] == "number";
        let grounded = if is_plain_text && GROUNDED_TEXT.contains(&name.as_str()) && !spans.is_empty() && spans.len() <= MAX_SPANS {
            prop["enum"] = serde_json::json!(spans);
            true
        } else if is_number && !numbers.is_empty() {
            prop["enum"] = serde_json::json!(numbers);
            true
        } else {
            false
        };
        // An optional text or number the command says nothing for would
        // only be invented (a year, free notes): left out.
        if !grounded && (is_plain_text || is_number) && !required.contains(&name) {
            props.remove(&name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: &[&str] = &[
        "save_note",
        "save_movie",
        "save_tv_show",
        "save_video",
        "save_link",
        "search_items",
        "delete_memory",
        "remember",
        "forget",
        "bookmark",
        "set_reminder",
    ];

    #[test]
    fn cues_pick_plausible_tools_in_english_and_portuguese() {
        assert_eq!(candidate_tools("save the movie Inception", ALL), ["save_movie"]);
        assert_eq!(candidate_tools("Salva o filme Matrix pra mim", ALL), ["save_movie"]);
        assert_eq!(candidate_tools("please save a note: buy milk", ALL), ["save_note"]);
        assert_eq!(candidate_tools("guarda isso: comprar pão", ALL), ["save_note"]);
        assert_eq!(candidate_tools("save this link https://example.com", ALL), ["save_link"]);
        assert_eq!(candidate_tools("remember that my sister is Ana", ALL), ["remember"]);
        assert_eq!(candidate_tools("quais filmes eu salvei?", ALL), ["search_items"]);
        assert!(candidate_tools("delete the note about milk", ALL).contains(&"delete_memory"));
    }

    #[test]
    fn plain_chat_gets_no_tools() {
        for m in [
            "Hi! How are you today?",
            "What is the capital of France?",
            "I watched a great movie yesterday",
            "Tudo bem com você?",
            "act as my chess coach",
        ] {
            assert!(candidate_tools(m, ALL).is_empty(), "{m}");
        }
    }

    #[test]
    fn commands_must_call_and_questions_may_answer() {
        assert!(route("save the movie Inception", ALL).must_call);
        assert!(route("por favor salva o filme Matrix", ALL).must_call);
        assert!(route("can you remember that my sister is Ana", ALL).must_call);
        let q = route("which movies did I save?", ALL);
        assert!(!q.must_call && q.tools.contains(&"search_items"));
        assert_eq!(route("do you remember where I grew up?", ALL).tools, Vec::<&str>::new());
        assert_eq!(route("Do you remember where my grandmother grew up?", ALL).tools, Vec::<&str>::new());
        assert!(!route("Hi there", ALL).must_call);
        assert!(route("Remind me of the Bluefin codename?", ALL).tools.is_empty());
        assert!(route("remind me to call mom tomorrow", ALL).must_call);
    }

    #[test]
    fn office_affordances_have_cues() {
        let office = &["submit", "query", "verify", "sign", "log_reasoning", "write_note", "request_clarification", "simulate"];
        assert_eq!(candidate_tools("I promise to send the report by Friday", office), ["submit"]);
        assert_eq!(candidate_tools("what are my obligations?", office), ["query"]);
        assert_eq!(candidate_tools("verifica o ledger", office), ["verify"]);
        assert_eq!(candidate_tools("simulate deleting everything", office), ["simulate"]);
        assert_eq!(candidate_tools("leave a note for yourself about the trip", office), ["write_note"]);
        assert!(candidate_tools("How was your day?", office).is_empty());
        assert!(route("verify the ledger", office).must_call);
        assert!(route("please simulate deleting everything", office).must_call);
        assert!(!route("can you verify things like that?", office).must_call);
    }

    #[test]
    fn only_offered_tools_are_returned() {
        assert!(candidate_tools("save the movie Heat", &["save_note"]).is_empty());
        assert_eq!(candidate_tools("look up the movie Heat", &["enrich_movie"]), ["enrich_movie"]);
    }

    #[test]
    fn a_message_with_several_commands_is_split_into_its_parts() {
        assert_eq!(
            command_parts("save the movie Heat and then save a note: buy popcorn"),
            ["save the movie Heat", "save a note: buy popcorn"]
        );
        assert_eq!(
            command_parts("Salva o filme Central do Brasil e depois anota comprar pipoca"),
            ["Salva o filme Central do Brasil", "anota comprar pipoca"]
        );
        assert_eq!(
            command_parts("save a note: milk, then remember that I like tea; then delete the note about eggs"),
            ["save a note: milk", "remember that I like tea", "delete the note about eggs"]
        );
        // One command, or no command: one part, the whole message.
        for m in [
            "save a note: bread and butter",
            "I watched Heat and then save it",
            "tom and jerry",
        ] {
            assert_eq!(command_parts(m), [m], "{m}");
        }
    }

    #[test]
    fn the_verb_carries_over_lists_split_and_a_notes_own_words_stay_whole() {
        let cases: &[(&str, &[&str])] = &[
            ("save the movie Heat and the show Dark", &["save the movie Heat", "save the show Dark"]),
            ("save the movie Heat and the movie Alien", &["save the movie Heat", "save the movie Alien"]),
            ("save a note: buy milk, then list all", &["save a note: buy milk", "list all"]),
            ("save the movies Heat, Alien and Dune", &["save movie Heat", "save movie Alien", "save movie Dune"]),
            ("save the movie Heat and also remember that I like tea", &["save the movie Heat", "remember that I like tea"]),
            (
                "please save the movie Heat, the show Dark and a note: buy milk and eggs",
                &["please save the movie Heat", "save the show Dark", "save a note: buy milk and eggs"],
            ),
            ("delete the note about milk and the movie Heat", &["delete the note about milk", "delete the movie Heat"]),
            ("save the notes: buy milk, call mom", &["save note: buy milk", "save note: call mom"]),
            ("save a note: buy milk and eggs, then the movie Heat", &["save a note: buy milk and eggs", "save the movie Heat"]),
            ("salva o filme Heat e a série Dark", &["salva o filme Heat", "salva a série Dark"]),
            ("salva o filme Heat e também a série Dark", &["salva o filme Heat", "salva a série Dark"]),
            ("anota comprar leite e ovos, depois lista tudo", &["anota comprar leite e ovos", "lista tudo"]),
            ("salva os filmes Heat, Alien e Duna", &["salva filme Heat", "salva filme Alien", "salva filme Duna"]),
            ("salva o filme Heat depois apaga a nota sobre leite", &["salva o filme Heat", "apaga a nota sobre leite"]),
            ("guarda as séries Dark e Lost", &["guarda série Dark", "guarda série Lost"]),
        ];
        for (message, parts) in cases {
            assert_eq!(command_parts(message), *parts, "{message}");
        }
        // A note's or a fact's own words, a title with "and": one part.
        for m in [
            "save a note: buy milk and eggs",
            "save a note: call mom and find the charger",
            "save a note: buy milk, eggs and bread",
            "remember that I like the movie Heat and the show Dark",
            "save the movie Tom and Jerry",
            "salva uma nota: comprar pão e manteiga",
            "salva o filme Romeu e Julieta",
            "lembre que eu gosto de chá e café",
        ] {
            assert_eq!(command_parts(m), [m], "{m}");
        }
    }

    #[test]
    fn arguments_are_spans_of_the_command_without_its_verbs_and_articles() {
        assert_eq!(argument_spans("save a note: buy popcorn"), ["buy", "buy popcorn", "popcorn"]);
        assert_eq!(argument_spans("save the movie Heat from 1995"), ["Heat", "Heat from 1995", "1995"]);
        assert_eq!(
            argument_spans("salva o filme Central do Brasil"),
            ["Central", "Central do Brasil", "Brasil"]
        );
        assert!(argument_spans("remember that my sister is Ana").contains(&"my sister is Ana".to_owned()));
        assert!(argument_spans("save the movie").is_empty());
    }

    #[test]
    fn a_schema_is_narrowed_to_the_commands_words_and_numbers() {
        let schema = || {
            serde_json::json!({
                "type": "object",
                "properties": {
                    "title": {"type": "string", "maxLength": 200},
                    "year": {"type": "integer"},
                    "tmdb_id": {"type": "integer"},
                    "notes": {"type": "string"},
                    "url": {"type": "string", "format": "uri"}
                },
                "required": ["title"]
            })
        };
        let mut s = schema();
        ground_args(&mut s, "save the movie Heat");
        assert_eq!(s["properties"]["title"]["enum"], serde_json::json!(["Heat"]));
        assert!(s["properties"].get("year").is_none() && s["properties"].get("tmdb_id").is_none(), "{s}");
        assert!(s["properties"].get("notes").is_none(), "free notes would be invented: {s}");
        assert!(s["properties"]["url"].get("enum").is_none());
        let mut s = schema();
        ground_args(&mut s, "save the movie Heat from 1995");
        assert_eq!(s["properties"]["year"]["enum"], serde_json::json!([1995]));
        // Nothing to take from: left as it is.
        let mut s = schema();
        ground_args(&mut s, "save the movie");
        assert!(s["properties"]["title"].get("enum").is_none());
    }

    #[test]
    fn a_question_gets_no_tool_unless_it_asks_about_saved_things() {
        let offered = ["save_movie", "save_note", "search_items", "remember", "set_reminder"];
        for q in ["On which days do I run?", "Which movie should I watch tonight?", "What should I note about the weather?", "Quais dias eu trabalho?", "Can you list three fun facts about cats?"] {
            assert_eq!(route(q, &offered), Routing { tools: vec![], must_call: false }, "{q}");
        }
        assert_eq!(route("What movies did I save?", &offered).tools, vec!["search_items"]);
        assert_eq!(route("Quais filmes eu salvei?", &offered).tools, vec!["search_items"]);
        // The persona's own tracked commitments are saved things too.
        let office = ["query", "submit", "save_note"];
        for q in ["What are my obligations?", "what are my obligations?", "Quais são minhas obrigações?"] {
            assert!(!route(q, &office).tools.is_empty(), "{q}");
        }
        let asked = route("Can you save the movie Heat?", &offered);
        assert!(asked.must_call && asked.tools.contains(&"save_movie"));
    }
}
