"""A deterministic OpenAI-compatible chat-completions server on 127.0.0.1, recording every request.

`fault(n, request)` may return (status, headers, body bytes) to inject an error for the n-th request
(0-based); `delay_s` makes every reply slow. `max_in_flight` records the peak of concurrent requests;
`body_sizes` the size in bytes of each request body as it came over the wire (same order as `requests`).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Fault = Callable[[int, dict], "tuple[int, dict, bytes] | None"]


class FakeOpenAI:
    """Serve /v1/chat/completions with `answer(request_json) -> str`; keep the requests for assertions."""

    def __init__(self, answer: Callable[[dict], str], fault: Fault | None = None, delay_s: float = 0.0):
        self.answer = answer
        self.fault = fault
        self.delay_s = delay_s
        self.requests: list[dict] = []
        self.body_sizes: list[int] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep connections alive, as real servers do
            disable_nagle_algorithm = True  # headers and body go out at once (no delayed-ACK stall)

            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = json.loads(raw)
                with owner._lock:
                    n = len(owner.requests)
                    owner.requests.append(body)
                    owner.body_sizes.append(len(raw))
                    owner.in_flight += 1
                    owner.max_in_flight = max(owner.max_in_flight, owner.in_flight)
                try:
                    self._respond(n, body)
                finally:
                    with owner._lock:
                        owner.in_flight -= 1

            def _respond(self, n: int, body: dict) -> None:
                if owner.delay_s:
                    time.sleep(owner.delay_s)
                injected = owner.fault(n, body) if owner.fault else None
                if injected is not None:
                    status, headers, raw = injected
                    self.send_response(status)
                    for name, value in {"Content-Type": "application/json", **headers}.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                    return
                text = owner.answer(body)
                payload = {
                    "id": "cmpl-fake",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", "fake"),
                    "choices": [
                        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """Return the server's /v1 base URL."""
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
