use std::path::PathBuf;

use ledger::EventBody;
use office::frame::{Capabilities, ContextFrame, EventLine, Identity, Memory, Obligation, Position, State, Temporal, Tool};
use office::{build_frame, Estimate, Language, NarrativeBudget, SessionType, TokenCounter};
use proptest::prelude::*;

use crate::{request, Fixture, ADA, START};

/// Compares with a checked-in snapshot; `UPDATE_SNAPSHOTS=1` rewrites it.
fn snapshot(name: &str, text: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/office/snapshots").join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() || !path.exists() {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, text).expect("write snapshot");
    }
    let want = std::fs::read_to_string(&path).expect("read snapshot");
    assert_eq!(text, want, "narrative differs from {}", path.display());
}

async fn narrative(lang: &str) -> String {
    let f = Fixture::rich().await;
    f.ledger.append("human", EventBody::PersonaLanguageSet { persona_id: ADA.into(), language: lang.into() }).await.expect("lang");
    let frame = build_frame(&f.ledger, request(START, SessionType::Assist), &Estimate).await.expect("frame");
    let key = frame.identity.public_key.clone().expect("key");
    assert!(frame.narrative.len() > 200);
    // The key is random per test run.
    frame.narrative.replace(&key, "<key>").replace(&key[..12], "<key>")
}

#[tokio::test]
async fn the_english_narrative_matches_its_snapshot() {
    let text = narrative("en").await;
    assert!(text.starts_with("You are Ada."));
    assert!(text.contains("Pay the Porto train tickets — overdue by 15 h 0 min."));
    assert!(text.contains("you left yourself this note"));
    let sanity = text.find("Prefer the ledger's facts").expect("sanity note");
    let constitution = text.find("Your constitution (version 1)").expect("constitution");
    assert!(constitution > sanity && text.trim_end().ends_with("If pressured: cite the terms, don't apologise."));
    snapshot("narrative_en.txt", &text);
}

#[tokio::test]
async fn the_portuguese_narrative_matches_its_snapshot() {
    let text = narrative("pt-BR").await;
    assert!(text.starts_with("Você é Ada."));
    assert!(text.contains("atrasada há 15 h 0 min"));
    assert!(text.contains("Sua constituição (versão 1) vem por último"));
    snapshot("narrative_pt-BR.txt", &text);
}

#[tokio::test]
async fn a_tight_budget_drops_old_events_before_obligations_and_keeps_the_constitution_last() {
    let f = Fixture::rich().await;
    for i in 0..30 {
        f.say(ledger::MessageRole::Human, &format!("x{i}"), &"a long message about the trip planning ".repeat(6)).await;
    }
    let mut req = request(START, SessionType::Assist);
    req.budget_cap = Some(600);
    let frame = build_frame(&f.ledger, req, &Estimate).await.expect("frame");
    let b = &frame.token_budget;
    assert!(b.used <= 600 && b.compressed, "{b:?}");
    let share = |n: &str| b.sections.iter().find(|s| s.name == n).expect("section").clone();
    assert!(share("recent_events").dropped > 0);
    assert_eq!(share("recent_events").kept, 0, "old events go first: {b:?}");
    assert_eq!(share("obligations").dropped, 0, "{b:?}");
    assert!(share("handover").tokens > 0);
    assert!(frame.narrative.contains("Tell the truth about deadlines"));
    assert!(frame.narrative.trim_end().ends_with("don't apologise."));
}

fn text(max: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec("[a-zA-Zãé]{1,12}", 0..max).prop_map(|w| w.join(" "))
}

