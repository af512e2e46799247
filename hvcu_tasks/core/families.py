"""The benchmark's fixed vocabulary: task families, aspects, levels and their published sizes."""

from __future__ import annotations

from types import MappingProxyType

LEVELS: tuple[int, int, int] = (1, 2, 3)
LEVEL_NAMES: MappingProxyType[int, str] = MappingProxyType({1: "perc", 2: "bridge", 3: "conn"})
OPTION_KEYS: tuple[str, str, str, str] = ("A", "B", "C", "D")

# Canonical family id -> (hub split name, authors' JSON stem, short task suffix).
FAMILIES: MappingProxyType[str, tuple[str, str, str]] = MappingProxyType(
    {
        "implication": ("Implication_Understanding", "Implication-Understanding", "impl"),
        "aesthetic": ("Aesthetic_Appreciation", "Aesthetic-Appreciation", "aesth"),
        "affective": ("Affective_Reasoning", "Affective-Reasoning", "affect"),
    }
)

# Aspect -> number of samples in the full benchmark (paper, Table 5), per family.
ASPECTS: MappingProxyType[str, MappingProxyType[str, int]] = MappingProxyType(
    {
        "implication": MappingProxyType(
            {"metaphor": 319, "symbolism": 21, "contrast": 22, "exaggeration": 22, "dislocation": 16}
        ),
        "aesthetic": MappingProxyType({"color": 37, "composition": 122, "font": 97, "graphics": 94}),
        "affective": MappingProxyType(
            {"joy": 25, "affection": 83, "wonder": 47, "anger": 31, "fear": 81, "sadness": 33}
        ),
    }
)

UNKNOWN_ASPECT = "unknown"


def aspect_from_text(text: str, family: str | None = None) -> str | None:
    """Return the aspect named by a label or an id prefix such as 'metaphor_012', else None."""
    lowered = text.strip().lower()
    families = [family] if family in ASPECTS else list(ASPECTS)
    for fam in families:
        for aspect in ASPECTS[fam]:
            if lowered == aspect or lowered.startswith(aspect + "_") or lowered.startswith(aspect + "-"):
                return aspect
    # The paper's figures say "Graphic" for the graphics aspect.
    if lowered in {"graphic"} or lowered.startswith(("graphic_", "graphic-")):
        return "graphics" if "graphics" in ASPECTS.get(family or "aesthetic", {}) else None
    return None
