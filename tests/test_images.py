"""Document images: decoded once for local models, sent to OpenAI-compatible APIs as the file's own bytes."""

from __future__ import annotations

import base64
import io
import json
import logging
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
from lmms_eval.evaluator import _collect_input_media
from lmms_eval.protocol import ChatMessages
from lmms_eval.utils import is_multimodal_content
from PIL import Image

from hvcu_tasks import settings
from hvcu_tasks.core.prompts import base_messages
from hvcu_tasks.dev.smoke import SMOKE_DIR
from hvcu_tasks.lmms import context, hooks, plugin

pytestmark = pytest.mark.usefixtures("fresh_image_cache")


def save(path: Path, image: Image.Image, fmt: str, **kwargs) -> Path:
    image.save(path, format=fmt, **kwargs)
    return path


def gradient(mode: str = "RGB", size: tuple[int, int] = (64, 48)) -> Image.Image:
    image = Image.new("RGB", size)
    image.putdata([(x * 4 % 256, y * 5 % 256, (x + y) % 256) for y in range(size[1]) for x in range(size[0])])
    if mode == "RGBA":
        image.putalpha(Image.linear_gradient("L").resize(size))
    return image


def doc_for(path: Path | None = None, data: bytes | None = None, sid: str = "joy_001") -> dict:
    return {
        "sample_id": sid,
        "family": "affective",
        "image_path": str(path) if path else None,
        "image_bytes": data,
    }


def sent(doc: dict) -> tuple[str, bytes]:
    """Return (media type, bytes) of the image in the OpenAI request built for a document."""
    request = ChatMessages(messages=base_messages("q", hooks.doc_image(doc))).to_openai_messages()
    url = request[1]["content"][1]["image_url"]["url"]
    head, _, payload = url.partition(";base64,")
    return head.removeprefix("data:"), base64.b64decode(payload)


def test_a_jpeg_is_sent_as_the_files_own_bytes(tmp_path) -> None:
    path = save(tmp_path / "a.jpg", gradient(), "JPEG", quality=90)
    assert sent(doc_for(path)) == ("image/jpeg", path.read_bytes())


def test_the_media_type_comes_from_the_bytes_not_the_file_name(tmp_path) -> None:
    path = save(tmp_path / "a.png", gradient(), "JPEG")
    assert sent(doc_for(path))[0] == "image/jpeg"


def test_a_png_with_alpha_is_sent_unchanged_and_keeps_its_alpha(tmp_path) -> None:
    path = save(tmp_path / "a.png", gradient("RGBA"), "PNG")
    media_type, data = sent(doc_for(path))
    assert (media_type, data) == ("image/png", path.read_bytes())
    assert Image.open(io.BytesIO(data)).mode == "RGBA"


def test_webp_and_still_gif_are_sent_as_they_are(tmp_path) -> None:
    webp = save(tmp_path / "a.webp", gradient(), "WEBP")
    gif = save(tmp_path / "b.gif", gradient().convert("P"), "GIF")
    assert sent(doc_for(webp)) == ("image/webp", webp.read_bytes())
    assert sent(doc_for(gif)) == ("image/gif", gif.read_bytes())


def test_encoded_bytes_are_sent_as_they_are(tmp_path) -> None:
    data = save(tmp_path / "a.jpg", gradient(), "JPEG").read_bytes()
    assert sent(doc_for(data=data)) == ("image/jpeg", data)


def test_a_tiff_is_converted_to_png_keeping_alpha_with_one_warning(tmp_path, caplog) -> None:
    original = gradient("RGBA")
    first = save(tmp_path / "a.png", original, "TIFF")  # a TIFF under a .png name
    second = save(tmp_path / "b.jpg", gradient("RGBA", (8, 8)), "TIFF")
    with caplog.at_level(logging.WARNING, logger="hvcu_tasks"):
        media_type, data = sent(doc_for(first))
        sent(doc_for(second, sid="fear_001"))
    converted = Image.open(io.BytesIO(data))
    assert (media_type, converted.format, converted.mode) == ("image/png", "PNG", "RGBA")
    assert converted.tobytes() == original.tobytes()
    warnings = [r.getMessage() for r in caplog.records if "TIFF" in r.getMessage()]
    assert len(warnings) == 1 and "converting them to PNG" in warnings[0] and str(first) in warnings[0]


def test_a_bmp_is_converted_to_png(tmp_path, caplog) -> None:
    path = save(tmp_path / "a.png", gradient(), "BMP")
    with caplog.at_level(logging.WARNING, logger="hvcu_tasks"):
        media_type, data = sent(doc_for(path))
    assert media_type == "image/png" and Image.open(io.BytesIO(data)).tobytes() == gradient().tobytes()
    assert "BMP images are not accepted" in caplog.text


