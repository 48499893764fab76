"""The broker: request handlers over the storage engine, and the asyncio server."""
