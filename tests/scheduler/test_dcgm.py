"""MIG slices' utilisation from a DCGM Exporter (GPUs whose NVML reports none, such as an
A100 in MIG mode): its page as the exporter writes it, served by a real HTTP server here, read
with a deadline; what the page cannot say stays unknown, never made up."""

from __future__ import annotations

import logging

import pytest
from servers import PageServer

from jupyter_elastic_gpu.scheduler.execution.dcgm import DcgmExporter, instance_figure, parse

GPU0 = "GPU-34319582-d595-d1c7-d1d2-179bcfa61660"
# dcgm-exporter's format (its default labels, dcp-metrics-included.csv's field): a whole GPU,
# then three GPU instances of an A100 in MIG mode, one idle.
PAGE = f"""# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{{gpu="1",UUID="GPU-bbb",device="nvidia1",modelName="Tesla T4",Hostname="box"}} 37
# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.
# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge
DCGM_FI_PROF_GR_ENGINE_ACTIVE{{gpu="1",UUID="GPU-bbb",device="nvidia1",modelName="Tesla T4",Hostname="box"}} 0.370000
DCGM_FI_PROF_GR_ENGINE_ACTIVE{{gpu="0",UUID="{GPU0}",device="nvidia0",modelName="NVIDIA A100-SXM4-40GB",GPU_I_PROFILE="1g.5gb",GPU_I_ID="13",Hostname="box"}} 0.995687
DCGM_FI_PROF_GR_ENGINE_ACTIVE{{gpu="0",UUID="{GPU0}",device="nvidia0",modelName="NVIDIA A100-SXM4-40GB",GPU_I_PROFILE="1g.5gb",GPU_I_ID="11",Hostname="box"}} 0.000000
DCGM_FI_PROF_GR_ENGINE_ACTIVE{{gpu="0",UUID="{GPU0}",device="nvidia0",modelName="NVIDIA A100-SXM4-40GB",GPU_I_PROFILE="3g.20gb",GPU_I_ID="2",Hostname="box"}} 0.25
"""


def test_each_gpu_instance_is_read_by_its_gpu_and_instance_id():
    figures = parse(PAGE)
    assert instance_figure(figures, GPU0, 0, 13) == pytest.approx(0.995687)
    assert instance_figure(figures, GPU0, 0, 11) == 0.0
    assert instance_figure(figures, GPU0, 0, 2) == 0.25
    assert instance_figure(figures, GPU0, 0, 7) is None  # an instance the page does not list
    assert instance_figure(figures, "GPU-bbb", 1, 0) is None  # a whole GPU: not a slice's
    # an exporter set to name the UUID label "uuid", or to leave it out: found by the index
    lower = parse(PAGE.replace('UUID="', 'uuid="'))
    assert instance_figure(lower, GPU0, 0, 13) == pytest.approx(0.995687)
    bare = parse(PAGE.replace(f'UUID="{GPU0}",', ""))
    assert instance_figure(bare, GPU0, 0, 2) == 0.25
    # out of range or not a number: clipped, or left unknown
    odd = PAGE.replace("} 0.25", "} 1.7").replace("} 0.000000", "} NaN")
    assert instance_figure(parse(odd), GPU0, 0, 2) == 1.0
    assert instance_figure(parse(odd), GPU0, 0, 11) is None


def test_a_page_that_is_not_prometheus_text_is_refused():
    with pytest.raises(ValueError):
        parse("<html><body>Grafana</body></html>\n")


@pytest.fixture
def exporter():
    server = PageServer(PAGE)
    yield server
    server.stop()


def test_the_exporter_is_read_and_a_failure_is_said_once_and_leaves_figures_unknown(
    exporter, caplog
):
    reader = DcgmExporter(exporter.url)
    assert instance_figure(reader.read(), GPU0, 0, 2) == 0.25

    exporter.status = 500
    exporter.page = "exporter failed"
    with caplog.at_level(logging.INFO, logger="jupyter_elastic_gpu"):
        assert reader.read() == {}
        assert reader.read() == {}
        said = [r.getMessage() for r in caplog.records]
        assert len(said) == 1 and "cannot be read" in said[0] and "500" in said[0], said
        assert exporter.url in said[0] and "MIG utilisation unknown" in said[0]

        exporter.status, exporter.page = 200, "# an exporter with no MIG GPU\n"
        assert reader.read() == {}
        assert "lists no DCGM_FI_PROF_GR_ENGINE_ACTIVE of a GPU instance" in caplog.text

        exporter.page = PAGE
        assert reader.read()
        assert "answers again" in caplog.records[-1].getMessage()


def test_a_slow_exporter_is_given_up_on_at_its_deadline(exporter):
    exporter.hold = True
    assert DcgmExporter(exporter.url, timeout=0.5).read() == {}
    # the deadline ended the read: the exporter holds the request still
    assert exporter.requests == 1 and not exporter.release.is_set()


def test_a_refused_connection_gives_no_figures(exporter):
    url = exporter.url
    exporter.stop()  # nobody listens there any more
    assert DcgmExporter(url, timeout=2).read() == {}


def test_the_setting_takes_an_http_url_or_nothing():
    from traitlets import TraitError

    from jupyter_elastic_gpu.server.extension import ElasticGPUApp

    app = ElasticGPUApp()
    assert app.dcgm_exporter_url == ""  # not read unless set
    app.dcgm_exporter_url = " http://127.0.0.1:9400/metrics "
    assert app.dcgm_exporter_url == "http://127.0.0.1:9400/metrics"
    for bad in ("file:///etc/passwd", "127.0.0.1:9400/metrics", "http://"):
        with pytest.raises(TraitError, match="is not an http\\(s\\) URL"):
            app.dcgm_exporter_url = bad
    assert app.dcgm_exporter_url == "http://127.0.0.1:9400/metrics"
