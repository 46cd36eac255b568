"""The JupyterLab extension as users get it: built into the wheel, listed OK by a JupyterLab
that has no Node.js, and its model's jest tests (run from here so that CI runs them too).

The wheel is built once (``pip wheel --no-deps``, which runs the labextension build hook); a
checkout needs Node.js for that, so without Node these tests skip, except on CI (``CI`` set),
where a missing Node is a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from needs import missing

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LABEXTENSION = ROOT / "labextension"
#: The npm package name, which is also the folder under share/jupyter/labextensions.
NAME = json.loads((LABEXTENSION / "package.json").read_text())["name"]
SHARED = f"share/jupyter/labextensions/{NAME}"


def need_node() -> None:
    if shutil.which("node"):
        return
    missing("Node.js is not installed: the extension cannot be built from a checkout")


def jlpm() -> list[str]:
    """JupyterLab's pinned yarn, from the environment running the tests."""
    here = Path(sys.executable).parent / "jlpm"
    found = str(here) if here.exists() else shutil.which("jlpm")
    if not found:
        pytest.fail("jlpm is missing: install the test extras (it comes with jupyterlab)")
    return [found]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    need_node()
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        check=True,
        env={k: v for k, v in os.environ.items() if k != "HATCH_JUPYTER_BUILDER_SKIP_NPM"},
    )
    (found,) = out.glob("jupyter_elastic_gpu-*.whl")
    return found


def test_the_wheel_carries_the_built_extension(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        data = next(n.split("/data/")[0] for n in names if ".data/data/" in n) + "/data/"
        package = json.loads(z.read(f"{data}{SHARED}/package.json"))
        install = json.loads(z.read(f"{data}{SHARED}/install.json"))
    assert package["name"] == NAME
    assert package["jupyterlab"]["_build"]["load"].startswith("static/remoteEntry.")
    assert f"{data}{SHARED}/{package['jupyterlab']['_build']['load']}" in names
    assert any(n.startswith(f"{data}{SHARED}/static/") and n.endswith(".js") for n in names)
    assert install == {
        "packageManager": "python",
        "packageName": "jupyter-elastic-gpu",
        "uninstallInstructions": install["uninstallInstructions"],
    }
    # The server extension is enabled by the same wheel.
    assert f"{data}etc/jupyter/jupyter_server_config.d/jupyter_elastic_gpu.json" in names


def test_an_install_without_node_lists_the_extension_ok(wheel, tmp_path):
    """A fresh environment gets the wheel alone (no build, no Node on PATH); JupyterLab and
    the other dependencies come from the environment running the tests."""
    env_dir = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # The dependencies: this environment's packages, after the fresh one's own.
    Path(site, "test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    subprocess.run([*pip, "install", "--no-deps", "-q", str(wheel)], check=True)
    assert (env_dir / SHARED / "install.json").exists()
    clean = {
        "PATH": str(env_dir / "bin"),  # no node, no jlpm
        "HOME": str(tmp_path / "home"),
        "JUPYTER_DATA_DIR": str(tmp_path / "data"),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTER_PLATFORM_DIRS": "1",
    }
    listed = subprocess.run(
        [python, "-m", "jupyterlab.labextensions", "list"],
        capture_output=True,
        text=True,
        env=clean,
        cwd=tmp_path,
    )
    text = re.sub(r"\x1b\[[0-9;]*m", "", listed.stdout + listed.stderr)
    assert listed.returncode == 0, text
    line = next((ln for ln in text.splitlines() if NAME + " v" in ln), None)
    assert line is not None, text
    expected = rf"{re.escape(NAME)} v\S+ enabled OK \(python, jupyter-elastic-gpu\)"
    assert re.search(expected, line), line
    assert str(env_dir) in text  # found in the fresh environment, not elsewhere


def test_the_model_jest_tests_pass():
    need_node()
    if not (LABEXTENSION / "node_modules" / ".bin" / "jest").exists():
        subprocess.run([*jlpm(), "install"], cwd=LABEXTENSION, check=True)
    run = subprocess.run(
        [*jlpm(), "jest", "--ci"], cwd=LABEXTENSION, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"Tests:\s+\d+ passed, \d+ total", run.stderr), run.stderr


def test_the_sources_and_the_tests_type_check():
    """The front end and its fixtures against the API's generated types (``api-types.ts``): a
    model that changes what the server sends fails here (jest only transpiles)."""
    need_node()
    if not (LABEXTENSION / "node_modules" / ".bin" / "tsc").exists():
        subprocess.run([*jlpm(), "install"], cwd=LABEXTENSION, check=True)
    run = subprocess.run([*jlpm(), "typecheck"], cwd=LABEXTENSION, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_wheel_carries_the_admin_page(wheel):
    """Its script too, which the build makes from labextension/src/admin/ (git-ignored)."""
    folder = "jupyter_elastic_gpu/server/static/admin/"
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        for name in ("admin.html", "admin.css", "admin.js", "message.html"):
            assert folder + name in names, name
        script = z.read(folder + "admin.js").decode()
    assert "Fair share is not available on this scheduler." in script
