"""The live scheduler service: the asyncio loop, leases and heartbeats, reasons; and its rooms,
``storage`` (what it keeps) and ``execution`` (where jobs run)."""
