//! Whose voice a reply speaks in. The remembered lines are the person's own
//! sentences ("I like to eat ramen most."), and a small model asked "What
//! do I like to eat most?" copies them as they are, answering in the
//! person's voice. Asked about themselves, the person is answered "You…"
//! ("Você…"): the reply may not begin with the words the person would use
//! for themselves, nor with the question's own first word (kept from its
//! first choice, the model may say the question back). Asked about the
//! persona ("Do you like music?"), the default model opens with "As an AI
//! language model, I don't have personal preferences…" whatever the system
//! message says: a reply to a question about "you" may not begin with "As".

/// Words a question about the speaker uses for them, lower case.
const ABOUT_ME: [&str; 15] = [
    "i", "me", "my", "mine", "myself", "i'm", "i've", "i'd", "eu", "meu", "minha", "meus", "minhas", "mim", "comigo",
];

/// The person's own possessives, which an answer about them does not say
/// anywhere: kept from beginning with "Minha", the model answered "Qual é a
/// minha comida preferida?" with "A minha comida preferida é feijoada."
const THEIR_POSSESSIVES: [&str; 8] = ["my", "My", "minha", "Minha", "meu", "Meu", "minhas", "meus"];

/// Words a question to the persona about itself uses, lower case.
const ABOUT_YOU: [&str; 9] = ["you", "your", "yours", "yourself", "you're", "you've", "você", "voce", "tu"];

/// The openings of a language model speaking of itself: "As an AI…", and
/// in Portuguese "Como Ada, eu não tenho a capacidade de comer." (the
/// default model, asked "Você já comeu ramen?").
const AS_A_MODEL: [&str; 2] = ["As", "Como"];

/// The person's own first words, which the answer may not begin with
/// ("As" too: kept from "I", the model answered "What do I like to eat
/// most?" with "As Daniel, I enjoy ramen as my favorite food."). Portuguese
/// marks the speaker in the verb, so an answer may begin in the person's
/// voice without a pronoun: "Qual é a minha profissão?" → "Sou
/// veterinária."; the commonest such openings are barred too.
const THEIR_VOICE: [&str; 11] = ["I", "My", "As", "Eu", "Meu", "Minha", "Meus", "Minhas", "Sou", "Estou", "Tenho"];

/// What a reply to a message may not say: the words it may not begin with,
/// and those it may never say (the local engine spells each with and
/// without a leading space).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Steer {
    pub not_first: Vec<String>,
    pub never: Vec<String>,
}

/// What the reply to `asked` may not say. A question about the person may
/// not begin with their own first words nor its own first word, and never
/// says their possessives; a question about the persona may not begin with
/// "As"; a statement is not answered with its own first word. Other
/// questions leave the reply free.
pub(crate) fn steer(asked: &str) -> Steer {
    if !asked.contains('?') {
        return reply_to_statement(asked);
    }
    let words = lower_words(asked);
    let owned = |list: &[&str]| list.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
    if words.iter().any(|w| ABOUT_ME.contains(&w.as_str())) {
        let mut not_first = owned(&THEIR_VOICE);
        // Kept from "Eu", the model said the question back ("Em que dia
        // eu jogo futebol?" → "Em que dia você jogo futebol?").
        let first = first_word(asked);
        // The verb the person put after "eu" is theirs ("Que instrumento eu
        // toco?" → "Toco violão."); the answer's is "você toca".
        let their_verb = words.windows(2).find(|w| w[0] == "eu").map(|w| capitalised(&w[1]));
        for word in [Some(first.to_owned()), their_verb].into_iter().flatten() {
            if !word.is_empty() && !not_first.contains(&word) {
                not_first.push(word);
            }
        }
        Steer { not_first, never: owned(&THEIR_POSSESSIVES) }
    } else if words.iter().any(|w| ABOUT_YOU.contains(&w.as_str())) {
        Steer { not_first: owned(&AS_A_MODEL), never: Vec::new() }
    } else {
        Steer::default()
    }
}

