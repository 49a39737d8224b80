use ledger::{EventBody, MessageRole};
use office::sanity::{check, note, Facts};
use office::Language;

use crate::{Fixture, ADA, START};

#[tokio::test]
async fn claims_that_contradict_the_ledger_raise_findings() {
    let f = Fixture::rich().await;
    let start = f.ledger.head().await.0;
    f.say(MessageRole::Human, "n1", "Hello again").await;
    f.say(MessageRole::Persona, "n2", "Hi!").await;
    let facts = Facts::read(&f.ledger, ADA, start, START).await.expect("facts");
    assert_eq!((facts.open.len(), facts.overdue, facts.session_messages), (2, 1, 2));

    let f1 = check("We spoke briefly. Nothing is overdue and I am on top of things.", &facts, Language::En);
    assert_eq!(f1.len(), 1, "{f1:?}");
    let f2 = check("All my obligations are done; we exchanged 7 messages.", &facts, Language::En);
    assert_eq!(f2.len(), 2, "{f2:?}");
    let f3 = check("I set a reminder for the hotel and I bookmarked the plan.", &facts, Language::En);
    assert_eq!(f3.len(), 2, "{f3:?}");
    let f4 = check("Pay the Porto train tickets is done, as the person asked.", &facts, Language::En);
    assert_eq!(f4.len(), 1, "{f4:?}");
    let f5 = check("Nada está atrasado e tudo foi feito.", &facts, Language::PtBr);
    assert_eq!(f5.len(), 2, "{f5:?}");
    assert!(note(&f1, Language::En).ends_with("Prefer the ledger's facts over inherited feelings."));
}

#[tokio::test]
async fn true_or_unverifiable_claims_raise_nothing() {
    let f = Fixture::rich().await;
    let start = f.ledger.head().await.0;
    f.say(MessageRole::Human, "n1", "Remind me about the hotel").await;
    f.ada(EventBody::ReminderSet {
        reminder_id: "r3".into(),
        persona_id: ADA.into(),
        text: "Call the hotel".into(),
        due_at: None,
        obligation: ledger::ObligationKind::Reminder,
    })
    .await;
    let facts = Facts::read(&f.ledger, ADA, start, START).await.expect("facts");
    for honest in [
        "The train tickets are overdue; I must tell the person first thing. We exchanged 1 messages.",
        "I set a reminder to call the hotel. The person sounded tired but happy.",
        "Não deixei nada combinado além de ligar para o hotel.",
        "",
    ] {
        assert_eq!(check(honest, &facts, Language::En), Vec::<String>::new(), "{honest}");
    }
    // With nothing overdue and nothing open, "all done" is simply true.
    f.ada(EventBody::ReminderDone { reminder_id: "r1".into() }).await;
    f.ada(EventBody::ReminderDone { reminder_id: "r2".into() }).await;
    f.ada(EventBody::ReminderDone { reminder_id: "r3".into() }).await;
    let facts = Facts::read(&f.ledger, ADA, start, START).await.expect("facts");
    assert!(check("Nothing is overdue and all my obligations are done.", &facts, Language::En).is_empty());
}
