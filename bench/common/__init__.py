"""What every bench shares: the command line, work dir and output (``harness``),
bounded loops and summaries (``stats``) and what a run ran on (``environment``)."""
