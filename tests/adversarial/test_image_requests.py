"""Images between task load and request (issue 13): files that vanish, change or lie, and the real openai path.

A document names its image by path or bytes; the image is decoded (or read for an API request) only when a
request is built. A file gone, cut short, swapped or hostile by then is one ImageError naming the file and the
sample, never a stale or silently altered image.
"""

from __future__ import annotations

import base64
import io
import json
import os
import struct
import zlib
from pathlib import Path

import pytest
from conftest import item, run_lmms_eval
from lmms_eval.protocol import ChatMessages
from PIL import Image

from hvcu_tasks import settings
from hvcu_tasks.core.prompts import base_messages
from hvcu_tasks.data import images
from hvcu_tasks.data.files import ImageError
from hvcu_tasks.lmms import hooks

pytestmark = pytest.mark.usefixtures("fresh_image_cache")


def picture(size: tuple[int, int] = (32, 32), color: str = "red") -> Image.Image:
    return Image.new("RGB", size, color)


def png_file(path: Path, image: Image.Image | None = None) -> Path:
    (image or picture()).save(path, format="PNG")
    return path


def doc_for(path: Path | None = None, data: bytes | None = None) -> dict:
    return {
        "sample_id": "joy_001",
        "family": "affective",
        "image_path": str(path) if path else None,
        "image_bytes": data,
    }


