"""Every GPU names its kind: read from NVML's model name, from a Ray node's accelerator type,
or described for simulated GPUs (``simulated_gpus = "2xA100-80GB,2xT4"``), and shown by
``GET gpus``, ``GET status`` and the CLI; a bad description is refused with the grammar."""

from __future__ import annotations

import pytest
from traitlets.config import Config

from jupyter_elastic_gpu.scheduler.execution.gpukinds import (
    MAX_SIMULATED,
    kind_of,
    memory_mb,
    parse_simulated,
)
from jupyter_elastic_gpu.scheduler.execution.inventory import GpuInfo, SimulatedInventory, detect
from jupyter_elastic_gpu.scheduler.execution.ray_cluster import accelerator_kind
from jupyter_elastic_gpu.server.extension import ElasticGPUApp


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
        ("NVIDIA H200", "H200"),
        ("Tesla T4", "T4"),
        ("NVIDIA Tesla V100-SXM2-32GB", "V100-SXM2-32GB"),
        ("NVIDIA GeForce RTX 4090", "GeForce-RTX-4090"),
        (b"NVIDIA L4".decode(), "L4"),
        ("Simulated GPU", "simulated"),
        ("  ", "simulated"),
        ("NVIDIA", "NVIDIA"),
    ],
)
def test_the_kind_is_the_model_without_the_vendors_words(name, kind):
    assert kind_of(name) == kind


@pytest.mark.parametrize(
    ("value", "kinds"),
    [
        (0, ()),
        ("0", ()),
        (3, ("simulated",) * 3),
        (" 2 ", ("simulated",) * 2),
        ("2xA100-80GB,2xT4", ("A100-80GB", "A100-80GB", "T4", "T4")),
        ("T4", ("T4",)),
        ("1 x H100, 3X L4", ("H100", "L4", "L4", "L4")),
    ],
)
def test_a_description_gives_each_simulated_gpu_its_kind(value, kinds):
    assert parse_simulated(value) == kinds


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (-1, "'-1' asks for -1 GPUs"),
        ("", "an empty description"),
        ("2xA100,,T4", "an empty item"),
        ("0xT4", "'0xT4' asks for 0 GPUs"),
        ("2xA100{3g.40gb}", "'2xA100{3g.40gb}' is not one"),
        ("2xA100[3g]", "'3g' in '2xA100[3g]' is not a MIG profile such as 1g.10gb"),
        ("H100[3g.40gb", "unbalanced brackets"),
        ("H100[[1g.10gb]]", "unbalanced brackets"),
        ("H100[8x1g.10gb]", "at most 7 MIG instances on a GPU"),
        ("2x A100 80GB", "is not one"),
        ("2x-T4", "is not one"),
        (f"{MAX_SIMULATED + 1}", f"at most {MAX_SIMULATED}"),
        (f"{MAX_SIMULATED}xT4,T4", f"at most {MAX_SIMULATED}"),
        (True, "got True"),
    ],
)
def test_a_bad_description_says_what_is_expected(value, said):
    with pytest.raises(ValueError, match=r"expected a count|at most") as e:
        parse_simulated(value)
    assert said in str(e.value)


def test_simulated_gpus_have_their_kinds_names_and_memory():
    inv = SimulatedInventory("2xA100-80GB,T4", node="box")
    gpus = inv.snapshot()
    assert [(g.id, g.kind, g.name) for g in gpus] == [
        ("0", "A100-80GB", "Simulated A100-80GB"),
        ("1", "A100-80GB", "Simulated A100-80GB"),
        ("2", "T4", "Simulated T4"),
    ]
    assert [g.memory_total_mb for g in gpus] == [80 * 1024, 80 * 1024, None]
    assert inv.reason == "3 simulated GPUs were asked for (2 A100-80GB, 1 T4)"
    assert (memory_mb("H100-94gb"), memory_mb("T4"), memory_mb("X-0GB")) == (94 * 1024, None, None)
    plain = detect(2)[0].snapshot()
    assert [g.kind for g in plain] == ["simulated", "simulated"]


def test_a_simulated_gpu_in_mig_mode_lists_its_instances_and_is_never_placed_whole():
    from jupyter_elastic_gpu.scheduler import snapshot

    inv = SimulatedInventory("H100-80GB[3g.40gb,2x2g.20gb],T4,H100-80GB[]", node="box")
    gpus = inv.snapshot()
    assert [(s.uuid, s.profile, s.memory_total_mb) for s in gpus[0].mig] == [
        ("MIG-simulated-0-0", "3g.40gb", 40 * 1024),
        ("MIG-simulated-0-1", "2g.20gb", 20 * 1024),
        ("MIG-simulated-0-2", "2g.20gb", 20 * 1024),
    ]
    assert gpus[1].mig is None and gpus[2].mig == []  # MIG mode with no instance
    snap = snapshot.build([], gpus, {}, default_resize_cost_s=5.0)
    assert [g.id for g in snap.usable_gpus] == ["1"]


def test_a_gpu_from_a_lab_s_own_inventory_gets_its_kind_from_its_name():
    info = GpuInfo("0", 0, "box", "NVIDIA L40S", None, None, None, None)
    assert info.kind == "L40S" and info.to_dict()["kind"] == "L40S"


def test_a_ray_node_names_its_kind_by_its_accelerator_type():
    assert accelerator_kind({"GPU": 2, "accelerator_type:T4": 1.0}) == "T4"
    assert accelerator_kind({"GPU": 2}) == ""
    # two types on one node, or a name that is not a kind: nothing rather than a guess
    assert accelerator_kind({"accelerator_type:T4": 1, "accelerator_type:A10G": 1}) == ""
    assert accelerator_kind({"accelerator_type:bad name!": 1}) == ""


def test_the_setting_takes_a_count_or_a_description_and_refuses_a_bad_one():
    app = ElasticGPUApp(config=Config({"ElasticGPUApp": {"simulated_gpus": 8}}))
    assert app._simulated() == ("simulated",) * 8
    app = ElasticGPUApp()
    app.parse_command_line(["--ElasticGPUApp.simulated_gpus=2xA100-80GB,2xT4"])
    assert app._simulated() == ("A100-80GB",) * 2 + ("T4",) * 2
    app = ElasticGPUApp(config=Config({"ElasticGPUApp": {"simulated_gpus": "2xA100[3g]"}}))
    with pytest.raises(ValueError, match=r"^simulated_gpus: .*such as 2xA100-80GB,2xT4"):
        app._simulated()


def test_a_ray_node_s_probe_sends_kinds_and_mig_instances_that_come_back_whole():
    from jupyter_elastic_gpu.scheduler.execution.ray_cluster import _from_row

    sent = SimulatedInventory("H100-80GB[1g.10gb,2g.20gb],T4").snapshot()
    back = [_from_row(g.to_dict(), f"n1:{g.index}") for g in sent]
    assert [(g.id, g.kind) for g in back] == [("n1:0", "H100-80GB"), ("n1:1", "T4")]
    assert back[0].mig == sent[0].mig and back[1].mig is None
