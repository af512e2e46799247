"""lmms-eval model classes shipped by this package (registered through the entry point in plugin.py)."""
