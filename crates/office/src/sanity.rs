//! The sanity check: claims a handover makes are compared with what the
//! ledger says (by queries), and a disagreement becomes a governance note.

use ledger::{Ledger, Reminder};
use regex::Regex;
use std::sync::LazyLock;

// The patterns are literals compiled once; the tests below exercise each.
use time::OffsetDateTime;

use crate::frame::parse_ts;
use crate::session::Language;
use crate::OfficeError;

/// The ledger's facts about a persona at the end of a session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    pub open: Vec<Reminder>,
    pub overdue: usize,
    /// Messages in the session that ended.
    pub session_messages: u64,
    pub reminders_set_in_session: u64,
    pub bookmarks_in_session: u64,
}

impl Facts {
    /// Reads the facts for the session that began after event `session_start`.
    pub async fn read(ledger: &Ledger, persona_id: &str, session_start: i64, now: OffsetDateTime) -> Result<Self, OfficeError> {
        let open = ledger.reminders(persona_id, false).await?;
        let overdue = open.iter().filter(|r| r.due_at.as_deref().and_then(parse_ts).is_some_and(|d| d < now)).count();
        let session_messages = ledger.messages_since(persona_id, session_start, 10_000).await?.len() as u64;
        let (reminders_set_in_session, bookmarks_in_session) = ledger.office_activity_since(persona_id, session_start).await?;
        Ok(Self { open, overdue, session_messages, reminders_set_in_session, bookmarks_in_session })
    }
}

static NOTHING_OVERDUE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(nothing|no (obligations?|reminders?|tasks?|deadlines?)) (is |are )?(overdue|late)\b|\bnada (está )?atrasad|\bnenhuma? (obrigaç\w+|tarefa|lembrete)s? atrasad|\b(on|in) track\b|\bem dia\b")
        .expect("literal pattern")
});
static ALL_DONE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(all|every) (my |of my )?(obligations?|reminders?|tasks?|promises?) (are |were |is )?(done|complete|completed|kept|finished)\b|\bno (open|pending) (obligations?|reminders?|tasks?)\b|\bnothing (is )?(open|pending)\b|\b(tudo|todas as (obrigaç\w+|tarefas)) (está |estão |foi |foram )?(feit|conclu|cumprid)|\bnada (está )?pendente\b|\bnenhuma (obrigaç\w+|tarefa) (em aberto|pendente)\b")
        .expect("literal pattern")
});
static MESSAGE_COUNT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(\d{1,5}) (messages|mensagens)\b").expect("literal pattern")
});
static SET_REMINDER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\bI (set|created|added|scheduled) (a |an )?(reminder|obligation|deadline)|\b(criei|defini|agendei|adicionei) (um |uma )?(lembrete|obrigaç|prazo)")
        .expect("literal pattern")
});
static BOOKMARKED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\bI bookmarked\b|\b(marquei|favoritei|salvei nos favoritos)\b").expect("literal pattern")
});
static DONE_WORD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(done|finished|completed|kept|sent|feit[oa]|conclu[ií]d[oa]|cumprid[oa]|enviad[oa])\b").expect("literal pattern")
});

/// Findings where the handover and the ledger disagree (empty: they agree).
pub fn check(handover: &str, facts: &Facts, lang: Language) -> Vec<String> {
    let pt = lang == Language::PtBr;
    let mut out = Vec::new();
    if facts.overdue > 0 && NOTHING_OVERDUE.is_match(handover) {
        out.push(if pt {
            format!("a nota diz que nada está atrasado, mas o ledger tem {} obrigação(ões) atrasada(s)", facts.overdue)
        } else {
            format!("the note says nothing is overdue, but the ledger has {} overdue obligation(s)", facts.overdue)
        });
    }
    if !facts.open.is_empty() && ALL_DONE.is_match(handover) {
        out.push(if pt {
            format!("a nota diz que tudo foi cumprido, mas o ledger tem {} obrigação(ões) em aberto", facts.open.len())
        } else {
            format!("the note says everything is done, but the ledger has {} open obligation(s)", facts.open.len())
        });
    }
    for c in MESSAGE_COUNT.captures_iter(handover) {
        let claimed: u64 = c[1].parse().unwrap_or(0);
        if claimed != facts.session_messages {
            out.push(if pt {
                format!("a nota fala em {claimed} mensagens, o ledger registra {} nesta sessão", facts.session_messages)
            } else {
                format!("the note speaks of {claimed} messages; the ledger records {} in this session", facts.session_messages)
            });
            break;
        }
    }
    if facts.reminders_set_in_session == 0 && SET_REMINDER.is_match(handover) {
        out.push(if pt { "a nota diz que um lembrete foi criado, mas nenhum foi registrado nesta sessão".to_owned() } else { "the note says a reminder was set, but none was recorded in this session".to_owned() });
    }
    if facts.bookmarks_in_session == 0 && BOOKMARKED.is_match(handover) {
        out.push(if pt { "a nota diz que algo foi marcado, mas nenhum marcador foi registrado nesta sessão".to_owned() } else { "the note says something was bookmarked, but no bookmark was recorded in this session".to_owned() });
    }
    // "The report is done" while the reminder "the report" is still open.
    let lower = handover.to_lowercase();
    for r in &facts.open {
        let key = r.text.trim().to_lowercase();
        if key.chars().count() < 4 {
            continue;
        }
        if let Some(at) = lower.find(&key) {
            let window: String = lower[at..].chars().take(key.chars().count() + 40).collect();
            if DONE_WORD.is_match(&window) {
                out.push(if pt {
                    format!("a nota dá \"{}\" como feito, mas no ledger continua em aberto", r.text)
                } else {
                    format!("the note calls \"{}\" done, but the ledger still has it open", r.text)
                });
            }
        }
    }
    out
}

/// The governance note for a set of findings.
pub fn note(findings: &[String], lang: Language) -> String {
    match lang {
        Language::En => format!(
            "A check of your last handover against the ledger found a disagreement: {}. Prefer the ledger's facts over inherited feelings.",
            findings.join("; ")
        ),
        Language::PtBr => format!(
            "Uma verificação da sua última nota de passagem contra o ledger encontrou uma divergência: {}. Prefira os fatos do ledger aos sentimentos herdados.",
            findings.join("; ")
        ),
    }
}
