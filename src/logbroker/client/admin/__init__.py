"""The Admin client: one core, its sync and asyncio shells, its results."""
