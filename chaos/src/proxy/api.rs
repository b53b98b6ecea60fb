//! JSON types of the Toxiproxy HTTP API, shared by the server and the client.
//!
//! The shapes follow Toxiproxy 2.x: a proxy is `{name, listen, upstream,
//! enabled, toxics}`, a toxic is `{name, type, stream, toxicity, attributes}`
//! and an error is `{"error": "...", "status": N}`. Toxics go through a wire
//! struct ([`ToxicWire`]) so that the Toxiproxy defaults (stream
//! `downstream`, toxicity 1.0, name `<type>_<stream>`, missing attributes 0)
//! are applied in one place for both sides.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Direction of the bytes a toxic acts on.
///
/// `upstream` is client → upstream server, `downstream` is upstream server →
/// client (the answers), exactly as in Toxiproxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    /// Client → upstream server.
    Upstream,
    /// Upstream server → client.
    Downstream,
}

impl Stream {
    /// The lowercase name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Upstream => "upstream",
            Stream::Downstream => "downstream",
        }
    }
}

impl fmt::Display for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A proxy as the API reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proxy {
    /// Unique name.
    pub name: String,
    /// Listen address; after a successful bind the real port (never `:0`).
    pub listen: String,
    /// Upstream `host:port`, resolved on every new connection.
    pub upstream: String,
    /// Whether the proxy listens and forwards.
    pub enabled: bool,
    /// Toxics in the order they were added.
    #[serde(default)]
    pub toxics: Vec<Toxic>,
}

/// Body of `POST /proxies` and one element of `POST /populate`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewProxy {
    /// Unique name.
    pub name: String,
    /// Address to listen on; port 0 picks a free port.
    pub listen: String,
    /// Upstream `host:port`.
    pub upstream: String,
    /// Defaults to `true`, as in Toxiproxy.
    #[serde(default = "default_true")]
    pub enabled: bool,
}

impl NewProxy {
    /// An enabled proxy.
    pub fn new(
        name: impl Into<String>,
        listen: impl Into<String>,
        upstream: impl Into<String>,
    ) -> Self {
        NewProxy {
            name: name.into(),
            listen: listen.into(),
            upstream: upstream.into(),
            enabled: true,
        }
    }
}

fn default_true() -> bool {
    true
}

/// Body of `POST`/`PATCH /proxies/{name}`: fields left `None` keep their value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProxyUpdate {
    /// New listen address (the proxy rebinds; open connections close).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// New upstream (open connections close, as in Toxiproxy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// Enable or disable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// Answer of `POST /populate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Populated {
    /// The proxies that were created or updated, in request order.
    pub proxies: Vec<Proxy>,
}

/// Answer of `GET /version` (Toxiproxy ≥ 2.6 answers JSON; older ones text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    /// Version string.
    pub version: String,
}

/// A toxic: what happens to the bytes of one direction of every connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "ToxicWire", try_from = "ToxicWire")]
pub struct Toxic {
    /// Unique within its proxy; defaults to `<type>_<stream>`.
    pub name: String,
    /// Direction it acts on.
    pub stream: Stream,
    /// Probability in `[0, 1]` that the toxic applies to a given connection.
    pub toxicity: f32,
    /// Type and attributes.
    pub kind: ToxicKind,
}

impl Toxic {
    /// A toxic with Toxiproxy's default name (`<type>_<stream>`) and toxicity 1.
    pub fn new(kind: ToxicKind, stream: Stream) -> Self {
        Toxic {
            name: format!("{}_{}", kind.type_name(), stream),
            stream,
            toxicity: 1.0,
            kind,
        }
    }

    /// Renames the toxic.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets the toxicity (probability per connection).
    pub fn with_toxicity(mut self, toxicity: f32) -> Self {
        self.toxicity = toxicity;
        self
    }
}

/// The toxic types Toxiproxy defines, with their attributes.
///
/// Times are milliseconds unless noted, sizes are bytes, as in Toxiproxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToxicKind {
    /// Delays every chunk by `latency` ± `jitter` ms.
    Latency {
        /// Milliseconds added.
        latency: u64,
        /// Uniform ± jitter, milliseconds.
        jitter: u64,
    },
    /// Limits throughput to `rate` KB/s (0: unlimited).
    Bandwidth {
        /// Kilobytes (1000 bytes) per second.
        rate: u64,
    },
    /// Delays the close of the stream by `delay` ms.
    SlowClose {
        /// Milliseconds.
        delay: u64,
    },
    /// Drops all data; with `timeout > 0` closes the connection after that
    /// many ms, with 0 holds it open forever (a black hole).
    Timeout {
        /// Milliseconds; 0 means never close.
        timeout: u64,
    },
    /// Resets the connection (TCP RST) `timeout` ms after data arrives.
    ResetPeer {
        /// Milliseconds.
        timeout: u64,
    },
    /// Cuts chunks into pieces of `average_size` ± `size_variation` bytes,
    /// `delay` µs apart.
    Slicer {
        /// Average piece size, bytes.
        average_size: u64,
        /// Uniform ± variation, bytes.
        size_variation: u64,
        /// Microseconds between pieces.
        delay: u64,
    },
    /// Closes the connection once `bytes` bytes went through.
    LimitData {
        /// Byte budget of the direction.
        bytes: u64,
    },
    /// Does nothing (Toxiproxy's `noop`, useful to test a client's toxic calls).
    Noop,
}

