#!/usr/bin/env python3
"""The sidecar's memory against the connections it served (issue 34).

    benches/scripts/connection_memory.py SIDECAR WORDCOUNT [SCENARIO...]

SCENARIO: idle (6 rounds of 200 connections opened and closed without a
byte), wordcount (30 short `wordcount -w 2 --epochs 2` runs over TCP),
random (200 connections of 64 KB of random bytes), held (500 connections
held open at once, then closed), limit (1100 connections held open at
once: past --max-connections, if the sidecar has it). Each scenario starts a fresh
`SIDECAR run --listen tcp:0 -q` and prints its RSS (VmRSS, MB) at each
step; default: all four.
"""
import os
import re
import socket
import subprocess
import sys
import time


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def start(sidecar, extra=()):
    p = subprocess.Popen([sidecar, "run", "--listen", "tcp:0", "-q", *extra],
                         stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    line = p.stderr.readline()
    m = re.search(r"tcp:([0-9.]+):(\d+)", line)
    if not m:
        raise SystemExit(f"no address in {line!r}")
    time.sleep(0.5)
    return p, (m.group(1), int(m.group(2)))


def stop(p):
    p.send_signal(2)
    err = p.stderr.read()
    p.wait(timeout=60)
    return [l for l in err.splitlines() if "records," in l or "refused" in l or "closed" in l][-3:]


def connect(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(addr)
    return s


def idle(sidecar, _wc):
    p, addr = start(sidecar)
    print(f"idle: start {rss_mb(p.pid):.1f} MB")
    for r in range(6):
        conns = [connect(addr) for _ in range(200)]
        time.sleep(0.5)
        for c in conns:
            c.close()
        time.sleep(1.5)
        print(f"idle: after round {r + 1} (200 connections): {rss_mb(p.pid):.1f} MB")
    print("idle:", *stop(p))


def wordcount(sidecar, wc):
    p, addr = start(sidecar)
    print(f"wordcount: start {rss_mb(p.pid):.1f} MB")
    env = dict(os.environ, PROBE_SINK=f"tcp:{addr[0]}:{addr[1]}")
    for i in range(30):
        subprocess.run([wc, "-w", "2", "--epochs", "2"], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if (i + 1) % 10 == 0:
            time.sleep(2.5)
            print(f"wordcount: after {i + 1} runs: {rss_mb(p.pid):.1f} MB")
    print("wordcount:", *stop(p))


def random_bytes(sidecar, _wc):
    p, addr = start(sidecar)
    print(f"random: start {rss_mb(p.pid):.1f} MB")
    for _ in range(200):
        c = connect(addr)
        try:
            c.sendall(os.urandom(64 << 10))
        except OSError:
            pass
        c.close()
    time.sleep(2.5)
    print(f"random: after 200 connections of 64 KB of random bytes: {rss_mb(p.pid):.1f} MB")
    print("random:", *stop(p))


def held(sidecar, _wc, n=500, name="held"):
    p, addr = start(sidecar)
    print(f"{name}: start {rss_mb(p.pid):.1f} MB")
    conns = [connect(addr) for _ in range(n)]
    time.sleep(2)
    # A connection the sidecar closed reads as ended (b"" or a reset).
    open_ = 0
    for c in conns:
        c.setblocking(False)
        try:
            open_ += c.recv(1) != b""
        except BlockingIOError:
            open_ += 1
        except OSError:
            pass
    print(f"{name}: {n} connections held open, {open_} still open: {rss_mb(p.pid):.1f} MB")
    for c in conns:
        c.close()
    time.sleep(2.5)
    print(f"{name}: after closing them: {rss_mb(p.pid):.1f} MB")
    print(f"{name}:", *stop(p))


def limit(sidecar, wc):
    held(sidecar, wc, 1100, "limit")


SCENARIOS = {"idle": idle, "wordcount": wordcount, "random": random_bytes, "held": held, "limit": limit}

if __name__ == "__main__":
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    for name in sys.argv[3:] or list(SCENARIOS):
        SCENARIOS[name](sys.argv[1], sys.argv[2])
