"""Record batch formats, the encoder, the walkers and Arrow (src/logbroker/records)."""