impl ToxicKind {
    /// The Toxiproxy type name (`latency`, `reset_peer`, ...).
    pub fn type_name(&self) -> &'static str {
        match self {
            ToxicKind::Latency { .. } => "latency",
            ToxicKind::Bandwidth { .. } => "bandwidth",
            ToxicKind::SlowClose { .. } => "slow_close",
            ToxicKind::Timeout { .. } => "timeout",
            ToxicKind::ResetPeer { .. } => "reset_peer",
            ToxicKind::Slicer { .. } => "slicer",
            ToxicKind::LimitData { .. } => "limit_data",
            ToxicKind::Noop => "noop",
        }
    }

    /// The attributes as the JSON object Toxiproxy uses.
    pub fn attributes(&self) -> Map<String, Value> {
        let pairs: Vec<(&str, u64)> = match *self {
            ToxicKind::Latency { latency, jitter } => {
                vec![("latency", latency), ("jitter", jitter)]
            }
            ToxicKind::Bandwidth { rate } => vec![("rate", rate)],
            ToxicKind::SlowClose { delay } => vec![("delay", delay)],
            ToxicKind::Timeout { timeout } | ToxicKind::ResetPeer { timeout } => {
                vec![("timeout", timeout)]
            }
            ToxicKind::Slicer {
                average_size,
                size_variation,
                delay,
            } => vec![
                ("average_size", average_size),
                ("size_variation", size_variation),
                ("delay", delay),
            ],
            ToxicKind::LimitData { bytes } => vec![("bytes", bytes)],
            ToxicKind::Noop => Vec::new(),
        };
        pairs
            .into_iter()
            .map(|(k, v)| (k.to_owned(), Value::from(v)))
            .collect()
    }

    /// Builds a kind from a type name and an attribute object; missing
    /// attributes are 0 (Go's zero value, which is what Toxiproxy uses).
    pub fn from_parts(
        type_name: &str,
        attributes: &Map<String, Value>,
    ) -> Result<Self, ToxicError> {
        let get = |key: &str| -> Result<u64, ToxicError> {
            match attributes.get(key) {
                None | Some(Value::Null) => Ok(0),
                Some(v) => v
                    .as_u64()
                    // Toxiproxy clients sometimes send floats like 200.0.
                    .or_else(|| {
                        v.as_f64()
                            .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f <= u64::MAX as f64)
                            .map(|f| f as u64)
                    })
                    .ok_or_else(|| ToxicError::BadAttribute {
                        key: key.to_owned(),
                        value: v.to_string(),
                    }),
            }
        };
        Ok(match type_name {
            "latency" => ToxicKind::Latency {
                latency: get("latency")?,
                jitter: get("jitter")?,
            },
            "bandwidth" => ToxicKind::Bandwidth { rate: get("rate")? },
            "slow_close" => ToxicKind::SlowClose {
                delay: get("delay")?,
            },
            "timeout" => ToxicKind::Timeout {
                timeout: get("timeout")?,
            },
            "reset_peer" => ToxicKind::ResetPeer {
                timeout: get("timeout")?,
            },
            "slicer" => ToxicKind::Slicer {
                average_size: get("average_size")?,
                size_variation: get("size_variation")?,
                delay: get("delay")?,
            },
            "limit_data" => ToxicKind::LimitData {
                bytes: get("bytes")?,
            },
            "noop" => ToxicKind::Noop,
            _ => return Err(ToxicError::InvalidType),
        })
    }
}

/// The toxic as it travels: every field optional so that Toxiproxy's
/// defaults can be applied, and so that a partial update body parses.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ToxicWire {
    /// Name; defaults to `<type>_<stream>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Type name; required on creation.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Stream; defaults to downstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
    /// Toxicity; defaults to 1.0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toxicity: Option<f32>,
    /// Attributes; missing ones are 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<Map<String, Value>>,
}

impl From<Toxic> for ToxicWire {
    fn from(t: Toxic) -> Self {
        ToxicWire {
            name: Some(t.name),
            kind: Some(t.kind.type_name().to_owned()),
            stream: Some(t.stream.as_str().to_owned()),
            toxicity: Some(t.toxicity),
            attributes: Some(t.kind.attributes()),
        }
    }
}

impl TryFrom<ToxicWire> for Toxic {
    type Error = ToxicError;

    fn try_from(w: ToxicWire) -> Result<Self, ToxicError> {
        // Toxiproxy checks the stream before the type, so a body wrong in
        // both gets the stream message, here too.
        let stream = parse_stream(w.stream.as_deref())?;
        let type_name = w.kind.ok_or(ToxicError::InvalidType)?;
        let toxicity = w.toxicity.unwrap_or(1.0);
        validate_toxicity(toxicity)?;
        let kind = ToxicKind::from_parts(&type_name, &w.attributes.unwrap_or_default())?;
        let name = match w.name {
            Some(n) if !n.is_empty() => n,
            _ => format!("{type_name}_{stream}"),
        };
        Ok(Toxic {
            name,
            stream,
            toxicity,
            kind,
        })
    }
}

