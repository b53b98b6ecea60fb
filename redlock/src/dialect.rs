//! What a connection's server understands beyond the commands every Redis and Valkey has:
//! `SET … IFEQ`, read from the `INFO server` reply the handshake asks for anyway (see
//! `node`), and a native compare-and-delete, asked by a probe in the background. Nothing is
//! learnt from a server that will not say.
//!
//! # Why it is per connection
//! A node's address can be served by another build after a restart or failover: an upgrade
//! or a downgrade (a rollback, a failover to an older replica). So what a server speaks is
//! learnt again with every new connection, and forgotten with it. And a server can stop
//! understanding a command under an open connection (a proxy in front fails over to an
//! older server without closing ours): a command it refuses as unknown, or as a syntax it
//! lacks, changed nothing, so the call falls back to the script at once, and the
//! connection keeps to the script from then on.
//!
//! # `SET … IFEQ`: compare-and-expire without Lua
//! Valkey 8.1 and Redis 8.4 added `IFEQ` to `SET`: the write happens only while the key
//! holds the given value. `SET key token IFEQ token GET PX ttl` is our extend in one
//! command: it rewrites the same value with a new TTL only while our token is there, and
//! `GET` returns what was there before — our token (extended), nil (gone, nothing
//! created) or another owner's token (nothing changed). A server with Lua disabled (an ACL
//! without `@scripting`, a managed service that forbids `EVAL`) can then still extend.
//!
//! The version decides, and a wrong guess is safe: a server that does not know `IFEQ`
//! answers `ERR syntax error` and changes nothing, and an error is never counted as a
//! yes. That connection then goes back to the script (see `extend`).
//!
//! # `DELIFEQ` and `DELEX`: compare-and-delete without Lua
//! Valkey 9 has `DELIFEQ key value`, Redis 8.4 `DELEX key IFEQ value`. Whether a
//! connection's server has either is asked (`COMMAND INFO DELIFEQ DELEX`) by a probe that
//! the first release on that connection starts in the background: a release never waits
//! for it, and uses the script until the probe has answered (see `Node::learn_delete`).
//! A server that then answers the command with `ERR unknown command` deleted nothing; the
//! same call sends the script right behind it, on the same connection (see `lease`,
//! `delete_one`).
//!
//! A server's error quotes the arguments of a command it does not know, and ours carry the
//! owner token: the error is never shown as it came (see `error`, `redacted`).

/// The commands one connection's server understands beyond the common set. The default
/// is the common set alone (the Lua scripts for everything).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Dialect {
    /// `SET … IFEQ value`: Valkey ≥ 8.1, Redis ≥ 8.4.
    pub(crate) set_ifeq: bool,
    /// A native compare-and-delete, once the probe has found one.
    pub(crate) delete: NativeDelete,
}

/// A native compare-and-delete a connection's server has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum NativeDelete {
    /// Neither command, or not known yet: the Lua script.
    #[default]
    None,
    /// Valkey ≥ 9: `DELIFEQ key value`.
    DelIfEq,
    /// Redis ≥ 8.4: `DELEX key IFEQ value`.
    DelEx,
}

/// First Valkey with `SET … IFEQ`.
const VALKEY_SET_IFEQ: Version = Version(8, 1, 0);
/// First Redis with `SET … IFEQ`.
const REDIS_SET_IFEQ: Version = Version(8, 4, 0);

impl Dialect {
    /// Reads the `INFO server` text. Valkey names itself (`server_name:valkey`) and gives
    /// its own version as `valkey_version`, while its `redis_version` stays at 7.2.4 for
    /// the clients that check it; Redis gives only `redis_version`. A server that names
    /// itself something else, or whose version does not parse, gets the common set.
    pub(crate) fn of(info: &str) -> Dialect {
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .map(str::trim)
        };
        let at_least = |name: &str, first: Version| {
            field(name)
                .and_then(Version::parse)
                .is_some_and(|v| v >= first)
        };
        let set_ifeq = match (field("valkey_version"), field("server_name")) {
            (Some(_), _) => at_least("valkey_version", VALKEY_SET_IFEQ),
            (None, None | Some("redis")) => at_least("redis_version", REDIS_SET_IFEQ),
            (None, Some(_)) => false,
        };
        Dialect {
            set_ifeq,
            delete: NativeDelete::None,
        }
    }
}

