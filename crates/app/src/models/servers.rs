//! The model servers people already run (Ollama, LM Studio, Jan, llama.cpp
//! server, vLLM), found on their usual ports and offered as accounts: one
//! click makes a server an OpenAI-compatible account whose models personas
//! can use, its key (Jan's) kept in the keychain like any account's.

use std::time::Duration;

use ::models::discover::{default_probes, discover, Probe, ServerInfo};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use super::views::{AccountView, NewAccount};
use super::Models;
use crate::error::AppError;
use crate::Result;

/// How long one port may take to answer: a server on this machine answers
/// in milliseconds; a closed port fails at once.
const PROBE_TIMEOUT: Duration = Duration::from_millis(800);

/// A server found on this machine.
#[derive(Debug, Clone, Serialize, Deserialize, TS, PartialEq)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct ServerView {
    /// ollama, lmstudio, jan, llamacpp or vllm.
    pub kind: String,
    /// Its OpenAI-compatible base URL (ends in `/v1`).
    pub url: String,
    /// The models it offers (none listed until a key is given, for Jan).
    pub models: Vec<String>,
    pub needs_key: bool,
    /// The account already made from it, if any.
    pub account: Option<String>,
}

fn kind_name(s: &ServerInfo) -> String {
    serde_json::to_value(s.kind).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_else(|| "server".to_owned())
}

impl Models {
    /// The servers running on this machine now.
    pub async fn local_servers(&self) -> Result<Vec<ServerView>> {
        self.servers_at(&default_probes()).await
    }

    /// The servers answering at `probes` (a mirror's address, or a test's).
    pub async fn servers_at(&self, probes: &[Probe]) -> Result<Vec<ServerView>> {
        let found = discover(probes, PROBE_TIMEOUT).await;
        if let Ok(mut kept) = self.found.lock() {
            kept.clone_from(&found);
        }
        let accounts = self.list_accounts().await?;
        Ok(found
            .into_iter()
            .map(|s| ServerView {
                kind: kind_name(&s),
                account: accounts.iter().find(|a| a.base_url == s.url).map(|a| a.name.clone()),
                url: s.url,
                models: s.models,
                needs_key: s.needs_key,
            })
            .collect())
    }

    /// Makes the server found at `url` by the last look an account (named
    /// after its kind, numbered when that name is taken) with `model` as its
    /// default model.
    pub async fn add_server_account(&self, url: &str, model: &str, api_key: &str) -> Result<AccountView> {
        let server = self
            .found
            .lock()
            .ok()
            .and_then(|f| f.iter().find(|s| s.url == url.trim()).cloned())
            .ok_or_else(|| AppError::new("SERVER_NOT_FOUND", format!("no server was found at {url}: look for servers again")))?;
        let kind = kind_name(&server);
        if let Some(a) = self.list_accounts().await?.into_iter().find(|a| a.base_url == server.url) {
            return Err(AppError::new("ACCOUNT_EXISTS", format!("this server is already the account {}", a.name)));
        }
        if server.needs_key && api_key.trim().is_empty() {
            return Err(AppError::invalid(format!("{kind} needs its API key (its settings show it)")));
        }
        let model = model.trim();
        if model.is_empty() && server.models.is_empty() {
            return Err(AppError::invalid(format!("name the {kind} model replies should use")));
        }
        if model.is_empty() || (!server.models.is_empty() && !server.models.iter().any(|m| m == model)) {
            return Err(AppError::invalid(format!("{kind} offers {}; choose one of them", server.models.join(", "))));
        }
        let taken: Vec<String> = self.list_accounts().await?.into_iter().map(|a| a.name).collect();
        let name = std::iter::once(kind.clone())
            .chain((2..).map(|n| format!("{kind}-{n}")))
            .find(|n| !taken.contains(n))
            .unwrap_or(kind);
        self.add_account(NewAccount {
            name,
            base_url: server.url.clone(),
            api_key: api_key.to_owned(),
            default_model: model.to_owned(),
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ::models::discover::ServerKind;
    use ::models::testkit::{FakeKind, FakeServer};

    use super::*;
    use crate::context::testing;

    /// A fake Ollama (the real one cannot be installed on this machine):
    /// found, made an account, and found again as that account.
    #[tokio::test]
    async fn a_found_server_becomes_an_account_once() {
        let t = testing::context(&[]).await;
        let models = Arc::new(Models::new(t.ctx.clone()));
        let ollama = FakeServer::start(FakeKind::Ollama, vec!["llama3.2:1b".into()]).await.expect("fake ollama");
        let probes = [Probe { kind: ServerKind::Ollama, base: ollama.url() }];
        let found = models.servers_at(&probes).await.expect("discover");
        assert_eq!(found.len(), 1, "{found:?}");
        let server = &found[0];
        assert_eq!((server.kind.as_str(), server.models.clone(), server.needs_key), ("ollama", vec!["llama3.2:1b".to_owned()], false));
        assert!(server.url.ends_with("/v1") && server.account.is_none(), "{server:?}");

        assert!(models.add_server_account(&server.url, "mistral", "").await.is_err(), "only a model it offers");
        assert!(models.add_server_account("http://127.0.0.1:9/v1", "llama3.2:1b", "").await.is_err(), "only a server found");
        let account = models.add_server_account(&server.url, "llama3.2:1b", "").await.expect("account");
        assert_eq!((account.name.as_str(), account.default_model.as_str()), ("ollama", "llama3.2:1b"));
        let again = models.servers_at(&probes).await.expect("discover");
        assert_eq!(again[0].account.as_deref(), Some("ollama"));
        assert!(models.add_server_account(&again[0].url, "llama3.2:1b", "").await.is_err(), "not made twice");
        let listed = models.list_models().await.expect("models");
        assert!(listed.iter().any(|m| m.spec == "ollama:llama3.2:1b"), "{listed:?}");
    }
}
