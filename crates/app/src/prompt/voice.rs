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
/// Each as the model spells it inside and at the start of a sentence.
const THEIR_POSSESSIVES: [&str; 12] =
    [" my", "my", "My", " My", " minha", " meu", " minhas", " meus", "Minha", "Meu", " Minha", " Meu"];

/// Words a question to the persona about itself uses, lower case.
const ABOUT_YOU: [&str; 6] = ["you", "your", "yours", "yourself", "you're", "you've"];

/// The person's own first words, which the answer may not begin with
/// ("As" too: kept from "I", the model answered "What do I like to eat
/// most?" with "As Daniel, I enjoy ramen as my favorite food.").
const THEIR_VOICE: [&str; 8] = ["I", "My", "As", "Eu", "Meu", "Minha", "Meus", "Minhas"];

/// The words the reply to `asked` may not say at all: the person's own
/// possessives, when `asked` is a question about them.
pub(crate) fn never_words(asked: &str) -> Vec<String> {
    if asked.contains('?') && words(asked).iter().any(|w| ABOUT_ME.contains(&w.as_str())) {
        THEIR_POSSESSIVES.iter().map(|w| (*w).to_owned()).collect()
    } else {
        Vec::new()
    }
}

fn words(asked: &str) -> Vec<String> {
    asked
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
        .map(|w| w.replace('’', "'").to_lowercase())
        .collect()
}

/// The words the reply to `asked` may not begin with: the person's own,
/// when `asked` is a question about them, and "As" when it asks about the
/// persona; none otherwise.
pub(crate) fn not_first_words(asked: &str) -> Vec<String> {
    if !asked.contains('?') {
        return Vec::new();
    }
    let words = words(asked);
    let mut avoided = Vec::new();
    if words.iter().any(|w| ABOUT_ME.contains(&w.as_str())) {
        avoided.extend(THEIR_VOICE.iter().map(|w| (*w).to_owned()));
        // Kept from "Eu", the model said the question back ("Em que dia
        // eu jogo futebol?" → "Em que dia você jogo futebol?").
        if let Some(first) = asked.split_whitespace().next() {
            let first = first.trim_matches(|c: char| !c.is_alphanumeric());
            if !first.is_empty() && !avoided.iter().any(|w| w == first) {
                avoided.push(first.to_owned());
            }
        }
    }
    if avoided.is_empty() && words.iter().any(|w| ABOUT_YOU.contains(&w.as_str())) {
        avoided.push("As".to_owned());
    }
    avoided
}

#[cfg(test)]
mod tests {
    use super::not_first_words;

    #[test]
    fn a_question_about_the_person_is_not_answered_in_their_voice() {
        for asked in ["What do I like to eat most?", "Em que dia eu jogo futebol?", "Qual é a minha comida preferida?", "what's my name?", "Você lembra de mim?", "Where did I’m… go? I’m lost?"] {
            assert!(not_first_words(asked).contains(&"I".to_owned()), "{asked}");
            assert!(not_first_words(asked).contains(&"Eu".to_owned()), "{asked}");
        }
    }

    #[test]
    fn statements_and_questions_about_others_leave_the_reply_free() {
        for asked in ["I like to eat ramen.", "Eu jogo futebol às quartas.", "What is the capital of Italy?", "Iceland or Ireland?", "Qual é a capital da Itália?", "You know, I love jazz."] {
            assert!(not_first_words(asked).is_empty(), "{asked}");
        }
    }

    #[test]
    fn an_answer_about_the_person_says_your_not_my() {
        assert!(super::never_words("Qual é a minha comida preferida?").contains(&" minha".to_owned()));
        assert!(super::never_words("What is my job?").contains(&" my".to_owned()));
        assert!(super::never_words("Do you like music?").is_empty());
        assert!(super::never_words("My cat is called Pimenta.").is_empty());
    }

    #[test]
    fn a_question_about_the_person_is_not_said_back() {
        assert!(not_first_words("Em que dia eu jogo futebol?").contains(&"Em".to_owned()));
        assert!(not_first_words("¿Where do I live?").contains(&"Where".to_owned()));
        assert_eq!(not_first_words("I? Really?").iter().filter(|w| *w == "I").count(), 1);
    }

    #[test]
    fn a_question_about_the_persona_does_not_open_as_a_language_model() {
        assert_eq!(not_first_words("Do you like music?"), vec!["As".to_owned()]);
        assert!(not_first_words("What do you think I should cook?").contains(&"As".to_owned()));
        assert!(not_first_words("What do you think I should cook?").contains(&"I".to_owned()));
    }
}
