//! Asking for what is missing (seed 003 §1.2: PROCESSING_INTENT →
//! AWAITING_INPUT, "Falta informacao"). A tool call that lacks a required
//! argument is neither refused nor guessed: the persona asks for exactly
//! that argument, in the user's language, and the next message fills it.
//!
//! Pure functions: which bare command names a tool without its argument
//! ("save a movie", "lembra de"), which arguments a call lacks, the
//! question and the lines around it in English and Portuguese, and how an
//! answer becomes the argument's value. The app keeps the waiting call.

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::router::{POLITE, SAVE};
use crate::schema::{validate, SchemaViolation};
use crate::text::fold_words;

/// The language of the user's command; questions and lines follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Lang {
    #[default]
    En,
    Pt,
}

/// Words only one of the two languages uses in commands (folded).
const PT_WORDS: &[&str] = &[
    "salva", "salve", "salvar", "adiciona", "adicione", "guarda", "guarde", "coloca", "coloque", "anota", "anote",
    "filme", "filmes", "serie", "series", "seriado", "nota", "lembra", "lembre", "memoriza", "um", "uma", "o", "os",
    "de", "do", "da", "que", "por", "favor", "pra", "para", "meu", "minha", "voce", "nao", "esse", "essa", "isso",
    "titulo", "chama", "pesquisa", "link", "video",
];
const EN_WORDS: &[&str] = &[
    "save", "add", "keep", "store", "put", "movie", "film", "show", "note", "remember", "memorize", "the", "a", "an",
    "my", "please", "it", "is", "its", "to", "of", "and", "called", "title", "look", "up", "link", "video",
];

/// English unless the message has more Portuguese words than English ones.
pub fn language_of(message: &str) -> Lang {
    let words = fold_words(message);
    let count = |set: &[&str]| words.split(' ').filter(|w| set.contains(w)).count();
    if count(PT_WORDS) > count(EN_WORDS) {
        Lang::Pt
    } else {
        Lang::En
    }
}

/// Fillers a bare command may carry around its object word (folded).
const FILLER: &str = r"(?:a|an|the|my|new|one|um|uma|o|a|meu|minha|novo|nova|de|that|que|for me|pra mim|para mim|please|pls|por favor|now|agora)";

/// Bare commands: a verb and an object word, nothing the tool could use.
/// Demonstratives ("save this", "lembra disso") point at something said
/// before: those go to the model with the conversation.
static BARE: LazyLock<Vec<(&'static str, Option<Regex>)>> = LazyLock::new(|| {
    // `object` is required after a save verb ("save" alone names nothing),
    // optional after a verb that is the tool ("anota", "remember").
    let bare = |verb: &str, object: &str, optional: bool| {
        let q = if optional { "?" } else { "" };
        Regex::new(&format!(r"^{POLITE}(?:{verb})(?:\s+{FILLER})*(?:\s+(?:{object})){q}(?:\s+{FILLER})*$")).ok()
    };
    let save = |object: &str| bare(SAVE, object, false);
    vec![
        ("save_movie", save(r"movie|film|filme")),
        ("save_tv_show", save(r"tv show|show|series|serie|seriado")),
        ("save_video", save(r"video|youtube video")),
        ("save_link", save(r"link|url|site|website|page|pagina")),
        ("save_note", save(r"note|nota|lembrete")),
        ("save_note", bare(r"anota|anote|anotar|note down|write down|jot down", "nota|note", true)),
        ("remember", bare(r"remember|memorize|lembra|lembre|memoriza|don t forget|nao esqueca", "de|do|da|that|que", true)),
        ("enrich_movie", bare(r"look up|lookup|pesquisa|pesquise", r"movie|film|filme", false)),
    ]
});

/// The tool a message names without the argument it needs ("save a movie",
/// "salva um filme", "anota", "remember", "lembra de"), if it is one.
pub fn bare_command(message: &str) -> Option<&'static str> {
    let words = fold_words(message);
    if words.is_empty() {
        return None;
    }
    BARE.iter()
        .find(|(_, re)| re.as_ref().is_some_and(|r| r.is_match(&words)))
        .map(|(tool, _)| *tool)
}