/// Parses a stream name, ignoring case as Toxiproxy does; absent means
/// downstream (Toxiproxy's default), but an empty string is refused (as there).
pub(crate) fn parse_stream(s: Option<&str>) -> Result<Stream, ToxicError> {
    match s.map(str::to_ascii_lowercase).as_deref() {
        None | Some("downstream") => Ok(Stream::Downstream),
        Some("upstream") => Ok(Stream::Upstream),
        Some(_) => Err(ToxicError::InvalidStream),
    }
}

/// Toxicity is a probability; NaN or out-of-range values are rejected
/// (stricter than Toxiproxy, which stores any float).
pub(crate) fn validate_toxicity(t: f32) -> Result<(), ToxicError> {
    if (0.0..=1.0).contains(&t) {
        Ok(())
    } else {
        Err(ToxicError::BadToxicity { toxicity: t })
    }
}

/// Why a toxic body was refused. The messages are Toxiproxy's where it has
/// one, so clients that match on them keep working.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ToxicError {
    /// The `stream` is neither `upstream` nor `downstream` (any case).
    #[error("stream was invalid, can be either upstream or downstream")]
    InvalidStream,
    /// The `type` is missing or not a toxic this server knows.
    #[error("invalid toxic type")]
    InvalidType,
    /// An attribute is not a non-negative integer.
    #[error("bad request body: attribute {key} must be a non-negative integer, got {value}")]
    BadAttribute {
        /// Attribute name.
        key: String,
        /// What was sent, as JSON.
        value: String,
    },
    /// Toxicity outside `[0, 1]`.
    #[error("bad request body: toxicity must be between 0 and 1, got {toxicity}")]
    BadToxicity {
        /// What was sent.
        toxicity: f32,
    },
}

impl From<ToxicError> for ApiError {
    fn from(e: ToxicError) -> Self {
        ApiError::bad_request(e.to_string())
    }
}

/// An error answer: `{"error": "...", "status": N}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{error} (HTTP {status})")]
pub struct ApiError {
    /// Human-readable message.
    pub error: String,
    /// HTTP status code, repeated in the body as Toxiproxy does.
    pub status: u16,
}

impl ApiError {
    /// 400 Bad Request.
    pub fn bad_request(msg: impl Into<String>) -> Self {
        ApiError {
            error: msg.into(),
            status: 400,
        }
    }

    /// 404 Not Found.
    pub fn not_found(msg: impl Into<String>) -> Self {
        ApiError {
            error: msg.into(),
            status: 404,
        }
    }

    /// 409 Conflict.
    pub fn conflict(msg: impl Into<String>) -> Self {
        ApiError {
            error: msg.into(),
            status: 409,
        }
    }

    /// 500 Internal Server Error (e.g. the listen address is taken).
    pub fn internal(msg: impl Into<String>) -> Self {
        ApiError {
            error: msg.into(),
            status: 500,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toxic_defaults_follow_toxiproxy() {
        let t: Toxic = serde_json::from_str(r#"{"type":"latency","attributes":{"latency":5}}"#)
            .expect("parses");
        assert_eq!(t.name, "latency_downstream");
        assert_eq!(t.stream, Stream::Downstream);
        assert_eq!(t.toxicity, 1.0);
        assert_eq!(
            t.kind,
            ToxicKind::Latency {
                latency: 5,
                jitter: 0
            }
        );
    }

    #[test]
    fn toxic_round_trips() {
        let t = Toxic::new(ToxicKind::ResetPeer { timeout: 7 }, Stream::Upstream);
        let json = serde_json::to_value(&t).expect("serializes");
        assert_eq!(json["type"], "reset_peer");
        assert_eq!(json["stream"], "upstream");
        assert_eq!(json["attributes"]["timeout"], 7);
        let back: Toxic = serde_json::from_value(json).expect("parses");
        assert_eq!(back, t);
    }

    #[test]
    fn streams_ignore_case_and_noop_has_no_attributes() {
        let t: Toxic =
            serde_json::from_str(r#"{"type":"noop","stream":"UpStream"}"#).expect("parses");
        assert_eq!(t.stream, Stream::Upstream);
        assert_eq!(t.name, "noop_upstream");
        assert_eq!(t.kind, ToxicKind::Noop);
        assert_eq!(
            serde_json::to_value(&t).expect("json")["attributes"],
            serde_json::json!({})
        );
    }

    #[test]
    fn bad_toxics_are_rejected() {
        for body in [
            r#"{"type":"nope"}"#,
            r#"{"attributes":{}}"#,
            r#"{"type":"latency","stream":"sideways"}"#,
            r#"{"type":"latency","stream":""}"#,
            r#"{"type":"latency","toxicity":2}"#,
            r#"{"type":"latency","attributes":{"latency":-1}}"#,
        ] {
            assert!(serde_json::from_str::<Toxic>(body).is_err(), "{body}");
        }
    }
}