def test_an_animated_gif_is_converted_to_png(tmp_path) -> None:
    frames = [gradient().convert("P"), Image.new("P", (64, 48), 3)]
    path = tmp_path / "a.gif"
    frames[0].save(path, format="GIF", save_all=True, append_images=frames[1:])
    assert sent(doc_for(path))[0] == "image/png"


def test_request_size_is_within_1_3_times_the_base64_of_the_source(tmp_path) -> None:
    path = save(tmp_path / "a.jpg", gradient(size=(512, 512)), "JPEG", quality=95)
    doc = doc_for(path)
    messages = ChatMessages(messages=base_messages("Which?\nOptions:\nA. x", hooks.doc_image(doc)))
    body = json.dumps({"model": "m", "messages": messages.to_openai_messages(), "max_tokens": 16})
    assert len(body) <= 1.3 * len(base64.b64encode(path.read_bytes()))


def test_images_without_a_source_keep_lmms_eval_encoding(monkeypatch) -> None:
    messages = ChatMessages(messages=base_messages("q", gradient("RGBA")))
    assert messages.to_openai_messages()[1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    monkeypatch.setenv("LMMS_IMAGE_ENCODE_FORMAT", "JPEG")
    assert messages.to_openai_messages()[1]["content"][1]["image_url"]["url"].startswith("data:image/jpeg;base64,")


def test_messages_with_audio_go_through_lmms_eval(tmp_path) -> None:
    path = save(tmp_path / "a.jpg", gradient(), "JPEG")
    raw = base_messages("q", hooks.doc_image(doc_for(path)))
    raw[1]["content"].append({"type": "audio", "url": "clip.wav"})
    built = ChatMessages(messages=raw).to_openai_messages()
    assert built[1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")  # lmms-eval's own
    assert built[1]["content"][2] == {"type": "audio_url", "audio_url": {"url": "clip.wav"}}


def test_the_hook_is_installed_once_and_keeps_the_original() -> None:
    hooked = ChatMessages.to_openai_messages
    plugin.install_image_hook()
    assert ChatMessages.to_openai_messages is hooked
    assert hooked._hvcu_hook and hooked.__wrapped__.__module__ == "lmms_eval.protocol"


def test_the_qwen3_vl_variant_sends_the_files_own_bytes_too(tmp_path) -> None:
    path = save(tmp_path / "a.jpg", gradient(), "JPEG")
    messages = ChatMessages(messages=base_messages("q", hooks.doc_image(doc_for(path))))
    url = messages.to_qwen3_vl_openai_messages()[1]["content"][1]["image_url"]["url"]
    assert url == "data:image/jpeg;base64," + base64.b64encode(path.read_bytes()).decode()


def test_a_changed_lmms_eval_signature_is_refused_by_name(monkeypatch) -> None:
    def to_openai_messages(self, video_kwargs=None):
        return []

    monkeypatch.setattr(ChatMessages, "to_openai_messages", to_openai_messages)
    with pytest.raises(plugin.IncompatibleLmmsEval, match=r"to_openai_messages\('self', 'video_kwargs'\)"):
        plugin.install_image_hook()


def test_local_backends_get_a_decoded_rgb_image(tmp_path) -> None:
    path = save(tmp_path / "a.png", gradient("RGBA"), "PNG")
    image = hooks.doc_to_visual(doc_for(path))[0]
    assert isinstance(image, Image.Image) and image.mode == "RGB"
    assert image.tobytes() == gradient("RGBA").convert("RGB").tobytes()


def test_hf_messages_carry_the_decoded_image(tmp_path) -> None:
    path = save(tmp_path / "a.jpg", gradient(), "JPEG")
    hf = ChatMessages(messages=hooks.doc_to_messages({**doc_for(path), **LEVEL})).to_hf_messages()
    assert hf[1]["content"][1]["image"].mode == "RGB"


LEVEL = {"question": "Which?", "option_keys": ["A", "B"], "option_texts": ["x", "y"]}


def smoke(build, family: str = "implication") -> datasets.Dataset:
    return build(datasets.Dataset.from_list([{"family": family, "source": "smoke"}]))


def test_base_setting_decodes_each_image_once_over_its_three_levels(image_decodes) -> None:
    docs = smoke(hooks.process_docs)
    for i in range(len(docs)):
        hooks.doc_to_messages(docs[i])  # a fresh dict per access, as lmms-eval's backends fetch them
    assert sorted(image_decodes.values()) == [1, 1, 1, 1, 1]


def test_context_setting_decodes_each_image_once_per_chain(image_decodes) -> None:
    docs = smoke(context.process_docs)
    for i in range(len(docs)):
        context.doc_to_messages(docs[i])
        for r in (1, 2):
            context.doc_to_messages(docs[i], round_idx=r, previous_output=["A"] * r)
    assert sorted(image_decodes.values()) == [1, 1, 1, 1, 1]


def test_one_document_dict_decodes_once_even_with_the_cache_off(monkeypatch, image_decodes) -> None:
    monkeypatch.setenv(settings.IMAGE_CACHE_ENV, "0")
    doc = smoke(context.process_docs)[0]
    context.doc_to_messages(doc)
    context.doc_to_messages(doc, round_idx=1, previous_output=["A"])
    context.doc_to_messages(doc, round_idx=2, previous_output=["A", "B"])
    assert list(image_decodes.values()) == [1]


def test_the_cache_is_bounded_by_decoded_bytes(tmp_path, monkeypatch, image_decodes) -> None:
    a = save(tmp_path / "a.png", gradient(size=(512, 512)), "PNG")  # 768 KiB decoded
    b = save(tmp_path / "b.png", gradient(size=(512, 400)), "PNG")  # 600 KiB decoded
    monkeypatch.setenv(settings.IMAGE_CACHE_ENV, "1")
    for path in (a, b, a):
        hooks.doc_image(doc_for(path))
    assert sorted(image_decodes.values()) == [1, 2]  # a was evicted to make room for b


def test_a_roomy_cache_keeps_both_images(tmp_path, image_decodes) -> None:
    a = save(tmp_path / "a.png", gradient(size=(512, 512)), "PNG")
    b = save(tmp_path / "b.png", gradient(size=(512, 400)), "PNG")
    for path in (a, b, a, b):
        hooks.doc_image(doc_for(path))
    assert sorted(image_decodes.values()) == [1, 1]


@pytest.mark.parametrize("value", ["lots", "-1", "nan"])
def test_a_bad_cache_size_names_the_variable(value, tmp_path, monkeypatch) -> None:
    path = save(tmp_path / "a.png", gradient(), "PNG")
    monkeypatch.setenv(settings.IMAGE_CACHE_ENV, value)
    with pytest.raises(ValueError, match=rf"HVCU_IMAGE_CACHE_MB='{value}'.*megabytes"):
        hooks.doc_image(doc_for(path))


def test_editing_a_handed_out_image_does_not_change_the_next_one(tmp_path) -> None:
    path = save(tmp_path / "a.png", gradient(), "PNG")
    first = hooks.doc_image(doc_for(path))
    first.paste((0, 0, 0), (0, 0, 64, 48))
    assert hooks.doc_image(doc_for(path)).tobytes() == gradient().tobytes()


def test_documents_hold_a_path_or_bytes_never_a_decoded_image() -> None:
    doc = smoke(hooks.process_docs)[0]
    assert "image" not in doc
    assert doc["image_path"].endswith("Implication-Understanding/metaphor_001.png") and doc["image_bytes"] is None


def test_sample_logs_keep_image_bytes_out(tmp_path) -> None:
    data = save(tmp_path / "a.png", gradient(), "PNG").read_bytes()
    doc = doc_for(data=data)
    assert is_multimodal_content(doc["image_bytes"])  # lmms-eval drops it from the logged `doc`
    assert _collect_input_media(doc, []) == []  # and inlines no base64 copy of it


def test_importing_lmms_eval_protocol_first_still_registers_our_models_and_the_hook() -> None:
    # lmms_eval.protocol imports the models package, which loads our entry point mid-import of protocol
    png = SMOKE_DIR / "Image/Implication-Understanding/metaphor_001.png"
    code = (
        "from lmms_eval.protocol import ChatMessages\n"
        "from lmms_eval.models import get_model\n"
        "from hvcu_tasks.lmms import hooks\n"
        "assert get_model('hvcu_replay').__name__ == 'ReplayModel'\n"
        f"hooks.doc_image({{'image_path': {str(png)!r}}})\n"
        "print(getattr(ChatMessages.to_openai_messages, '_hvcu_hook', False))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "True"
    assert "Failed to load model entry-point manifests" not in proc.stderr


@pytest.mark.parametrize(("mode", "sent_mode"), [("CMYK", "RGB"), ("LAB", "RGB"), ("LA", "LA"), ("I;16", "I;16")])
def test_a_tiff_mode_png_cannot_hold_becomes_rgb_and_others_stay(tmp_path, mode, sent_mode) -> None:
    path = save(tmp_path / "a.png", Image.new(mode, (8, 8)), "TIFF")
    media_type, data = sent(doc_for(path))
    assert (media_type, Image.open(io.BytesIO(data)).mode) == ("image/png", sent_mode)
