"""Readers that turn workload files (native, Pollux, Philly) into simulator workloads."""
