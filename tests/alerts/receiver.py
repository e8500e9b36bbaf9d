"""A real webhook receiver for the alert tests: `http.server` on a loopback port, recording
every JSON body it is sent; it can answer the first `fail_first` requests with HTTP 500."""

from __future__ import annotations

import json
import queue
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver:
    def __init__(self, server: ThreadingHTTPServer):
        self.server = server
        self.bodies: queue.Queue = queue.Queue()
        self.requests = 0
        self.fail_first = 0
        self.fail_always = False

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/hook"

    def next(self, timeout: float = 30.0) -> dict:
        return self.bodies.get(timeout=timeout)


@contextmanager
def receiver(fail_first: int = 0, fail_always: bool = False):
    holder: dict = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            r = holder["r"]
            length = int(self.headers.get("Content-Length", 0))
            body = self.rfile.read(length)
            r.requests += 1
            if r.fail_always or r.requests <= r.fail_first:
                self.send_response(500)
                self.end_headers()
                return
            r.bodies.put(json.loads(body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    r = holder["r"] = Receiver(server)
    r.fail_first, r.fail_always = fail_first, fail_always
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield r
    finally:
        server.shutdown()
        server.server_close()