/// A call that only lacks required arguments: the arguments it has (blank
/// ones dropped: an empty title is no title) and the missing names, in the
/// schema's order. `None` when anything else is wrong too, or nothing is.
pub fn missing_args(schema: &Value, args: &Map<String, Value>) -> Option<(Map<String, Value>, Vec<String>)> {
    let blank = |v: &Value| v.is_null() || v.as_str().is_some_and(|s| s.trim().is_empty());
    let given: Map<String, Value> = args.iter().filter(|(_, v)| !blank(v)).map(|(k, v)| (k.clone(), v.clone())).collect();
    let missing: Vec<String> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).filter(|k| !given.contains_key(*k)).map(str::to_owned).collect())
        .unwrap_or_default();
    if missing.is_empty() {
        return None;
    }
    let violations = validate(schema, &Value::Object(given.clone())).err().unwrap_or_default();
    let only_missing = violations.iter().all(|v| v.path.is_empty() && v.message.starts_with("missing required field"));
    only_missing.then_some((given, missing))
}

/// What is asked for, per tool and argument: (question, the thing asked
/// for) in English, then in Portuguese.
struct Wanted {
    tool: &'static str,
    field: &'static str,
    en: (&'static str, &'static str),
    pt: (&'static str, &'static str),
}

const WANTED: &[Wanted] = &[
    Wanted { tool: "save_movie", field: "title", en: ("Which movie should I save? Tell me its title.", "the movie's title"), pt: ("Qual filme devo salvar? Me diga o título.", "o título do filme") },
    Wanted { tool: "save_tv_show", field: "title", en: ("Which show should I save? Tell me its title.", "the show's title"), pt: ("Qual série devo salvar? Me diga o título.", "o título da série") },
    Wanted { tool: "save_video", field: "url", en: ("Which video should I save? Send me its link.", "the video's link"), pt: ("Qual vídeo devo salvar? Me mande o link.", "o link do vídeo") },
    Wanted { tool: "save_link", field: "url", en: ("Which link should I save?", "the link"), pt: ("Qual link devo salvar?", "o link") },
    Wanted { tool: "save_note", field: "content", en: ("What should the note say?", "the note's text"), pt: ("O que devo anotar?", "o texto da nota") },
    Wanted { tool: "remember", field: "fact", en: ("What should I remember?", "what to remember"), pt: ("Do que devo me lembrar?", "o que lembrar") },
    Wanted { tool: "enrich_movie", field: "title", en: ("Which movie should I look up?", "the movie's title"), pt: ("Qual filme devo pesquisar?", "o título do filme") },
    Wanted { tool: "enrich_tv_show", field: "title", en: ("Which show should I look up?", "the show's title"), pt: ("Qual série devo pesquisar?", "o título da série") },
    Wanted { tool: "enrich_video", field: "url", en: ("Which video should I look up? Send me its link.", "the video's link"), pt: ("Qual vídeo devo pesquisar? Me mande o link.", "o link do vídeo") },
];

fn wanted(tool: &str, field: &str) -> Option<&'static Wanted> {
    WANTED.iter().find(|w| w.tool == tool && w.field == field)
}

/// The question for `field` of `tool` (`description` from its schema for
/// the tools without a written one), with how to drop it.
pub fn question(tool: &str, field: &str, description: &str, lang: Lang) -> String {
    let asked = match (wanted(tool, field), lang) {
        (Some(w), Lang::En) => w.en.0.to_owned(),
        (Some(w), Lang::Pt) => w.pt.0.to_owned(),
        (None, Lang::En) => format!("To run `{tool}` I still need `{field}` ({description}). What is it?"),
        (None, Lang::Pt) => format!("Para executar `{tool}` ainda preciso de `{field}` ({description}). Qual é?"),
    };
    match lang {
        Lang::En => format!("{asked} (Say “cancel” to drop it.)"),
        Lang::Pt => format!("{asked} (Diga “cancela” para desistir.)"),
    }
}

/// The thing asked for, in a sentence ("the movie's title"); a question
/// asked by the persona itself (no tool) waits for "your answer".
fn thing(tool: Option<&str>, field: Option<&str>, lang: Lang) -> String {
    let known = tool.zip(field).and_then(|(t, f)| wanted(t, f));
    match (known, tool, field, lang) {
        (Some(w), _, _, Lang::En) => w.en.1.to_owned(),
        (Some(w), _, _, Lang::Pt) => w.pt.1.to_owned(),
        (None, Some(t), Some(f), Lang::En) => format!("`{f}` for `{t}`"),
        (None, Some(t), Some(f), Lang::Pt) => format!("`{f}` para `{t}`"),
        (None, _, _, Lang::En) => "your answer".to_owned(),
        (None, _, _, Lang::Pt) => "sua resposta".to_owned(),
    }
}

