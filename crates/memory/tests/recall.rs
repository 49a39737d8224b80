//! The index end to end over a real ledger: import, recall, visibility,
//! rebuild from the ledger, and (when the model files are present) the
//! real all-MiniLM-L6-v2.

use std::sync::Arc;

use ledger::{Draft, EventBody, Ledger, LedgerOptions, MemoryKeyStore, Persona, HUMAN_ENTITY};
use memory::{
    import_file, parse_conversation, Embedder, HashingEmbedder, MemoryError, MemoryIndex, MiniLm, RecallSettings, Scope,
};

async fn ledger(dir: &tempfile::TempDir) -> Ledger {
    let mut opts = LedgerOptions::new(dir.path().join("ledger.db"));
    opts.durable = false;
    Ledger::open(opts, Arc::new(MemoryKeyStore::default())).await.expect("test step")
}

async fn persona(l: &Ledger, name: &str) -> Persona {
    let id = uuid::Uuid::now_v7().to_string();
    let public_key = l.create_key(&id).expect("test step");
    let by_human = |body| Draft { entity_id: id.clone(), signer: HUMAN_ENTITY.into(), body };
    l.append_drafts(vec![
        by_human(EventBody::EntityKeyRegistered { entity_id: id.clone(), entity_kind: "persona".into(), public_key }),
        by_human(EventBody::PersonaCreated {
            persona_id: id.clone(),
            name: name.into(),
            short_description: String::new(),
            long_description: String::new(),
            model: "local:m".into(),
            is_system: false,
        }),
    ])
    .await
    .expect("test step");
    l.persona(&id).await.expect("test step")
}

fn conversation(persona: &str, prefix: &str, secret: &str) -> String {
    let mut rows = Vec::new();
    for i in 0..200 {
        let (speaker, text) = if i == 17 {
            ("human", secret.to_owned())
        } else if i % 2 == 0 {
            ("human", format!("chatting about the weather and lunch plans, turn {i}"))
        } else {
            (persona, format!("that sounds nice, tell me more about turn {i}"))
        };
        rows.push(serde_json::json!({
            "id": format!("{prefix}-{i}"), "speaker": speaker, "text": text,
            "timestamp": 1_700_000_000 + i * 600,
        }));
    }
    serde_json::to_string(&rows).expect("test step")
}

#[tokio::test]
async fn import_then_recall_finds_the_old_turn_and_never_leaks() {
    let dir = tempfile::tempdir().expect("test step");
    let l = ledger(&dir).await;
    let ada = persona(&l, "Ada").await;
    let bob = persona(&l, "Bob").await;
    let index = MemoryIndex::open(&dir.path().join("index.db")).await.expect("test step");
    index.set_embedder(Arc::new(HashingEmbedder::default())).await.expect("test step");

    let fa = dir.path().join("a.json");
    std::fs::write(&fa, conversation("Ada", "a", "my sister Greta lives in Trondheim")).expect("test step");
    let fb = dir.path().join("b.json");
    std::fs::write(&fb, conversation("bob", "b", "my cat Pixel hates the vacuum cleaner")).expect("test step");
    let r = import_file(&l, &index, &ada, &fa, &|_, _| {}).await.expect("test step");
    assert_eq!((r.imported, r.skipped), (200, 0));
    import_file(&l, &index, &bob, &fb, &|_, _| {}).await.expect("test step");
    assert_eq!(l.messages(&ada.id, None).await.expect("test step").len(), 200);

    // Right after import, before any embedding: keyword recall works.
    let now = memory::now_ms();
    let hits = index.recall(&Scope::for_viewer(&ada.id, false, &[]), None, "Where does Greta live?", 5, now).await.expect("test step");
    assert_eq!(hits.hits[0].public_id(), "a-17");

    index.embed_all_pending().await.expect("test step");
    assert_eq!(index.progress().embedded, 400);
    let hits = index.recall(&Scope::for_viewer(&ada.id, false, &[]), None, "Greta Trondheim", 5, now).await.expect("test step");
    assert_eq!(hits.mode, "hybrid");
    assert_eq!(hits.hits[0].public_id(), "a-17");
    assert_eq!(hits.hits[0].kind, memory::ItemKind::Message);

    // Ada never sees Bob's conversation, by keyword or by vector.
    for q in ["Pixel vacuum cleaner cat", "my cat Pixel hates the vacuum cleaner", "turn"] {
        let hits = index.recall(&Scope::for_viewer(&ada.id, false, &[]), None, q, 50, now).await.expect("test step");
        assert!(hits.hits.iter().all(|h| h.persona_id == ada.id), "leak for {q}");
        let hits = index.recall(&Scope::for_viewer(&bob.id, false, &[]), None, q, 50, now).await.expect("test step");
        assert!(hits.hits.iter().all(|h| h.persona_id == bob.id), "leak for {q}");
    }
    // Ei sees everything.
    let hits = index.recall(&Scope::for_viewer(ledger::EI_PERSONA_ID, true, &[]), None, "Pixel vacuum", 5, now).await.expect("test step");
    assert_eq!(hits.hits[0].public_id(), "b-17");

    // Importing the same file again adds nothing.
    let again = import_file(&l, &index, &ada, &fa, &|_, _| {}).await.expect("test step");
    assert_eq!((again.imported, again.skipped), (0, 200));
    assert_eq!(l.messages(&ada.id, None).await.expect("test step").len(), 200);

    // A file with one bad row imports nothing.
    let before = l.event_count().await.expect("test step");
    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"[{"id":"n1","speaker":"human","text":"fine","timestamp":1},{"id":"n2","speaker":"Eve","text":"x","timestamp":1}]"#,
    )
    .expect("test step");
    match import_file(&l, &index, &ada, &bad, &|_, _| {}).await {
        Err(MemoryError::BadRow { index: 1, .. }) => {}
        other => panic!("expected row 1 to be rejected, got {other:?}"),
    }
    assert_eq!(l.event_count().await.expect("test step"), before);
}

