"""Document images: decoded once for local models, sent as the file's own bytes to OpenAI-compatible APIs.

`document_image(doc)` decodes a document's `image_path` / `image_bytes` to RGB through an LRU keyed by content
(`HVCU_IMAGE_CACHE_MB`); each image handed out is a private copy carrying its `ImageSource` (`image.hvcu_source`),
which `api_messages` sends as `data:<media type>;base64,<the file's bytes>` (docs/lmms-eval.md, "Images").
"""

from __future__ import annotations

import base64
import functools
import io
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from hvcu_tasks import settings
from hvcu_tasks.core.schema import ImageRef
from hvcu_tasks.data.files import ImageError, image_identity, open_image

log = logging.getLogger("hvcu_tasks")

MAX_CACHED_IMAGES = 1024
MAX_CONVERTED = 32
SOURCE_ATTR = "hvcu_source"
"""Attribute of a handed-out image that holds its ImageSource."""
MEMO_KEY = "_hvcu_decoded_image"
"""Key under which a document dict memoises its decoded image (PIL images are kept out of lmms-eval logs)."""

API_MEDIA_TYPES: dict[str, str] = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}
"""Formats OpenAI-compatible chat APIs accept as image input (GIF only when not animated)."""


@dataclass(frozen=True)
class ImageSource:
    """Where a document's image lives: a file path or encoded bytes; `label` names the sample in errors."""

    path: str | None = None
    data: bytes | None = field(default=None, repr=False)
    label: str = field(default="", compare=False)

    @classmethod
    def of_doc(cls, doc: Mapping[str, Any]) -> ImageSource:
        """Return the image source a document names (`image_path`, else `image_bytes`), or raise ImageError."""
        label = f"sample {doc.get('family', '?')}/{doc.get('sample_id', '?')}"
        path, data = doc.get("image_path"), doc.get("image_bytes")
        if path:
            return cls(path=str(path), label=label)
        if data:
            return cls(data=bytes(data), label=label)
        raise ImageError(f"{label}: the document names no image (neither image_path nor image_bytes)")

    def describe(self) -> str:
        """Return how errors name this image: its path or byte count, and its sample."""
        where = self.path if self.path is not None else f"<{len(self.data or b'')} image bytes>"
        return f"{where} ({self.label})" if self.label else where

    def _gone(self, exc: OSError) -> ImageError:
        """Return the error for a file that vanished or became unreadable after the task loaded."""
        why = exc.strerror or type(exc).__name__
        return ImageError(f"{self.describe()}: image file is gone or unreadable since the task loaded ({why})")

    def read(self) -> bytes:
        """Return the encoded bytes (the file's content for a path), or raise ImageError naming the file."""
        try:
            return self.data or b"" if self.path is None else Path(self.path).read_bytes()
        except OSError as exc:
            raise self._gone(exc) from None

    def key(self) -> tuple:
        """Return the content key (`files.image_identity`: the file's identity, or a digest of the bytes)."""
        try:
            return image_identity(self.path, self.data)
        except OSError as exc:
            raise self._gone(exc) from None


def image_format(data: bytes, label: str = "image bytes") -> str:
    """Return the format of encoded image bytes from their header (never a file name), e.g. 'JPEG', 'animated GIF'."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            name, animated = image.format or "unknown", bool(getattr(image, "is_animated", False))
    except Exception:  # untrusted bytes: let the one checker say precisely why (bomb, unknown format, ...)
        open_image(data, label)
        raise ImageError(f"{label}: not a readable image (its header cannot be parsed)") from None
    return "animated GIF" if name == "GIF" and animated else name


# ---- decoding, memoised per document and per content ----

_LOCK = threading.Lock()
# The three level documents of a sample are fresh dicts that share one image: measured, 1 decode per image
# instead of 3 (docs/performance.md); bounded by HVCU_IMAGE_CACHE_MB and MAX_CACHED_IMAGES.
_CACHE: OrderedDict[tuple, Image.Image] = OrderedDict()
# Behaviour: the log names each converted format once per process, not once per request.
_WARNED: set[str] = set()


def decoded_size(image: Image.Image) -> int:
    """Return the bytes an image's decoded pixels take (one byte per band per pixel)."""
    return image.width * image.height * len(image.getbands())


