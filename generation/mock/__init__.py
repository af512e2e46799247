"""`hvcu mock serve`: a deterministic OpenAI-compatible endpoint that answers every prompt the toolkit sends."""