#[tokio::test]
async fn the_index_rebuilds_from_the_ledger() {
    let dir = tempfile::tempdir().expect("test step");
    let l = ledger(&dir).await;
    let ada = persona(&l, "Ada").await;
    {
        let index = MemoryIndex::open(&dir.path().join("index.db")).await.expect("test step");
        let f = dir.path().join("a.json");
        std::fs::write(&f, conversation("Ada", "a", "the spare key is under the blue flowerpot")).expect("test step");
        import_file(&l, &index, &ada, &f, &|_, _| {}).await.expect("test step");
        index.close().await;
        assert!(!dir.path().join("index.db-wal").exists(), "a closed index leaves no -wal behind");
    }
    // Messages typed later, and a lost index: sync re-derives everything.
    l.append(
        HUMAN_ENTITY,
        EventBody::MessageAdded {
            message_id: "late".into(),
            persona_id: ada.id.clone(),
            role: ledger::MessageRole::Human,
            content: "I started learning the cello".into(),
            external_id: None,
            said_at: None,
        },
    )
    .await
    .expect("test step");
    std::fs::remove_file(dir.path().join("index.db")).expect("test step");
    let index = MemoryIndex::open(&dir.path().join("index.db")).await.expect("test step");
    assert_eq!(index.sync_from_ledger(&l).await.expect("test step"), 201);
    assert_eq!(index.sync_from_ledger(&l).await.expect("test step"), 0);
    let scope = Scope::for_viewer(&ada.id, false, &[]);
    let now = memory::now_ms();
    let hits = index.recall(&scope, None, "where is the spare key?", 3, now).await.expect("test step");
    assert_eq!(hits.mode, "keyword");
    assert_eq!(hits.hits[0].public_id(), "a-17");
    let hits = index.recall(&scope, None, "cello", 3, now).await.expect("test step");
    assert_eq!(hits.hits[0].item_id, "late");
    // Hostile FTS syntax is harmless.
    for q in ["\"unclosed", "NEAR(key", "key*", "col:key", "^key OR", "AND", "", "-", "🙂"] {
        index.recall(&scope, None, q, 3, now).await.expect("test step");
    }
    let _ = RecallSettings::default();
    let _ = parse_conversation(b"[]", "Ada").expect("test step");
}

