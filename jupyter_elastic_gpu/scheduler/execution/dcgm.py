"""MIG instances' utilisation from a DCGM Exporter, for GPUs where NVML reports none.

NVML's device utilisation is not supported in MIG mode, and its per-instance sampling (GPM)
exists only on Hopper and later: on an A100 or A30 in MIG mode NVML says nothing of how busy a
slice is. DCGM does (its profiling field ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, per GPU instance),
and labs that run DCGM usually run NVIDIA's DCGM Exporter beside it for Prometheus. Reading
that exporter's ``/metrics`` page needs neither DCGM's Python bindings (not on PyPI) nor a
second connection to its host engine. Each sample names its GPU (``gpu``: the NVML index, and
the GPU's ``UUID``) and its GPU instance (``GPU_I_ID``), which NVML gives each instance too
(``nvmlDeviceGetGpuInstanceId``).

The exporter is another process, so a read has a short deadline, and any failure (refused,
slow, not an exporter's page) leaves the figures unknown and is said once in the log.
"""

from __future__ import annotations

import logging
import math
import urllib.error
import urllib.request
from collections.abc import Mapping

from prometheus_client.parser import text_string_to_metric_families

log = logging.getLogger(__name__)

#: The DCGM field read: the share of time a GPU instance's graphics engine was busy (0..1).
FIELD = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
#: Longest page read: an exporter of 8 GPUs in 7 slices each with every field is ~1 MB.
MAX_BYTES = 16 * 1024 * 1024

#: (the GPU's UUID or "#" + its NVML index, the GPU instance's id) -> busy share, 0..1.
Readings = Mapping[tuple[str, int], float]


def parse(text: str) -> dict[tuple[str, int], float]:
    """The GPU instances' figures on an exporter's page, keyed both by their GPU's UUID and by
    its index ("#0"): the UUID's label is ``UUID`` or ``uuid`` as the exporter is set up, and
    an exporter may leave it out. Samples without a GPU instance (whole GPUs) are skipped;
    raises ValueError for text that is not Prometheus' format."""
    figures: dict[tuple[str, int], float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != FIELD:
            continue
        for sample in family.samples:
            labels = sample.labels
            try:
                instance = int(labels.get("GPU_I_ID", ""))
            except ValueError:
                continue
            value = float(sample.value)
            if not math.isfinite(value):
                continue
            busy = min(max(value, 0.0), 1.0)
            uuid = labels.get("UUID") or labels.get("uuid")
            if uuid:
                figures[(uuid, instance)] = busy
            if labels.get("gpu", "").isdigit():
                figures[("#" + labels["gpu"], instance)] = busy
    return figures


def instance_figure(
    readings: Readings, uuid: str | None, index: int, instance: int
) -> float | None:
    """GPU instance ``instance`` of the GPU ``uuid`` (NVML index ``index``): by its GPU's UUID
    where the exporter names it, else by its index."""
    if uuid and (uuid, instance) in readings:
        return readings[(uuid, instance)]
    return readings.get((f"#{index}", instance))


class DcgmExporter:
    """Reads one DCGM Exporter's ``/metrics`` page (``url``) within ``timeout`` seconds."""

    def __init__(self, url: str, timeout: float = 2.0) -> None:
        self.url, self.timeout = url, timeout
        self._said: str | None = None

    def read(self) -> dict[tuple[str, int], float]:
        """The page's figures; none (said in the log, once for each kind of failure) when the
        exporter cannot be read."""
        try:
            with urllib.request.urlopen(self.url, timeout=self.timeout) as response:
                body = response.read(MAX_BYTES + 1)
            if len(body) > MAX_BYTES:
                raise ValueError(f"its page is over {MAX_BYTES // (1024 * 1024)} MiB")
            figures = parse(body.decode("utf-8", errors="replace"))
        except (OSError, ValueError) as e:  # (urllib's errors and timeouts are OSErrors)
            self._say(f"cannot be read: {e}", logging.WARNING)
            return {}
        if not figures:
            self._say(
                f"lists no {FIELD} of a GPU instance (is MIG on, and the field among those the "
                "exporter collects? it is in dcp-metrics-included.csv)",
                logging.INFO,
            )
        elif self._said is not None:
            self._said = None
            log.info("DCGM Exporter at %s answers again", self.url)
        return figures

    def _say(self, what: str, level: int) -> None:
        """Log what is wrong, unless it was the last thing said (reads come every few s)."""
        if what != self._said:
            self._said = what
            log.log(level, "DCGM Exporter at %s %s: MIG utilisation unknown", self.url, what)
