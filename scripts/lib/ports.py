"""Free ports for local clusters, out of the way of the ports the kernel hands out.

A free TCP port on 127.0.0.1 is picked at random *below* the kernel's ephemeral range:
every node binds its own port 0 and connects out from ephemeral ports, so a port from
that range (what binding port 0 gives) could be taken by a node's outgoing connection
before the scheduler meant for it binds it (the jobs schedulers bind their API only
once they have joined). Run as a script, prints one such port.
"""

import random
import socket

_GIVEN = set()


def free_port() -> int:
    """A free port on 127.0.0.1 below the ephemeral range, never the same twice in one
    process (port 0's answer if that range leaves no room below it)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    pick = random.SystemRandom()
    for _ in range(200):
        if low <= 11000:
            break
        port = pick.randrange(10000, low)
        if port in _GIVEN:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _GIVEN.add(port)
        return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    print(free_port())