/// An index written before embeddings moved to their own table (schema 1,
/// a vector in every `items` row) is migrated in place when opened: no
/// vector is lost or re-made, and recall answers exactly as before.
#[tokio::test]
async fn an_index_from_before_the_vectors_table_keeps_its_vectors() {
    let dir = tempfile::tempdir().expect("test step");
    let path = dir.path().join("index.db");
    let embedder = HashingEmbedder::default();
    let texts = ["my sister Greta lives in Trondheim", "the spare key is under the blue flowerpot", "lunch was fine"];
    {
        let opts = sqlx::sqlite::SqliteConnectOptions::new().filename(&path).create_if_missing(true);
        let pool = sqlx::SqlitePool::connect_with(opts).await.expect("test step");
        let all = sqlx::migrate!("./migrations");
        let first = sqlx::migrate::Migrator {
            migrations: std::borrow::Cow::Owned(all.migrations.iter().filter(|m| m.version == 1).cloned().collect()),
            ..sqlx::migrate::Migrator::DEFAULT
        };
        first.run(&pool).await.expect("test step");
        sqlx::query("INSERT INTO meta (key, value) VALUES ('embed_model', ?)")
            .bind(embedder.model_id())
            .execute(&pool)
            .await
            .expect("test step");
        for (i, text) in texts.iter().enumerate() {
            let v = embedder.embed(&[text]).expect("test step").remove(0);
            let blob: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            // The last row was never embedded.
            sqlx::query(
                "INSERT INTO items (item_id, kind, persona_id, text, ts_ms, embedding) VALUES (?, 'message', 'p', ?, ?, ?)",
            )
            .bind(format!("m{i}"))
            .bind(*text)
            .bind(1_700_000_000_000i64 + i as i64)
            .bind((i < 2).then_some(blob))
            .execute(&pool)
            .await
            .expect("test step");
        }
        pool.close().await;
    }
    let index = MemoryIndex::open(&path).await.expect("test step");
    assert_eq!((index.progress().embedded, index.progress().total), (2, 3));
    index.set_embedder(Arc::new(HashingEmbedder::default())).await.expect("test step");
    let scope = Scope::Keys(vec!["p".into()]);
    let now = memory::now_ms();
    // "flowerpot key" matches row m1 by keyword; its cosine comes from the migrated vector.
    let hits = index.recall(&scope, None, "the spare key is under the blue flowerpot", 3, now).await.expect("test step");
    assert_eq!(hits.mode, "hybrid");
    assert_eq!(hits.hits[0].item_id, "m1");
    assert!(hits.hits[0].score > 0.5, "the stored vector is used: {:?}", hits.hits[0]);
    // Only the row without a vector is embedded now; its text change drops its vector again.
    assert_eq!(index.embed_all_pending().await.expect("test step"), 1);
    index.update_text("m0", "my brother Olaf lives in Bergen").await.expect("test step");
    assert_eq!(index.embed_all_pending().await.expect("test step"), 1);
    let hits = index.recall(&scope, None, "Olaf Bergen", 1, now).await.expect("test step");
    assert_eq!(hits.hits[0].item_id, "m0");
    index.remove_item("m0").await.expect("test step");
    let left: i64 = {
        index.close().await;
        let pool = sqlx::SqlitePool::connect_with(sqlx::sqlite::SqliteConnectOptions::new().filename(&path))
            .await
            .expect("test step");
        let n = sqlx::query_scalar("SELECT COUNT(*) FROM vectors").fetch_one(&pool).await.expect("test step");
        pool.close().await;
        n
    };
    assert_eq!(left, 2, "a removed item's vector goes with it");
}

fn model_dir() -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("LEDGERMIND_MINILM_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "/tmp/lm/models/all-MiniLM-L6-v2".into());
    dir.join("model.safetensors").is_file().then_some(dir)
}

#[test]
fn minilm_scores_paraphrases_above_unrelated_text() {
    let Some(dir) = model_dir() else {
        eprintln!("skipped: all-MiniLM-L6-v2 not found (set LEDGERMIND_MINILM_DIR)");
        return;
    };
    let m = MiniLm::load(&dir).expect("test step");
    assert_eq!(m.dim(), 384);
    let v = m
        .embed(&[
            "My sister moved to Norway last spring.",
            "Last year in April my sibling relocated to Norway.",
            "The recipe needs two cups of flour and an egg.",
            "A man is playing a guitar.",
            "Someone plays an instrument with strings.",
            "The stock market fell sharply today.",
        ])
        .expect("test step");
    let cos = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    for x in &v {
        assert!((cos(x, x) - 1.0).abs() < 1e-4, "normalised");
    }
    assert!(cos(&v[0], &v[1]) > cos(&v[0], &v[2]) + 0.2, "{} vs {}", cos(&v[0], &v[1]), cos(&v[0], &v[2]));
    assert!(cos(&v[3], &v[4]) > cos(&v[3], &v[5]) + 0.2);
    // Batching (padding) does not change a vector.
    let alone = m.embed(&["My sister moved to Norway last spring."]).expect("test step");
    assert!(cos(&alone[0], &v[0]) > 0.9999);
}

