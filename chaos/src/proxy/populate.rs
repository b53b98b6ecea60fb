//! `POST /populate` and `--config FILE`: parsing, validation and "is this the
//! same proxy?".
//!
//! As in Toxiproxy, the whole list is validated before anything changes
//! (a missing field names the proxy's 1-based position: `missing required
//! field: name at proxy 2`), and a proxy whose listen and upstream resolve
//! to the addresses it already has is kept as it is — toxics, open
//! connections and enabled state included — instead of being replaced.

use std::collections::HashSet;
use std::net::SocketAddr;

use serde::Deserialize;

use super::api::{ApiError, NewProxy};

/// Listen address used when a proxy is created without one: a free port on
/// loopback (Toxiproxy binds a free port on every interface).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:0";

/// One proxy as a create or populate body has it: every field optional so
/// that a missing one gets Toxiproxy's precise 400.
#[derive(Debug, Deserialize)]
pub(crate) struct ProxyBody {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    listen: Option<String>,
    #[serde(default)]
    upstream: Option<String>,
    #[serde(default)]
    enabled: Option<bool>,
}

impl ProxyBody {
    /// The proxy to create; `at` is appended to "missing field" messages
    /// (empty for `POST /proxies`, ` at proxy N` for populate).
    pub(crate) fn into_new(self, at: &str) -> Result<NewProxy, ApiError> {
        let missing = |f: &str| ApiError::bad_request(format!("missing required field: {f}{at}"));
        let name = self
            .name
            .filter(|n| !n.is_empty())
            .ok_or_else(|| missing("name"))?;
        let upstream = self
            .upstream
            .filter(|u| !u.is_empty())
            .ok_or_else(|| missing("upstream"))?;
        Ok(NewProxy {
            name,
            listen: self
                .listen
                .filter(|l| !l.is_empty())
                .unwrap_or_else(|| DEFAULT_LISTEN.to_owned()),
            upstream,
            enabled: self.enabled.unwrap_or(true),
        })
    }
}

/// Parses a populate body (a JSON array of proxies) and validates all of it.
pub(crate) fn parse(body: &[u8]) -> Result<Vec<NewProxy>, ApiError> {
    let list: Vec<ProxyBody> = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("bad request body: {e}")))?;
    let mut names = HashSet::new();
    let mut out = Vec::with_capacity(list.len());
    for (i, p) in list.into_iter().enumerate() {
        let p = p.into_new(&format!(" at proxy {}", i + 1))?;
        if !names.insert(p.name.clone()) {
            // Toxiproxy answers this one with a 500, not a 400.
            return Err(ApiError::internal(format!(
                "duplicate proxy name {:?}",
                p.name
            )));
        }
        out.push(p);
    }
    Ok(out)
}

/// Two `host:port` strings name the same endpoint: equal, or resolving to a
/// common address (`localhost:P` and `127.0.0.1:P`). Unresolvable names only
/// match themselves.
pub(crate) async fn same_endpoint(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let (ra, rb) = (resolve(a).await, resolve(b).await);
    ra.iter().any(|x| rb.contains(x))
}

async fn resolve(addr: &str) -> Vec<SocketAddr> {
    match tokio::net::lookup_host(addr).await {
        Ok(it) => it.collect(),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_fields_name_the_position() {
        let e = parse(br#"[{"name":"a","upstream":"x:1"},{"upstream":"x:2"}]"#).unwrap_err();
        assert_eq!(
            (e.status, e.error.as_str()),
            (400, "missing required field: name at proxy 2")
        );
        let e = parse(br#"[{"name":"a"}]"#).unwrap_err();
        assert_eq!(e.error, "missing required field: upstream at proxy 1");
        let e =
            parse(br#"[{"name":"a","upstream":"x:1"},{"name":"a","upstream":"x:1"}]"#).unwrap_err();
        assert_eq!(
            (e.status, e.error.as_str()),
            (500, r#"duplicate proxy name "a""#)
        );
    }

    #[test]
    fn listen_is_optional_and_enabled_defaults_to_true() {
        let p = parse(br#"[{"name":"a","upstream":"x:1"}]"#).expect("valid");
        assert_eq!(p[0].listen, DEFAULT_LISTEN);
        assert!(p[0].enabled);
    }

    #[tokio::test]
    async fn localhost_and_loopback_are_the_same_endpoint() {
        assert!(same_endpoint("localhost:7000", "127.0.0.1:7000").await);
        assert!(!same_endpoint("localhost:7000", "127.0.0.1:7001").await);
        // No port: refused before any lookup, so this test makes no DNS query.
        assert!(!same_endpoint("nonsense", "127.0.0.1:1").await);
    }
}