/// A reply to a statement does not begin with the statement's first word.
/// A small model says a statement back: in the window scenario the default
/// model answered "Eu trabalho como professora de música." and "Hoje choveu
/// o dia inteiro aqui." with the same sentences. A friend's reaction seldom
/// starts with the same word ("I went…" → "Oh, nice!"); of 23 LoCoMo
/// statements none was answered with its own first word.
fn reply_to_statement(said: &str) -> Steer {
    let first = first_word(said);
    if first.is_empty() {
        return Steer::default();
    }
    let mut not_first = vec![first.to_owned()];
    // "Desculpe" is an apology, never sympathy ("sinto muito"): opening with
    // it, the default model refused "Hoje eu estou muito cansada." with
    // "Desculpe, mas não posso ajudá-lo com isso." (2 of 5 runs).
    if first != "Desculpe" {
        not_first.push("Desculpe".to_owned());
    }
    Steer { not_first, never: Vec::new() }
}

/// Whether `asked` is a question about the person who asks it ("Where do
/// I work?", "Qual é a minha profissão?").
pub(crate) fn asks_about_the_person(asked: &str) -> bool {
    asked.contains('?') && lower_words(asked).iter().any(|w| ABOUT_ME.contains(&w.as_str()))
}

/// The text's first word without the punctuation around it.
fn first_word(text: &str) -> &str {
    text.split_whitespace().next().unwrap_or("").trim_matches(|c: char| !c.is_alphanumeric())
}

fn lower_words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’')).map(|w| w.replace('’', "'").to_lowercase()).collect()
}

fn capitalised(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::steer;

    fn not_first(asked: &str) -> Vec<String> {
        steer(asked).not_first
    }

    #[test]
    fn a_question_about_the_person_is_not_answered_in_their_voice() {
        for asked in ["What do I like to eat most?", "Em que dia eu jogo futebol?", "Qual é a minha comida preferida?", "what's my name?", "Você lembra de mim?", "Where did I’m… go? I’m lost?"] {
            assert!(not_first(asked).contains(&"I".to_owned()), "{asked}");
            assert!(not_first(asked).contains(&"Eu".to_owned()), "{asked}");
        }
    }

    #[test]
    fn questions_about_others_leave_the_reply_free() {
        for asked in ["What is the capital of Italy?", "Iceland or Ireland?", "Qual é a capital da Itália?"] {
            assert_eq!(steer(asked), super::Steer::default(), "{asked}");
        }
    }

    #[test]
    fn a_statement_is_not_said_back() {
        assert_eq!(not_first("Eu trabalho como professora de música."), vec!["Eu".to_owned(), "Desculpe".to_owned()]);
        assert_eq!(not_first("Hoje choveu o dia inteiro aqui.")[0], "Hoje");
        assert_eq!(not_first("\"I like to eat ramen.\"")[0], "I");
        assert!(not_first("Hoje eu estou muito cansada.").contains(&"Desculpe".to_owned()), "an apology is not a reply to a feeling");
        assert!(steer("You know, I love jazz.").never.is_empty());
        assert!(not_first("...").is_empty());
    }

    #[test]
    fn an_answer_about_the_person_says_your_not_my() {
        assert!(steer("Qual é a minha comida preferida?").never.contains(&"minha".to_owned()));
        assert!(steer("What is my job?").never.contains(&"my".to_owned()));
        assert!(steer("Do you like music?").never.is_empty());
    }

    #[test]
    fn a_portuguese_answer_about_the_person_does_not_open_with_their_verb() {
        assert!(not_first("Que instrumento eu toco?").contains(&"Toco".to_owned()));
        assert!(not_first("O que eu ensino às terças?").contains(&"Ensino".to_owned()));
        assert!(not_first("Qual é a minha profissão?").contains(&"Sou".to_owned()));
        assert!(!not_first("Do you like music?").contains(&"Sou".to_owned()));
    }

    #[test]
    fn a_question_about_the_person_is_not_said_back() {
        assert!(not_first("Em que dia eu jogo futebol?").contains(&"Em".to_owned()));
        assert!(not_first("¿Where do I live?").contains(&"Where".to_owned()));
        assert_eq!(not_first("I? Really?").iter().filter(|w| *w == "I").count(), 1);
    }

    #[test]
    fn a_question_about_the_persona_does_not_open_as_a_language_model() {
        assert_eq!(not_first("Do you like music?"), vec!["As".to_owned(), "Como".to_owned()]);
        assert_eq!(not_first("Você já comeu ramen?"), vec!["As".to_owned(), "Como".to_owned()]);
        assert!(not_first("What do you think I should cook?").contains(&"I".to_owned()));
    }
}
