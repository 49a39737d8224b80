//! Whose voice a reply speaks in. The remembered lines are the person's own
//! sentences ("I like to eat ramen most."), and a small model asked "What
//! do I like to eat most?" copies them as they are, answering in the
//! person's voice. Asked about themselves, the person is answered "You…"
//! ("Você…"): the reply may not begin with the words the person would use
//! for themselves.

/// Words a question about the speaker uses for them, lower case.
const ABOUT_ME: [&str; 15] = [
    "i", "me", "my", "mine", "myself", "i'm", "i've", "i'd", "eu", "meu", "minha", "meus", "minhas", "mim", "comigo",
];

/// The person's own first words, which the answer may not begin with.
const THEIR_VOICE: [&str; 7] = ["I", "My", "Eu", "Meu", "Minha", "Meus", "Minhas"];

/// The words the reply to `asked` may not begin with: the person's own,
/// when `asked` is a question about them; none otherwise.
pub(crate) fn not_first_words(asked: &str) -> Vec<String> {
    let question = asked.contains('?');
    let about_them = asked
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
        .any(|w| ABOUT_ME.contains(&w.replace('’', "'").to_lowercase().as_str()));
    if question && about_them {
        THEIR_VOICE.iter().map(|w| (*w).to_owned()).collect()
    } else {
        Vec::new()
    }
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
        for asked in ["I like to eat ramen.", "Eu jogo futebol às quartas.", "What is the capital of Italy?", "Do you like jazz?", "Iceland or Ireland?", "Qual é a capital da Itália?"] {
            assert!(not_first_words(asked).is_empty(), "{asked}");
        }
    }
}
