"""The servers' CPU per release command, measured in isolation (docs/performance.md,
"where the servers' extra CPU goes", 2026-12-05).

Writes N pairs of `SET k tok NX PX 100000` + a release, as RESP, for one variant:
  ours         our release script (`RELEASE` in redlock/src/script.rs, copied as it was
               on 2026-12-05), with a channel: GET, DEL, PUBLISH
  ours-nopub   the same script with an empty channel: GET, DEL
  rslock       rslock 0.10's compare-and-delete as EVALSHA (SCRIPT LOAD it first)
  rslock-eval  the same as EVAL
  del          a bare DEL (the floor)

Run against one Valkey with appendonly yes, appendfsync everysec:
  python3 release-cost-2026-12-05.py ours 200000 > ours.resp
  t0=$(awk '{print $14+$15}' /proc/$PID/stat); redis-cli -p $PORT --pipe < ours.resp
  t1=$(awk '{print $14+$15}' /proc/$PID/stat); echo $(( (t1-t0)*10000000/200000 )) ns/pair
Piped, the socket work per command is small: what is left is each command's own cost.
"""
import hashlib
import sys

OURS = """
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[2] ~= '' then redis.call('PUBLISH', ARGV[2], ARGV[3]) end
  return 1
end
if v then return -1 end
return 0"""
RSLOCK = '''
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
else
  return 0
end
'''


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def main():
    variant, n = sys.argv[1], int(sys.argv[2])
    w = sys.stdout.buffer
    tok = "A" * 22
    sha = hashlib.sha1(RSLOCK.encode()).hexdigest()
    for i in range(n):
        k = "res:%d" % (i % 1000)
        w.write(resp("SET", k, tok, "NX", "PX", "100000"))
        if variant == "ours":
            w.write(resp("EVAL", OURS, "1", k, tok, "__redlock__:released:" + k, "0123456789abcdef"))
        elif variant == "ours-nopub":
            w.write(resp("EVAL", OURS, "1", k, tok, "", ""))
        elif variant == "rslock":
            w.write(resp("EVALSHA", sha, "1", k, tok))
        elif variant == "rslock-eval":
            w.write(resp("EVAL", RSLOCK, "1", k, tok))
        elif variant == "del":
            w.write(resp("DEL", k))
        else:
            sys.exit(f"unknown variant {variant}")


if __name__ == "__main__":
    main()
