"""Benchmark construction and MCTS instruction-data synthesis on one OpenAI-compatible client (in progress).

Built so far: `client` (async chat client with bounded concurrency, retries and a persistent request
cache) and `replies` (JSON objects out of model replies). The MCTS search, the direct baseline and the
benchmark-construction pipeline are open issues.
"""
