//! The stack file: a deployment `chaos run --stack FILE` attaches to instead of bringing
//! its own up (see [`super::attached`]). TOML, versioned:
//!
//! ```toml
//! version = 1
//! name = "staging"                        # shown in reports
//!
//! [toxiproxy]                             # optional: proxy faults and amnesia need it
//! api = "http://10.0.0.9:8474"
//!
//! [postgres]                              # optional: --pg-url overrides it
//! url = "postgres://chaos:chaos@10.0.0.9:5432/chaos"
//!
//! [[node]]
//! url = "redis://10.0.0.9:26379"          # what workers use (through the proxy)
//! admin_url = "redis://10.0.0.1:6379"     # direct: reset and checks
//! proxy = "node0"                         # this node's proxy at [toxiproxy].api
//! clock_file = "/run/faketime/node0"      # optional: a libfaketime timestamp file
//! control = { kind = "docker", container = "valkey", engine = "tcp://10.0.0.1:2375" }
//! # or { kind = "local", pid_file = "…", command = ["valkey-server", "…"], env = { … }, log = "…" }
//! # or { kind = "none" }
//! ```
//!
//! A node's `control` says how node faults reach it: `docker` (kill, start, pause,
//! unpause a container, on the local engine or the one at `engine`: `unix://`, `tcp://`,
//! `http://`), `local` (signals to the pid in `pid_file`; start runs `command`) or `none`.
//! Faults no control can apply make their scenarios *not applicable*.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The one version this build reads and writes.
pub const STACK_VERSION: u32 = 1;

/// A deployment to attach to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stack {
    /// Format version; must be [`STACK_VERSION`].
    pub version: u32,
    /// Shown in reports (`attached: NAME`).
    #[serde(default = "default_name")]
    pub name: String,
    /// The Toxiproxy (ours or Shopify's) in front of the nodes, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toxiproxy: Option<ToxiproxySection>,
    /// The database the fenced counter lives in, if not given on the command line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres: Option<PostgresSection>,
    /// The primaries, in order: node `i` is the `i`-th entry.
    #[serde(rename = "node", default)]
    pub nodes: Vec<StackNode>,
}

fn default_name() -> String {
    "stack".into()
}

/// `[toxiproxy]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToxiproxySection {
    /// Base URL of its HTTP API.
    pub api: String,
}

/// `[postgres]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostgresSection {
    /// URL or key=value DSN.
    pub url: String,
}

/// One `[[node]]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StackNode {
    /// `redis://` URL workers use (through its proxy when there is one).
    pub url: String,
    /// Direct `redis://` URL for reset and checks; defaults to `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_url: Option<String>,
    /// Name of this node's proxy at `[toxiproxy].api`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
    /// A libfaketime timestamp file the server reads (`FAKETIME_TIMESTAMP_FILE`), on this
    /// host: clock faults write offsets to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_file: Option<PathBuf>,
    /// How node faults reach it.
    #[serde(default)]
    pub control: Control,
}

/// How node faults reach a node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Control {
    /// No node faults (proxy and client faults still apply).
    #[default]
    None,
    /// A container on a Docker engine.
    Docker {
        /// Container name or id.
        container: String,
        /// `unix:///path`, `tcp://host:port` or `http://host:port`; default: the local
        /// engine (`DOCKER_HOST` or the default socket).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        engine: Option<String>,
    },
    /// A process on this host.
    Local {
        /// File holding the server's pid (rewritten when `chaos` starts it again).
        pid_file: PathBuf,
        /// Program and arguments that start it again (in the foreground).
        command: Vec<String>,
        /// Extra environment for `command`.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        env: BTreeMap<String, String>,
        /// Working directory for `command`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<PathBuf>,
        /// Where its output goes (appended); default: discarded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        log: Option<PathBuf>,
    },
}

impl Control {
    /// `"docker"`, `"local"` or `"none"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Control::None => "none",
            Control::Docker { .. } => "docker",
            Control::Local { .. } => "local",
        }
    }
}

/// A stack file that cannot be used, with where and what to change.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StackError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Not TOML, or a field of the wrong shape.
    #[error("{path}:{line}: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line of the problem.
        line: usize,
        /// The parser's message (names the field).
        message: String,
    },
    /// Well formed, but not usable.
    #[error("{path}: {field}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Dotted path of the field, e.g. `node[2].admin_url`.
        field: String,
        /// What to change.
        message: String,
    },
}

impl Stack {
    /// Reads and validates `path`.
    ///
    /// # Errors
    /// [`StackError`] naming the line or field to change.
    pub fn read(path: &Path) -> Result<Stack, StackError> {
        let text = std::fs::read_to_string(path).map_err(|source| StackError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Stack::parse(&text, path)
    }

    /// Parses and validates `text` (`path` is for messages).
    ///
    /// # Errors
    /// [`StackError`] naming the line or field to change.
    pub fn parse(text: &str, path: &Path) -> Result<Stack, StackError> {
        let stack: Stack = toml::from_str(text).map_err(|e| StackError::Syntax {
            path: path.to_path_buf(),
            line: e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
                .unwrap_or(1),
            message: e.message().trim().to_owned(),
        })?;
        stack
            .validate()
            .map_err(|(field, message)| StackError::Invalid {
                path: path.to_path_buf(),
                field,
                message,
            })?;
        Ok(stack)
    }

    /// As TOML, in the format [`Stack::parse`] reads.
    pub fn to_toml(&self) -> String {
        let body = toml::to_string_pretty(self).unwrap_or_else(|e| format!("# unprintable: {e}\n"));
        format!(
            "# chaos stack file (version {STACK_VERSION}): `chaos run --stack FILE` attaches to it.\n{body}"
        )
    }

    /// Writes [`Stack::to_toml`] to `path`.
    ///
    /// # Errors
    /// The write's I/O error.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, self.to_toml())
    }

