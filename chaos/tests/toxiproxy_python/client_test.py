"""Every call of toxiproxy-python (PyPI, 0.1.1) against `chaos toxiproxy`.

Run by chaos/tests/toxiproxy_python_client.rs with the venv that
scripts/install-deps makes: client_test.py API_HOST API_PORT ECHO_ADDR.
Traffic goes through the proxies to an echo server the Rust test runs.
Exits non-zero (with the failing assertion) on any mismatch.
"""

import socket
import sys
import time

from toxiproxy import Toxiproxy
from toxiproxy.exceptions import InvalidToxic, NotFound, ProxyExists

API_HOST, API_PORT, ECHO = sys.argv[1], int(sys.argv[2]), sys.argv[3]


def addr(listen):
    host, port = listen.rsplit(":", 1)
    return host, int(port)


def echo_time(listen, payload=b"hello", timeout=3.0):
    """Round trip through a proxy; the seconds it took."""
    start = time.monotonic()
    with socket.create_connection(addr(listen), timeout=timeout) as s:
        s.sendall(payload)
        got = b""
        while len(got) < len(payload):
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("closed after %r" % got)
            got += chunk
    assert got == payload, got
    return time.monotonic() - start


def refused(listen):
    try:
        socket.create_connection(addr(listen), timeout=1.0).close()
        return False
    except OSError:
        return True


def main():
    tp = Toxiproxy()
    tp.update_api_consumer(API_HOST, API_PORT)
    assert tp.running() is True
    assert b'"version"' in tp.version(), tp.version()
    assert tp.proxies() == {}

    # create: explicit listen, and the client's own default (127.0.0.1:0).
    p = tp.create(upstream=ECHO, name="py_echo", listen="127.0.0.1:0")
    assert p.name == "py_echo" and p.enabled is True and p.upstream == ECHO
    assert not p.listen.endswith(":0"), p.listen
    echo_time(p.listen)
    q = tp.create(upstream=ECHO, name="py_default")
    echo_time(q.listen)
    try:
        tp.create(upstream=ECHO, name="py_echo")
        raise AssertionError("duplicate create must raise")
    except ProxyExists:
        pass
    assert set(tp.proxies()) == {"py_echo", "py_default"}
    assert tp.get_proxy("py_echo").listen == p.listen
    assert tp.get_proxy("nope") is None

    # Toxics: add (defaults filled in), list, get, effect on traffic, destroy.
    p.add_toxic(type="latency", attributes={"latency": 200})
    p.add_toxic(type="bandwidth", stream="upstream", name="bw", toxicity=1.0,
                attributes={"rate": 1000})
    toxics = p.toxics()
    assert set(toxics) == {"latency_downstream", "bw"}, toxics
    lat = p.get_toxic("latency_downstream")
    assert (lat.type, lat.stream, lat.toxicity) == ("latency", "downstream", 1.0)
    assert lat.attributes == {"latency": 200, "jitter": 0}, lat.attributes
    assert p.get_toxic("nope") is None
    took = echo_time(p.listen)
    assert took >= 0.2, took
    try:
        p.add_toxic(type="nope")
        raise AssertionError("bad toxic must raise")
    except InvalidToxic:
        pass
    try:
        p.add_toxic(type="latency")  # same default name again: 409
        raise AssertionError("duplicate toxic must raise")
    except ProxyExists:
        pass
    assert p.destroy_toxic("latency_downstream") is True
    try:
        p.destroy_toxic("latency_downstream")
        raise AssertionError("destroying a missing toxic must raise")
    except NotFound:
        pass
    assert echo_time(p.listen) < 0.2

    # timeout toxic on an open connection, then reset() heals everything.
    p.add_toxic(type="timeout", attributes={"timeout": 0})
    try:
        echo_time(p.listen, timeout=0.3)
        raise AssertionError("timeout toxic must hold the data")
    except socket.timeout:
        pass
    assert tp.reset() is True
    assert p.toxics() == {}
    echo_time(p.listen)

    # disable / enable / down().
    p.disable()
    assert p.enabled is False and refused(p.listen)
    assert tp.get_proxy("py_echo").enabled is False
    p.enable()
    echo_time(p.listen)
    with p.down():
        assert refused(p.listen)
    echo_time(p.listen)

    # populate: an identical proxy is left alone, a new one is created.
    populated = tp.populate([
        {"name": "py_echo", "upstream": ECHO, "listen": p.listen},
        {"name": "py_new", "upstream": ECHO, "listen": "127.0.0.1:0"},
    ])
    assert [x.name for x in populated] == ["py_new"], populated
    echo_time(populated[0].listen)

    # destroy, destroy_all.
    assert tp.destroy(q) is True
    assert tp.destroy("not a proxy") is False
    assert tp.get_proxy("py_default") is None
    try:
        q.destroy()
        raise AssertionError("destroying twice must raise")
    except NotFound:
        pass
    tp.destroy_all()
    assert tp.proxies() == {}
    assert refused(p.listen)
    print("toxiproxy-python: every call passed")


if __name__ == "__main__":
    main()
