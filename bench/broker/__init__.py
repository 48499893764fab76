"""Single-node broker benchmark (issue 3): ``python -m bench.broker``."""