def openai_request(doc: dict) -> list[dict]:
    return ChatMessages(messages=base_messages("q", hooks.doc_image(doc))).to_openai_messages()


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def bomb_header(width: int, height: int) -> bytes:
    """A tiny PNG whose header claims width x height pixels, with a few rows of data behind it."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = zlib.compress(b"\x00" * (1 + 3 * width) * 2)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")


def test_a_file_deleted_after_load_names_the_file_and_the_sample(tmp_path) -> None:
    path = png_file(tmp_path / "joy_001.png")
    doc = doc_for(path)
    path.unlink()
    with pytest.raises(ImageError, match=rf"{path}.*sample affective/joy_001.*gone or unreadable"):
        hooks.doc_image(doc)


def test_a_file_deleted_before_the_api_request_names_the_file_and_the_sample(tmp_path) -> None:
    path = png_file(tmp_path / "joy_001.png")
    messages = ChatMessages(messages=base_messages("q", hooks.doc_image(doc_for(path))))
    path.unlink()
    with pytest.raises(ImageError, match=rf"{path}.*sample affective/joy_001.*gone or unreadable"):
        messages.to_openai_messages()


def test_a_file_cut_short_after_load_is_refused(tmp_path) -> None:
    path = png_file(tmp_path / "joy_001.png", Image.effect_noise((64, 64), 50).convert("RGB"))
    doc = doc_for(path)
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(ImageError, match=rf"{path} \(sample affective/joy_001\): not a readable image"):
        hooks.doc_image(doc)


def test_a_decompression_bomb_is_refused_before_decoding(tmp_path) -> None:
    path = tmp_path / "joy_001.png"
    path.write_bytes(bomb_header(40_000, 40_000))
    with pytest.raises(ImageError, match=r"1,600,000,000 pixels is over the limit") as caught:
        hooks.doc_image(doc_for(path))
    assert caught.value.too_large and str(path) in str(caught.value)


def test_bytes_that_are_no_image_name_the_sample() -> None:
    with pytest.raises(ImageError, match=r"sample affective/joy_001\): not a readable image") as caught:
        hooks.doc_image(doc_for(data=b"<html>not an image</html>"))
    assert caught.value.unknown_format


def test_a_file_swapped_for_text_before_the_api_request_is_refused(tmp_path) -> None:
    path = png_file(tmp_path / "joy_001.png")
    messages = ChatMessages(messages=base_messages("q", hooks.doc_image(doc_for(path))))
    path.write_text("not an image any more")
    with pytest.raises(ImageError, match=rf"{path}.*not a readable image"):
        messages.to_openai_messages()


def test_a_document_without_any_image_names_the_sample() -> None:
    with pytest.raises(ImageError, match=r"sample affective/joy_001: the document names no image"):
        hooks.doc_image(doc_for())


def test_a_file_replaced_by_another_image_is_not_served_from_the_cache(tmp_path) -> None:
    path = png_file(tmp_path / "joy_001.png", picture(color="red"))
    assert hooks.doc_image(doc_for(path)).getpixel((0, 0)) == (255, 0, 0)
    png_file(path, picture((40, 40), color="blue"))
    os.utime(path, ns=(1, 1))  # a different modification time, whatever the clock's resolution
    assert hooks.doc_image(doc_for(path)).getpixel((0, 0)) == (0, 0, 255)


def test_an_image_larger_than_the_whole_cache_is_still_served(tmp_path, monkeypatch, image_decodes) -> None:
    monkeypatch.setenv(settings.IMAGE_CACHE_ENV, "0.001")
    path = png_file(tmp_path / "joy_001.png", picture((256, 256)))
    assert hooks.doc_image(doc_for(path)).size == (256, 256)
    assert hooks.doc_image(doc_for(path)).size == (256, 256)
    assert list(image_decodes.values()) == [2]  # not kept, so decoded per fresh document


# ---------------------------------------------------------------- the real lmms-eval CLI against a fake API


def natural(size: int = 512) -> Image.Image:
    """A photo-like image: smooth colour with fine random noise (a JPEG of it is about 100 KB at 512 x 512)."""
    base = Image.linear_gradient("L").resize((size, size))
    noise = Image.effect_noise((size, size), 40)
    return Image.merge("RGB", (base, noise, base.transpose(Image.Transpose.ROTATE_90)))


def image_in(request: dict) -> tuple[str, bytes]:
    """Return (media type, bytes) of the one image of a chat-completions request."""
    url = next(p["image_url"]["url"] for m in request["messages"] for p in m["content"] if p["type"] == "image_url")
    head, _, payload = url.partition(";base64,")
    return head.removeprefix("data:"), base64.b64decode(payload)


def user_text(request: dict) -> str:
    return next(p["text"] for p in request["messages"][-1]["content"] if p["type"] == "text")


@pytest.mark.slow
def test_openai_backend_sends_each_file_as_itself_or_as_png(tmp_path: Path) -> None:
    from fake_openai import FakeOpenAI

    root = tmp_path / "data"
    folder = root / "Image" / "Affective-Reasoning"
    folder.mkdir(parents=True)
    ids = ["joy_001", "fear_001", "anger_001", "sadness_001"]
    items = [item(sid) for sid in ids]
    for it in items:  # distinct questions, so each request tells its sample
        for lv in it["qa_levels"]:
            lv["question"] = f"{it['id']} level {lv['level']}?"
    (root / "Affective-Reasoning.json").write_text(json.dumps(items), encoding="utf-8")
    natural().save(folder / "joy_001.jpg", format="JPEG", quality=90)
    rgba = natural(64).convert("RGBA")
    rgba.putalpha(Image.linear_gradient("L").resize((64, 64)))
    rgba.save(folder / "fear_001.png", format="PNG")
    rgb = natural(64)
    rgb.save(folder / "anger_001.png", format="BMP")  # a BMP under a .png name
    rgba.save(folder / "sadness_001.jpg", format="TIFF")  # a TIFF with alpha under a .jpg name

    with FakeOpenAI(lambda request: "A") as server:
        run = run_lmms_eval(
            [
                "--model",
                "openai",
                "--model_args",
                f"model_version=fake-vlm,base_url={server.base_url},api_key=x",
                "--tasks",
                "hvcu_bench_affect",
            ],
            tmp_path / "out",
            env={"HVCU_BENCH_DATA": str(root), "HF_HUB_OFFLINE": "1"},
            expect_ok=False,
        )
        requests, sizes = list(server.requests), list(server.body_sizes)
    assert run["results"], run["output"][-4000:]
    by_sample: dict[str, list[tuple[str, bytes, int]]] = {}
    for request, size in zip(requests, sizes, strict=True):
        by_sample.setdefault(user_text(request).split(" ")[0], []).append((*image_in(request), size))
    assert sorted(by_sample) == sorted(ids) and all(len(v) == 3 for v in by_sample.values())

    jpeg = (folder / "joy_001.jpg").read_bytes()
    assert {(t, d) for t, d, _ in by_sample["joy_001"]} == {("image/jpeg", jpeg)}
    assert all(size <= 1.3 * len(base64.b64encode(jpeg)) for *_, size in by_sample["joy_001"])
    assert {(t, d) for t, d, _ in by_sample["fear_001"]} == {("image/png", (folder / "fear_001.png").read_bytes())}
    for sid, mode, expected in (("anger_001", "RGB", rgb), ("sadness_001", "RGBA", rgba)):
        media_type, data, _ = by_sample[sid][0]
        sent = Image.open(io.BytesIO(data))
        assert (media_type, sent.format, sent.mode) == ("image/png", "PNG", mode)
        assert sent.tobytes() == expected.tobytes()
    assert run["output"].count("BMP images are not accepted") == 1
    assert run["output"].count("TIFF images are not accepted") == 1


def test_a_bmp_bomb_for_the_api_is_refused_as_too_large(tmp_path, monkeypatch) -> None:
    path = tmp_path / "joy_001.png"
    Image.new("RGB", (40, 40)).save(path, format="BMP")
    source = images.ImageSource(path=str(path), label="sample affective/joy_001")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)  # 1,600 pixels: over twice the limit
    with pytest.raises(ImageError, match=r"1,600 pixels is over the limit of 100") as caught:
        images.data_url(source)
    assert caught.value.too_large
