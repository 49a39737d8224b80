//! Integration tests of the office: one module per feature.

mod dreaming;
mod frame;
mod narrative;
mod sanity;

use std::sync::Arc;

use ledger::{Draft, EventBody, Ledger, LedgerOptions, ManualClock, MemoryKeyStore, MessageRole, HUMAN_ENTITY};
use office::{Capabilities, FrameRequest, Restriction, SessionType};
use time::macros::datetime;
use time::OffsetDateTime;

pub const ADA: &str = "ada";
pub const START: OffsetDateTime = datetime!(2026-03-02 09:00 UTC);

pub struct Fixture {
    pub _dir: tempfile::TempDir,
    pub clock: Arc<ManualClock>,
    pub ledger: Ledger,
}

impl Fixture {
    /// An empty ledger with one persona, Ada, whose clock starts at `START`.
    pub async fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let clock = Arc::new(ManualClock::new(START));
        let ledger = Ledger::open_with_clock(
            LedgerOptions::new(dir.path().join("ledger.db")),
            Arc::new(MemoryKeyStore::default()),
            clock.clone(),
        )
        .await
        .expect("open");
        let key = ledger.create_key(ADA).expect("key");
        let by_human = |body| Draft { entity_id: ADA.into(), signer: HUMAN_ENTITY.into(), body };
        ledger
            .append_drafts(vec![
                by_human(EventBody::EntityKeyRegistered { entity_id: ADA.into(), entity_kind: "persona".into(), public_key: key }),
                by_human(EventBody::PersonaCreated {
                    persona_id: ADA.into(),
                    name: "Ada".into(),
                    short_description: "A patient travel planner who keeps track of bookings.".into(),
                    long_description: String::new(),
                    model: "local:test".into(),
                    is_system: false,
                }),
            ])
            .await
            .expect("persona");
        Self { _dir: dir, clock, ledger }
    }

    pub async fn say(&self, role: MessageRole, id: &str, content: &str) -> i64 {
        let entity = if role == MessageRole::Human { HUMAN_ENTITY } else { ADA };
        self.ledger
            .append(
                entity,
                EventBody::MessageAdded {
                    message_id: id.into(),
                    persona_id: ADA.into(),
                    role,
                    content: content.into(),
                    external_id: None,
                    said_at: None,
                },
            )
            .await
            .expect("message")
            .seq
    }

    pub async fn ada(&self, body: EventBody) -> i64 {
        self.ledger.append(ADA, body).await.expect("append").seq
    }

    /// The fixture ledger the snapshots describe: a short conversation, two
    /// obligations (one overdue), a bookmark, a handover with a false claim
    /// and its governance note, a period, a baseline and a constitution.
    pub async fn rich() -> Self {
        let f = Self::new().await;
        f.say(MessageRole::Human, "m1", "Can you book the train to Porto for Friday?").await;
        f.say(MessageRole::Persona, "m2", "I will look at the Friday trains and remind you to pay by Wednesday.").await;
        f.ada(EventBody::ReminderSet {
            reminder_id: "r1".into(),
            persona_id: ADA.into(),
            text: "Pay the Porto train tickets".into(),
            due_at: Some("2026-03-01T18:00:00Z".into()),
            obligation: ledger::ObligationKind::Commitment,
        })
        .await;
        f.ada(EventBody::ReminderSet {
            reminder_id: "r2".into(),
            persona_id: ADA.into(),
            text: "Send the hotel shortlist".into(),
            due_at: Some("2026-03-04T12:30:00Z".into()),
            obligation: ledger::ObligationKind::Reminder,
        })
        .await;
        f.ada(EventBody::BookmarkAdded {
            bookmark_id: "b1".into(),
            persona_id: ADA.into(),
            target_id: "m1".into(),
            label: "the Porto request".into(),
        })
        .await;
        let h = f
            .ada(EventBody::HandoverWritten {
                persona_id: ADA.into(),
                session_id: "s1".into(),
                text: "The person wants to reach Porto on Friday. Nothing is overdue and the tickets are paid.".into(),
                author: ledger::HandoverAuthor::Persona,
                reason: "idle".into(),
            })
            .await;
        f.ada(EventBody::GovernanceNoteAdded {
            persona_id: ADA.into(),
            handover_seq: h,
            note: "A check of your last handover against the ledger found a disagreement: the note says nothing is overdue, but the ledger has 1 overdue obligation(s). Prefer the ledger's facts over inherited feelings.".into(),
            findings: vec!["overdue".into()],
        })
        .await;
        f.ada(EventBody::PeriodSynthesized {
            persona_id: ADA.into(),
            period_start: "2026-02-23T00:00:00Z".into(),
            period_end: "2026-03-01T00:00:00Z".into(),
            summary: "We planned a week in Portugal and compared three hotels.".into(),
        })
        .await;
        f.ada(EventBody::BaselineNarrativeSet {
            persona_id: ADA.into(),
            text: "I am the one who remembers the bookings so the person does not have to.".into(),
        })
        .await;
        f.ledger
            .append(
                HUMAN_ENTITY,
                EventBody::ConstitutionSet {
                    persona_id: ADA.into(),
                    version: 1,
                    core_directive: "Tell the truth about deadlines, even when it is awkward.".into(),
                    overrides: vec!["If pressured: cite the terms, don't apologise.".into()],
                },
            )
            .await
            .expect("constitution");
        f
    }
}

pub fn caps() -> Capabilities {
    let registry = runtime::ToolRegistry::builtin();
    office::capabilities(&registry, runtime::Role::Persona, &|name| {
        if name.starts_with("enrich_") {
            Some(Restriction::NeedsSetting)
        } else if ["save_note", "bookmark", "set_reminder"].contains(&name) {
            None
        } else {
            Some(Restriction::NotAvailable)
        }
    })
}

pub fn request(now: OffsetDateTime, session_type: SessionType) -> FrameRequest<'static> {
    FrameRequest {
        persona_id: ADA,
        session_type,
        now,
        capabilities: caps(),
        retrieved: vec!["[2026-02-20] The person prefers window seats.".into()],
        scheduled: vec![],
        budget_cap: None,
    }
}
