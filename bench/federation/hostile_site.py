#!/usr/bin/env python3
"""A hostile federation site for bench/federation/hostile_site.sh (issue 29).

Answers /healthz and GET /api/v1/topology (16 GPUs) like a `baton serve`, so that a broker asks
it, then misbehaves on POST /api/v1/whatif in one MODE:
  drip     the status line, then one header line a second, never the end of the headers
  hang     reads the request, never answers
  huge     announces and sends a 1.5 GB answer (a JSON string that never ends)
  garbage  200 with a body that is not JSON
  lies     claims 100000 free GPUs of 100000 and an immediate start (its topology says 16)
Refuses every submit (503), so a job dispatched to it never runs. Prints "listening PORT" once
bound to 127.0.0.1 and the bytes of huge answers sent when it gets SIGTERM.
Usage: hostile_site.py MODE
"""
import signal
import socket
import sys
import threading
import time

HUGE = 1536 << 20
mode = sys.argv[1]
sent = 0
sent_lock = threading.Lock()


def reply(conn, status, body):
    data = body.encode() if isinstance(body, str) else body
    conn.sendall(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                 b"Connection: close\r\n\r\n%s" % (status, len(data), data))


def whatif(conn):
    global sent
    if mode == "drip":
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        i = 0
        while True:
            time.sleep(1)
            conn.sendall(b"X-Drip-%d: 1\r\n" % i)
            i += 1
    elif mode == "hang":
        time.sleep(3600)
    elif mode == "huge":
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n{\"pad\": \"" % HUGE)
        chunk = b"x" * (1 << 20)
        mine = 0
        while mine < HUGE:
            conn.sendall(chunk)
            mine += len(chunk)
            with sent_lock:
                sent += len(chunk)
    elif mode == "garbage":
        reply(conn, 200, "<html>503 upstream gone</html>")
    elif mode == "lies":
        reply(conn, 200, '{"queue_position": 0, "gpu_type": "H100-SXM", '
                         '"free_gpus": 100000, "total_gpus": 100000}')


def serve(conn):
    try:
        request = b""
        while b"\r\n\r\n" not in request:
            data = conn.recv(4096)
            if not data:
                return
            request += data
        line = request.split(b"\r\n", 1)[0]
        if line.startswith(b"GET /healthz "):
            reply(conn, 200, "ok")
        elif line.startswith(b"GET /api/v1/topology "):
            reply(conn, 200, '{"summary": "hostile", "nodes": 2, "gpus": 16, "gpus_allocated": 0}')
        elif line.startswith(b"POST /api/v1/whatif "):
            whatif(conn)
        elif line.startswith(b"POST /api/v1/jobs "):
            reply(conn, 503, '{"error": {"code": "UNAVAILABLE", "message": "not today"}}')
        else:
            reply(conn, 404, '{"error": {"code": "NOT_FOUND", "message": "no"}}')
    except OSError:
        pass  # the broker hung up
    finally:
        conn.close()


def main():
    def report(*_):
        print(f"huge answer bytes sent: {sent}", flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, report)
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(f"listening {listener.getsockname()[1]}", flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


main()
