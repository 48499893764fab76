"""The Producer: one core, its sync and asyncio shells, accumulator, sender, delivery."""
