"""`hvcu mock serve` / `hvcu mock wait`: run the deterministic mock endpoint, or wait until one answers."""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
import threading
import time
from pathlib import Path

from generation.mock.styles import DEFAULT_STYLES, MC_STYLES, parse_styles
from hvcu_tasks.argtypes import float_range, int_range
from hvcu_tasks.data import jsonio

DEFAULT_PORT = 8765


def _stop_on_sigterm() -> None:
    """Make SIGTERM (kill, a test's cleanup) stop the server as Ctrl-C does."""

    def stop(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop)


def _cmd_serve(args: argparse.Namespace) -> int:
    """Serve the mock until Ctrl-C or SIGTERM."""
    from generation.mock.answers import MockSettings, load_gold
    from generation.mock.server import base_url, make_server

    sources = args.gold or ["smoke"]
    gold = load_gold(sources)
    settings = MockSettings(seed=args.seed, accuracy=args.accuracy, styles=args.styles)
    try:
        server = make_server(args.host, args.port, settings, gold)
    except OSError as exc:
        why = "address already in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
        hint = " (pick another --port, or --port 0 for a free one)" if exc.errno == errno.EADDRINUSE else ""
        raise ValueError(f"mock: cannot listen on {args.host}:{args.port}: {why}{hint}") from None
    print(
        f"mock OpenAI endpoint: {base_url(server)} (seed {args.seed}, accuracy {args.accuracy:g}, "
        f"gold {'+'.join(sources)}: {len(gold.gold)} questions, styles {style_text(args.styles)}; Ctrl-C stops it)",
        flush=True,
    )
    _stop_on_sigterm()
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    print("mock: stopped", file=sys.stderr, flush=True)
    return 0


def _styles(text: str) -> tuple[tuple[str, int], ...]:
    """argparse type of --styles: the parsed styles, or a usage error naming what is wrong."""
    try:
        return parse_styles(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def style_text(styles: tuple[tuple[str, int], ...]) -> str:
    """Return styles as --styles takes them (weight 1 left out)."""
    return ",".join(name + (f":{weight}" if weight != 1 else "") for name, weight in styles)


def _exited(pid: int) -> bool:
    """Whether process pid has ended (gone, or a zombie not yet reaped by its shell)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False  # no /proc (macOS): the process exists
    return stat[stat.rindex(")") + 2 :].startswith("Z")


def _answering_pid(url: str) -> int | None:
    """Return the pid a mock at url reports (-1 for another OpenAI-compatible server), or None when none answers."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url}/models", timeout=2) as response:
            listing, _ = jsonio.loads_reply(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None
    mock = listing.get("hvcu_mock") if isinstance(listing, dict) else None
    return mock.get("pid", -1) if isinstance(mock, dict) else -1


def _cmd_wait(args: argparse.Namespace) -> int:
    """Wait until an endpoint (with --pid: that mock process) answers GET /v1/models at the given port."""
    url = f"http://{args.host}:{args.port}/v1"
    deadline = time.monotonic() + args.timeout
    while True:
        if args.pid is not None and _exited(args.pid):
            raise ValueError(f"the mock process {args.pid} ended before answering at {url} (its error is above)")
        pid = _answering_pid(url)
        if pid is not None and (args.pid is None or pid == args.pid):
            print(f"mock endpoint ready: {url}", flush=True)
            return 0
        if time.monotonic() >= deadline:
            other = {None: "", -1: " (another server answers there)"}.get(
                pid, f" (another mock answers there: pid {pid})"
            )
            raise ValueError(f"no endpoint answered GET {url}/models within {args.timeout:g} s{other}")
        time.sleep(0.1)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `mock serve` and `mock wait` on the `hvcu` command line."""
    mock = sub.add_parser(
        "mock",
        help="a deterministic local OpenAI-compatible endpoint for offline runs (mcts, direct, build-bench, lmms-eval)",
    )
    commands = mock.add_subparsers(dest="mock_command", required=True)
    serve = commands.add_parser(
        "serve",
        help="serve POST /v1/chat/completions (non-streaming) and GET /v1/models until Ctrl-C",
        description="Answer every prompt the toolkit sends (MCTS generation and judge, direct, build-bench stages "
        "and validator, multiple-choice questions) with seeded replies: the same request and --seed give the "
        "same reply. Anything else gets HTTP 400 naming what was not recognised.",
    )
    serve.add_argument(
        "--port",
        type=int_range(0, 65535),
        default=DEFAULT_PORT,
        help=f"TCP port (default {DEFAULT_PORT}; 0: a free one, printed on start)",
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)"
    )
    serve.add_argument(
        "--accuracy",
        type=float_range(0, 1),
        default=0.6,
        help="probability (default 0.6) that a multiple-choice reply names the gold key (questions in --gold only; "
        "others get a random key)",
    )
    serve.add_argument("--seed", type=int_range(0, 2**31 - 1), default=0, help="seeds every reply (default 0)")
    serve.add_argument(
        "--styles",
        type=_styles,
        default=parse_styles(DEFAULT_STYLES),
        metavar="NAME[:WEIGHT],...",
        help=f"how multiple-choice replies name the letter, drawn by weight (default {DEFAULT_STYLES}); styles: "
        f"{', '.join(MC_STYLES)}; the authors' parser misses answer-is-paren, paren, option, boxed and prose",
    )
    serve.add_argument(
        "--gold",
        action="append",
        metavar="SOURCE",
        help="dataset whose gold keys --accuracy uses: 'smoke' (default), a benchmark folder or file, "
        "'hub[:REPO@REV]'; repeat for several",
    )
    serve.set_defaults(func=_cmd_serve, gold=None)
    wait = commands.add_parser("wait", help="wait until an endpoint answers GET /v1/models (for scripts)")
    wait.add_argument(
        "--port",
        type=int_range(1, 65535),
        default=DEFAULT_PORT,
        help=f"TCP port of the endpoint (default {DEFAULT_PORT})",
    )
    wait.add_argument("--host", default="127.0.0.1", help="address of the endpoint")
    wait.add_argument(
        "--timeout",
        type=float_range(0, 3600, low_open=True),
        default=30.0,
        help="seconds before giving up (default 30)",
    )
    wait.add_argument(
        "--pid",
        type=int_range(1),
        help="the mock's process id (e.g. $! after `hvcu mock serve ... &`): wait for that very process, and stop "
        "with an error if it ended (a port in use) instead of talking to another server on the port",
    )
    wait.set_defaults(func=_cmd_wait)
