"""The cluster benchmark (issue 10): ``python -m bench.cluster``; see __main__."""
