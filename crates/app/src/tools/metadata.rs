//! The metadata service behind `enrich_movie`, `enrich_tv_show` and
//! `enrich_video`: an HTTP service the user configures in Settings (base URL
//! in the ledger, API key in the keychain, like provider accounts).
//!
//! Protocol: `GET {base}/movie?title=…&year=…`, `GET {base}/tv?title=…`,
//! `GET {base}/video?url=…`, with `Authorization: Bearer {key}` when a key
//! is set; the answer is one JSON object (`title`, `year`, `overview`… all
//! optional). Enrichment only reads, so a timed-out request is retried
//! (at most [`ATTEMPTS`] times) without any risk of doing something twice.

use std::sync::Arc;
use std::time::Duration;

use ledger::{EventBody, HUMAN_ENTITY};
use runtime::{CancelToken, ToolError};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use ts_rs::TS;

use crate::context::Context;
use crate::error::AppError;
use crate::Result;

pub(crate) const BASE_URL_KEY: &str = "metadata.base_url";
const KEY_ACCOUNT: &str = "metadata-service";
const ATTEMPTS: u32 = 3;
/// Per-request timeout; `LEDGERMIND_METADATA_TIMEOUT_MS` overrides it (tests).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(8);

#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct MetadataServiceView {
    pub base_url: Option<String>,
    pub has_key: bool,
}

/// A lookup's answer, and the guard's record of a flagged answer, to write.
pub(crate) struct Enriched {
    pub outcome: Result<Value, ToolError>,
    pub flag: Option<ledger::Draft>,
}

/// The per-request timeout: `LEDGERMIND_METADATA_TIMEOUT_MS`, else 8 s.
pub(crate) fn timeout_from_env() -> Duration {
    std::env::var("LEDGERMIND_METADATA_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_millis)
}

pub(crate) struct MetadataService {
    ctx: Arc<Context>,
    http: reqwest::Client,
    timeout: Duration,
}

impl MetadataService {
    pub(crate) fn new(ctx: Arc<Context>, timeout: Duration) -> Self {
        Self { ctx, http: reqwest::Client::new(), timeout }
    }

    fn key_account(&self) -> String {
        self.ctx.ledger.key_account(KEY_ACCOUNT)
    }

    pub(crate) async fn view(&self) -> Result<MetadataServiceView> {
        let base_url = self.ctx.ledger.runtime_setting(BASE_URL_KEY).await?;
        let has_key = matches!(self.ctx.ledger.keystore().load(&self.key_account()), Ok(Some(_)));
        Ok(MetadataServiceView { base_url, has_key })
    }

    /// Sets (or, with an empty URL, removes) the service. An empty key keeps
    /// the stored one; the key goes to the keychain, never to the ledger.
    pub(crate) async fn configure(&self, base_url: &str, api_key: &str) -> Result<MetadataServiceView> {
        let base_url = base_url.trim().trim_end_matches('/');
        if base_url.is_empty() {
            self.ctx.ledger
                .append(HUMAN_ENTITY, EventBody::RuntimeSettingSet { key: BASE_URL_KEY.into(), value: None })
                .await?;
            self.ctx.ledger.keystore().delete(&self.key_account())?;
            return self.view().await;
        }
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(AppError::invalid("the metadata service URL must start with http:// or https://"));
        }
        let key = api_key.trim();
        if !key.is_empty() {
            self.ctx.ledger.keystore().store(&self.key_account(), key.as_bytes())?;
        }
        self.ctx.ledger
            .append(
                HUMAN_ENTITY,
                EventBody::RuntimeSettingSet { key: BASE_URL_KEY.into(), value: Some(base_url.to_owned()) },
            )
            .await?;
        self.view().await
    }

    /// Looks the item up. A flagged answer comes back with its
    /// `guard_flagged` record for the caller to write through the call's
    /// gate (a stopped call writes nothing); `cancel`: a stopped call sends
    /// no more requests.
    pub(crate) async fn enrich(&self, tool: &str, args: &Value, correlation_id: &str, cancel: &CancelToken) -> Enriched {
        let mut flag = None;
        let outcome = self.look_up(tool, args, correlation_id, cancel, &mut flag).await;
        Enriched { outcome, flag }
    }

    async fn look_up(
        &self,
        tool: &str,
        args: &Value,
        correlation_id: &str,
        cancel: &CancelToken,
        flag: &mut Option<ledger::Draft>,
    ) -> Result<Value, ToolError> {
        let base = self.ctx.ledger.runtime_setting(BASE_URL_KEY).await.map_err(|e| ToolError::Failed(e.to_string()))?;
        let Some(base) = base else {
            return Err(ToolError::Unavailable(
                "no metadata service is configured; add one in Settings → Metadata service".into(),
            ));
        };
        let (path, query): (&str, Vec<(&str, String)>) = match tool {
            "enrich_video" => ("video", vec![("url", str_arg(args, "url"))]),
            other => {
                let mut q = vec![("title", str_arg(args, "title"))];
                if let Some(y) = args.get("year").and_then(Value::as_i64) {
                    q.push(("year", y.to_string()));
                }
                (if other == "enrich_tv_show" { "tv" } else { "movie" }, q)
            }
        };
        let key = self.ctx.ledger.keystore().load(&self.key_account()).ok().flatten();
        let url = format!("{base}/{path}");
        let mut last = ToolError::Timeout;
        for attempt in 1..=ATTEMPTS {
            if cancel.is_cancelled() {
                return Err(ToolError::Cancelled);
            }
            let mut req = self.http.get(&url).query(&query).timeout(self.timeout);
            if let Some(k) = &key {
                req = req.bearer_auth(String::from_utf8_lossy(k));
            }
            match req.send().await {
                Ok(resp) if resp.status().is_success() => {
                    let mut data: Value = resp
                        .json()
                        .await
                        .map_err(|e| ToolError::Failed(format!("the metadata service sent unreadable data: {e}")))?;
                    Self::screen(tool, correlation_id, &mut data, flag)?;
                    return Ok(json!({"message": summary(&data), "metadata": data}));
                }
                Ok(resp) if resp.status().as_u16() == 404 => {
                    return Err(ToolError::Failed("the metadata service found nothing for this".into()));
                }
                Ok(resp) if resp.status().is_server_error() || resp.status().as_u16() == 429 => {
                    last = ToolError::Unavailable(format!("the metadata service answered {}", resp.status()));
                }
                Ok(resp) => {
                    return Err(ToolError::Failed(format!("the metadata service refused the request ({})", resp.status())));
                }
                Err(e) if e.is_timeout() => last = ToolError::Timeout,
                Err(e) => last = ToolError::Unavailable(format!("the metadata service is unreachable: {e}")),
            }
            tracing::warn!(correlation_id, tool, attempt, error = %last, "metadata request failed; retrying");
            tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
        }
        if last == ToolError::Timeout {
            // A clear message: every attempt timed out, none is left running.
            return Err(ToolError::Unavailable(format!(
                "the metadata service did not answer in time ({ATTEMPTS} attempts of {:.1} s each); nothing was saved",
                self.timeout.as_secs_f64()
            )));
        }
        Err(last)
    }
}

