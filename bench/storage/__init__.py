"""Storage engine benchmark (issue 2): ``python -m bench.storage``."""
