"""The live scheduler service: the asyncio loop, grants and heartbeats, reasons; and its rooms,
``storage`` (what it keeps), ``execution`` (where jobs run) and ``port`` (the operations the
web routes call, answered here or by a shared scheduler)."""
