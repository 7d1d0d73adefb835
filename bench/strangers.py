#!/usr/bin/env python3
"""Strangers at a cluster's doors, for bench/cluster_bench.sh's "f" runs: on
each HOST:PORT, COUNT connections that send nothing and COUNT that trickle one
byte a second, each opened again as soon as the node closes it (its gate
gives a connection handshake_timeout to prove the token). Runs until killed
or for at most --seconds; prints how many connections it opened and how many
the nodes closed.

    bench/strangers.py [--count 100] [--seconds 600] HOST:PORT...
"""
import argparse
import selectors
import socket
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("targets", nargs="+")
    args = ap.parse_args()
    targets = []
    for t in args.targets:
        host, port = t.rsplit(":", 1)
        targets.append((host, int(port)))
    sel = selectors.DefaultSelector()
    opened = closed = 0
    # Connections each (target, trickles) still lacks: all of them at first
    # (the nodes may not listen yet), one more each time a node closes one.
    missing = {(t, trickle): args.count for t in targets for trickle in (False, True)}

    def top_up():
        nonlocal opened
        for (target, trickle), n in missing.items():
            while n > 0:
                s = socket.socket()
                s.settimeout(1)
                try:
                    s.connect(target)
                except OSError:
                    s.close()
                    break  # not listening (yet): try again later
                s.setblocking(False)
                opened += 1
                n -= 1
                sel.register(s, selectors.EVENT_READ, (target, trickle))
            missing[(target, trickle)] = n

    end = time.monotonic() + args.seconds
    next_trickle = next_top_up = time.monotonic()
    try:
        while time.monotonic() < end:
            if time.monotonic() >= next_top_up:
                next_top_up += 0.5
                top_up()
            for key, _ in sel.select(timeout=0.2):
                s = key.fileobj
                try:
                    data = s.recv(4096)  # the node's hello, or its closing
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(s)
                    s.close()
                    closed += 1
                    missing[key.data] += 1
            if time.monotonic() >= next_trickle:
                next_trickle += 1.0
                for key in list(sel.get_map().values()):
                    if key.data[1]:
                        try:
                            key.fileobj.send(b"\x00")
                        except OSError:
                            pass
    except KeyboardInterrupt:
        pass
    finally:
        print(f"strangers: opened {opened} connections, the nodes closed {closed}", file=sys.stderr)


if __name__ == "__main__":
    import signal
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    main()
