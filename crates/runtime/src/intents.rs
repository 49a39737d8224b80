//! Deterministic intents that skip the LLM (seed 001): delete all, list all,
//! cancel. They fire only on whole, imperative messages ("delete all my
//! memories", "apaga tudo"), never on narration ("I deleted all my emails").

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use crate::text::fold_words;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeterministicIntent {
    /// Runs `delete_all_memories` (still through a confirmation).
    DeleteAll,
    /// Runs `search_items` without a query.
    ListAll,
    /// Clears the pending proposal / context.
    Cancel,
}

// Patterns run on folded text (lowercase, no accents, words separated by
// single spaces) and are anchored at both ends: the message must be the
// command, optionally wrapped in politeness.
const POLITE_PRE: &str = r"^(?:(?:please|pls|hey|ok|okay|por favor|pf|ei|oi|agora|now|just|so)\s+)*(?:(?:can|could|would) you\s+|(?:voce )?(?:pode|poderia)\s+|(?:quero|i want to|i want you to)\s+)?";
const POLITE_POST: &str =
    r"(?:\s+(?:please|pls|por favor|pf|now|agora|ja|right now|for me|pra mim|para mim))*$";

fn anchored(body: &str) -> Option<Regex> {
    Regex::new(&format!("{POLITE_PRE}(?:{body}){POLITE_POST}")).ok()
}

static DELETE_ALL: LazyLock<Option<Regex>> = LazyLock::new(|| {
    anchored(
        &[
            r"(?:delete|erase|wipe|remove|clear|forget)\s+(?:all|everything)(?:\s+(?:of\s+)?(?:my|the|your))?(?:\s+(?:memories|memory|notes|data|items|saved items|stuff))?(?:\s+(?:you have|you know|about me))?",
            r"(?:delete|erase|wipe|clear)\s+(?:my|your)\s+(?:whole\s+|entire\s+)?memory",
            r"(?:apaga|apague|apagar|deleta|delete|deletar|exclui|exclua|excluir|limpa|limpe|limpar|remove|remova|remover|esquece|esqueca|esquecer)\s+(?:tudo|todas?|todos?)(?:\s+(?:as|os))?(?:\s+(?:minhas|meus|suas|seus))?(?:\s+(?:memorias|memoria|notas|dados|itens|lembrancas))?(?:\s+(?:salvas|salvos|guardadas|guardados))?",
            r"(?:apaga|apague|limpa|limpe)\s+(?:a|sua|minha)\s+memoria(?:\s+toda|\s+inteira)?",
            r"(?:borra|borrar|elimina|eliminar)\s+(?:todo|todas?|todos?)(?:\s+(?:mis|las|los))?(?:\s+(?:memorias|notas|datos))?",
        ]
        .join("|"),
    )
});

static LIST_ALL: LazyLock<Option<Regex>> = LazyLock::new(|| {
    anchored(
        &[
            r"(?:list|show|display)(?:\s+me)?\s+(?:all|everything)(?:\s+(?:my|the|you have|you saved|saved))?(?:\s+(?:memories|notes|items|saved items|stuff|saved))?",
            r"what do you (?:know|remember)(?: about me)?",
            r"(?:lista|liste|listar|mostra|mostre|mostrar|exibe|exiba|ve|ver)(?:\s+(?:me|pra mim))?\s+(?:tudo|todas?|todos?)(?:\s+(?:as|os))?(?:\s+(?:minhas|meus))?(?:\s+(?:memorias|notas|itens|salvos|salvas))?(?:\s+(?:salvos|salvas|que (?:voce )?(?:tem|sabe|salvou)))?",
            r"o que voce sabe(?: sobre mim)?",
            r"(?:muestra|muestrame|lista|listame)\s+(?:todo|todas?|todos?)(?:\s+(?:mis|las|los))?(?:\s+(?:memorias|notas))?",
        ]
        .join("|"),
    )
});

static CANCEL: LazyLock<Option<Regex>> = LazyLock::new(|| {
    anchored(
        r"(?:cancel|cancel (?:it|that|this)|never ?mind|forget it|stop|abort|no cancel|cancela|cancele|cancelar|cancela isso|deixa pra la|deixa para la|deixa quieto|esquece|esquece isso|para|pare|nao quero mais|desiste|cancelalo|olvidalo|dejalo)",
    )
});

/// The deterministic intent of a whole user message, if any.
pub fn detect_intent(message: &str) -> Option<DeterministicIntent> {
    let text = fold_words(message);
    if text.is_empty() || text.len() > 120 {
        return None;
    }
    let hit = |re: &LazyLock<Option<Regex>>| re.as_ref().is_some_and(|r| r.is_match(&text));
    if hit(&CANCEL) {
        Some(DeterministicIntent::Cancel)
    } else if hit(&DELETE_ALL) {
        Some(DeterministicIntent::DeleteAll)
    } else if hit(&LIST_ALL) {
        Some(DeterministicIntent::ListAll)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DeterministicIntent::*;

    #[test]
    fn regexes_compile() {
        assert!(DELETE_ALL.is_some() && LIST_ALL.is_some() && CANCEL.is_some());
    }

    #[test]
    fn delete_all_in_english_and_portuguese() {
        for m in [
            "delete all my memories",
            "Delete everything",
            "please erase all my notes",
            "wipe your memory",
            "forget everything about me",
            "clear all memories now",
            "can you delete all my data?",
            "apaga tudo",
            "Apague todas as memórias",
            "apaga todas as minhas memórias, por favor",
            "limpa a memória",
            "deleta tudo agora",
            "exclua todos os meus dados",
            "borra todas mis memorias",
        ] {
            assert_eq!(detect_intent(m), Some(DeleteAll), "{m}");
        }
    }

    #[test]
    fn narration_and_other_requests_are_not_delete_all() {
        for m in [
            "I deleted all my emails yesterday",
            "did you delete all my memories?",
            "don't delete all my memories",
            "how do I delete all my emails in Gmail?",
            "ontem eu apaguei tudo do celular",
            "ele apagou todas as fotos",
            "delete the note about the party",
            "should I delete everything from my old laptop before selling it?",
        ] {
            assert_ne!(detect_intent(m), Some(DeleteAll), "{m}");
        }
    }

    #[test]
    fn list_all_in_english_and_portuguese() {
        for m in [
            "list everything",
            "List all my memories",
            "show me everything",
            "what do you know about me?",
            "liste tudo",
            "mostra tudo",
            "Mostre todas as minhas notas",
            "o que você sabe sobre mim?",
        ] {
            assert_eq!(detect_intent(m), Some(ListAll), "{m}");
        }
        for m in [
            "show me everything about the Roman empire",
            "can you list all countries in Europe?",
            "mostra tudo sobre Roma",
        ] {
            assert_eq!(detect_intent(m), None, "{m}");
        }
    }

    #[test]
    fn cancel_in_english_and_portuguese() {
        for m in [
            "cancel",
            "Cancel!",
            "never mind",
            "Nevermind.",
            "forget it",
            "cancela",
            "Deixa pra lá",
            "deixa para lá",
            "cancela isso por favor",
            "esquece",
        ] {
            assert_eq!(detect_intent(m), Some(Cancel), "{m}");
        }
        for m in [
            "cancel my dentist appointment",
            "how do I cancel Netflix?",
            "esquece isso, não era importante e salva o filme",
        ] {
            assert_eq!(detect_intent(m), None, "{m}");
        }
    }
}