/// The chat line when the user cancels the question.
pub fn cancelled_line(tool: Option<&str>, field: Option<&str>, lang: Lang) -> String {
    let what = thing(tool, field, lang);
    match lang {
        Lang::En => format!("Cancelled: I stopped waiting for {what}, and nothing was done."),
        Lang::Pt => format!("Cancelado: parei de esperar {what}, e nada foi feito."),
    }
}

/// The chat line when nobody answered within `minutes`.
pub fn expired_line(tool: Option<&str>, field: Option<&str>, lang: Lang, minutes: i64) -> String {
    let what = thing(tool, field, lang);
    match lang {
        Lang::En => format!(
            "I asked for {what} {minutes} minutes ago and got no answer, so nothing was done. Ask again whenever you like."
        ),
        Lang::Pt => format!(
            "Pedi {what} há {minutes} minutos e não recebi resposta, então nada foi feito. Peça de novo quando quiser."
        ),
    }
}

/// The question again after an answer that did not fit.
pub fn retry_question(violations: &[SchemaViolation], question: &str, lang: Lang) -> String {
    let why: Vec<String> = violations.iter().map(|v| v.message.clone()).collect();
    match lang {
        Lang::En => format!("That answer does not fit ({}). {question}", why.join("; ")),
        Lang::Pt => format!("Essa resposta não serve ({}). {question}", why.join("; ")),
    }
}

/// "It's Heat", "the title is Heat", "é Heat", "se chama Heat" → "Heat".
static LEAD_IN: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^(?:(?:it['’]?s|it\s+is|the\s+(?:title|name|url|link|note|fact)\s+is|called|named|é|o\s+(?:título|titulo|nome|link)\s+é|se\s+chama|chama-se)\s+|(?:title|name|url|link|título|titulo|nome)\s*:\s*)",
    )
    .ok()
});

