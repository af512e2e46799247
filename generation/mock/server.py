"""The mock's HTTP edge: OpenAI-compatible `POST /v1/chat/completions` and `GET /v1/models` on a local port.

Non-streaming only: a request with `"stream": true` gets a 400 saying so. Errors use OpenAI's error body
(`{"error": {"message", "type", "code"}}`) and are logged to stderr, one line each.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TextIO

from generation.mock.answers import GoldIndex, MockSettings, Unrecognised, reply_to
from hvcu_tasks.data import jsonio

MODEL_ID = "mock"
UNKNOWN_GOLD = "mock: a multiple-choice question whose gold key is unknown"
MAX_BODY = 256 * 1024 * 1024  # bytes; a request body larger than this is refused


def _error(status: int, message: str, kind: str = "invalid_request_error") -> tuple[int, dict[str, Any]]:
    """Return an OpenAI-style error response."""
    return status, {"error": {"message": message, "type": kind, "code": status}}


def _usage(body: dict[str, Any], text: str) -> dict[str, int]:
    """Return rough token counts (words) of the request's text and the reply."""
    prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []) if isinstance(m, dict))
    completion = len(text.split())
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _content_length(value: str | None) -> tuple[int, tuple[int, dict[str, Any]] | None]:
    """Return (body length, None), or (0, (4xx status, error body)) for a Content-Length that is unusable."""
    text = (value or "0").strip()
    if not text.isdigit() or not text.isascii():
        return 0, _error(400, f"Content-Length {value!r} is not a whole number of bytes")
    length = int(text[:20])  # 20 digits are more than any size; a longer string is over the limit anyway
    if length > MAX_BODY or len(text) > 20:
        return 0, _error(413, f"request body of {text[:20]} bytes is over the mock's {MAX_BODY}")
    return length, None


def respond(
    method: str, path: str, raw: bytes, settings: MockSettings, gold: GoldIndex, log: Callable[[str], None]
) -> tuple[int, dict[str, Any]]:
    """Return (HTTP status, JSON body) for one request; errors are logged with `log`."""
    route = path.split("?", 1)[0].rstrip("/")
    if method == "GET" and route == "/v1/models":
        model = {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "hvcu"}
        server = {"pid": os.getpid(), "seed": settings.seed, "accuracy": settings.accuracy, "styles": settings.styles}
        return 200, {"object": "list", "data": [model], "hvcu_mock": server}
    if route != "/v1/chat/completions":
        status, payload = _error(
            404, f"no route {method} {path}: the mock serves POST /v1/chat/completions and GET /v1/models", "not_found"
        )
    elif method != "POST":
        status, payload = _error(405, f"{method} {path}: use POST")
    else:
        try:
            body = jsonio.loads(raw, source="request body")
        except jsonio.JsonReadError as exc:
            status, payload = _error(400, f"the request body is not usable JSON: {exc.reason}")
        else:
            if isinstance(body, dict) and body.get("stream"):
                status, payload = _error(400, 'streaming is not supported by the mock: send "stream": false')
            else:
                try:
                    reply = reply_to(body, settings, gold)
                except Unrecognised as exc:
                    status, payload = _error(400, f"mock: {exc}")
                else:
                    if not reply.gold_known:
                        sources = "+".join(gold.sources) or "none"
                        log(
                            f"{UNKNOWN_GOLD} (not in --gold {sources}): answered a seeded random letter, not --accuracy"
                        )
                    return 200, {
                        "id": "chatcmpl-mock",
                        "object": "chat.completion",
                        "created": 0,
                        "model": str(body.get("model", MODEL_ID)),
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": reply.text},
                            }
                        ],
                        "usage": _usage(body, reply.text),
                    }
    log(f"mock: HTTP {status}: {payload['error']['message']}")
    return status, payload


def make_server(
    host: str, port: int, settings: MockSettings, gold: GoldIndex, stderr: TextIO | None = None
) -> ThreadingHTTPServer:
    """Return a bound (not yet serving) threaded HTTP server for the mock; raise OSError when the port is taken."""
    lock = threading.Lock()
    out = stderr if stderr is not None else sys.stderr

    unknown_gold = [0]

    def log(line: str) -> None:
        with lock:
            if line.startswith(UNKNOWN_GOLD):  # said once, not once per question
                unknown_gold[0] += 1
                if unknown_gold[0] > 1:
                    return
                line += " (said once; later ones are not logged)"
            print(line, file=out, flush=True)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as clients with connection pools expect
        disable_nagle_algorithm = True

        def _send(self, method: str) -> None:
            length, problem = _content_length(self.headers.get("Content-Length"))
            if problem is not None:
                status, payload = problem
                self.close_connection = True  # the body's end is unknown: this connection cannot be reused
            else:
                raw = self.rfile.read(length) if length else b""
                status, payload = respond(method, self.path, raw, settings, gold, log)
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802 (http.server naming)
            self._send("POST")

        def do_GET(self) -> None:  # noqa: N802
            self._send("GET")

        def log_message(self, *args: Any) -> None:
            pass  # one line per error is logged by `respond`; successful requests are not

    return _Server((host, port), Handler)


class _Server(ThreadingHTTPServer):
    """The threaded server; request threads never keep the process alive after shutdown."""

    daemon_threads = True
    request_queue_size = 256  # the default 5 refuses connections when many clients connect at once


def base_url(server: ThreadingHTTPServer) -> str:
    """Return the server's OpenAI base URL (with /v1)."""
    host, port = server.server_address[:2]
    return f"http://{host}:{port}/v1"
