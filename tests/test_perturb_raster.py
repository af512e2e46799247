"""Colour and composition operations: the measured change equals the parameter, other factors stay fixed."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.colors import hsv_to_rgb
from PIL import Image

from generation.perturb import raster


def colour_field(width: int = 120, height: int = 90) -> Image.Image:
    """An image covering the hue circle left to right, with saturation and brightness varying top to bottom."""
    ys, xs = np.mgrid[0:height, 0:width]
    hsv = np.stack([xs / width, 0.35 + 0.6 * ys / height, 0.4 + 0.5 * (1 - ys / height)], axis=-1)
    return Image.fromarray(np.rint(hsv_to_rgb(hsv) * 255).astype(np.uint8))


def card(size=(200, 160), box=(60, 50, 120, 100), colour=(200, 30, 40)) -> Image.Image:
    """A white canvas with one solid rectangle (x0, y0, x1, y1 exclusive)."""
    image = Image.new("RGB", size, "white")
    image.paste(colour, box)
    return image


def ink_bbox(image: Image.Image) -> tuple[int, int, int, int]:
    """Bounding box (x0, y0, x1, y1 exclusive) of pixels clearly different from white."""
    a = np.asarray(image, dtype=np.int16)
    ys, xs = np.nonzero((255 - a).max(axis=-1) > 60)
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


def circular_mean_shift_deg(before: np.ndarray, after: np.ndarray) -> float:
    """Circular mean of the hue difference after - before, in degrees."""
    angle = 2 * np.pi * (after - before)
    return float(np.degrees(np.angle(np.exp(1j * angle).mean())))


def saturated(hsv: np.ndarray) -> np.ndarray:
    """Mask of pixels whose hue is well defined."""
    return (hsv[..., 1] > 0.3) & (hsv[..., 2] > 0.3)


@pytest.mark.parametrize("degrees", [35.0, -120.0, 90.5, 180.0])
def test_hue_rotate_shifts_the_mean_hue_by_the_requested_degrees(degrees):
    image = colour_field()
    before, after = raster.to_hsv(image), raster.to_hsv(raster.hue_rotate(image, degrees))
    mask = saturated(before)
    shift = circular_mean_shift_deg(before[..., 0][mask], after[..., 0][mask])
    assert abs(((shift - degrees) + 180) % 360 - 180) < 1.0


def test_hue_rotate_keeps_saturation_and_brightness():
    image = colour_field()
    before, after = raster.to_hsv(image), raster.to_hsv(raster.hue_rotate(image, 75))
    assert np.abs(after[..., 1] - before[..., 1]).mean() < 0.01
    assert np.abs(after[..., 2] - before[..., 2]).max() <= 1 / 255 + 1e-9


@pytest.mark.parametrize("factor", [0.4, 1.3])
def test_saturation_scale_multiplies_saturation_and_keeps_hue_and_brightness(factor):
    image = colour_field()
    before, after = raster.to_hsv(image), raster.to_hsv(raster.scale_saturation(image, factor))
    mask = saturated(before) & (before[..., 1] * factor < 0.98)
    ratio = after[..., 1][mask] / before[..., 1][mask]
    assert abs(np.median(ratio) - factor) < 0.01
    assert abs(circular_mean_shift_deg(before[..., 0][mask], after[..., 0][mask])) < 0.5
    assert np.abs(after[..., 2] - before[..., 2]).max() <= 1 / 255 + 1e-9


@pytest.mark.parametrize("factor", [0.6, 1.25])
def test_brightness_scale_multiplies_value_and_keeps_hue_and_saturation(factor):
    image = colour_field()
    before, after = raster.to_hsv(image), raster.to_hsv(raster.scale_brightness(image, factor))
    mask = saturated(before) & (before[..., 2] * factor < 0.98)
    ratio = after[..., 2][mask] / before[..., 2][mask]
    assert abs(np.median(ratio) - factor) < 0.01
    assert abs(circular_mean_shift_deg(before[..., 0][mask], after[..., 0][mask])) < 0.5
    assert np.abs(after[..., 1][mask] - before[..., 1][mask]).mean() < 0.01


def test_colour_factors_reject_negative_factors():
    with pytest.raises(ValueError, match="saturation factor"):
        raster.scale_saturation(colour_field(), -0.5)
    with pytest.raises(ValueError, match="brightness factor"):
        raster.scale_brightness(colour_field(), -1)


def test_crop_keeps_exactly_the_requested_box():
    image = colour_field(200, 100)
    out = raster.crop(image, (0.25, 0.1, 0.75, 0.9))
    assert out.size == (100, 80)
    assert out.tobytes() == image.crop((50, 10, 150, 90)).tobytes()


@pytest.mark.parametrize("box", [(0.5, 0.1, 0.4, 0.9), (0.0, 0.0, 1.2, 1.0), (-0.1, 0.0, 0.5, 0.5)])
def test_crop_rejects_boxes_outside_the_image(box):
    with pytest.raises(ValueError, match="crop box"):
        raster.crop(colour_field(), box)


def test_reframe_moves_the_content_by_the_shift_and_keeps_the_canvas():
    image = card()
    out = raster.reframe(image, 0.1, -0.125)
    assert out.size == image.size
    x0, y0, x1, y1 = ink_bbox(image)
    assert ink_bbox(out) == (x0 + 20, y0 - 20, x1 + 20, y1 - 20)
    assert out.getpixel((5, 155)) == (255, 255, 255)  # uncovered strip takes the border colour


def test_reframe_pads_with_an_explicit_colour():
    out = raster.reframe(card(), -0.2, 0.0, pad=(10, 20, 30))
    assert out.getpixel((199, 80)) == (10, 20, 30)


@pytest.mark.parametrize("factor", [0.5, 0.8, 1.5])
def test_scale_resizes_the_content_about_the_canvas_centre(factor):
    image = card()
    x0, y0, x1, y1 = ink_bbox(image)
    ox0, oy0, ox1, oy1 = ink_bbox(raster.scale(image, factor))
    assert raster.scale(image, factor).size == image.size
    assert abs((ox1 - ox0) - factor * (x1 - x0)) <= 2
    assert abs((oy1 - oy0) - factor * (y1 - y0)) <= 2
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    assert abs((ox0 + ox1) / 2 - (100 + factor * (cx - 100))) <= 1.5
    assert abs((oy0 + oy1) / 2 - (80 + factor * (cy - 80))) <= 1.5


def test_border_colour_is_the_median_of_the_outer_ring():
    image = card()
    image.paste((0, 0, 255), (0, 0, 10, 1))  # a few odd border pixels do not move the median
    assert raster.border_color(image) == (255, 255, 255)


def test_to_rgb_composites_transparency_over_white():
    rgba = Image.new("RGBA", (4, 4), (255, 0, 0, 0))
    rgba.putpixel((0, 0), (0, 0, 255, 255))
    out = raster.to_rgb(rgba)
    assert out.mode == "RGB"
    assert out.getpixel((1, 1)) == (255, 255, 255)
    assert out.getpixel((0, 0)) == (0, 0, 255)
