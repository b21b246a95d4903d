#!/usr/bin/env python3
"""Runs the real `opencode serve` behind a loopback proxy that cuts its event stream, for the
real-CLI tier (Python 3 stdlib only). planwire starts it in place of opencode:

    CUT_EVENTS_OPENCODE=/path/to/opencode  cut_events.py serve --hostname 127.0.0.1 --port 0

It starts opencode with the same argv and environment (as its child, in its process group,
so planwire's stop reaches both), waits for opencode's `listening on` line, listens on a free
port of its own and prints `opencode server listening on http://127.0.0.1:PROXY`. Every
connection is relayed to opencode, except `GET /event`: the first subscription is cut (both
sockets closed) once it carried CUT_AFTER_DELTAS `message.part.delta` events (default 1); every
later one is refused with 503, so the client must follow the session through the other routes.
It exits when opencode exits.
"""

import os
import re
import socket
import subprocess
import sys
import threading

CUT_AFTER = int(os.environ.get("CUT_AFTER_DELTAS", "1"))
state = {"subscriptions": 0}
lock = threading.Lock()


def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def relay_events(client, upstream, head):
    """Relays the stream up to the end of the CUT_AFTER-th delta event, and not a byte more
    (one read may hold many events: the rest of the answer must not slip through)."""
    upstream.sendall(head)
    seen, pending = 0, b""
    try:
        while True:
            data = upstream.recv(65536)
            if not data:
                break
            pending += data
            # Whole events only: up to the last blank line.
            cut = pending.rfind(b"\n\n")
            if cut < 0:
                continue
            events, pending = pending[: cut + 2], pending[cut + 2 :]
            out = b""
            for event in events.split(b"\n\n")[:-1]:
                out += event + b"\n\n"
                seen += b'"message.part.delta"' in event
                if seen >= CUT_AFTER:
                    break
            client.sendall(out)
            if seen >= CUT_AFTER:
                print("[cut_events] cutting the event stream", file=sys.stderr, flush=True)
                break
    except OSError:
        pass
    for s in (client, upstream):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()


def handle(client, port):
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = client.recv(65536)
        if not chunk:
            client.close()
            return
        head += chunk
    if head.startswith(b"GET /event"):
        with lock:
            state["subscriptions"] += 1
            first = state["subscriptions"] == 1
        if not first:
            client.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            client.close()
            return
        upstream = socket.create_connection(("127.0.0.1", port))
        relay_events(client, upstream, head)
        return
    upstream = socket.create_connection(("127.0.0.1", port))
    upstream.sendall(head)
    threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
    pipe(client, upstream)


def main():
    server = subprocess.Popen([os.environ["CUT_EVENTS_OPENCODE"], *sys.argv[1:]], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, text=True)
    port = None
    for line in server.stdout:
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            port = int(m.group(1))
            break
        print(line, end="", flush=True)
    if port is None:
        sys.exit(server.wait())
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(f"opencode server listening on http://127.0.0.1:{listener.getsockname()[1]}", flush=True)

    def accept():
        while True:
            client, _ = listener.accept()
            threading.Thread(target=handle, args=(client, port), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    threading.Thread(target=lambda: [None for _ in server.stdout], daemon=True).start()
    sys.exit(server.wait())


if __name__ == "__main__":
    main()
