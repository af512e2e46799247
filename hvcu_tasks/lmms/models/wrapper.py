"""`hvcu_context`: runs multi-round chats on ANY lmms-eval chat model, one batched call per round per chunk.

    --model hvcu_context --model_args inner=openai,model_version=gpt-4o,base_url=...,chunk_size=64

The round driver is rounds.py; the request cache (`cache=`, `reuse=`, `run=`) is request_cache.py. Every argument
but those and `chunk_size` goes to the inner model. docs/evaluation.md, "The context setting", says what chunks
cost, which lines a run prints (the endpoint, failed requests) and how a run whose every request failed ends.
"""

from __future__ import annotations

import contextlib
import copy
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from lmms_eval.api.instance import Instance
from lmms_eval.api.model import lmms

from hvcu_tasks.data.public import public_url
from hvcu_tasks.lmms.models.cache_runs import LockUnsupported, reuse_setting, run_name
from hvcu_tasks.lmms.models.request_cache import (
    API_BACKENDS,
    FAILURE_MARKERS,
    IDENTITY_ATTRS,
    RequestCache,
    cache_location,
    cache_setting,
    chat_client,
    hook_client,
    model_identity,
    resolved_attributes,
)
from hvcu_tasks.lmms.models.rounds import reply_text as _text
from hvcu_tasks.lmms.models.rounds import run_rounds
from hvcu_tasks.lmms.models.routing import CHAIN_ROUNDS, hint_once
from hvcu_tasks.lmms.plugin import end_after_results, installed_lmms_eval, serve

DEFAULT_CHUNK_SIZE = 64
"""Documents whose chains run together (one inner call per round) when `chunk_size` is not given."""
REQUEST_FAILED, BUDGET_EXCEEDED = FAILURE_MARKERS
"""How lmms-eval begins a failed request's text; what it returns for one its token budget skipped (not a failure)."""
RANK_PADDING = "__padding_only__"
"""lmms-eval's metadata mark on the copies it adds so that every rank sends as many requests: none of the run's."""
OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
"""Where the openai client sends requests when neither base_url nor the environment names an endpoint."""


def is_lmms_eval(program: str) -> bool:
    """Whether argv[0] is lmms-eval's CLI (the `lmms-eval` script or `python -m lmms_eval`), read, never changed."""
    path = Path(program)
    return path.name in ("lmms-eval", "lmms_eval") or (path.name == "__main__.py" and path.parent.name == "lmms_eval")


def is_padding(request: Any) -> bool:
    """Whether a request is a copy lmms-eval added to even out the ranks' shares (RANK_PADDING)."""
    return bool((getattr(request, "metadata", None) or {}).get(RANK_PADDING))


def failure_of(reply: Any) -> str | None:
    """Return why a reply is no answer (the backend's error, an empty reply, no reply), or None for a real reply."""
    text = _text(reply)
    if text is None:
        return "no reply"
    if text.startswith(REQUEST_FAILED):
        return " ".join(text.partition("]")[2].split()) or text
    if text.startswith(BUDGET_EXCEEDED):
        return None
    return None if text.strip() else "an empty reply"


def endpoint_of(inner: Any, model_args: Mapping[str, Any], client: Any = None) -> str | None:
    """Return the URL an inner model sends its requests to, without user, password or query; None for a local one."""
    url = getattr(client, "base_url", None) if client is not None else None
    if url is None:
        url = model_args.get("base_url") or getattr(inner, "base_url", None)
    if not isinstance(url, str) and url is not None:
        url = str(url)
    return public_url(url).rstrip("/") if url else None


def endpoint_line(backend: str, model: Any, endpoint: str, base_url_given: bool) -> str:
    """Return the start line that names the inner backend, its model and the endpoint every request goes to."""
    if base_url_given:
        where = endpoint
    elif endpoint == OPENAI_DEFAULT_URL:
        where = f"{endpoint} (the OpenAI API, the client's default: no base_url given)"
    else:
        where = f"{endpoint} (no base_url given: the client's environment names it)"
    named = model if model not in (None, "") else "(not given)"
    return f"hvcu_context: inner {backend}, model {named}, endpoint {where}"


