"""Data utilities for fairseq-local (synthetic corpora for tests and demos)."""
