//! The compare-and-expire of an extend, on one node: `SET … IFEQ` where the connection's
//! server has it (see `dialect`), the `EXTEND` script elsewhere. Either is one command,
//! sent through the node's vote (in the order gate, with the clock-jump guard's `TIME`
//! behind it), and either has the same three outcomes.
//!
//! # Why not always the script
//! Some deployments switch Lua off (an ACL without `@scripting`, a managed service that
//! forbids `EVAL`). The unfenced acquire never needed it (`SET NX`); with `IFEQ` the
//! extend does not either, so a lock that is only taken, extended and left to expire works
//! there. A release still needs `DELIFEQ` (Valkey ≥ 9) or `DELEX` (Redis ≥ 8.4) on such a
//! server, and fencing always needs Lua.
//!
//! # A server that refuses `IFEQ`
//! The version is a guess (a fork may report one it does not match). A server without
//! `IFEQ` answers `ERR syntax error` and changes nothing; that answer stays an error for
//! this extend (never a yes, so never an unsafe one), and the connection goes back to the
//! script for the next one.

use redis::RedisResult;

use crate::conn::Conn;
use crate::node::{Link, Node};
use crate::script;
use crate::token::Token;

/// Extends `key` to `ttl_ms` on `link`'s connection if `token` holds it: 1 extended, 0 gone
/// (nothing created), −1 held by another (nothing changed).
pub(crate) async fn extend_one(
    c: &mut Conn,
    node: &Node,
    link: Link,
    key: &str,
    token: &Token,
    ttl_ms: u64,
) -> RedisResult<i64> {
    if !link.dialect.set_ifeq {
        return script::EXTEND
            .call(&[key.as_bytes()])
            .arg(token.as_str())
            .arg(ttl_ms)
            .query_async(c)
            .await;
    }
    // `GET` answers with the value before the write: ours only when the write happened.
    let before: RedisResult<Option<Vec<u8>>> =
        crate::script::command("SET", 7, key.len().saturating_add(96))
            .arg(key)
            .arg(token.as_str())
            .arg("IFEQ")
            .arg(token.as_str())
            .arg("GET")
            .arg("PX")
            .arg(ttl_ms)
            .query_async(c)
            .await;
    match before {
        Ok(Some(v)) if v == token.as_str().as_bytes() => Ok(1),
        Ok(Some(_)) => Ok(-1),
        Ok(None) => Ok(0),
        Err(e) => {
            if crate::dialect::not_understood(&e) {
                node.script_only(link);
            }
            Err(e)
        }
    }
}