/// Whether `e` is a server refusing a command's syntax (`ERR syntax error`): what a server
/// without `IFEQ` answers to `SET … IFEQ`.
pub(crate) fn not_understood(e: &redis::RedisError) -> bool {
    e.code() == Some("ERR")
        && e.detail()
            .is_some_and(|d| d.to_ascii_lowercase().contains("syntax error"))
}

/// Whether `e` is a server refusing a command it does not know (`ERR unknown command
/// 'DELIFEQ', …`): what a server without `DELIFEQ` or `DELEX` answers to it.
pub(crate) fn unknown_command(e: &redis::RedisError) -> bool {
    e.code() == Some("ERR")
        && e.detail()
            .is_some_and(|d| d.to_ascii_lowercase().starts_with("unknown command"))
}

/// `major.minor.patch`, compared in that order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Version(u32, u32, u32);

impl Version {
    /// `8.1.8`; a missing patch counts as 0, anything else that is not a number refuses.
    fn parse(s: &str) -> Option<Version> {
        let mut parts = s.split('.').map(str::parse::<u32>);
        let major = parts.next()?.ok()?;
        let minor = parts.next()?.ok()?;
        let patch = parts.next().unwrap_or(Ok(0)).ok()?;
        Some(Version(major, minor, patch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(lines: &[&str]) -> String {
        let mut text = String::from("# Server\r\n");
        for l in lines {
            text.push_str(l);
            text.push_str("\r\n");
        }
        text
    }

    #[test]
    fn valkey_is_judged_by_its_own_version_not_the_compatibility_one() {
        let at = |v: &str| {
            Dialect::of(&info(&[
                "redis_version:7.2.4",
                "server_name:valkey",
                &format!("valkey_version:{v}"),
            ]))
            .set_ifeq
        };
        assert!(at("8.1.8"));
        assert!(at("8.1.0"));
        assert!(at("9.0.0"));
        assert!(!at("8.0.4"));
        assert!(!at("7.2.11"));
        assert!(!at("eight"));
    }

    #[test]
    fn redis_from_8_4() {
        let at = |v: &str| Dialect::of(&info(&[&format!("redis_version:{v}")])).set_ifeq;
        assert!(at("8.4.0"));
        assert!(at("8.6.1"));
        assert!(at("255.255.255"), "an unstable build");
        assert!(!at("8.2.3"));
        assert!(!at("7.0.15"));
        assert!(!at(""));
    }

    #[test]
    fn an_unknown_server_or_no_answer_gets_the_scripts() {
        assert_eq!(Dialect::of(""), Dialect::default());
        assert!(!Dialect::of(&info(&["server_name:valkey", "redis_version:8.4.0"])).set_ifeq);
        assert!(!Dialect::of(&info(&["server_name:other", "redis_version:9.0.0"])).set_ifeq);
    }

    #[test]
    fn versions_order_by_number_not_text() {
        assert!(Version::parse("8.10.0") > Version::parse("8.4.0"));
        assert_eq!(Version::parse("8.4"), Some(Version(8, 4, 0)));
        assert_eq!(Version::parse("8"), None);
    }

    #[test]
    fn an_unknown_command_is_told_from_other_errors() {
        let reply = |bytes: &[u8]| {
            redis::parse_redis_value(bytes)
                .expect("parses")
                .extract_error()
                .expect_err("an error reply")
        };
        assert!(unknown_command(&reply(
            b"-ERR unknown command 'DELIFEQ', with args beginning with: 'k' 'v' \r\n"
        )));
        assert!(unknown_command(&reply(
            b"-ERR unknown command 'DELEX', with args beginning with: \r\n"
        )));
        assert!(!unknown_command(&reply(b"-ERR syntax error\r\n")));
        assert!(!unknown_command(&reply(
            b"-ERR unknown subcommand 'X'. Try COMMAND HELP.\r\n"
        )));
        assert!(!unknown_command(&reply(
            b"-NOPERM User locker has no permissions to run the 'delifeq' command\r\n"
        )));
    }

    #[test]
    fn a_syntax_error_is_told_from_other_errors() {
        let reply = |bytes: &[u8]| {
            redis::parse_redis_value(bytes)
                .expect("parses")
                .extract_error()
                .expect_err("an error reply")
        };
        assert!(not_understood(&reply(b"-ERR syntax error\r\n")));
        assert!(!not_understood(&reply(
            b"-NOPERM User locker has no permissions to run the 'set' command\r\n"
        )));
        assert!(!not_understood(&reply(
            b"-ERR unknown command 'DELIFEQ', with args beginning with: \r\n"
        )));
        assert!(!not_understood(&reply(
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
        )));
    }
}
