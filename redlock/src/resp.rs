//! RESP2 replies on the lean connection (`conn`): where one ends in the bytes read so far
//! ([`frame_end`]), and what it says ([`decode`]).
//!
//! `redis::parse_redis_value` gives the same values, but builds a parser with an 8 KiB
//! read buffer for every call: counted with `chaos/examples/allocs.rs`, 81 of the 113 KB
//! a lock operation allocated (two replies from each of five nodes), where the replies
//! themselves are a few bytes each. [`decode`] reads the shapes the lock's commands
//! answer with (`+`, `:`, `$`, `*`) in place and leaves everything else — error replies,
//! whose kinds only the `redis` crate can build, and anything malformed — to the crate's
//! parser, so what a caller gets is the crate's answer either way (a property test holds
//! the two together).

use redis::{RedisResult, Value};

/// What the RESP2 reply `frame` says: one whole value, as [`frame_end`] cut it. The same
/// result as `redis::parse_redis_value(frame)`.
pub(crate) fn decode(frame: &[u8]) -> RedisResult<Value> {
    match decode_at(frame, 0, 0) {
        Some((value, end)) if end == frame.len() => Ok(value),
        _ => redis::parse_redis_value(frame),
    }
}

/// The value starting at `buf[start]` and where it ends, for the plain shapes; `None`
/// for an error reply or anything the `redis` crate should judge.
fn decode_at(buf: &[u8], start: usize, depth: usize) -> Option<(Value, usize)> {
    let rest = buf.get(start..)?;
    let &kind = rest.first()?;
    let cr = rest.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(rest.get(1..cr)?).ok()?;
    let line_end = start.checked_add(cr)?.checked_add(2)?;
    // The crate trims a length or an integer before parsing it.
    let number = || line.trim().parse::<i64>().ok();
    match kind {
        b'+' if line == "OK" => Some((Value::Okay, line_end)),
        b'+' => Some((Value::SimpleString(line.to_owned()), line_end)),
        b':' => Some((Value::Int(number()?), line_end)),
        b'$' => {
            let Ok(len) = usize::try_from(number()?) else {
                return Some((Value::Nil, line_end));
            };
            let end = line_end.checked_add(len)?;
            let bytes = buf.get(line_end..end)?;
            let after = end.checked_add(2)?;
            (buf.get(end..after)? == b"\r\n").then(|| (Value::BulkString(bytes.to_vec()), after))
        }
        b'*' => {
            if depth >= MAX_DEPTH {
                return None;
            }
            let Ok(len) = usize::try_from(number()?) else {
                return Some((Value::Nil, line_end));
            };
            // The count is the server's word, not yet checked against the bytes.
            let mut items = Vec::with_capacity(len.min(16));
            let mut end = line_end;
            for _ in 0..len {
                let (item, next) = decode_at(buf, end, depth.saturating_add(1))?;
                items.push(item);
                end = next;
            }
            Some((Value::Array(items), end))
        }
        _ => None,
    }
}

/// Deepest nesting of arrays accepted in a reply (the lock's replies have none but the
/// `COMMAND INFO` probe's; a deeper one breaks the connection instead of the stack).
const MAX_DEPTH: usize = 16;

/// Where the RESP2 value starting at `buf[start]` ends (exclusive), `None` if `buf` does
/// not hold all of it yet; an error for bytes that are not RESP2.
pub(crate) fn frame_end(buf: &[u8], start: usize) -> Result<Option<usize>, String> {
    frame_end_at(buf, start, 0)
}

