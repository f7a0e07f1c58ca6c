"""A TCP port for a rendezvous server that the test starts later.

A port the kernel hands out for bind(("", 0)) comes from the ephemeral range,
and between the probe and the server's bind any other test's connection may
take it (errno 98, "Address already in use", seen in CI). Ports below the
ephemeral range are never handed out that way, so only another listener
picking the same random port could collide: one in thousands per pair.
"""
import random
import socket


def _ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def free_port():
    lo, hi = _ephemeral_range()
    first, last = (10000, lo - 1) if lo > 11000 else (hi + 1, 65535)
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randint(first, last)
        with socket.socket() as s:
            try:
                s.bind(("", port))  # both wildcards' torch's TCPStore binds
            except OSError:
                continue
            return port
    with socket.socket() as s:  # every try taken: the kernel's choice
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
