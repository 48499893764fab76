"""The broker process: its configuration (config.py), its lifecycle and
wiring (server.py: storage, metadata, the pipeline, the listeners,
background loops) and OS tuning (fdlimit.py, malloc.py)."""
