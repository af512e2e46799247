"""Safe files for every command: atomic writes, names inside their folder, CSV cells, checked images and folders."""

from __future__ import annotations

import hashlib
import io
import os
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

from hvcu_tasks.core.names import UnsafeNameError

if TYPE_CHECKING:
    from PIL import Image


def image_identity(path: Path | str | None, data: bytes | None) -> tuple:
    """Return an image's in-process key: its file's identity, or a digest of its bytes; OSError for an unreadable file.

    One stat (device, inode, size, modification and change times): a file rewritten or replaced gets a new key.
    """
    if path is not None:
        st = os.stat(path)
        return ("file", st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return ("bytes", hashlib.blake2b(data or b"", digest_size=16).digest())


def inside(root: Path | str, *parts: str) -> Path:
    """Return root/parts resolved, refusing any result outside root (symlinks and '..' included) or root itself.

    With no parts it returns root; with parts, a target that resolves to root (`""`, `"."`, `"sub/.."`) is
    refused: a writer must never be handed the folder itself as its file.
    """
    base = Path(root).resolve()
    target = base.joinpath(*parts).resolve()
    if parts and target == base:
        raise UnsafeNameError(f"{Path(root).joinpath(*parts)} is the folder {root} itself, not a file inside it")
    if target != base and base not in target.parents:
        raise UnsafeNameError(f"{Path(root).joinpath(*parts)} resolves outside {root}; refusing to write there")
    return target


@contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it replaces `path`, on failure it is removed."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a folder, expected a file path")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as exc:
        if exc.filename == str(tmp):  # name the file the user asked for in the message, not the temporary one
            exc.filename = str(path)
        raise
    finally:
        tmp.unlink(missing_ok=True)


def write_atomic(path: Path | str, data: str | bytes, durable: bool = False) -> None:
    """Write text (UTF-8) or bytes to `path` by rename: readers see the old or the new file, never half.

    `durable`: the file and its folder are fsync'd, so a machine crash leaves the old or the new file, never
    an empty one.
    """
    raw = data if isinstance(data, bytes) else data.encode("utf-8")
    with atomic_path(path) as tmp:
        tmp.write_bytes(raw)
        if durable:
            with tmp.open("rb") as written:
                os.fsync(written.fileno())
    if durable:  # the rename too: Windows cannot open a folder, some file systems refuse fsync on one
        with suppress(OSError):
            fd = os.open(Path(path).parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?%?")


def csv_cell(value: object) -> object:
    """Return a CSV cell that no spreadsheet runs as a formula ("'" prefix); numbers and other types pass."""
    if not isinstance(value, str) or not value:
        return value
    if value.startswith("'") or (value.startswith(_FORMULA_START) and not _PLAIN_NUMBER.fullmatch(value)):
        return "'" + value
    return value


def csv_uncell(text: str) -> str:
    """Return the original text of a cell written by `csv_cell` (the inverse of its "'" prefix)."""
    return text[1:] if text.startswith("'") else text


IMAGE_CHECK_RULES = 1
"""Version of `open_image`'s rules: raise it whenever they change, so that remembered verdicts are not reused."""


class ImageError(ValueError):
    """A file that is not a fully decodable image of a usable size (missing, truncated, a decompression bomb)."""

    def __init__(self, message: str, unknown_format: bool = False, too_large: bool = False) -> None:
        super().__init__(message)
        self.unknown_format = unknown_format
        """True when PIL does not recognise the file as any image format (e.g. a text file)."""
        self.too_large = too_large
        """True when the header claims more pixels than PIL's limit (a decompression bomb)."""


def open_image(source: Path | str | bytes, label: str | None = None) -> Image.Image:
    """Return an image file (or encoded bytes) fully decoded, or raise ImageError naming it (`label`) and the fault.

    A header claiming more than PIL's `Image.MAX_IMAGE_PIXELS` pixels is refused before any pixel is decoded
    (PIL only warns between one and two times the limit; here both are errors), and a file cut short is refused
    even when `ImageFile.LOAD_TRUNCATED_IMAGES` was switched on elsewhere (lmms-eval does so at import).
    """
    from PIL import Image, ImageFile, UnidentifiedImageError

    if isinstance(source, bytes):
        name, opened = label or "image bytes", io.BytesIO(source)
    else:
        path = Path(source)
        name, opened = label or str(path), path
        if not path.is_file():
            raise ImageError(f"{name}: {'is a folder, not an image file' if path.is_dir() else 'no such image file'}")
    limit = Image.MAX_IMAGE_PIXELS
    lenient = ImageFile.LOAD_TRUNCATED_IMAGES
    try:
        ImageFile.LOAD_TRUNCATED_IMAGES = False
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(opened) as image:
                image.load()
                return image
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        found = re.search(r"\((\d+) pixels\)", str(exc))
        size = f"{int(found.group(1)):,} pixels" if found else "its pixel count"
        raise ImageError(
            f"{name}: {size} is over the limit of {limit:,} pixels (PIL.Image.MAX_IMAGE_PIXELS): "
            "a decompression bomb, or an image too large to use; shrink it first",
            too_large=True,
        ) from None
    except UnidentifiedImageError:
        raise ImageError(
            f"{name}: not a readable image (PIL does not recognise its format)", unknown_format=True
        ) from None
    except Exception as exc:  # any decoder failure on an untrusted file means the same: not a usable image
        why = " ".join(str(exc).split()) or "no detail"
        raise ImageError(f"{name}: not a readable image ({type(exc).__name__}: {why})") from None
    finally:
        ImageFile.LOAD_TRUNCATED_IMAGES = lenient


def check_image(source: Path | str | bytes, label: str | None = None) -> tuple[int, int]:
    """Return (width, height) of an image file (or encoded bytes) after decoding it fully; else raise ImageError."""
    with open_image(source, label) as image:  # frees the decoded pixels now, not at the next garbage collection
        return image.size


class NotAFolderError(ValueError):
    """An output folder that is a file, runs through a file, or cannot be created."""


def check_folder(path: Path | str, what: str = "--out") -> Path:
    """Return `path` if it is a folder or could be made one; a path that is, or runs through, a file is refused."""
    path = Path(path)
    for folder in (path, *path.parents):
        if folder.exists():
            if not folder.is_dir():
                where = "is a file" if folder == path else f"runs through the file {folder}"
                raise NotAFolderError(f"{what} {path}: {where}, not a folder; give a folder path")
            break
    return path


def make_folder(path: Path | str, what: str = "--out") -> Path:
    """Create folder `path` (and its parents) if missing; a file in the way or a refused mkdir is one clear error."""
    path = check_folder(path, what)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NotAFolderError(f"{what} {path}: cannot create the folder ({exc.strerror or exc})") from None
    return path
