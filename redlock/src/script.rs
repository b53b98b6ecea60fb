//! The Lua scripts, each computed once (EVALSHA, reloaded after NOSCRIPT by `redis::Script`).
//!
//! Every script checks the token before touching the lock key, so no call of ours ever
//! deletes or extends a key that holds another owner's token.

use std::sync::LazyLock;

use redis::Script;

/// `SET lock token NX PX ttl`, and on success also return the stored fence (0 when absent);
/// −1 when the key is held. One atomic step, so the fence read happens-after the
/// previous holder's key is gone from this node.
pub(crate) static ACQUIRE_FENCED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return tonumber(redis.call('GET', KEYS[2]) or '0') or 0
end
return -1",
    )
});

/// Raise the fence to ARGV[2] if it is lower (never lower it), then report whether our
/// token still holds the lock here: 1 yes, 0 no.
pub(crate) static FENCE_WRITE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local current = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
if tonumber(ARGV[2]) > current then
  redis.call('SET', KEYS[2], ARGV[2])
end
if redis.call('GET', KEYS[1]) == ARGV[1] then return 1 end
return 0",
    )
});

/// Compare-and-delete, then announce the release id ARGV[3] on channel ARGV[2] (none when
/// empty): 1 released, 0 already gone, −1 held by another.
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[2] ~= '' then redis.call('PUBLISH', ARGV[2], ARGV[3]) end
  return 1
end
if v then return -1 end
return 0",
    )
});

/// Compare-and-PEXPIRE: 1 extended, 0 gone, −1 held by another. Never deletes.
pub(crate) static EXTEND: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if v then return -1 end
return 0",
    )
});
