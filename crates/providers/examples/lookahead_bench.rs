//! Replies written one token a step against replies that propose the
//! tokens that followed the same words earlier in the context (prompt
//! lookup, the engine's default), on LoCoMo's conversations (third-party:
//! snap-research/locomo, CC BY-NC 4.0, for measuring only), in one run,
//! the arms taking turns prompt by prompt.
//!
//! ```text
//! target/debug/examples/lookahead_bench MODEL_PATH LOCOMO_JSON [PROMPTS_PER_CONVERSATION] [MAX_TOKENS]
//! ```
//!
//! Two kinds of prompt per conversation: the persona's next turn after
//! the last eight turns of a session, and a question about the
//! conversation with the turns that answer it given as remembered lines
//! (what a reply with recalled memories reads). Conversations 0–2 are the
//! tuning half, 3–4 held out (LoCoMo's split in `locomo_bench`). Greedy
//! with the conversation's repetition control, so both arms should write
//! the same text; prints per half the time a written token takes after
//! the first (median per reply and over all tokens) and the replies that
//! differ (the engine logs proposed and confirmed tokens per call at
//! debug level).

use std::path::PathBuf;
use std::time::Instant;

use providers::{ChatMessage, CompletionRequest, LocalEngine, Provider, Role, Sampling};
use serde_json::Value;

struct Prompt {
    held_out: bool,
    messages: Vec<ChatMessage>,
}

fn turns(conv: &Value) -> Vec<Vec<(String, String, String)>> {
    let mut sessions = Vec::new();
    for n in 1.. {
        let Some(s) = conv.get(format!("session_{n}")).and_then(Value::as_array) else { break };
        sessions.push(
            s.iter()
                .filter_map(|t| {
                    Some((
                        t.get("speaker")?.as_str()?.to_owned(),
                        t.get("text")?.as_str()?.to_owned(),
                        t.get("dia_id")?.as_str()?.to_owned(),
                    ))
                })
                .collect(),
        );
    }
    sessions
}

fn prompts(data: &Value, per: usize) -> Vec<Prompt> {
    let mut out = Vec::new();
    for (index, sample) in data.as_array().into_iter().flatten().enumerate() {
        let held_out = index >= 3;
        let conv = &sample["conversation"];
        let (a, b) = (conv["speaker_a"].as_str().unwrap_or("A"), conv["speaker_b"].as_str().unwrap_or("B"));
        let sessions = turns(conv);
        let system = format!("You are {b}, talking with your friend {a}. Reply briefly, as {b}.");
        // The next turn of `per` sessions, spread over the conversation.
        for k in 0..per {
            let Some(session) = sessions.get(k * sessions.len() / per.max(1)) else { continue };
            let Some(end) = session.iter().rposition(|t| t.0 == a) else { continue };
            let start = end.saturating_sub(7);
            let mut messages = vec![ChatMessage::new(Role::System, &system)];
            for (speaker, text, _) in &session[start..=end] {
                let role = if speaker == a { Role::User } else { Role::Assistant };
                messages.push(ChatMessage::new(role, text));
            }
            out.push(Prompt { held_out, messages });
        }
        // Questions with the turns that answer them remembered.
        let all: Vec<&(String, String, String)> = sessions.iter().flatten().collect();
        let qa: Vec<&Value> = sample["qa"].as_array().into_iter().flatten().filter(|q| q.get("answer").is_some()).collect();
        for k in 0..per {
            let Some(q) = qa.get(k * qa.len() / per.max(1)) else { continue };
            let evidence: Vec<&str> = q["evidence"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            let lines: Vec<String> = all
                .iter()
                .filter(|t| evidence.contains(&t.2.as_str()))
                .map(|t| format!("- {} said: {}", t.0, t.1))
                .collect();
            if lines.is_empty() {
                continue;
            }
            let system = format!("{system}\nWhat you remember:\n{}", lines.join("\n"));
            let question = q["question"].as_str().unwrap_or_default();
            out.push(Prompt {
                held_out,
                messages: vec![ChatMessage::new(Role::System, system), ChatMessage::new(Role::User, question)],
            });
        }
    }
    out
}

#[derive(Default)]
struct Arm {
    per_token: Vec<f64>,
    decode_ms: f64,
    tokens: u32,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: lookahead_bench MODEL_PATH LOCOMO_JSON [PROMPTS_PER_CONVERSATION] [MAX_TOKENS]";
    let path = PathBuf::from(args.next().ok_or(usage)?);
    let data_path = PathBuf::from(args.next().ok_or(usage)?);
    let per: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(2);
    let max_tokens: u32 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(64);
    if !data_path.is_file() {
        println!("LoCoMo data not found at {}: nothing measured.", data_path.display());
        return Ok(());
    }
    let data: Value = serde_json::from_str(&std::fs::read_to_string(&data_path)?)?;
    let dir = path.parent().ok_or("the model path has no directory")?.to_path_buf();
    let stem = path.file_stem().and_then(|s| s.to_str()).ok_or("bad file name")?.to_owned();
    let engine = LocalEngine::new(dir, 0);
    let arms = [("one token a step", engine.with_lookahead(0)), ("proposing (default)", engine.clone())];
    let prompts = prompts(&data, per);
    println!("{} prompts, at most {max_tokens} tokens each; load average {}", prompts.len(),
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
    // Per half (tuning, held out): each arm, and the replies that differ.
    let mut results: [[Arm; 2]; 2] = Default::default();
    let mut differ = [0usize; 2];
    for (i, p) in prompts.iter().enumerate() {
        let mut texts = [String::new(), String::new()];
        for k in 0..2 {
            let a = (i + k) % 2;
            engine.drop_warm_contexts();
            let mut r = CompletionRequest::chat(&stem, p.messages.clone());
            r.max_tokens = max_tokens;
            r.temperature = 0.0;
            r.sampling = Some(Sampling::CONVERSATION);
            let started = Instant::now();
            let c = arms[a].1.complete(r, None).await?;
            let total = started.elapsed().as_secs_f64() * 1000.0;
            let decode = total - c.first_token_ms.unwrap_or(total);
            let arm = &mut results[usize::from(p.held_out)][a];
            if c.completion_tokens > 1 {
                arm.per_token.push(decode / f64::from(c.completion_tokens - 1));
            }
            arm.decode_ms += decode;
            arm.tokens += c.completion_tokens.saturating_sub(1);
            texts[a] = c.text;
        }
        if texts[0] != texts[1] {
            differ[usize::from(p.held_out)] += 1;
            println!("differs:\n  {:?}\n  {:?}", texts[0], texts[1]);
        }
    }
    for (h, split) in ["tuning", "held out"].iter().enumerate() {
        for (a, (name, _)) in arms.iter().enumerate() {
            let arm = &mut results[h][a];
            arm.per_token.sort_by(f64::total_cmp);
            let median = arm.per_token.get(arm.per_token.len() / 2).copied().unwrap_or(0.0);
            println!(
                "{split:<9} {name:<20} replies {:>3}  ms per token after the first: median {median:6.1}, overall {:6.1}",
                arm.per_token.len(),
                arm.decode_ms / f64::from(arm.tokens.max(1))
            );
        }
        println!("{split:<9} replies that differ: {}", differ[h]);
    }
    Ok(())
}
