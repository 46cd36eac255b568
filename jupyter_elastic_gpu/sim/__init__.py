"""Discrete-event simulator: replays a workload through any ``core`` policy on a virtual clock."""
