"""Stand-ins for outside services the tests talk to (the Hugging Face Hub)."""
