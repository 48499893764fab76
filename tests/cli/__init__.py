"""The logbroker command line and inspect (src/logbroker/cli, src/logbroker/dump)."""