/// The user's answer as the value of an argument with `schema`: the lead-in
/// and quotes dropped; a number for a numeric argument (when there is one);
/// `https://` before a bare domain for a URI. Whatever it gives is then
/// validated like any argument.
pub fn fill(schema: &Value, answer: &str) -> Value {
    let mut text = answer.trim();
    if let Some(m) = LEAD_IN.as_ref().and_then(|re| re.find(text)) {
        if m.end() < text.len() {
            text = &text[m.end()..];
        }
    }
    let text = text
        .trim_end_matches(['.', '!'])
        .trim_matches(|c: char| matches!(c, '"' | '\'' | '“' | '”' | '‘' | '’' | '«' | '»'))
        .trim();
    match schema["type"].as_str() {
        Some("integer" | "number") => {
            let digits: String = text.chars().skip_while(|c| !c.is_ascii_digit()).take_while(char::is_ascii_digit).collect();
            digits.parse::<i64>().map_or_else(|_| Value::String(text.to_owned()), Value::from)
        }
        _ if schema["format"] == "uri" && !text.contains(':') && text.contains('.') && !text.contains(char::is_whitespace) => {
            Value::String(format!("https://{text}"))
        }
        _ => Value::String(text.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ToolRegistry;
    use serde_json::json;

    #[test]
    fn bare_commands_name_their_tool_in_both_languages() {
        for (message, tool) in [
            ("save a movie", "save_movie"),
            ("Please save a new movie for me", "save_movie"),
            ("salva um filme", "save_movie"),
            ("adiciona um filme, por favor", "save_movie"),
            ("save a show", "save_tv_show"),
            ("salva uma série", "save_tv_show"),
            ("save a link", "save_link"),
            ("save a video", "save_video"),
            ("save a note", "save_note"),
            ("anota", "save_note"),
            ("anota uma nota", "save_note"),
            ("remember", "remember"),
            ("lembra de", "remember"),
            ("lembra de…", "remember"),
            ("please remember that", "remember"),
            ("look up a movie", "enrich_movie"),
        ] {
            assert_eq!(bare_command(message), Some(tool), "{message}");
        }
    }

    #[test]
    fn commands_with_something_to_use_or_a_pointer_are_not_bare() {
        for message in [
            "save the movie Heat",
            "salva o filme Heat",
            "save a note: buy milk",
            "anota comprar leite",
            "remember that I like tea",
            "lembra de comprar pão",
            "save this",
            "save this please",
            "lembra disso",
            "save it",
            "do you remember?",
            "a movie",
            "save",
            "salva",
            "look up",
            "hi",
            "",
        ] {
            assert_eq!(bare_command(message), None, "{message}");
        }
    }

    #[test]
    fn the_language_follows_the_command() {
        assert_eq!(language_of("save a movie"), Lang::En);
        assert_eq!(language_of("salva um filme"), Lang::Pt);
        assert_eq!(language_of("lembra de"), Lang::Pt);
        assert_eq!(language_of("anota"), Lang::Pt);
        assert_eq!(language_of("remember"), Lang::En);
        assert_eq!(language_of(""), Lang::En);
    }

    #[test]
    fn only_missing_required_arguments_make_a_question() {
        let registry = ToolRegistry::builtin();
        let schema = |t: &str| registry.get(t).map(|s| s.args_schema.clone()).unwrap_or_default();
        let args = |v: Value| v.as_object().cloned().unwrap_or_default();
        let (given, missing) = missing_args(&schema("save_movie"), &args(json!({"year": 1995}))).expect("missing");
        assert_eq!((given, missing), (args(json!({"year": 1995})), vec!["title".to_owned()]));
        let (given, missing) = missing_args(&schema("save_movie"), &args(json!({"title": "  "}))).expect("blank");
        assert!(given.is_empty());
        assert_eq!(missing, ["title"]);
        let (_, missing) = missing_args(&schema("set_reminder"), &Map::new()).expect("two missing");
        assert_eq!(missing, ["text", "due"]);
        // Anything else wrong: a plain refusal, not a question.
        assert!(missing_args(&schema("save_movie"), &args(json!({"rating": 5}))).is_none());
        assert!(missing_args(&schema("save_movie"), &args(json!({"year": "x"}))).is_none());
        assert!(missing_args(&schema("save_movie"), &args(json!({"title": "Heat"}))).is_none());
    }

    #[test]
    fn questions_and_lines_in_both_languages() {
        assert_eq!(
            question("save_movie", "title", "", Lang::En),
            "Which movie should I save? Tell me its title. (Say “cancel” to drop it.)"
        );
        assert_eq!(
            question("save_movie", "title", "", Lang::Pt),
            "Qual filme devo salvar? Me diga o título. (Diga “cancela” para desistir.)"
        );
        assert!(question("set_reminder", "due", "When", Lang::En).contains("`due` (When)"));
        assert!(question("set_reminder", "due", "When", Lang::Pt).starts_with("Para executar `set_reminder`"));
        assert_eq!(
            cancelled_line(Some("save_movie"), Some("title"), Lang::En),
            "Cancelled: I stopped waiting for the movie's title, and nothing was done."
        );
        assert_eq!(
            cancelled_line(None, None, Lang::Pt),
            "Cancelado: parei de esperar sua resposta, e nada foi feito."
        );
        assert!(expired_line(Some("remember"), Some("fact"), Lang::Pt, 10).starts_with("Pedi o que lembrar há 10 minutos"));
    }

    #[test]
    fn an_answer_becomes_the_argument() {
        let text = json!({"type": "string"});
        assert_eq!(fill(&text, "Heat"), json!("Heat"));
        assert_eq!(fill(&text, "  It's “Heat”. "), json!("Heat"));
        assert_eq!(fill(&text, "the title is The Thing"), json!("The Thing"));
        assert_eq!(fill(&text, "se chama Cidade de Deus"), json!("Cidade de Deus"));
        assert_eq!(fill(&text, "é"), json!("é"), "a lead-in alone is the answer");
        assert_eq!(fill(&json!({"type": "integer"}), "from 1995"), json!(1995));
        assert_eq!(fill(&json!({"type": "integer"}), "no idea"), json!("no idea"));
        let uri = json!({"type": "string", "format": "uri"});
        assert_eq!(fill(&uri, "example.com/a"), json!("https://example.com/a"));
        assert_eq!(fill(&uri, "https://x.org"), json!("https://x.org"));
        assert_eq!(fill(&uri, "not a link"), json!("not a link"));
    }
}