/// Our encoder (`src/bert.rs`) against candle's `BertModel` on the same
/// files: same vectors to ~1e-6, for a one-token text, a chat query, a
/// Portuguese sentence and a text cut at the 128-token limit.
#[test]
fn the_own_encoder_matches_candles_bert() {
    use candle_core::{DType, Device, Tensor};
    let Some(dir) = model_dir() else {
        eprintln!("skipped: all-MiniLM-L6-v2 not found (set LEDGERMIND_MINILM_DIR)");
        return;
    };
    let config: candle_transformers::models::bert::Config =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).expect("test step")).expect("test step");
    let weights = candle_core::safetensors::load(dir.join("model.safetensors"), &Device::Cpu).expect("test step");
    let vb = candle_nn::VarBuilder::from_tensors(weights, DType::F32, &Device::Cpu);
    let reference = candle_transformers::models::bert::BertModel::load(vb, &config).expect("test step");
    let tokenizer = memory::WordPiece::from_file(&dir.join("vocab.txt"), memory::MINILM_MAX_TOKENS).expect("test step");
    let ours = MiniLm::load(&dir).expect("test step");
    let long = "word ".repeat(300);
    let texts = ["?", "Where did Clara move to last spring?", "Qual era o nome do meu primeiro professor de piano?", long.as_str()];
    let mine = ours.embed(&texts).expect("test step");
    for (text, mine) in texts.iter().zip(&mine) {
        let ids = tokenizer.encode(text);
        let input = Tensor::new(ids.as_slice(), &Device::Cpu).and_then(|t| t.unsqueeze(0)).expect("test step");
        let out = reference.forward(&input, &input.zeros_like().expect("test step"), None).expect("test step");
        let mean: Vec<f32> = out.mean(1).and_then(|t| t.squeeze(0)).and_then(|t| t.to_vec1()).expect("test step");
        let reference = memory::normalise(mean);
        let max_diff = reference.iter().zip(mine).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(max_diff < 1e-5, "{text:?}: differs by {max_diff}");
    }
}

/// Records every text it is asked to embed (the query's among them).
#[derive(Default)]
struct Recording {
    inner: HashingEmbedder,
    seen: std::sync::Mutex<Vec<String>>,
}

impl Embedder for Recording {
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, MemoryError> {
        self.seen.lock().expect("test step").extend(texts.iter().map(|t| (*t).to_owned()));
        self.inner.embed(texts)
    }
}

fn item(persona: &str, n: usize, text: &str) -> memory::NewItem {
    memory::NewItem {
        item_id: format!("{persona}-{n}"),
        kind: memory::ItemKind::Message,
        persona_id: persona.into(),
        external_id: None,
        source_ids: Vec::new(),
        text: text.into(),
        ts_ms: 1_700_000_000_000 + n as i64 * 60_000,
        seq: None,
        role: Some(ledger::MessageRole::Human),
    }
}

