use ledger::{
    ContextStatus, EventBody, HandoverAuthor, MemoryKind, MessageRole, ObligationKind, PersonaTopic, QuoteSpan, Validation,
    EI_PERSONA_ID, HUMAN_ENTITY,
};
use proptest::prelude::*;

use crate::{raw, Fixture};

#[derive(Debug, Clone)]
enum Op {
    CreatePersona(u8),
    Rename(u8, u8),
    Archive(u8, bool),
    Say(u8, String),
    Reply(u8, String),
    Read(u8),
    // memory
    Groups(u8, u8),
    Learn(u8, u8, String, bool),
    Revise(u8, u8, u8),
    Decay(u8),
    Profile(u8, String),
    Pause(u8, bool),
    Settings(u8, u8),
    Context(u8, u8),
    Summary(u8, String),
    Sources(u8, u8, u8),
    // office
    Remind(u8, u8, bool),
    Done(u8),
    Bookmark(u8, u8, String),
    Handover(u8, String, bool),
    GovernanceNote(u8, u8),
    Constitution(u8, u8, String),
    Period(u8, String),
    Baseline(u8, String),
    Tokens(u8, u8, u16),
    Quota(u8, u16),
    Language(u8, bool),
    Frame(u8, u8, String),
    Mode(u8, u8),
    Simulated(u8, u8, bool),
    Executed(u8, u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..4).prop_map(Op::CreatePersona),
        (0u8..4, 0u8..8).prop_map(|(a, b)| Op::Rename(a, b)),
        (0u8..4, any::<bool>()).prop_map(|(a, b)| Op::Archive(a, b)),
        (0u8..4, "[a-z ]{0,20}").prop_map(|(a, s)| Op::Say(a, s)),
        (0u8..4, "[a-z ]{0,20}").prop_map(|(a, s)| Op::Reply(a, s)),
        (0u8..4).prop_map(Op::Read),
        memory_op(),
        office_op(),
    ]
}

/// Office events: obligations, bookmarks, handovers and their notes,
/// constitutions, dreaming outputs, token usage and quotas, language,
/// reply frames, session modes, simulations and executed actions.
fn office_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..4, 0u8..4, any::<bool>()).prop_map(|(a, r, d)| Op::Remind(a, r, d)),
        (0u8..4).prop_map(Op::Done),
        (0u8..4, 0u8..4, "[a-z ]{1,12}").prop_map(|(a, b, s)| Op::Bookmark(a, b, s)),
        (0u8..4, "[a-z ]{0,30}", any::<bool>()).prop_map(|(a, s, p)| Op::Handover(a, s, p)),
        (0u8..4, 0u8..40).prop_map(|(a, h)| Op::GovernanceNote(a, h)),
        (0u8..4, 1u8..4, "[a-z ]{1,20}").prop_map(|(a, v, s)| Op::Constitution(a, v, s)),
        (0u8..4, "[a-z ]{1,20}").prop_map(|(a, s)| Op::Period(a, s)),
        (0u8..4, "[a-z ]{1,20}").prop_map(|(a, s)| Op::Baseline(a, s)),
        (0u8..4, 0u8..3, any::<u16>()).prop_map(|(a, d, t)| Op::Tokens(a, d, t)),
        (0u8..4, any::<u16>()).prop_map(|(a, l)| Op::Quota(a, l)),
        (0u8..4, any::<bool>()).prop_map(|(a, pt)| Op::Language(a, pt)),
        (0u8..40, 0u8..4, "[a-z ]{0,40}").prop_map(|(m, a, s)| Op::Frame(m, a, s)),
        (0u8..4, 0u8..4).prop_map(|(a, t)| Op::Mode(a, t)),
        (0u8..4, 0u8..3, any::<bool>()).prop_map(|(a, k, st)| Op::Simulated(a, k, st)),
        (0u8..4, 0u8..3).prop_map(|(a, k)| Op::Executed(a, k)),
    ]
}

const ACTIONS: [&str; 3] = ["delete_memory", "submit:fulfil", "save_movie"];