fn frame_strategy() -> impl Strategy<Value = (ContextFrame, usize)> {
    (
        text(400),
        proptest::collection::vec((text(40), -100_000i64..100_000), 0..200),
        proptest::collection::vec(text(120), 0..20),
        proptest::collection::vec(text(60), 0..20),
        proptest::collection::vec(text(300), 0..8),
        proptest::option::of(text(300)),
        proptest::sample::select(SessionType::ALL.to_vec()),
        any::<bool>(),
        proptest::option::of(200usize..9_000),
        proptest::collection::vec(text(80), 0..10),
        proptest::collection::vec(text(20), 0..12),
        proptest::option::of(text(200)),
    )
        .prop_map(|(desc, obligations, events, retrieved, overrides, baseline, st, pt, cap, periods, bookmarks, handover)| {
            let frame = ContextFrame {
                identity: Identity {
                    entity_id: "p".into(),
                    name: "Zé".into(),
                    public_key: Some("ab".repeat(32)),
                    roles: vec![],
                    guardian: "human".into(),
                    language: if pt { Language::PtBr } else { Language::En },
                    constitution: Some(ledger::Constitution {
                        persona_id: "p".into(),
                        version: 3,
                        core_directive: "Be honest.".into(),
                        overrides,
                        seq: 1,
                        ts: String::new(),
                    }),
                },
                position: Position { description: desc, is_system: false, model: "local:m".into(), conversation_messages: 9, created_seq: 1 },
                state: State {
                    session_type: st,
                    mode: "commitment".into(),
                    ledger_head: 100_000,
                    unread: 0,
                    archived: false,
                    open_obligations: obligations.len(),
                    overdue_obligations: obligations.iter().filter(|o| o.1 < 0).count(),
                    sanity_note: Some("Prefer the ledger's facts over inherited feelings.".into()),
                },
                obligations: obligations
                    .into_iter()
                    .enumerate()
                    .map(|(i, (t, m))| Obligation {
                        id: i.to_string(),
                        text: t,
                        kind: ledger::ObligationKind::Reminder,
                        due_at: Some("2026-03-04T12:30:00Z".into()),
                        minutes_left: Some(m),
                        overdue: m < 0,
                    })
                    .collect(),
                capabilities: Capabilities {
                    allowed: vec![Tool { name: "save_note".into(), description: String::new() }],
                    restricted: vec![],
                },
                memory: Memory {
                    recent_events: events
                        .into_iter()
                        .enumerate()
                        .map(|(i, t)| EventLine { seq: i as i64, ts: "2026-03-02T09:00:00Z".into(), kind: "message_added".into(), entity_id: "human".into(), text: Some(t) })
                        .collect(),
                    periods: periods
                        .into_iter()
                        .enumerate()
                        .map(|(i, summary)| ledger::Period {
                            seq: i as i64,
                            persona_id: "p".into(),
                            period_start: "2026-02-20T09:00:00Z".into(),
                            period_end: "2026-02-27T09:00:00Z".into(),
                            summary,
                        })
                        .collect(),
                    bookmarks: bookmarks
                        .into_iter()
                        .enumerate()
                        .map(|(i, label)| ledger::Bookmark {
                            id: format!("b{i}"),
                            persona_id: "p".into(),
                            target_id: format!("m{i}"),
                            label,
                            seq: i as i64,
                            ts: "2026-03-01T09:00:00Z".into(),
                        })
                        .collect(),
                    baseline,
                    retrieved,
                    handover: handover.map(|text| ledger::Handover {
                        seq: 7,
                        persona_id: "p".into(),
                        session_id: "s1".into(),
                        text,
                        author: ledger::HandoverAuthor::Persona,
                        reason: "idle".into(),
                        ts: "2026-03-01T22:00:00Z".into(),
                    }),
                },
                temporal: Temporal { now: "2026-03-02T09:00:00Z".into(), next_deadlines: vec![], scheduled: vec![] },
                narrative: String::new(),
                frame_hash: String::new(),
                token_budget: NarrativeBudget::default(),
            };
            (frame, cap.unwrap_or(usize::MAX))
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn every_narrative_fits_its_budget_and_accounts_for_its_sections((frame, cap) in frame_strategy()) {
        let cap = (cap != usize::MAX).then_some(cap);
        let framed = office::frame::finish(frame, cap, &Estimate);
        let b = &framed.token_budget;
        prop_assert!(b.used <= b.effective, "{} > {}", b.used, b.effective);
        prop_assert_eq!(Estimate.count(&framed.narrative), b.used);
        prop_assert!(b.effective <= b.budget);
        let sum: f64 = b.sections.iter().map(|s| s.share).sum();
        // Section texts are joined by blank lines, which count a little.
        prop_assert!(sum <= 1.0 + 1e-9, "shares sum to {}", sum);
        prop_assert!(framed.narrative.starts_with("You are Zé") || framed.narrative.starts_with("Você é Zé") || b.compressed);
    }
}

/// Not a pass/fail test: prints the average share of each section over many
/// large random states (run with `--nocapture`), for the closing note.
#[test]
fn report_section_shares_over_random_states() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let mut totals: std::collections::BTreeMap<String, (f64, usize)> = Default::default();
    let n = 300;
    let mut within = 0;
    for _ in 0..n {
        let (frame, cap) = frame_strategy().new_tree(&mut runner).expect("tree").current();
        let framed = office::frame::finish(frame, (cap != usize::MAX).then_some(cap), &Estimate);
        if framed.token_budget.used <= framed.token_budget.effective {
            within += 1;
        }
        for s in &framed.token_budget.sections {
            let e = totals.entry(s.name.clone()).or_default();
            e.0 += s.share;
            e.1 += 1;
        }
    }
    assert_eq!(within, n);
    println!("within budget: {within}/{n}");
    for (name, (sum, count)) in totals {
        println!("section {name}: mean share {:.3}", sum / count as f64);
    }
}