    /// `(field, what to change)` for the first problem.
    fn validate(&self) -> Result<(), (String, String)> {
        if self.version != STACK_VERSION {
            return Err((
                "version".into(),
                format!(
                    "version {} is not supported; this chaos reads version {STACK_VERSION}",
                    self.version
                ),
            ));
        }
        if self.nodes.is_empty() || self.nodes.len() > 64 {
            return Err((
                "node".into(),
                format!(
                    "{} [[node]] entries; describe between 1 and 64 primaries",
                    self.nodes.len()
                ),
            ));
        }
        if let Some(t) = &self.toxiproxy {
            reqwest::Url::parse(&t.api).map_err(|e| {
                (
                    "toxiproxy.api".into(),
                    format!("{:?} is not a URL: {e}", t.api),
                )
            })?;
        }
        let mut proxies = std::collections::BTreeSet::new();
        for (i, n) in self.nodes.iter().enumerate() {
            let field = |f: &str| format!("node[{i}].{f}");
            redis_url(&n.url).map_err(|m| (field("url"), m))?;
            if let Some(a) = &n.admin_url {
                redis_url(a).map_err(|m| (field("admin_url"), m))?;
            }
            if let Some(p) = &n.proxy {
                if self.toxiproxy.is_none() {
                    return Err((
                        field("proxy"),
                        format!("proxy {p:?} named but there is no [toxiproxy] api to reach it"),
                    ));
                }
                if !proxies.insert(p.clone()) {
                    return Err((field("proxy"), format!("proxy {p:?} is named twice")));
                }
            }
            match &n.control {
                Control::Docker { container, engine } => {
                    if container.is_empty() {
                        return Err((field("control.container"), "empty container name".into()));
                    }
                    if let Some(e) = engine
                        && !["unix://", "tcp://", "http://"]
                            .iter()
                            .any(|s| e.starts_with(s))
                    {
                        return Err((
                            field("control.engine"),
                            format!("{e:?}: use unix:///path, tcp://host:port or http://host:port"),
                        ));
                    }
                }
                Control::Local { command, .. } if command.is_empty() => {
                    return Err((
                        field("control.command"),
                        "empty: give the program and arguments that start the server".into(),
                    ));
                }
                Control::Local { .. } | Control::None => {}
            }
        }
        Ok(())
    }
}

fn redis_url(u: &str) -> Result<(), String> {
    let parsed = reqwest::Url::parse(u).map_err(|e| format!("{u:?} is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "redis" | "rediss") || parsed.host_str().is_none() {
        return Err(format!("{u:?}: use redis://host:port"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
version = 1
name = "five hosts"
[toxiproxy]
api = "http://127.0.0.1:8474"
[[node]]
url = "redis://127.0.0.1:26379"
admin_url = "redis://10.0.0.1:6379"
proxy = "node0"
control = { kind = "docker", container = "valkey", engine = "tcp://10.0.0.1:2375" }
[[node]]
url = "redis://127.0.0.1:26380"
control = { kind = "local", pid_file = "/tmp/p", command = ["valkey-server"] }
[[node]]
url = "redis://127.0.0.1:26381"
"#;

    fn parse(t: &str) -> Result<Stack, StackError> {
        Stack::parse(t, Path::new("s.toml"))
    }

    #[test]
    fn reads_every_control_and_round_trips() {
        let s = parse(GOOD).expect("valid");
        assert_eq!(s.nodes.len(), 3);
        assert_eq!(s.nodes[0].control.kind(), "docker");
        assert_eq!(s.nodes[1].control.kind(), "local");
        assert_eq!(s.nodes[2].control, Control::None);
        assert_eq!(parse(&s.to_toml()).expect("round trip"), s);
    }

    #[test]
    fn errors_name_the_line_or_the_field() {
        let e = parse(&GOOD.replace("admin_url", "admin_ulr")).unwrap_err();
        assert!(
            matches!(&e, StackError::Syntax { line: 8, .. }) && e.to_string().contains("admin_ulr"),
            "{e}"
        );
        let e = parse(&GOOD.replace("http://127.0.0.1:8474", "nope")).unwrap_err();
        assert!(e.to_string().contains("toxiproxy.api"), "{e}");
        let e = parse(&GOOD.replace("redis://10.0.0.1:6379", "http://x")).unwrap_err();
        assert!(e.to_string().contains("node[0].admin_url"), "{e}");
        let e = parse(&GOOD.replace("version = 1", "version = 2")).unwrap_err();
        assert!(e.to_string().contains("version 2 is not supported"), "{e}");
        let e = parse(&GOOD.replace("tcp://10.0.0.1:2375", "ssh://x")).unwrap_err();
        assert!(e.to_string().contains("node[0].control.engine"), "{e}");
        let no_proxy = GOOD.replace("[toxiproxy]\napi = \"http://127.0.0.1:8474\"\n", "");
        let e = parse(&no_proxy).unwrap_err();
        assert!(e.to_string().contains("no [toxiproxy]"), "{e}");
        let e = parse(&GOOD.replace("kind = \"docker\"", "kind = \"ssh\"")).unwrap_err();
        assert!(matches!(e, StackError::Syntax { .. }), "{e}");
    }
}