/// Memory events: groups, memories and their changes, decay, persona
/// profile, pause, settings, context status, summaries, reply sources.
fn memory_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..4, 0u8..3).prop_map(|(a, g)| Op::Groups(a, g)),
        (0u8..4, 0u8..4, "[a-z ]{1,20}", any::<bool>()).prop_map(|(a, m, s, q)| Op::Learn(a, m, s, q)),
        (0u8..4, 0u8..4, 0u8..4).prop_map(|(m, how, other)| Op::Revise(m, how, other)),
        (1u8..10).prop_map(Op::Decay),
        (0u8..4, "[a-z]{1,8}").prop_map(|(a, s)| Op::Profile(a, s)),
        (0u8..4, any::<bool>()).prop_map(|(a, p)| Op::Pause(a, p)),
        (0u8..4, 0u8..60).prop_map(|(a, h)| Op::Settings(a, h)),
        (0u8..40, 0u8..3).prop_map(|(m, st)| Op::Context(m, st)),
        (0u8..4, "[a-z ]{0,20}").prop_map(|(a, s)| Op::Summary(a, s)),
        (0u8..40, 0u8..4, 0u8..4).prop_map(|(m, a, k)| Op::Sources(m, a, k)),
    ]
}

fn pid(n: u8) -> String {
    if n == 0 { EI_PERSONA_ID.to_owned() } else { format!("p{n}") }
}

