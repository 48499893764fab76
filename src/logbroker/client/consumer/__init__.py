"""The Consumer: one core, its sync and asyncio shells, the fetcher and its buffer."""