#[tokio::test]
async fn only_names_common_in_the_viewers_items_are_left_out_of_the_query_embedding() {
    let dir = tempfile::tempdir().expect("test step");
    let index = MemoryIndex::open(&dir.path().join("index.db")).await.expect("test step");
    let embedder = Arc::new(Recording::default());
    index.set_embedder(embedder.clone()).await.expect("test step");
    // Persona p's conversation: Caroline (a participant) greeted in 12 of
    // 60 turns, Tomás (a third party) in 2, "may" the verb in 15.
    let mut items = Vec::new();
    for n in 0..60 {
        let text = match n {
            0..12 => format!("Hi Caroline, how was day {n}?"),
            12..14 => format!("Tomás lent me his drill, visit {n}"),
            14..29 => format!("I may go for a walk later, note {n}"),
            _ => format!("Lunch was fine today, entry {n}"),
        };
        items.push(item("p", n, &text));
    }
    // Another conversation that names Tomás all the time: not p's to count.
    items.extend((0..40).map(|n| item("q", n, &format!("Tomás says hello again, {n}"))));
    index.index_items(&items).await.expect("test step");
    index.embed_all_pending().await.expect("test step");
    index.set_settings(RecallSettings { names_by_keyword: false, common_name_share: 0.05, ..memory::DEFAULT_SETTINGS });
    let query = "When did Caroline borrow Tomás's drill in May?";
    let embedded_for = |scope: Scope| {
        let index = &index;
        let embedder = embedder.clone();
        async move {
            embedder.seen.lock().expect("test step").clear();
            index.recall(&scope, None, query, 5, memory::now_ms()).await.expect("test step");
            embedder.seen.lock().expect("test step").clone()
        }
    };
    let p = Scope::Keys(vec!["p".into()]);
    // The participant is left out; the rare third party and the month stay.
    assert_eq!(embedded_for(p.clone()).await, vec!["When did borrow Tomás's drill in May?".to_owned()]);
    // Asked again (counts cached), the same.
    assert_eq!(embedded_for(p.clone()).await, vec!["When did borrow Tomás's drill in May?".to_owned()]);
    // Over everything, Tomás is in 42 of 100 items: common too.
    assert_eq!(embedded_for(Scope::All).await, vec!["When did borrow drill in May?".to_owned()]);
    // p's conversation grows to talk about Tomás all the time: recounted.
    let more: Vec<_> = (60..90).map(|n| item("p", n, &format!("Tomás came over again, {n}"))).collect();
    index.index_items(&more).await.expect("test step");
    index.embed_all_pending().await.expect("test step");
    assert_eq!(embedded_for(p.clone()).await, vec!["When did borrow drill in May?".to_owned()]);
    // Counts stop once a name is common (10 items here); a higher share
    // counts again: of p's 90 items, Tomás is in 32 (≥ 27), Caroline in 12.
    index.set_settings(RecallSettings { names_by_keyword: false, common_name_share: 0.3, ..memory::DEFAULT_SETTINGS });
    assert_eq!(embedded_for(p.clone()).await, vec!["When did Caroline borrow drill in May?".to_owned()]);
    // Off: the query is embedded whole.
    index.set_settings(RecallSettings { names_by_keyword: false, common_name_share: 0.0, ..memory::DEFAULT_SETTINGS });
    assert_eq!(embedded_for(p).await, vec![query.to_owned()]);
}

/// Caroline (the person) greets Mel (the persona) by name and Mel greets
/// her, 12 times each; then each says what they painted, naming the other.
fn who_painted_what() -> Vec<memory::ConversationRow> {
    let mut rows = Vec::new();
    for i in 0..40 {
        let human = i % 2 == 0;
        let text = match i {
            30 => "Mel, I painted a sunset by the lake".to_owned(),
            31 => "Caroline, I painted a boat once".to_owned(),
            0..24 if human => format!("Hey Mel, what a day {i}"),
            0..24 => format!("Good to hear, Caroline, day {i}"),
            _ => format!("nothing much to say, turn {i}"),
        };
        rows.push(serde_json::json!({
            "id": format!("t{i}"), "speaker": if human { "human" } else { "Mel" }, "text": text,
            "timestamp": 1_700_000_000 + i * 600,
        }));
    }
    parse_conversation(serde_json::to_string(&rows).expect("test step").as_bytes(), "Mel").expect("test step")
}