async fn run(f: &Fixture, ops: &[Op]) {
    for (i, op) in ops.iter().enumerate() {
        let body = match op {
            Op::CreatePersona(n) => EventBody::PersonaCreated {
                persona_id: pid(*n),
                name: format!("Persona {n}"),
                short_description: "d".into(),
                long_description: String::new(),
                model: "local:m".into(),
                is_system: false,
            },
            Op::Rename(n, k) => EventBody::PersonaUpdated {
                persona_id: pid(*n),
                name: Some(format!("Name {k}")),
                short_description: None,
                long_description: None,
                model: None,
            },
            Op::Archive(n, a) => EventBody::PersonaArchived { persona_id: pid(*n), archived: *a },
            Op::Say(n, s) | Op::Reply(n, s) => EventBody::MessageAdded {
                message_id: format!("m{i}"),
                persona_id: pid(*n),
                role: if matches!(op, Op::Say(..)) { MessageRole::Human } else { MessageRole::Persona },
                content: s.clone(),
                external_id: None,
                said_at: None,
            },
            Op::Read(n) => EventBody::MessagesRead { persona_id: pid(*n), up_to_seq: i64::MAX },
            Op::Groups(n, g) => EventBody::PersonaGroupsSet {
                persona_id: pid(*n),
                group_primary: ["", "Work", "Family"][*g as usize].into(),
                groups_visible: vec!["General".into(), format!("G{g}")],
            },
            Op::Learn(n, m, text, quoted) => EventBody::MemoryLearned {
                memory_id: format!("mem{m}"),
                memory_kind: if *quoted { MemoryKind::Quote } else { MemoryKind::ALL[*m as usize % 5] },
                subject: format!("s{n}"),
                text: text.clone(),
                group: ["General", "Work"][*n as usize % 2].into(),
                learned_by: pid(*n),
                source_ids: vec![format!("m{m}")],
                quote: quoted.then(|| QuoteSpan { message_id: format!("m{m}"), start: 0, end: 3 }),
                confidence: 0.5 + f64::from(*m) / 10.0,
            },
            Op::Revise(m, how, other) => EventBody::MemoryUpdated {
                memory_id: format!("mem{m}"),
                text: (*how == 0).then(|| format!("edited {other}")),
                confidence: (*how == 1).then(|| f64::from(*other) / 4.0),
                validation: (*how == 2).then(|| [Validation::None, Validation::Ei, Validation::Human][*other as usize % 3]),
                superseded_by: (*how == 3).then(|| format!("mem{other}")),
                add_source_ids: vec![format!("m{other}")],
            },
            Op::Decay(days) => EventBody::ExposureDecayed {
                at: format!("2026-01-{:02}T03:00:00Z", days),
                elapsed_days: f64::from(*days),
                half_life_days: 7.0,
                factor: 0.5f64.powf(f64::from(*days) / 7.0),
            },
            Op::Profile(n, word) => EventBody::PersonaProfileSet {
                persona_id: pid(*n),
                traits: vec![word.clone()],
                topics: vec![PersonaTopic {
                    name: word.clone(),
                    perspective: String::new(),
                    approach: String::new(),
                    personal_stake: String::new(),
                    sentiment: 0.25,
                    exposure_current: 0.1,
                    exposure_desired: 0.7,
                }],
                source: "human".into(),
            },
            Op::Pause(n, p) => EventBody::PersonaPaused {
                persona_id: pid(*n),
                until: p.then(|| "2030-01-01T00:00:00Z".into()),
            },
            Op::Settings(n, h) => EventBody::PersonaSettingsSet {
                persona_id: pid(*n),
                heartbeat_minutes: u32::from(*h),
                context_window_hours: u32::from(*h) / 2 + 1,
            },
            Op::Context(m, st) => EventBody::MessageContextSet {
                persona_id: pid(*m % 4),
                message_id: format!("m{m}"),
                status: [ContextStatus::Default, ContextStatus::Always, ContextStatus::Never][*st as usize],
            },
            Op::Summary(n, text) => EventBody::SummaryWritten {
                persona_id: pid(*n),
                text: text.clone(),
                up_to_seq: i as i64,
                source: "fallback".into(),
            },
            Op::Sources(m, n, k) => EventBody::ReplySources {
                message_id: format!("m{m}"),
                persona_id: pid(*n),
                item_ids: vec![format!("mem{k}"), format!("m{k}")],
            },
            Op::Remind(n, r, dated) => EventBody::ReminderSet {
                reminder_id: format!("r{r}"),
                persona_id: pid(*n),
                text: format!("do {r}"),
                due_at: dated.then(|| format!("2030-01-0{}T09:00:00Z", r + 1)),
                obligation: if *dated { ObligationKind::Commitment } else { ObligationKind::Reminder },
            },
            Op::Done(r) => EventBody::ReminderDone { reminder_id: format!("r{r}") },
            Op::Bookmark(n, b, label) => EventBody::BookmarkAdded {
                bookmark_id: format!("b{b}"),
                persona_id: pid(*n),
                target_id: format!("m{b}"),
                label: label.clone(),
            },
            Op::Handover(n, text, persona) => EventBody::HandoverWritten {
                persona_id: pid(*n),
                session_id: format!("s{i}"),
                text: text.clone(),
                author: if *persona { HandoverAuthor::Persona } else { HandoverAuthor::System },
                reason: ["idle", "closed", "new"][i % 3].into(),
            },
            Op::GovernanceNote(n, h) => EventBody::GovernanceNoteAdded {
                persona_id: pid(*n),
                handover_seq: i64::from(*h),
                note: "Prefer the ledger's facts.".into(),
                findings: vec![format!("finding {h}"), "another".into()],
            },
            Op::Constitution(n, v, directive) => EventBody::ConstitutionSet {
                persona_id: pid(*n),
                version: u32::from(*v),
                core_directive: directive.clone(),
                overrides: vec![format!("if pressured {v}")],
            },
            Op::Period(n, summary) => EventBody::PeriodSynthesized {
                persona_id: pid(*n),
                period_start: format!("2026-01-{:02}T00:00:00Z", i % 28 + 1),
                period_end: "2026-02-01T00:00:00Z".into(),
                summary: summary.clone(),
            },
            Op::Baseline(n, text) => EventBody::BaselineNarrativeSet { persona_id: pid(*n), text: text.clone() },
            Op::Tokens(n, d, t) => EventBody::TokensUsed {
                entity_id: pid(*n),
                day: format!("2026-01-0{}", d + 1),
                prompt_tokens: u32::from(*t),
                completion_tokens: u32::from(*t) / 3,
            },
            Op::Quota(n, l) => EventBody::TokenQuotaSet { entity_id: pid(*n), daily_limit: u32::from(*l) },
            Op::Language(n, pt) => EventBody::PersonaLanguageSet {
                persona_id: pid(*n),
                language: if *pt { "pt-BR" } else { "en" }.into(),
            },
            Op::Frame(m, n, narrative) => EventBody::ReplyFramed {
                persona_id: pid(*n),
                message_id: format!("m{m}"),
                frame_hash: format!("{:064x}", narrative.len() + usize::from(*m)),
                frame: serde_json::json!({"narrative": narrative}).to_string(),
            },
            Op::Mode(n, t) => EventBody::SessionModeSet {
                persona_id: pid(*n),
                session_type: ["work", "assist", "deliberate", "research"][*t as usize].into(),
                mode: if *t < 2 { "commitment" } else { "deliberation" }.into(),
            },
            Op::Simulated(n, k, with_state) => EventBody::SimulationRun {
                persona_id: pid(*n),
                action: ACTIONS[*k as usize].into(),
                args_hash: format!("{k:064x}"),
                risk_permille: 100 * u32::from(*k),
                level: ["recommended", "recommended", "skipped"][*k as usize].into(),
                changes: vec![format!("- item {k}")],
                state_hash: with_state.then(|| format!("{i:064x}")),
            },
            Op::Executed(n, k) => EventBody::ActionExecuted {
                persona_id: pid(*n),
                action: ACTIONS[*k as usize].into(),
                correlation_id: format!("c{i}"),
            },
        };
        // Invalid operations (duplicate names, unknown personas) are refused
        // and leave no trace; that is part of what replay must reproduce.
        let _refused_or_applied = f.ledger.append(HUMAN_ENTITY, body).await;
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn replaying_the_events_rebuilds_exactly_the_projected_state(ops in prop::collection::vec(op(), 1..40)) {
        rt().block_on(async {
            let f = Fixture::new().await;
            run(&f, &ops).await;
            let incremental = f.ledger.state_digest().await.expect("digest");
            f.ledger.rebuild_projections().await.expect("rebuild");
            let replayed = f.ledger.state_digest().await.expect("digest");
            prop_assert_eq!(incremental, replayed);
            prop_assert!(f.ledger.verify().await.expect("verify").ok());
            Ok(())
        })?;
    }

    #[test]
    fn erasure_keeps_verify_green_and_replay_exact(
        ops in prop::collection::vec(op(), 1..40),
        erase in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3), 1..6),
        restore_between in any::<bool>(),
    ) {
        rt().block_on(async {
            let f = Fixture::new().await;
            run(&f, &ops).await;
            if restore_between {
                let _saved = f.ledger.save_checkpoint(10, "mid").await.expect("save");
                run(&f, &ops[..ops.len() / 2]).await;
            }
            // Erase a random mix of messages (by id), whole payloads and
            // archived personas; refused requests (already erased, a key
            // registration, a persona not archived) must leave no trace.
            let messages: Vec<String> = sqlx::query_scalar("SELECT id FROM messages")
                .fetch_all(&mut raw(&f.db_path()).await).await.expect("ids");
            let total = f.ledger.event_count().await.expect("count") as usize;
            for (pick, how) in &erase {
                let _refused_or_done = match how {
                    0 if !messages.is_empty() => f.ledger.erase_message(&messages[pick.index(messages.len())]).await.map(|_| ()),
                    1 => f.ledger.erase_payload(pick.index(total) as i64 + 1, "property test").await.map(|_| ()),
                    _ => f.ledger.delete_persona(&pid(pick.index(4) as u8), pick.index(2) == 0).await.map(|_| ()),
                };
                let report = f.ledger.verify().await.expect("verify");
                prop_assert!(report.ok(), "verify after erasure: {:?}", report.failure);
            }
            let incremental = f.ledger.state_digest().await.expect("digest");
            f.ledger.rebuild_projections().await.expect("rebuild");
            prop_assert_eq!(incremental, f.ledger.state_digest().await.expect("digest"));
            Ok(())
        })?;
    }

    #[test]
    fn any_byte_flip_in_a_stored_event_is_detected(
        n in 3usize..12,
        pick in any::<prop::sample::Index>(),
        column in 0usize..8,
        byte in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        rt().block_on(async {
            let f = Fixture::new().await;
            for i in 0..n {
                f.ledger.append(HUMAN_ENTITY, EventBody::MessageAdded {
                    message_id: format!("m{i}"), persona_id: EI_PERSONA_ID.into(), role: MessageRole::Human,
                    content: format!("message {i}"), external_id: None,
                    said_at: None,
                }).await.expect("append");
            }
            let total = f.ledger.event_count().await.expect("count") as usize;
            let seq = pick.index(total) as i64 + 1;
            let (table, col) = [
                ("events", "id"), ("events", "ts"), ("events", "kind"), ("events", "signer"),
                ("events", "payload_hash"), ("events", "prev_hash"), ("events", "signature"), ("payloads", "body"),
            ][column];
            let mut conn = raw(&f.db_path()).await;
            sqlx::query("DROP TRIGGER events_reject_update").execute(&mut conn).await.expect("drop trigger");
            let value: Vec<u8> = sqlx::query_scalar(&format!("SELECT CAST({col} AS BLOB) FROM {table} WHERE seq = ?"))
                .bind(seq).fetch_one(&mut conn).await.expect("read");
            let mut value = value;
            let at = byte.index(value.len());
            value[at] ^= 1 << bit;
            // Text columns stay text so the ledger reads them as it would.
            if matches!(col, "id" | "ts" | "kind" | "signer") {
                let Ok(s) = String::from_utf8(value) else { return Ok(()) };
                sqlx::query(&format!("UPDATE {table} SET {col} = ? WHERE seq = ?")).bind(s).bind(seq)
                    .execute(&mut conn).await.expect("tamper");
            } else {
                sqlx::query(&format!("UPDATE {table} SET {col} = ? WHERE seq = ?")).bind(value).bind(seq)
                    .execute(&mut conn).await.expect("tamper");
            }
            let report = f.ledger.verify().await.expect("verify");
            let failure = report.failure.expect("a flipped byte must be detected");
            prop_assert_eq!(failure.seq, seq, "{}", failure.reason);
            Ok(())
        })?;
    }
}