impl MetadataService {
    /// The metadata service's answer is outside text that is shown, stored
    /// and indexed (so it can reach a prompt): every string in it passes the
    /// injection guard. Medium risk: the flagged parts are removed; high:
    /// the answer is refused. Either is a `guard_flagged` event (`flag`).
    fn screen(tool: &str, correlation_id: &str, data: &mut Value, flag: &mut Option<ledger::Draft>) -> Result<(), ToolError> {
        let mut worst: Option<runtime::GuardReport> = None;
        let mut blocked = false;
        for_each_string(data, &mut |text| {
            let (report, kept) = crate::screening::screen_imported_text(text);
            if report.action == runtime::Action::Allow {
                return;
            }
            match kept {
                Some(clean) => *text = clean,
                None => blocked = true,
            }
            if worst.as_ref().is_none_or(|w| report.risk_level > w.risk_level) {
                worst = Some(report);
            }
        });
        let Some(report) = worst else { return Ok(()) };
        tracing::warn!(correlation_id, tool, risk = ?report.risk_level, "guard: metadata answer flagged");
        *flag = Some(crate::screening::flagged(correlation_id, crate::screening::SOURCE_METADATA, Some(tool), &report));
        if blocked {
            return Err(ToolError::Failed(
                "the metadata service's answer looks like a prompt-injection attempt; it was not used".into(),
            ));
        }
        Ok(())
    }
}

fn for_each_string(v: &mut Value, f: &mut dyn FnMut(&mut String)) {
    match v {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter_mut().for_each(|i| for_each_string(i, f)),
        Value::Object(map) => map.values_mut().for_each(|i| for_each_string(i, f)),
        _ => {}
    }
}

fn str_arg(args: &Value, key: &str) -> String {
    args.get(key).and_then(Value::as_str).unwrap_or_default().to_owned()
}

fn summary(data: &Value) -> String {
    let title = data.get("title").and_then(Value::as_str).unwrap_or("(untitled)");
    let year = data.get("year").and_then(Value::as_i64).map(|y| format!(" ({y})")).unwrap_or_default();
    let overview = data.get("overview").and_then(Value::as_str).map(|o| format!(": {o}")).unwrap_or_default();
    format!("Found “{title}”{year}{overview}")
}
