//! The Lua scripts, sent as plain `EVAL`: one request per node per step.
//!
//! Every script checks the token before touching the lock key, so no call of ours ever
//! deletes or extends a key that holds another owner's token.
//!
//! # Why `EVAL` and not `EVALSHA`
//! The safety of a failed attempt's clean-up, of a release and of a fence write rests on
//! one argument: whatever we sent a node earlier reaches it, on the same connection,
//! before whatever we send it later. `EVALSHA` through `redis::Script` breaks that
//! argument: on a node whose script cache is empty (a restart, `SCRIPT FLUSH`, a failover)
//! the first request answers `NOSCRIPT`, and the client then loads the script and sends
//! the call **again** — a second request that can arrive after a release we sent in the
//! meantime, setting a key nobody will delete (it stays for a full TTL). Loading the
//! scripts ourselves on connect would narrow that window but not close it (the cache can
//! be flushed between the load and the call), and treating `NOSCRIPT` as a failed vote
//! would fail every call after a flush until the next load.
//!
//! `EVAL` carries the source with every call: the server compiles it once and keeps it in
//! its cache, so the cost is the few hundred bytes of source per request, and there is no
//! second request, ever. Each step is exactly one command per node.

use redis::Cmd;

/// A Lua script sent with `EVAL`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lua(&'static str);

/// Arguments and bytes a script call takes after its keys: at most a token (32), a TTL or
/// a fence (≤ 20 digits), a release channel (a prefix and the key again) and a release id
/// (16): room for them besides the key counted once more.
const ARGS_AFTER_KEYS: usize = 4;
const BYTES_AFTER_KEYS: usize = 128;

/// `name`, with room for `args` more arguments holding `data` bytes in all. A command
/// whose buffers grow one argument at a time reallocates them three or four times; every
/// lock operation builds ten (measured with `chaos/examples/allocs.rs`).
pub(crate) fn command(name: &str, args: usize, data: usize) -> Cmd {
    let mut cmd = Cmd::with_capacity(args.saturating_add(1), data.saturating_add(name.len()));
    cmd.arg(name);
    cmd
}

impl Lua {
    /// `EVAL source <keys.len()> keys…`; the caller appends the arguments.
    pub(crate) fn call(self, keys: &[&[u8]]) -> Cmd {
        let keys_len: usize = keys.iter().map(|k| k.len()).sum();
        let mut cmd = command(
            "EVAL",
            keys.len().saturating_add(2 + ARGS_AFTER_KEYS),
            // The source, the key count, the keys, and the key once more in a channel.
            self.0
                .len()
                .saturating_add(2)
                .saturating_add(keys_len.saturating_mul(2))
                .saturating_add(BYTES_AFTER_KEYS),
        );
        cmd.arg(self.0).arg(keys.len());
        for key in keys {
            cmd.arg(*key);
        }
        cmd
    }
}

/// `SET lock token NX PX ttl`, and on success also return the stored fence (0 when absent);
/// −1 when the key is held. One atomic step, so the fence read happens-after the
/// previous holder's key is gone from this node.
pub(crate) const ACQUIRE_FENCED: Lua = Lua(r"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return tonumber(redis.call('GET', KEYS[2]) or '0') or 0
end
return -1");

/// Raise the fence to ARGV[2] if it is lower (never lower it), then report whether our
/// token still holds the lock here: 1 yes, 0 no; 2: yes, but the counter was already at
/// ARGV[2] or above (another grant took this token: see `fence.rs`, "clock jumps").
pub(crate) const FENCE_WRITE: Lua = Lua(r"
local current = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
local ahead = tonumber(ARGV[2]) <= current
if not ahead then
  redis.call('SET', KEYS[2], ARGV[2])
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ahead then return 2 end
return 1");

/// Compare-and-delete, then announce the release id ARGV[3] on channel ARGV[2] (none when
/// empty): 1 released, 0 already gone, −1 held by another.
pub(crate) const RELEASE: Lua = Lua(r"
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[2] ~= '' then redis.call('PUBLISH', ARGV[2], ARGV[3]) end
  return 1
end
if v then return -1 end
return 0");

/// Compare-and-PEXPIRE: 1 extended, 0 gone, −1 held by another. Never deletes. Only for
/// servers without `SET … IFEQ` (see `extend`).
pub(crate) const EXTEND: Lua = Lua(r"
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if v then return -1 end
return 0");

/// Delete the fence counter KEYS[2], only while our token ARGV[1] holds the lock key
/// KEYS[1] here: 1 deleted, 0 no counter, −1 the lock is not ours here (counter left
/// alone). Checked in the same atomic step as the delete, so a delete that arrives after
/// our key is gone — when the next holder may have written its token — touches nothing.
pub(crate) const RETIRE_FENCE: Lua = Lua(r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
return redis.call('DEL', KEYS[2])");