/// Runs each op alone (at position 0) and checks that it was applied and
/// moved the digest to a value not seen before.
async fn each_changes_the_digest(f: &Fixture, ops: &[Op]) {
    let mut seen = vec![f.ledger.state_digest().await.expect("digest")];
    for op in ops {
        let before = f.ledger.event_count().await.expect("count");
        run(f, std::slice::from_ref(op)).await;
        assert!(f.ledger.event_count().await.expect("count") > before, "{op:?} was refused");
        let digest = f.ledger.state_digest().await.expect("digest");
        assert!(!seen.contains(&digest), "{op:?} did not change the digest");
        seen.push(digest);
    }
}

/// The digest covers the memory projections: each of these events changes it
/// (so the replay properties above compare them too).
#[tokio::test]
async fn every_memory_projection_is_in_the_state_digest() {
    let f = Fixture::new().await;
    let ops = [
        Op::CreatePersona(1),
        Op::Say(1, "hello there".into()), // "m0": each op below runs alone, at position 0
        Op::Groups(1, 1),
        Op::Learn(1, 0, "hel".into(), true),
        Op::Learn(1, 1, "likes tea".into(), false),
        Op::Revise(0, 0, 1),
        Op::Revise(0, 1, 3),
        Op::Revise(0, 2, 2),
        Op::Revise(1, 3, 0),
        Op::Decay(3),
        Op::Profile(1, "gardening".into()),
        Op::Pause(1, true),
        Op::Settings(1, 45),
        Op::Context(0, 2),
        Op::Summary(1, "they said hello".into()),
        Op::Sources(0, 1, 0),
    ];
    each_changes_the_digest(&f, &ops).await;
}

