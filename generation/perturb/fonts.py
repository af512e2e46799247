"""Font files for text layers: DejaVu families shipped with matplotlib, or explicit font files."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from PIL import ImageFont

# family name -> (regular file, bold file), both in matplotlib's font folder
FONT_FAMILIES: dict[str, tuple[str, str]] = {
    "DejaVu Sans": ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf"),
    "DejaVu Serif": ("DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf"),
    "DejaVu Sans Mono": ("DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf"),
}
FONT_SUFFIXES = (".ttf", ".otf", ".ttc")
WEIGHTS = ("regular", "bold")


def font_dir() -> Path:
    """Return the folder holding matplotlib's bundled TrueType fonts."""
    import matplotlib  # imported on use: `hvcu` builds every parser at start-up

    return Path(matplotlib.get_data_path()) / "fonts" / "ttf"


def is_font_path(font: str) -> bool:
    """Tell whether a `font` value names a font file rather than a family."""
    return font.lower().endswith(FONT_SUFFIXES) or "/" in font or "\\" in font


def font_file(font: str, weight: str, font_bold: str | None = None) -> Path:
    """Return the font file for a family name or file path at a weight (`bold` needs a real bold file)."""
    if weight not in WEIGHTS:
        raise ValueError(f"unknown weight {weight!r} (known: {', '.join(WEIGHTS)})")
    if font in FONT_FAMILIES:
        return font_dir() / FONT_FAMILIES[font][WEIGHTS.index(weight)]
    if not is_font_path(font):
        raise ValueError(f"unknown font family {font!r} (known: {', '.join(FONT_FAMILIES)}, or a font file path)")
    if weight == "regular":
        return Path(font)
    if font_bold is None:
        raise ValueError(f"weight 'bold' with font file {font!r} needs 'font_bold' (a bold font file)")
    return Path(font_bold)


def has_bold(font: str, font_bold: str | None) -> bool:
    """Tell whether a bold file is known for this font (a family, or a file with `font_bold`)."""
    return font in FONT_FAMILIES or font_bold is not None


@lru_cache(maxsize=128)
def load_font(path: str, size: int) -> ImageFont.FreeTypeFont:
    """Open a font file at a pixel size with the basic (FreeType-only) layout engine, for stable output."""
    return ImageFont.truetype(path, size, layout_engine=ImageFont.Layout.BASIC)
