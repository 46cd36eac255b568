"""Real OS accounts for the two-user suite: created when missing (root only), and a Python
interpreter that they, not only root, can run.

``unavailable(reason)`` skips the suite where it cannot run (not root, no ``useradd``), with
the reason; with ``CI=true`` it fails instead, so that CI never passes by skipping it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from needs import missing
from servers import as_user

#: The shared scheduler's service account, and two users of the box.
SCHEDULER, ANN, BOB = "egpu-sched", "egpu-ann", "egpu-bob"
ACCOUNTS = (SCHEDULER, ANN, BOB)


def unavailable(reason: str) -> None:
    missing(f"the two-account suite cannot run: {reason}", "it needs root to add accounts")


def ensure_accounts() -> None:
    """Create the accounts that do not exist yet (each with a home and its own group)."""
    if os.geteuid() != 0:
        unavailable("the two-account suite creates OS users and runs servers as them: run as root")
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    for name in ACCOUNTS:
        try:
            pwd.getpwnam(name)
            continue
        except KeyError:
            pass
        res = subprocess.run(
            [useradd, "--create-home", "--user-group", "--shell", "/bin/sh", name],
            capture_output=True,
            text=True,
        )
        if res.returncode != 0:
            unavailable(f"cannot create the OS user {name}: {res.stderr.strip() or res.stdout}")


def home(user: str) -> Path:
    return Path(pwd.getpwnam(user).pw_dir)


def chown(path: Path, user: str, mode: int) -> Path:
    pw = pwd.getpwnam(user)
    os.chown(path, pw.pw_uid, pw.pw_gid)
    os.chmod(path, mode)
    return path


def _runs_for(python: str, user: str, env: dict) -> bool:
    code = "import jupyter_elastic_gpu, jupyter_server, elastic_gpu_sidecar, aiosqlite"
    try:
        res = subprocess.run(
            [python, "-c", code], capture_output=True, timeout=60, **as_user(user, env)
        )
    except OSError:  # not even executable by that account
        return False
    return res.returncode == 0


def shared_python(base: Path, user: str) -> tuple[str, dict]:
    """(a Python every account can run with this test's packages, environment for it).

    This test's interpreter when ``user`` can run it; else (it lives in a private folder such
    as /root) a virtual environment in ``base`` made from a system Python of the same version,
    which reads this one's site-packages (readable by all) through a ``.pth`` line."""
    env = {**os.environ, "JUPYTER_CONFIG_PATH": str(Path(sys.prefix) / "etc" / "jupyter")}
    if _runs_for(sys.executable, user, env):
        return sys.executable, env
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"]
    base_python = next((c for c in candidates if os.access(c, os.X_OK)), None)
    if base_python is None:
        unavailable(
            f"{sys.executable} is not runnable by other accounts and there is no system "
            f"python{version} to share this environment's packages with them"
        )
    venv = base / "shared-venv"
    subprocess.run([base_python, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    lines = "".join(f"import site; site.addsitedir({p!r})\n" for p in sorted(ours))
    Path(site, "_egpu_shared.pth").write_text(lines)
    if not _runs_for(python, user, env):
        unavailable(
            f"neither {sys.executable} nor {python} can import this environment's packages as "
            f"{user}: install them where every account can read them"
        )
    return python, env