/// The digest covers every office projection: each of these events changes
/// it (so the replay properties above compare them too).
#[tokio::test]
async fn every_office_projection_is_in_the_state_digest() {
    let f = Fixture::new().await;
    let ops = [
        Op::CreatePersona(1),
        Op::Remind(1, 0, true),
        Op::Remind(1, 0, false),
        Op::Done(0),
        Op::Bookmark(1, 0, "plan".into()),
        Op::Bookmark(1, 0, "the plan".into()),
        Op::Handover(1, "we talked".into(), true),
        Op::GovernanceNote(1, 3),
        Op::Constitution(1, 1, "be brief".into()),
        Op::Constitution(1, 1, "be kind".into()),
        Op::Period(1, "a quiet week".into()),
        Op::Baseline(1, "I help with trips".into()),
        Op::Tokens(1, 0, 120),
        Op::Tokens(1, 0, 120),
        Op::Quota(1, 1000),
        Op::Quota(1, 2000),
        Op::Language(1, true),
        Op::Frame(0, 1, "you are".into()),
        Op::Frame(0, 1, "you are here".into()),
        Op::Mode(1, 2),
        Op::Mode(1, 3),
        Op::Simulated(1, 0, true),
        Op::Simulated(1, 0, false),
        Op::Executed(1, 1),
        Op::Executed(1, 1),
    ];
    each_changes_the_digest(&f, &ops).await;
    let incremental = f.ledger.state_digest().await.expect("digest");
    f.ledger.rebuild_projections().await.expect("rebuild");
    assert_eq!(incremental, f.ledger.state_digest().await.expect("digest"));
    assert_eq!(f.ledger.action_executions("p1", "submit:fulfil").await.expect("executions"), 2);
}

