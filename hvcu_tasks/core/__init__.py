"""The pure core: vocabulary, records, prompts, both answer parsers, the metrics (standard library, core only)."""
