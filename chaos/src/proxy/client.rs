//! Async client for the Toxiproxy HTTP API (this crate's server or Shopify's).
//!
//! Every call has a deadline (default [`DEFAULT_TIMEOUT`]) covering connect,
//! request and body, and every non-2xx answer becomes
//! [`ClientError::Api`] with the server's status and message. Updates use
//! `POST`, which every Toxiproxy 2.x accepts (`PATCH` only came later).

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::{Method, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::api::{
    ApiError, NewProxy, Populated, Proxy, ProxyUpdate, Stream, Toxic, ToxicKind, Version,
};

/// Deadline of one API call unless configured otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why an API call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server answered with a non-2xx status.
    #[error("{method} {path}: HTTP {status}: {message}")]
    Api {
        /// HTTP method of the call.
        method: Method,
        /// Path of the call.
        path: String,
        /// HTTP status.
        status: u16,
        /// The server's `error` message (or its raw body if not JSON).
        message: String,
    },
    /// No complete answer within the deadline.
    #[error("{method} {path}: no answer within {timeout:?}")]
    Timeout {
        /// HTTP method of the call.
        method: Method,
        /// Path of the call.
        path: String,
        /// The deadline that passed.
        timeout: Duration,
    },
    /// Connection or protocol failure.
    #[error("{method} {path}: {source}")]
    Transport {
        /// HTTP method of the call.
        method: Method,
        /// Path of the call.
        path: String,
        /// The underlying error.
        #[source]
        source: reqwest::Error,
    },
    /// A 2xx answer whose body is not the expected JSON.
    #[error("{method} {path}: unexpected answer ({source}): {body}")]
    Decode {
        /// HTTP method of the call.
        method: Method,
        /// Path of the call.
        path: String,
        /// The body, possibly cut.
        body: String,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// The base URL is not an `http://` URL.
    #[error("invalid Toxiproxy URL {url:?}: {reason}")]
    InvalidUrl {
        /// What was given.
        url: String,
        /// Why it is refused.
        reason: String,
    },
}

impl ClientError {
    /// The HTTP status for [`ClientError::Api`].
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The server's message for [`ClientError::Api`].
    pub fn message(&self) -> Option<&str> {
        match self {
            ClientError::Api { message, .. } => Some(message),
            _ => None,
        }
    }

    /// HTTP 404: unknown proxy or toxic.
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// HTTP 409: the name is taken.
    pub fn is_conflict(&self) -> bool {
        self.status() == Some(409)
    }
}

/// A Toxiproxy API client; cheap to clone (shares its connection pool).
#[derive(Debug, Clone)]
pub struct Client {
    base: Url,
    http: reqwest::Client,
    timeout: Duration,
}

impl Client {
    /// A client for `base_url` (e.g. `http://127.0.0.1:8474`) with [`DEFAULT_TIMEOUT`].
    pub fn new(base_url: &str) -> Result<Self, ClientError> {
        Self::with_timeout(base_url, DEFAULT_TIMEOUT)
    }

    /// A client whose every call must complete within `timeout`.
    pub fn with_timeout(base_url: &str, timeout: Duration) -> Result<Self, ClientError> {
        let invalid = |reason: String| ClientError::InvalidUrl {
            url: base_url.to_owned(),
            reason,
        };
        let base = Url::parse(base_url).map_err(|e| invalid(e.to_string()))?;
        if base.scheme() != "http" {
            // Built without TLS on purpose: the API is on loopback or a
            // container network.
            return Err(invalid("only http:// is supported".to_owned()));
        }
        let http = reqwest::Client::builder()
            // Environment proxies must never see chaos traffic.
            .no_proxy()
            .build()
            .map_err(|e| invalid(e.to_string()))?;
        Ok(Client {
            base,
            http,
            timeout,
        })
    }

    /// The base URL.
    pub fn base_url(&self) -> &Url {
        &self.base
    }

    /// The per-call deadline.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Server version (JSON `{"version"}` or, for old Toxiproxy, plain text).
    pub async fn version(&self) -> Result<String, ClientError> {
        let (_, body) = self.call(Method::GET, "/version", None::<&()>).await?;
        Ok(match serde_json::from_slice::<Version>(&body) {
            Ok(v) => v.version,
            Err(_) => String::from_utf8_lossy(&body).trim().to_owned(),
        })
    }

    /// All proxies, by name.
    pub async fn proxies(&self) -> Result<BTreeMap<String, Proxy>, ClientError> {
        self.json(Method::GET, "/proxies".to_owned(), None::<&()>)
            .await
    }

    /// Creates a proxy; 409 if the name is taken.
    pub async fn create_proxy(&self, proxy: &NewProxy) -> Result<Proxy, ClientError> {
        self.json(Method::POST, "/proxies".to_owned(), Some(proxy))
            .await
    }

    /// One proxy with its toxics; 404 if unknown.
    pub async fn get_proxy(&self, name: &str) -> Result<Proxy, ClientError> {
        self.json(Method::GET, proxy_path(name), None::<&()>).await
    }

    /// Changes listen, upstream or enabled.
    pub async fn update_proxy(
        &self,
        name: &str,
        update: &ProxyUpdate,
    ) -> Result<Proxy, ClientError> {
        self.json(Method::POST, proxy_path(name), Some(update))
            .await
    }

    /// Deletes a proxy, closing its connections.
    pub async fn delete_proxy(&self, name: &str) -> Result<(), ClientError> {
        self.call(Method::DELETE, &proxy_path(name), None::<&()>)
            .await
            .map(drop)
    }

    /// Creates or updates several proxies at once.
    pub async fn populate(&self, proxies: &[NewProxy]) -> Result<Vec<Proxy>, ClientError> {
        let p: Populated = self
            .json(Method::POST, "/populate".to_owned(), Some(&proxies))
            .await?;
        Ok(p.proxies)
    }

    /// Enables every proxy and removes every toxic.
    pub async fn reset(&self) -> Result<(), ClientError> {
        self.call(Method::POST, "/reset", None::<&()>)
            .await
            .map(drop)
    }

    /// The toxics of a proxy.
    pub async fn toxics(&self, proxy: &str) -> Result<Vec<Toxic>, ClientError> {
        self.json(Method::GET, toxics_path(proxy), None::<&()>)
            .await
    }

    /// Adds a toxic; 409 if its name is taken on that proxy.
    pub async fn add_toxic(&self, proxy: &str, toxic: &Toxic) -> Result<Toxic, ClientError> {
        self.json(Method::POST, toxics_path(proxy), Some(toxic))
            .await
    }

    /// One toxic; 404 if unknown.
    pub async fn get_toxic(&self, proxy: &str, name: &str) -> Result<Toxic, ClientError> {
        self.json(Method::GET, toxic_path(proxy, name), None::<&()>)
            .await
    }

    /// Replaces toxicity and attributes of the toxic named `toxic.name`.
    pub async fn update_toxic(&self, proxy: &str, toxic: &Toxic) -> Result<Toxic, ClientError> {
        self.json(Method::POST, toxic_path(proxy, &toxic.name), Some(toxic))
            .await
    }

    /// Removes a toxic; 404 if unknown.
    pub async fn remove_toxic(&self, proxy: &str, name: &str) -> Result<(), ClientError> {
        self.call(Method::DELETE, &toxic_path(proxy, name), None::<&()>)
            .await
            .map(drop)
    }

    /// Disables a proxy: its connections close, new ones are refused.
    pub async fn disable(&self, name: &str) -> Result<Proxy, ClientError> {
        let update = ProxyUpdate {
            enabled: Some(false),
            ..ProxyUpdate::default()
        };
        self.update_proxy(name, &update).await
    }

    /// Enables a proxy again.
    pub async fn enable(&self, name: &str) -> Result<Proxy, ClientError> {
        let update = ProxyUpdate {
            enabled: Some(true),
            ..ProxyUpdate::default()
        };
        self.update_proxy(name, &update).await
    }

    /// Adds a latency toxic named `latency_<stream>` (millisecond resolution).
    pub async fn add_latency(
        &self,
        name: &str,
        stream: Stream,
        latency: Duration,
        jitter: Duration,
    ) -> Result<Toxic, ClientError> {
        let kind = ToxicKind::Latency {
            latency: millis(latency),
            jitter: millis(jitter),
        };
        self.add_toxic(name, &Toxic::new(kind, stream)).await
    }

    /// Black-holes the proxy in both directions: `timeout` 0 toxics named
    /// `black_hole_upstream` and `black_hole_downstream`. Connections stay
    /// open and data vanishes until [`Client::heal`] or [`Client::reset`],
    /// which close the connections that were held (Toxiproxy does the same
    /// when a timeout toxic is removed); new connections then work.
    pub async fn black_hole(&self, name: &str) -> Result<Vec<Toxic>, ClientError> {
        let mut added = Vec::with_capacity(2);
        for stream in [Stream::Upstream, Stream::Downstream] {
            let toxic = Toxic::new(ToxicKind::Timeout { timeout: 0 }, stream)
                .named(format!("black_hole_{stream}"));
            added.push(self.add_toxic(name, &toxic).await?);
        }
        Ok(added)
    }

    /// Removes every toxic of one proxy (leaves it enabled or disabled).
    pub async fn heal(&self, name: &str) -> Result<(), ClientError> {
        for toxic in self.toxics(name).await? {
            match self.remove_toxic(name, &toxic.name).await {
                // Someone else removed it meanwhile: that is what we wanted.
                Err(e) if e.is_not_found() => {}
                other => other?,
            }
        }
        Ok(())
    }

    async fn json<T: DeserializeOwned>(
        &self,
        method: Method,
        path: String,
        body: Option<&(impl Serialize + ?Sized)>,
    ) -> Result<T, ClientError> {
        let (_, bytes) = self.call(method.clone(), &path, body).await?;
        serde_json::from_slice(&bytes).map_err(|source| ClientError::Decode {
            method,
            path,
            body: String::from_utf8_lossy(&bytes[..bytes.len().min(512)]).into_owned(),
            source,
        })
    }

    /// One HTTP exchange under the deadline; non-2xx becomes `Api`.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&(impl Serialize + ?Sized)>,
    ) -> Result<(u16, Vec<u8>), ClientError> {
        let url = self.base.join(path).map_err(|e| ClientError::InvalidUrl {
            url: format!("{}{path}", self.base),
            reason: e.to_string(),
        })?;
        let mut req = self.http.request(method.clone(), url);
        if let Some(b) = body {
            req = req.json(b);
        }
        let exchange = async {
            let resp = req.send().await?;
            let status = resp.status();
            let bytes = resp.bytes().await?;
            Ok::<_, reqwest::Error>((status, bytes))
        };
        let (status, bytes) = match tokio::time::timeout(self.timeout, exchange).await {
            Err(_) => {
                return Err(ClientError::Timeout {
                    method,
                    path: path.to_owned(),
                    timeout: self.timeout,
                });
            }
            Ok(Err(source)) => {
                return Err(ClientError::Transport {
                    method,
                    path: path.to_owned(),
                    source,
                });
            }
            Ok(Ok(r)) => r,
        };
        if !status.is_success() {
            let message = match serde_json::from_slice::<ApiError>(&bytes) {
                Ok(e) => e.error,
                Err(_) => {
                    let text = String::from_utf8_lossy(&bytes).trim().to_owned();
                    if text.is_empty() {
                        status.canonical_reason().unwrap_or("error").to_owned()
                    } else {
                        text
                    }
                }
            };
            return Err(ClientError::Api {
                method,
                path: path.to_owned(),
                status: status.as_u16(),
                message,
            });
        }
        Ok((status.as_u16(), bytes.to_vec()))
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn proxy_path(name: &str) -> String {
    format!("/proxies/{}", segment(name))
}

fn toxics_path(proxy: &str) -> String {
    format!("/proxies/{}/toxics", segment(proxy))
}

fn toxic_path(proxy: &str, toxic: &str) -> String {
    format!("/proxies/{}/toxics/{}", segment(proxy), segment(toxic))
}

/// Percent-encodes a path segment so any proxy or toxic name is safe.
fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_encoded() {
        assert_eq!(segment("redis-1_a.b"), "redis-1_a.b");
        assert_eq!(segment("a/b c"), "a%2Fb%20c");
    }

    #[test]
    fn only_http_urls() {
        assert!(Client::new("http://127.0.0.1:8474").is_ok());
        assert!(matches!(
            Client::new("https://127.0.0.1:8474"),
            Err(ClientError::InvalidUrl { .. })
        ));
        assert!(matches!(
            Client::new("not a url"),
            Err(ClientError::InvalidUrl { .. })
        ));
    }
}