/// A database written by the previous version (its newest migration not yet
/// applied, so that migration's projections are missing) is upgraded at open
/// and its projections are rebuilt from the events: the state is exactly the
/// one a replay gives.
#[tokio::test]
async fn an_upgraded_database_rebuilds_its_projections_at_open() {
    let f = Fixture::new().await;
    for i in 0..5 {
        f.ledger.append(HUMAN_ENTITY, crate::say(EI_PERSONA_ID, &format!("m{i}"), "hello")).await.expect("append");
    }
    let expected = f.ledger.state_digest().await.expect("digest");
    let path = f.db_path();
    let (dir, keys) = (f.dir, f.keys);
    f.ledger.close().await;

    // Back to the previous version's schema: the newest migration undone by
    // hand (its tables dropped), and a projection it would not have touched
    // left stale, as an older build could leave it.
    let mut conn = raw(&path).await;
    let newest: i64 = sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations").fetch_one(&mut conn).await.expect("version");
    assert_eq!(newest, 18, "this test undoes migration 0018 by hand: update it with the next migration");
    for sql in [
        "DROP TABLE simulations",
        "DROP TABLE office_actions",
        "DELETE FROM _sqlx_migrations WHERE version = 18",
        "DELETE FROM messages",
    ] {
        sqlx::query(sql).execute(&mut conn).await.expect(sql);
    }
    sqlx::Connection::close(conn).await.expect("close");

    let ledger = ledger::Ledger::open(ledger::LedgerOptions::new(&path), keys.clone()).await.expect("reopen");
    assert_eq!(ledger.messages(EI_PERSONA_ID, None).await.expect("messages").len(), 5, "messages re-derived");
    assert_eq!(ledger.state_digest().await.expect("digest"), expected);
    // The next open is not an upgrade: nothing is rebuilt (a stale row stays stale).
    ledger.close().await;
    let mut conn = raw(&path).await;
    sqlx::query("DELETE FROM messages WHERE id = 'm0'").execute(&mut conn).await.expect("delete");
    sqlx::Connection::close(conn).await.expect("close");
    let ledger = ledger::Ledger::open(ledger::LedgerOptions::new(&path), keys).await.expect("reopen");
    assert_eq!(ledger.messages(EI_PERSONA_ID, None).await.expect("messages").len(), 4);
    drop(dir);
}
