"""Data into the core: the hub and local sources, images, validation, provenance, file and JSON helpers."""
