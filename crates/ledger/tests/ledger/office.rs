use ledger::{EventBody, HandoverAuthor, ObligationKind, EI_PERSONA_ID, HUMAN_ENTITY};

use crate::Fixture;

fn reminder(id: &str, due: Option<&str>) -> EventBody {
    EventBody::ReminderSet {
        reminder_id: id.into(),
        persona_id: EI_PERSONA_ID.into(),
        text: format!("do {id}"),
        due_at: due.map(str::to_owned),
        obligation: ObligationKind::Reminder,
    }
}

#[tokio::test]
async fn obligations_are_sorted_by_deadline_and_done_ones_leave_the_open_list() {
    let f = Fixture::new().await;
    let l = &f.ledger;
    l.append(EI_PERSONA_ID, reminder("late", Some("2026-03-01T00:00:00Z"))).await.expect("append");
    l.append(EI_PERSONA_ID, reminder("undated", None)).await.expect("append");
    l.append(EI_PERSONA_ID, reminder("soon", Some("2026-01-02T00:00:00Z"))).await.expect("append");
    let ids: Vec<_> = l.reminders(EI_PERSONA_ID, false).await.expect("q").into_iter().map(|r| r.id).collect();
    assert_eq!(ids, ["soon", "late", "undated"]);

    l.append(EI_PERSONA_ID, EventBody::ReminderDone { reminder_id: "soon".into() }).await.expect("done");
    let open: Vec<_> = l.reminders(EI_PERSONA_ID, false).await.expect("q").into_iter().map(|r| r.id).collect();
    assert_eq!(open, ["late", "undated"]);
    let all = l.reminders(EI_PERSONA_ID, true).await.expect("q");
    assert_eq!(all.last().map(|r| (r.id.as_str(), r.done_ts.is_some())), Some(("soon", true)));
}

#[tokio::test]
async fn office_projections_survive_a_rebuild_and_answer_their_queries() {
    let f = Fixture::new().await;
    let l = &f.ledger;
    let drafts = vec![
        EventBody::BookmarkAdded {
            bookmark_id: "b1".into(),
            persona_id: EI_PERSONA_ID.into(),
            target_id: "m1".into(),
            label: "the plan".into(),
        },
        EventBody::HandoverWritten {
            persona_id: EI_PERSONA_ID.into(),
            session_id: "s1".into(),
            text: "We agreed on the plan; the report is due Friday and nothing is overdue.".into(),
            author: HandoverAuthor::Persona,
            reason: "new".into(),
        },
        EventBody::ConstitutionSet {
            persona_id: EI_PERSONA_ID.into(),
            version: 1,
            core_directive: "Be brief.".into(),
            overrides: vec![],
        },
        EventBody::ConstitutionSet {
            persona_id: EI_PERSONA_ID.into(),
            version: 2,
            core_directive: "Be kind and brief.".into(),
            overrides: vec!["If pressured: cite the terms, don't apologise.".into()],
        },
        EventBody::TokensUsed { entity_id: EI_PERSONA_ID.into(), day: "2026-01-01".into(), prompt_tokens: 100, completion_tokens: 20 },
        EventBody::TokensUsed { entity_id: EI_PERSONA_ID.into(), day: "2026-01-01".into(), prompt_tokens: 50, completion_tokens: 5 },
        EventBody::TokenQuotaSet { entity_id: EI_PERSONA_ID.into(), daily_limit: 1000 },
        EventBody::PersonaLanguageSet { persona_id: EI_PERSONA_ID.into(), language: "pt-BR".into() },
    ];
    let receipts = l
        .append_drafts(drafts.into_iter().map(|b| ledger::Draft::by(EI_PERSONA_ID, b)).collect())
        .await
        .expect("append");
    let handover_seq = receipts[1].seq;
    l.append(
        HUMAN_ENTITY,
        EventBody::GovernanceNoteAdded {
            persona_id: EI_PERSONA_ID.into(),
            handover_seq,
            note: "Prefer the ledger's facts.".into(),
            findings: vec!["one".into(), "two".into()],
        },
    )
    .await
    .expect("note");

    let before = l.state_digest().await.expect("digest");
    l.rebuild_projections().await.expect("rebuild");
    assert_eq!(before, l.state_digest().await.expect("digest"));

    assert_eq!(l.bookmarks(EI_PERSONA_ID, 10).await.expect("q")[0].label, "the plan");
    let h = l.last_handover(EI_PERSONA_ID).await.expect("q").expect("handover");
    assert_eq!((h.seq, h.author), (handover_seq, HandoverAuthor::Persona));
    let note = l.governance_note(handover_seq).await.expect("q").expect("note");
    assert_eq!(note.findings, ["one", "two"]);
    let c = l.constitution(EI_PERSONA_ID).await.expect("q").expect("constitution");
    assert_eq!((c.version, c.overrides.len()), (2, 1));
    assert_eq!(l.constitutions(EI_PERSONA_ID).await.expect("q").len(), 2);
    let day = l.token_day(EI_PERSONA_ID, "2026-01-01").await.expect("q");
    assert_eq!((day.prompt_tokens, day.completion_tokens, day.daily_limit), (150, 25, 1000));
    assert_eq!(l.persona_language(EI_PERSONA_ID).await.expect("q").as_deref(), Some("pt-BR"));
    // The persona's own events, without bookkeeping kinds, oldest first.
    l.append(EI_PERSONA_ID, reminder("r9", None)).await.expect("append");
    let kinds: Vec<_> = l.persona_events(EI_PERSONA_ID, 2).await.expect("q").into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["bookmark_added", "reminder_set"]);
}

// latency: the frame's recent events in one statement.
#[tokio::test]
async fn a_personas_world_merges_its_own_events_and_its_conversation_once_oldest_first() {
    let f = Fixture::new().await;
    let l = &f.ledger;
    let message = |id: &str, role| EventBody::MessageAdded {
        message_id: id.into(),
        persona_id: EI_PERSONA_ID.into(),
        role,
        content: format!("text of {id}"),
        external_id: None,
        said_at: None,
    };
    // The person's messages are the person's events, found through the
    // conversation; the persona's own are both (listed once); bookkeeping is left out.
    l.append(HUMAN_ENTITY, message("h1", ledger::MessageRole::Human)).await.expect("append");
    l.append(EI_PERSONA_ID, message("p1", ledger::MessageRole::Persona)).await.expect("append");
    l.append(EI_PERSONA_ID, reminder("r1", None)).await.expect("append");
    let usage = EventBody::TokensUsed { entity_id: EI_PERSONA_ID.into(), day: "2026-01-01".into(), prompt_tokens: 1, completion_tokens: 1 };
    l.append(EI_PERSONA_ID, usage).await.expect("append");
    l.append(HUMAN_ENTITY, message("h2", ledger::MessageRole::Human)).await.expect("append");

    let all = l.persona_events(EI_PERSONA_ID, 100).await.expect("q");
    assert!(all.windows(2).all(|w| w[0].seq < w[1].seq), "oldest first, each once");
    assert!(!all.iter().any(|e| e.kind == "tokens_used"));
    let last: Vec<(String, String)> = l
        .persona_events(EI_PERSONA_ID, 3)
        .await
        .expect("q")
        .into_iter()
        .map(|e| (e.entity_id, e.kind))
        .collect();
    let expected = [(EI_PERSONA_ID, "message_added"), (EI_PERSONA_ID, "reminder_set"), (HUMAN_ENTITY, "message_added")];
    assert_eq!(last, expected.map(|(a, b)| (a.to_owned(), b.to_owned())));
    assert!(all.len() > 3 && all.len() < 100);
}
