"""LLaMA-Factory datasets and LoRA configs for tuning on generated chains (not built yet: see the open issues)."""