fn frame_end_at(buf: &[u8], start: usize, depth: usize) -> Result<Option<usize>, String> {
    let Some(rest) = buf.get(start..) else {
        return Ok(None);
    };
    let Some(&kind) = rest.first() else {
        return Ok(None);
    };
    let Some(cr) = rest.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    // Within `buf`, so no overflow.
    let line_end = start.saturating_add(cr).saturating_add(2);
    let number = || -> Result<i64, String> {
        rest.get(1..cr)
            .and_then(|n| std::str::from_utf8(n).ok())
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| "a reply with a bad length".to_owned())
    };
    match kind {
        b'+' | b'-' | b':' => Ok(Some(line_end)),
        b'$' => {
            let Ok(len) = usize::try_from(number()?) else {
                return Ok(Some(line_end)); // $-1: nil
            };
            let end = line_end
                .checked_add(len)
                .and_then(|e| e.checked_add(2))
                .ok_or("a reply too long")?;
            Ok((end <= buf.len()).then_some(end))
        }
        b'*' => {
            if depth >= MAX_DEPTH {
                return Err("a reply nested too deep".into());
            }
            let mut end = line_end;
            for _ in 0..number()?.max(0) {
                match frame_end_at(buf, end, depth.saturating_add(1))? {
                    Some(e) => end = e,
                    None => return Ok(None),
                }
            }
            Ok(Some(end))
        }
        other => Err(format!("a reply of unknown type {other:#04x} (not RESP2)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn encode(v: &Value, out: &mut Vec<u8>) {
        match v {
            Value::Nil => out.extend_from_slice(b"$-1\r\n"),
            Value::Int(i) => out.extend_from_slice(format!(":{i}\r\n").as_bytes()),
            Value::Okay => out.extend_from_slice(b"+OK\r\n"),
            Value::BulkString(b) => {
                out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
                out.extend_from_slice(b);
                out.extend_from_slice(b"\r\n");
            }
            Value::Array(items) => {
                out.extend_from_slice(format!("*{}\r\n", items.len()).as_bytes());
                for i in items {
                    encode(i, out);
                }
            }
            _ => unreachable!("not generated"),
        }
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Nil),
            Just(Value::Okay),
            any::<i64>().prop_map(Value::Int),
            // Bulk strings may hold CR LF and anything else.
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(Value::BulkString),
        ];
        leaf.prop_recursive(3, 24, 5, |inner| {
            proptest::collection::vec(inner, 0..5).prop_map(Value::Array)
        })
    }

    proptest! {
        /// Replies split anywhere are framed exactly where they end, and only when whole.
        #[test]
        fn frames_end_where_values_end(values in proptest::collection::vec(value(), 1..6), cut in 0usize..400) {
            let mut bytes = Vec::new();
            let mut ends = Vec::new();
            for v in &values {
                encode(v, &mut bytes);
                ends.push(bytes.len());
            }
            let cut = cut.min(bytes.len());
            let seen = &bytes[..cut];
            let mut start = 0;
            let mut found = Vec::new();
            while let Some(end) = frame_end(seen, start).expect("valid RESP2") {
                prop_assert_eq!(
                    redis::parse_redis_value(&seen[start..end]).expect("parses"),
                    values[found.len()].clone()
                );
                found.push(end);
                start = end;
            }
            let whole: Vec<usize> = ends.iter().copied().filter(|e| *e <= cut).collect();
            prop_assert_eq!(found, whole);
        }
    }

    /// A RESP2 reply as bytes: any shape a server may send, error replies included.
    fn reply() -> impl Strategy<Value = Vec<u8>> {
        let line = "[ -~]{0,20}";
        let code = prop::sample::select(vec!["ERR", "NOSCRIPT", "WRONGTYPE", "LOADING", "NOPERM"]);
        let leaf = prop_oneof![
            Just(b"+OK\r\n".to_vec()),
            line.prop_map(|l| format!("+{l}\r\n").into_bytes()),
            prop::sample::select(vec!["OKAY", "OK ", "PONG", "QUEUED", ""])
                .prop_map(|l| format!("+{l}\r\n").into_bytes()),
            (code, line).prop_map(|(c, l)| format!("-{c} {l}\r\n").into_bytes()),
            any::<i64>().prop_map(|i| format!(":{i}\r\n").into_bytes()),
            Just(b"$-1\r\n".to_vec()),
            Just(b"*-1\r\n".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(|b| {
                let mut v = format!("${}\r\n", b.len()).into_bytes();
                v.extend(b);
                v.extend(b"\r\n");
                v
            }),
        ];
        leaf.prop_recursive(3, 24, 5, |inner| {
            proptest::collection::vec(inner, 0..5).prop_map(|items| {
                let mut v = format!("*{}\r\n", items.len()).into_bytes();
                for i in items {
                    v.extend(i);
                }
                v
            })
        })
    }

    /// `decode` and the `redis` crate give the same value, or both an error.
    fn agree(bytes: &[u8]) -> Result<(), TestCaseError> {
        match (decode(bytes), redis::parse_redis_value(bytes)) {
            (Ok(ours), Ok(theirs)) => prop_assert_eq!(ours, theirs),
            (Err(_), Err(_)) => {}
            (ours, theirs) => {
                prop_assert!(false, "{bytes:?}: ours {ours:?}, the crate's {theirs:?}")
            }
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn replies_decode_as_the_redis_crate_decodes_them(bytes in reply()) {
            prop_assert_eq!(frame_end(&bytes, 0), Ok(Some(bytes.len())));
            agree(&bytes)?;
        }

        /// One byte of a reply changed: wherever the framing still finds a whole value,
        /// both decoders agree (an error for an error).
        #[test]
        fn damaged_replies_decode_as_the_redis_crate_decodes_them(
            mut bytes in reply(),
            at in any::<prop::sample::Index>(),
            with in prop::sample::select(b"\r\n+-:$*0123456789 x\xff".to_vec()),
        ) {
            let i = at.index(bytes.len());
            bytes[i] = with;
            if let Ok(Some(end)) = frame_end(&bytes, 0) {
                agree(&bytes[..end])?;
            }
        }
    }

    #[test]
    fn the_lock_replies_are_read_in_place() {
        assert_eq!(decode(b"+OK\r\n").ok(), Some(Value::Okay));
        assert_eq!(
            decode(b"+OKAY\r\n").ok(),
            Some(Value::SimpleString("OKAY".into()))
        );
        assert_eq!(decode(b"$-1\r\n").ok(), Some(Value::Nil));
        assert_eq!(
            decode(b"*2\r\n:7\r\n$2\r\nab\r\n").ok(),
            Some(Value::Array(vec![
                Value::Int(7),
                Value::BulkString(b"ab".to_vec())
            ]))
        );
        assert_eq!(
            decode_at(b"-ERR no\r\n", 0, 0),
            None,
            "errors go to the crate"
        );
        assert!(matches!(decode(b"-ERR no\r\n"), Ok(Value::ServerError(_))));
    }

    #[test]
    fn errors_and_unknown_types() {
        assert_eq!(frame_end(b"-ERR no\r\n", 0), Ok(Some(9)));
        assert_eq!(frame_end(b"-ERR no\r", 0), Ok(None));
        assert!(frame_end(b"%2\r\n", 0).is_err());
        assert!(frame_end(b"$x\r\n", 0).is_err());
        assert_eq!(frame_end(b"*-1\r\n", 0), Ok(Some(5)));
        assert_eq!(frame_end(b"$-1\r\n", 0), Ok(Some(5)));
        assert!(frame_end(&b"*1\r\n".repeat(100), 0).is_err());
    }
}
