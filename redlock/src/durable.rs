//! Durable votes: a yes that counts only once the node has it on disk.
//!
//! # Why
//! A node's `OK` to a `SET` means the key is in its memory. If the server dies before it
//! writes the key to its append-only file (AOF), it comes back without it: the lease
//! that counted that vote may no longer hold a majority, and another client can be
//! granted the lock while the first still believes it holds it (the amnesia of
//! `quarantine`, but from a crash inside the fsync window rather than a restart without
//! persistence). With [`Durability::Fsync`], a yes counts only once the node reports the
//! write fsynced to its AOF.
//!
//! # How
//! `WAITAOF 1 0 <timeout>` (Redis and Valkey ≥ 7.2) blocks until the connection's last
//! write is fsynced to the local AOF, or the timeout passes, and answers how many
//! fsynced it (local, replicas). It is pipelined right behind the vote's request, on the
//! same connection and inside the node's order gate (see `node`), so it adds no round
//! trip: the reply comes as soon as the fsync is done. A yes whose `WAITAOF` answers
//! `[0, _]` becomes [`NodeError::NotDurable`]; its key is cleaned up like any failed
//! vote's.
//!
//! # Trade-offs
//! - The wait happens inside the node's deadline, so the fsync policy decides how long a
//!   vote takes. With `appendfsync always` the write is fsynced before the reply, and the
//!   wait is short. With `appendfsync everysec` a vote waits up to about a second: the
//!   node deadline (and the durability timeout below it) must be that long, which slows
//!   every attempt against a slow disk and eats validity.
//! - **Use `appendfsync always`.** At `everysec`, Valkey 8.1.8 answers `WAITAOF` with the
//!   local fsync done before it is: on a tick of its event loop soon after (100 ms apart),
//!   with no `fdatasync` in between (`strace`, and 20 `SET` + `WAITAOF`s 100 ms apart all
//!   answered `[1, 0]` in 8-151 ms, 2026-12-04). A yes counted so is in the AOF file,
//!   not on disk, and a machine crash can still take it back. The client cannot tell such
//!   an answer from a true one.
//! - `WAITAOF` blocks the connection on the server: later requests of this client to that
//!   node queue behind it until it answers. With `appendfsync always` that is a disk
//!   flush; with `everysec` it can be the full timeout.
//! - Releases and clean-ups are not waited for: a lost delete leaves a key that expires
//!   with its TTL, which is safe.
//! - Only the local disk is asked for; replicas are not (`numreplicas` is 0): Redlock's
//!   nodes are independent primaries.

use std::time::Duration;

use redis::RedisResult;

use crate::error::NodeError;

/// When a node's yes counts: once it is in the node's memory (the default), or once the
/// node has fsynced it to its append-only file (see [`Builder::durability`](crate::Builder::durability)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// A yes counts when the node answers it. A node that crashes before its next fsync
    /// may come back without the key (see the crate's Trade-offs, and
    /// [`RestartQuarantine`](crate::config::RestartQuarantine) for the other defence).
    #[default]
    Memory,
    /// A yes (acquire, fence write, extend) counts only once the node reports it fsynced
    /// to its append-only file, within `timeout`: `WAITAOF 1 0 <timeout>` is pipelined
    /// behind each such request. Needs `appendonly yes` on every node and Redis or Valkey
    /// ≥ 7.2; `timeout` must be below the node deadline.
    Fsync {
        /// How long a node may take to fsync a yes; whole milliseconds are sent.
        timeout: Duration,
    },
}

impl Durability {
    /// The `WAITAOF` timeout to send, `None` for [`Durability::Memory`].
    pub(crate) fn wait(self) -> Option<Duration> {
        match self {
            Durability::Memory => None,
            Durability::Fsync { timeout } => Some(timeout),
        }
    }
}

/// The `WAITAOF` asking for one local fsync within `timeout`.
pub(crate) fn waitaof(timeout: Duration) -> redis::Cmd {
    let ms = u64::try_from(timeout.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    let mut cmd = redis::cmd("WAITAOF");
    cmd.arg(1).arg(0).arg(ms);
    cmd
}

/// What a `WAITAOF` reply means for the yes it followed: `Ok` when the node fsynced it.
pub(crate) fn judge(reply: RedisResult<redis::Value>, timeout: Duration) -> Result<(), NodeError> {
    let value = match reply {
        Ok(value) => value,
        Err(e) => return Err(refused(&e)),
    };
    let local = match &value {
        redis::Value::Array(items) => match items.first() {
            Some(redis::Value::Int(n)) => *n,
            _ => return Err(odd(&value)),
        },
        _ => return Err(odd(&value)),
    };
    if local >= 1 {
        Ok(())
    } else {
        Err(NodeError::NotDurable { timeout })
    }
}

/// The error for a `WAITAOF` the server refused.
fn refused(e: &redis::RedisError) -> NodeError {
    let text = crate::error::redacted(e);
    let lower = text.to_ascii_lowercase();
    if lower.contains("appendonly is disabled") {
        NodeError::AofDisabled
    } else if lower.contains("unknown command") {
        NodeError::NoWaitAof(text)
    } else {
        NodeError::from_redis(e)
    }
}

fn odd(value: &redis::Value) -> NodeError {
    NodeError::Protocol(format!(
        "WAITAOF answered {value:?}, not an array of two integers"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    const T: Duration = Duration::from_millis(50);

    fn err(text: &'static str) -> RedisResult<Value> {
        Err(redis::RedisError::from((
            redis::ErrorKind::Client,
            "An error was signalled by the server",
            text.to_owned(),
        )))
    }

    #[test]
    fn a_local_fsync_counts() {
        assert_eq!(
            judge(Ok(Value::Array(vec![Value::Int(1), Value::Int(0)])), T),
            Ok(())
        );
    }

    #[test]
    fn no_fsync_in_time_is_not_durable() {
        assert_eq!(
            judge(Ok(Value::Array(vec![Value::Int(0), Value::Int(0)])), T),
            Err(NodeError::NotDurable { timeout: T })
        );
    }

    #[test]
    fn refusals_say_what_to_change() {
        assert_eq!(
            judge(
                err("WAITAOF cannot be used when numlocal is set but appendonly is disabled."),
                T
            ),
            Err(NodeError::AofDisabled)
        );
        assert!(matches!(
            judge(err("unknown command 'WAITAOF'"), T),
            Err(NodeError::NoWaitAof(_))
        ));
    }

    #[test]
    fn odd_replies_are_protocol_errors() {
        for v in [
            Value::Okay,
            Value::Array(vec![]),
            Value::Array(vec![Value::Nil]),
            Value::Int(1),
        ] {
            assert!(matches!(judge(Ok(v), T), Err(NodeError::Protocol(_))));
        }
    }

    #[test]
    fn the_timeout_is_whole_milliseconds_never_zero() {
        // `WAITAOF … 0` would block forever.
        let packed = waitaof(Duration::from_micros(10)).get_packed_command();
        assert!(String::from_utf8_lossy(&packed).ends_with("$1\r\n1\r\n"));
    }
}
