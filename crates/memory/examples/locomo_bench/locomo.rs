//! Reading LoCoMo conversations (snap-research, CC BY-NC 4.0: read from
//! outside the repository at run time, never copied into it) and turning
//! one into the import file `ledgermind import-conversation` takes.

use serde_json::Value;

pub struct Turn {
    pub dia_id: String,
    pub speaker: String,
    /// The turn, with a shared image's caption as `[image: …]`.
    pub text: String,
    /// RFC 3339: the session's date and time, 30 s more per turn.
    pub timestamp: String,
}

pub struct Question {
    pub text: String,
    pub category: u8,
    pub evidence: Vec<String>,
}

pub struct Conversation {
    pub id: String,
    pub speaker_a: String,
    pub speaker_b: String,
    pub turns: Vec<Turn>,
    pub questions: Vec<Question>,
}

const MONTHS: [&str; 12] = [
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december",
];

/// "1:56 pm on 8 May, 2023" → seconds since 1970 (UTC).
pub fn session_time(s: &str) -> Option<i64> {
    let s = s.trim().to_lowercase();
    let (clock, date) = s.split_once(" on ")?;
    let (hm, ampm) = clock.split_once(' ')?;
    let (h, m) = hm.split_once(':')?;
    let mut h: i64 = h.parse().ok()?;
    let m: i64 = m.parse().ok()?;
    if ampm == "pm" && h != 12 {
        h += 12;
    } else if ampm == "am" && h == 12 {
        h = 0;
    }
    let mut parts = date.split([' ', ',']).filter(|p| !p.is_empty());
    let day: u8 = parts.next()?.parse().ok()?;
    let month_name = parts.next()?;
    let month = MONTHS.iter().position(|x| *x == month_name)? as u8 + 1;
    let year: i32 = parts.next()?.parse().ok()?;
    let date = time::Date::from_calendar_date(year, time::Month::try_from(month).ok()?, day).ok()?;
    Some(date.midnight().assume_utc().unix_timestamp() + h * 3600 + m * 60)
}

fn rfc3339(secs: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(secs)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_default()
}

pub fn load(path: &std::path::Path) -> Result<Vec<Conversation>, Box<dyn std::error::Error>> {
    let v: Value = serde_json::from_slice(&std::fs::read(path)?)?;
    let mut out = Vec::new();
    for sample in v.as_array().ok_or("expected an array of conversations")? {
        let conv = &sample["conversation"];
        let str_of = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let mut turns = Vec::new();
        for n in 1.. {
            let Some(session) = conv.get(format!("session_{n}")).and_then(Value::as_array) else { break };
            let start = session_time(conv[format!("session_{n}_date_time")].as_str().unwrap_or_default())
                .ok_or_else(|| format!("session {n} of {} has no readable date", str_of(&sample["sample_id"])))?;
            for (i, t) in session.iter().enumerate() {
                let mut text = str_of(&t["text"]);
                if let Some(c) = t.get("blip_caption").and_then(Value::as_str) {
                    text = format!("{text} [image: {c}]");
                }
                turns.push(Turn {
                    dia_id: str_of(&t["dia_id"]),
                    speaker: str_of(&t["speaker"]),
                    text,
                    timestamp: rfc3339(start + 30 * i as i64),
                });
            }
        }
        let questions = sample["qa"]
            .as_array()
            .map(|qa| {
                qa.iter()
                    .map(|q| Question {
                        text: str_of(&q["question"]),
                        category: q["category"].as_u64().unwrap_or(0) as u8,
                        evidence: q["evidence"]
                            .as_array()
                            .map(|e| e.iter().map(str_of).collect())
                            .unwrap_or_default(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.push(Conversation {
            id: str_of(&sample["sample_id"]),
            speaker_a: str_of(&conv["speaker_a"]),
            speaker_b: str_of(&conv["speaker_b"]),
            turns,
            questions,
        });
    }
    Ok(out)
}

/// The import file for a persona named after speaker B: speaker A is the
/// human, the dialogue id is the row id (so `recall --json` answers with it).
pub fn to_import_json(c: &Conversation) -> String {
    let rows: Vec<Value> = c
        .turns
        .iter()
        .map(|t| {
            serde_json::json!({
                "id": t.dia_id,
                "speaker": if t.speaker == c.speaker_a { "human" } else { c.speaker_b.as_str() },
                "text": t.text,
                "timestamp": t.timestamp,
            })
        })
        .collect();
    Value::Array(rows).to_string()
}