/// An index made before it stored who said each message (its messages'
/// speakers unknown, the ledger read to its head) learns them from the
/// ledger once, when opened: no row is added and no vector re-made, and
/// the lift of the side a question names reaches the old messages.
#[tokio::test]
async fn an_index_from_before_the_speakers_learns_them_from_the_ledger_once() {
    let dir = tempfile::tempdir().expect("test step");
    let path = dir.path().join("index.db");
    let l = ledger(&dir).await;
    let mel = persona(&l, "Mel").await;
    let index = MemoryIndex::open(&path).await.expect("test step");
    index.set_embedder(Arc::new(HashingEmbedder::default())).await.expect("test step");
    memory::import_rows(&l, &index, &mel, who_painted_what(), &|_, _| {}).await.expect("test step");
    assert_eq!(index.embed_all_pending().await.expect("test step"), 40);
    assert_eq!(index.sync_from_ledger(&l).await.expect("test step"), 0);
    index.close().await;
    // As the index was before the speakers were filled in: every speaker
    // unknown and the last migration not run yet.
    let raw = |sql: &'static str| {
        let path = path.clone();
        async move {
            let pool = sqlx::SqlitePool::connect_with(sqlx::sqlite::SqliteConnectOptions::new().filename(&path))
                .await
                .expect("test step");
            let n: Option<i64> = sqlx::query_scalar(sql).fetch_optional(&pool).await.expect("test step");
            pool.close().await;
            n
        }
    };
    assert_eq!(raw("SELECT max(version) FROM _sqlx_migrations").await, Some(4), "the migration that fills the speakers in");
    raw("UPDATE items SET by_human = NULL").await;
    raw("DELETE FROM _sqlx_migrations WHERE version = 4").await;
    let unknown = || raw("SELECT count(*) FROM items WHERE by_human IS NULL");
    assert_eq!(unknown().await, Some(40));

    let index = MemoryIndex::open(&path).await.expect("test step");
    assert_eq!(index.sync_from_ledger(&l).await.expect("test step"), 0, "no row added");
    assert_eq!(index.sync_from_ledger(&l).await.expect("test step"), 0);
    index.set_embedder(Arc::new(HashingEmbedder::default())).await.expect("test step");
    assert_eq!(index.embed_all_pending().await.expect("test step"), 0, "no vector re-made");
    index.set_settings(RecallSettings { keyword_context: [0.0; 2], vector_context: [0.0; 2], ..memory::DEFAULT_SETTINGS.keyword_only() });
    let scope = Scope::Keys(vec![mel.id.clone()]);
    let first = index.recall(&scope, Some("Mel"), "What did Caroline paint?", 3, memory::now_ms()).await.expect("test step");
    assert_eq!(first.hits[0].public_id(), "t30", "the person's own line rises");
    index.close().await;
    assert_eq!(unknown().await, Some(0));
}

#[tokio::test]
async fn a_turn_said_by_the_one_the_question_names_rises_also_after_a_rebuild() {
    let dir = tempfile::tempdir().expect("test step");
    let l = ledger(&dir).await;
    let mel = persona(&l, "Mel").await;
    let index = MemoryIndex::open(&dir.path().join("index.db")).await.expect("test step");
    memory::import_rows(&l, &index, &mel, who_painted_what(), &|_, _| {}).await.expect("test step");
    let rebuilt = MemoryIndex::open(&dir.path().join("rebuilt.db")).await.expect("test step");
    rebuilt.sync_from_ledger(&l).await.expect("test step");
    let plain = RecallSettings { keyword_context: [0.0; 2], vector_context: [0.0; 2], ..memory::DEFAULT_SETTINGS.keyword_only() };
    let scope = &Scope::Keys(vec![mel.id.clone()]);
    for index in [&index, &rebuilt] {
        let first_as = |persona: Option<&'static str>, q: &'static str, s: RecallSettings| async move {
            index.set_settings(s);
            index.recall(scope, persona, q, 3, memory::now_ms()).await.expect("test step").hits[0].public_id().to_owned()
        };
        let first = |q, s| first_as(Some("Mel"), q, s);
        // By words alone, the line naming the asked one comes first: it is
        // the other side's.
        let off = RecallSettings { speaker_weight: 0.0, ..plain };
        assert_eq!(first("What did Caroline paint?", off).await, "t31");
        assert_eq!(first("What did Mel paint?", off).await, "t30");
        // The persona says "Caroline": she is the person, and her own line
        // rises; "Mel" is the persona's own name: the persona's line rises.
        assert_eq!(first("What did Caroline paint?", plain).await, "t30");
        assert_eq!(first("What did Mel paint?", plain).await, "t31");
        // Naming both sides lifts neither.
        assert_eq!(first("Did Caroline and Mel paint?", plain).await, first("Did Caroline and Mel paint?", off).await);
        // A name only the person says is not taken for the persona unless
        // it is the persona's name: it may be a third person.
        assert_eq!(first_as(Some("Ada"), "What did Mel paint?", plain).await, "t30");
        assert_eq!(first_as(None, "What did Mel paint?", plain).await, "t30");
        assert_eq!(first_as(None, "What did Caroline paint?", plain).await, "t30");
    }
}
