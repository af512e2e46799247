"""The bundled smoke sample: 15 hand-written chains (one per aspect) on generated images.

It is a SMOKE SAMPLE for testing the tooling offline, not HVCU-Bench: its numbers mean nothing.
"""

from pathlib import Path

SMOKE_DIR: Path = Path(__file__).resolve().parent / "data"