def _remember(key: tuple, image: Image.Image) -> None:
    """Put a decoded image in the LRU, evicting the oldest past the byte and count bounds (caller holds _LOCK)."""
    budget = settings.current().image_cache_bytes()
    if decoded_size(image) > budget or key in _CACHE:
        return
    _CACHE[key] = image
    while len(_CACHE) > MAX_CACHED_IMAGES or sum(map(decoded_size, _CACHE.values())) > budget:
        _CACHE.popitem(last=False)


def _shared_image(source: ImageSource) -> Image.Image:
    """Return the one decoded RGB image of a source's content, decoding it only on an LRU miss."""
    key = source.key()
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit
    # decoded fully: truncation and decompression bombs are refused (`files.open_image`)
    image = open_image(source.path if source.path is not None else source.read(), source.describe())
    image = image if image.mode == "RGB" else image.convert("RGB")
    setattr(image, SOURCE_ATTR, source)
    with _LOCK:
        _remember(key, image)
    return image


def document_image(doc: Mapping[str, Any]) -> Image.Image:
    """Return a document's image as RGB (a private copy carrying `hvcu_source`), decoded at most once per doc dict."""
    shared = doc.get(MEMO_KEY)
    if shared is None:
        shared = _shared_image(ImageSource.of_doc(doc))
        if isinstance(doc, dict):
            doc[MEMO_KEY] = shared
    copy = shared.copy()  # private: a backend may edit its image in place
    setattr(copy, SOURCE_ATTR, getattr(shared, SOURCE_ATTR))
    return copy


def open_ref(ref: ImageRef) -> Image.Image:
    """Decode a sample's image reference as RGB (a fresh image, not cached), or raise ImageError naming it."""
    return open_image(ref.path if ref.path is not None else ref.data or b"", ref.describe()).convert("RGB")


def reset() -> None:
    """Forget every cached image, conversion and format warning (for tests and benchmarks)."""
    with _LOCK:
        _CACHE.clear()
        _WARNED.clear()
    _as_png.cache_clear()


# ---- OpenAI-compatible requests ----


@functools.lru_cache(maxsize=MAX_CONVERTED)  # keyed by the bytes: the three level requests share one conversion
def _as_png(data: bytes, label: str) -> bytes:
    """Re-encode image bytes as PNG, keeping the mode and alpha where PNG can hold them."""
    image = open_image(data, label)
    if image.mode not in {"1", "L", "LA", "P", "RGB", "RGBA", "I;16"}:
        has_alpha = image.mode.endswith(("A", "a")) or "transparency" in image.info  # LAB has a band "A", no alpha
        image = image.convert("RGBA" if has_alpha else "RGB")
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def data_url(source: ImageSource) -> str:
    """Return the `data:` URL an OpenAI-compatible request carries for an image: the file's own bytes, or a PNG."""
    data, label = source.read(), source.describe()
    kind = image_format(data, label)
    if kind not in API_MEDIA_TYPES:
        with _LOCK:  # each converted format is said once per process, not once per request
            first = kind not in _WARNED
            _WARNED.add(kind)
        if first:
            what = f"{kind} images are not accepted by OpenAI-compatible APIs; converting them to PNG"
            log.warning("HVCU-Bench: %s (mode and alpha kept) before sending, first: %s", what, label)
        data = _as_png(data, label)
    return f"data:{API_MEDIA_TYPES.get(kind, 'image/png')};base64,{base64.b64encode(data).decode('ascii')}"


def api_messages(messages: Iterable[Any]) -> list[dict[str, Any]] | None:
    """Return OpenAI chat messages for lmms-eval ChatMessage objects whose images all carry a source; else None.

    None (any video, audio, or image without an `hvcu_source`) tells the caller to use lmms-eval's own encoding.
    """
    built: list[dict[str, Any]] = []
    for message in messages:
        content: list[dict[str, Any]] = []
        for part in message.content:
            source = getattr(part.url, SOURCE_ATTR, None) if part.type == "image" else None
            if part.type == "text":
                content.append({"type": "text", "text": part.text})
            elif isinstance(source, ImageSource):
                content.append({"type": "image_url", "image_url": {"url": data_url(source)}})
            else:
                return None
        built.append({"role": message.role, "content": content})
    return built
