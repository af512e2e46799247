"""LoRA tuning on generated chains with LLaMA-Factory: datasets (prepare), configs (render), training runs (run)."""
