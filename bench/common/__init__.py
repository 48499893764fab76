"""What every bench shares: the command line, work dir and output (``harness``),
bounded loops and summaries (``stats``), what a run ran on (``environment``),
the processes of brokers and etcd (``procs``, which the tests use too) and
what ``/proc`` says about them (``procfs``)."""