def all_failed_line(
    total: int, endpoint: str | None, inner: str, first_error: str | None, results_written: bool = True
) -> str:
    """Return the one line a run whose every request failed ends with: where they went and what to check."""
    files = (
        "lmms-eval wrote the results (n_failed_requests counts them)" if results_written else "no results were written"
    )
    if endpoint:
        return (
            f"hvcu_context: error: all {total} requests failed (endpoint {endpoint}; first error: {first_error}); "
            f"check base_url, the API key and that the server is up and serves this model; {files}"
        )
    return (
        f"hvcu_context: error: all {total} requests of the inner model {inner} failed (first error: {first_error}); "
        f"see its messages above; {files}"
    )


def across_ranks(value: Any) -> list[Any]:
    """Return every rank's `value` (rank order) when torch.distributed runs a group of several, else [value]."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return [value]
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, value)
    return gathered


def chunk_size_of(value: Any) -> int:
    """Return the `chunk_size` model argument as a positive int; raise a clear error otherwise."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"hvcu_context: chunk_size must be a positive integer (documents whose rounds run together), got {value!r}"
        )
    return value


@contextlib.contextmanager
def _usage_errors() -> Iterator[None]:
    """Turn the wrapper's own ValueError into one stderr line and exit status 2 under lmms-eval's command line.

    lmms-eval's CLI catches every Exception, prints its traceback and exits 0, so a mistyped model argument would
    look like a finished run; SystemExit passes through it. Called from code (simple_evaluate, a script), the
    ValueError is raised as it is.
    """
    try:
        yield
    except ValueError as exc:
        if not is_lmms_eval(sys.argv[0] if sys.argv else ""):
            raise
        message = " ".join(str(exc).split()).removeprefix("hvcu_context: ")
        print(f"hvcu_context: error: {message}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None


class ContextWrapper(lmms):
    """Drive an inner chat model round by round over chunks of documents (true multi-turn messages)."""

    is_simple = False

    def __init__(
        self,
        inner: str = "",
        chunk_size: Any = DEFAULT_CHUNK_SIZE,
        cache: Any = None,
        reuse: Any = None,
        run: Any = None,
        **inner_args: Any,
    ) -> None:
        """Build the inner model named by `inner` with every model argument except chunk_size, cache, reuse, run."""
        super().__init__()
        with _usage_errors():
            if not inner:
                raise ValueError("hvcu_context needs --model_args inner=<lmms-eval model>,<its arguments>")
            size = chunk_size_of(chunk_size)
            cache_setting(cache), reuse_setting(reuse), run_name(run)  # bad ones fail before the inner model is built
        from lmms_eval.models import get_model

        cls = get_model(inner)
        with _usage_errors():
            self._check_chat(cls, inner)
        self._attach(cls(**inner_args), inner, size)
        with _usage_errors():
            self._open_cache(cache, inner_args, reuse, run)

    @classmethod
    def around(
        cls,
        inner: lmms,
        name: str = "",
        chunk_size: Any = DEFAULT_CHUNK_SIZE,
        cache: Any = None,
        model_args: Mapping[str, Any] | None = None,
        reuse: Any = None,
        run: Any = None,
    ) -> ContextWrapper:
        """Wrap an already-built lmms-eval chat model (for code that builds its models itself).

        `model_args` (what it was built with) and its IDENTITY_ATTRS identify it to the request cache; when neither
        says which model it is, `cache=on` is an error. `run` and `reuse`: request_cache.py.
        """
        size = chunk_size_of(chunk_size)
        cls._check_chat(type(inner), name or type(inner).__name__)
        wrapper = cls.__new__(cls)
        lmms.__init__(wrapper)
        wrapper._attach(inner, name or type(inner).__name__, size)
        wrapper._open_cache(cache, dict(model_args or {}), reuse, run)
        return wrapper

    @staticmethod
    def _check_chat(model_cls: type, name: str) -> None:
        """Reject models that take a text prompt instead of chat messages."""
        if getattr(model_cls, "is_simple", True):
            raise ValueError(
                f"hvcu_context: inner model {name!r} resolves to a simple (text-prompt) model that cannot take "
                "multi-turn chat messages; pick a chat backend (openai, vllm, qwen2_5_vl, qwen3_vl, llava_hf, ...)"
            )

    def _attach(self, inner: lmms, name: str, chunk_size: int) -> None:
        """Hold the inner model and share its task_dict (the evaluator fills ours, the inner model reads it)."""
        self.inner_name = name
        self.inner = inner
        self.chunk_size = chunk_size
        self.task_dict = inner.task_dict
        self.rounds_sent: list[int] = []  # batch size of every inner call made for multi-round requests
        self.request_cache: RequestCache | None = None
        self.model_identity: dict[str, Any] = {}
        """What the results file records as the served model (plugin.py's dump_config hook reads it)."""
        self._client_cached = False
        self._inner_calls = 0
        self.endpoint: str | None = None
        """Where the inner model sends its requests (without user, password or query); None for a local model."""
        self._asked = 0
        self._failed = 0
        self._first_error: str | None = None
        serve(self)

    def _open_cache(self, cache: Any, model_args: Mapping[str, Any], reuse: Any = None, run: Any = None) -> None:
        """Note the served model's identity, name the endpoint, open the request cache's run and hook the client.

        By default a model nothing identifies or an unusable folder leaves the cache off; asked for, it is an error.
        """
        setting, reuse, run = cache_setting(cache), reuse_setting(reuse), run_name(run)
        client, attrs = chat_client(self.inner), resolved_attributes(self.inner)
        self.endpoint = endpoint_of(self.inner, model_args, client)
        if self.endpoint:
            model = next((attrs[k] for k in ("model_version", "model", "model_name") if k in attrs), None)
            given = bool(model_args.get("base_url")) or client is None  # else the client chose it
            self._say(endpoint_line(self.inner_name, model, self.endpoint, given))
        url = getattr(client, "base_url", None)  # where the client really sends; a local model: the lmms-eval release
        identity = model_identity(self.inner_name, model_args, None if url is None else str(url), attrs)
        if client is None:
            identity["lmms_eval"] = installed_lmms_eval()
        self.model_identity = copy.deepcopy(identity)
        api = client is not None or self.inner_name in API_BACKENDS or bool(model_args.get("base_url"))  # paid
        root = cache_location(setting, api)

        def off(why: str, error: str) -> None:
            if setting != "auto":
                raise ValueError(f"hvcu_context: {error}")
            self._say(f"hvcu_context: request cache off ({why})")

        if root is None and api:
            why = "cache=off" if setting == "off" else "the toolkit's caches are turned off (HVCU_CACHE_DIR)"
            self._say(f"hvcu_context: request cache off ({why}); a killed run pays again for every request")
        if root is None:
            return None
        if not (identity["args"] or identity.get("resolved")):  # nothing says which model it is
            why = f"nothing identifies the inner model {self.inner_name}: no model arguments and no "
            why += f"{', '.join(IDENTITY_ATTRS)} attribute"
            return off(why, f"cache={setting}, but {why}; pass the model's arguments (model_args)")
        try:
            cache = RequestCache(root, identity, reuse, self.rank, self.world_size, report=True, name=run)
        except LockUnsupported as exc:
            why = f"{exc.strerror}; give a cache=PATH on a local disk"
            return off(f"{exc.strerror}: runs cannot be told apart", f"cache={setting}: {why}")
        except OSError as exc:
            why, advice = f"{root}: {exc.strerror or exc}", "give a writable cache=PATH or cache=off"
            return off(f"cannot create {why}", f"cannot create the request cache {why}; {advice}")
        self.request_cache = cache
        self.model_identity["request_cache"] = {"identity": cache.folder.name, "run": cache.run_id}
        if client is not None:
            hook_client(client, cache)
            self._client_cached = True
        for line in cache.start_lines():
            self._say(line)

    def end_run(self) -> None:
        """End the request cache's run now (else at garbage collection or exit): finished, or left to resume."""
        if self.request_cache is not None:
            self.request_cache.end()

    def _say(self, line: str) -> None:
        """Print one line to stderr on rank 0."""
        if self.rank == 0:
            print(line, file=sys.stderr)

    @property
    def rank(self) -> int:
        """The inner model's process rank."""
        return self.inner.rank

    @property
    def world_size(self) -> int:
        """The inner model's world size."""
        return self.inner.world_size

    def __getattr__(self, name: str) -> Any:
        """Delegate everything else (accelerator, device, ...) to the inner model."""
        if name in {"inner", "__setstate__"}:
            raise AttributeError(name)
        return getattr(self.inner, name)

    def set_cache_hook(self, cache_hook: Any) -> None:
        """Install the cache hook on the wrapper and the inner model."""
        super().set_cache_hook(cache_hook)
        self.inner.set_cache_hook(cache_hook)

    def clean(self) -> None:
        """Free the inner model's memory; lmms-eval calls this once every rank's requests are done, so judge the run."""
        self.inner.clean()
        self._judge()

    def _judge(self) -> None:
        """Say how many requests of the run failed (all ranks together); a run whose every request failed ends non-zero
        under lmms-eval's command line, after its results files are written (plugin.end_after_results)."""
        mine = (self._failed, self._asked, self._first_error)
        self._failed = self._asked = 0
        self._first_error = None
        everyone = across_ranks(mine)
        failed = sum(f for f, _t, _e in everyone)
        total = sum(t for _f, t, _e in everyone)
        first = next((e for _f, _t, e in everyone if e), None)
        if not failed:
            end_after_results(None)
            return
        where = f"endpoint {self.endpoint}" if self.endpoint else f"inner model {self.inner_name}"
        self._say(f"hvcu_context: {failed} of {total} requests failed ({where}); first error: {first}")
        if failed < total or not is_lmms_eval(sys.argv[0] if sys.argv else ""):
            end_after_results(None)
            return
        line = all_failed_line(total, self.endpoint, self.inner_name, first)
        if not end_after_results(line):  # the hook is missing: end now (every rank: they share the verdict)
            raise SystemExit(all_failed_line(total, self.endpoint, self.inner_name, first, results_written=False))

    def generate_until(self, requests: list[Instance]) -> list[Any]:
        """Single-round requests go straight to the inner model (through the request cache when it is on)."""
        self._hint(requests, 1)
        return self._guarded(lambda: self._by_sample(requests, self._generate))

    def _hint(self, requests: list[Instance], rounds: int) -> None:
        """Say once how to feed an inner routed backend that runs at batch size 1, naming the wrapper's command."""
        command = f"--model hvcu_context --model_args inner={self.inner_name}"
        hint_once(self.inner, self.inner_name, requests, rounds, command)

    def _guarded(self, call: Callable[[], Any]) -> Any:
        """Run one model call of the evaluation; anything it raises ends the cache's run as unfinished.

        Whatever raises (the inner model, a document lookup, a task's doc_to_messages, an image decode), the
        model phase did not complete: the same command resumes the run.
        """
        cache = self.request_cache
        if cache is not None:
            cache.reopen()  # a call after one that raised (which ended the run) continues the run
        try:
            return call()
        except BaseException as exc:
            if cache is not None:
                cache.failed(exc)
            raise

    @staticmethod
    def _by_sample(requests: list[Any], answer: Callable[[list[Any], int], list[Any]]) -> list[Any]:
        """Answer requests with `answer(part, k)`, part k holding each request's k-th copy in the list.

        lmms-eval's `--repeats K` lists one Instance K times: each copy is its own sample (keyed with k), while
        equal requests of different Instances (the context setting's level 1 and the base request) share one.
        """
        seen: dict[int, int] = {}
        samples = []
        for request in requests:
            samples.append(seen.get(id(request), 0))
            seen[id(request)] = samples[-1] + 1
        replies: list[Any] = [None] * len(requests)
        for sample in sorted(set(samples)):
            part = [i for i, k in enumerate(samples) if k == sample]
            got = answer([requests[i] for i in part], sample)
            if len(got) != len(part):
                raise RuntimeError(f"returned {len(got)} replies for {len(part)} requests")
            for i, reply in zip(part, got, strict=True):
                replies[i] = reply
        return replies

    def _generate(self, requests: list[Instance], sample: int = 0) -> list[Any]:
        """Answer requests from the cache and the inner model (a client backend's cache sits in its client)."""
        cache = self.request_cache
        if cache is not None and not self._client_cached:
            replies = self._generate_cached(cache, requests, sample)
        else:
            if cache is not None:
                cache.sample = sample  # the client's hook keys this call's requests with it
            replies = self._call_inner(requests)
        # the ranks' padding copies are answered, not counted (a wrong reply count is the callers' error to raise)
        own = [reply for request, reply in zip(requests, replies, strict=False) if not is_padding(request)]
        if cache is not None:
            cache.tally([_text(reply) for reply in own])
        failures = [why for why in map(failure_of, own) if why is not None]  # counted, the first one's reason kept
        self._asked += len(own)
        self._failed += len(failures)
        if self._first_error is None and failures:
            self._first_error = failures[0]
        return replies

    def _generate_cached(self, cache: RequestCache, requests: list[Instance], sample: int = 0) -> list[Any]:
        """Answer stored requests from the cache, send the rest (equal ones once) `chunk_size` at a time, store each."""
        keys = [cache.key(self._request_content(r), sample) for r in requests]
        replies: list[Any] = [getattr(cache.get(key), "text", None) for key in keys]
        first: dict[Any, int] = {}  # each request to send (by key; uncached ones by position) -> its first position
        for i, key in enumerate(keys):
            if replies[i] is None:
                first.setdefault(i if key is None else key, i)
        todo = list(first.values())
        for start in range(0, len(todo), self.chunk_size):
            part = todo[start : start + self.chunk_size]
            got = self._call_inner([requests[i] for i in part])
            if len(got) != len(part):
                raise RuntimeError(f"{self.inner_name} returned {len(got)} replies for {len(part)} requests")
            for i, reply in zip(part, got, strict=True):
                replies[i] = reply
                cache.put(keys[i], _text(reply))
        copies = [(i, first[key]) for i, key in enumerate(keys) if replies[i] is None and key in first]
        for i, source in copies:  # equal requests of the call: sent once, each gets that reply
            replies[i] = replies[source]
        return replies

    def _call_inner(self, requests: list[Instance]) -> list[Any]:
        """Call the inner model's generate_until, each call after the first with a fresh async connection pool.

        lmms-eval's async_openai runs every call in a new event loop (asyncio.run) while its AsyncOpenAI client
        keeps the previous loop's pooled connections: without a fresh pool, the first requests of each later call
        fail ("Event loop is closed") after the server got them, and are sent (and paid) twice.
        """
        import openai

        client = getattr(self.inner, "client", None)
        if self._inner_calls and isinstance(client, openai.AsyncOpenAI) and hasattr(client, "copy"):
            fresh = client.copy(http_client=openai.DefaultAsyncHttpxClient())
            self.inner.client = fresh
            if self._client_cached:
                hook_client(fresh, self.request_cache)
        self._inner_calls += 1
        return self.inner.generate_until(requests)

    def _request_content(self, request: Instance) -> dict[str, Any]:
        """Return what a request asks: its chat messages (as the inner model builds them) and generation settings."""
        _ctx, doc_to_messages, gen_kwargs, doc_id, task, split = request.args
        return {"messages": doc_to_messages(self.task_dict[task][split][doc_id]), "gen_kwargs": gen_kwargs}

    def loglikelihood(self, requests: list[Instance]) -> list[tuple[float, bool]]:
        """Delegate log-likelihood requests to the inner model (a raise leaves the cache's run unfinished)."""
        return self._guarded(lambda: self.inner.loglikelihood(requests))

    def generate_until_multi_round(self, requests: list[Instance]) -> list[list[str | None]]:
        """Run every document's rounds, `chunk_size` documents at a time (rounds.py); replies in request order."""
        self._hint(requests, CHAIN_ROUNDS)

        def chains(part: list[Instance], sample: int) -> list[list[str | None]]:
            return run_rounds(
                part,
                self.inner.task_dict,
                lambda batch: self._generate(batch, sample),
                self.chunk_size,
                name=self.inner_name,
                rank=self.rank,
                rounds_sent=self.rounds_sent,
                desc="hvcu_context chains",
            )

        return self._guarded(lambda: self._by_sample(requests, chains))
