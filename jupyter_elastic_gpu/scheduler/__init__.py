"""The live scheduler service: asyncio loop, store, GPU inventory, launchers, agent API."""
