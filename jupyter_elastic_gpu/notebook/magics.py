"""``%%elastic_train``, ``%elastic_jobs``, ``%elastic_cancel``: the notebook's way in.

``%load_ext jupyter_elastic_gpu`` registers them. The magic finds the scheduler of the Jupyter
server that started the kernel (or the environment's, or the box's shared daemon) without any
setting, checks the options and the cell before anything is submitted, and returns a job
handle, whose output is the job's card in JupyterLab and its text view elsewhere.
"""

from __future__ import annotations

import argparse
import os
import posixpath
import time
from collections.abc import Callable, Mapping
from typing import Any

from elastic_gpu_sidecar.protocol import JobKind
from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from ..core.reason_text import gpu_range
from ..errors import BadRequest
from ..listing import hidden_line, job_filter, magic_filter_options
from ..models.requests import check_notebook_path
from ..options import as_flags, in_our_voice, job_request, magic_job_options
from .client import SchedulerClient, SchedulerError
from .discovery import discover, server_root
from .job import ElasticJob, in_kernel
from .script import CellError, build_script, check_cell, pack
from .text import jobs_table

#: Set in a kernel's environment by jupyter_server (ipykernel copies it to ``__session__``):
#: the notebook's path, relative to the server's root, or its absolute path when the front
#: end names the session (JupyterLab does).
SESSION_ENV = "JPY_SESSION_NAME"


def submitting_notebook(
    user_ns: Mapping[str, Any], environ: Mapping[str, str] = os.environ
) -> str | None:
    """The notebook this kernel runs for, relative to its Jupyter server's root as the file
    browser names it, from what jupyter_server tells the kernel and nothing else; None for a
    console, a kernel no server started, or a notebook outside the server's root."""
    session = user_ns.get("__session__") or environ.get(SESSION_ENV)
    if not isinstance(session, str) or not session.lower().endswith(".ipynb"):
        return None
    if os.path.isabs(session):
        root = server_root(environ)
        if root is None:
            return None
        session = os.path.relpath(os.path.realpath(session), os.path.realpath(root))
        session = session.replace(os.sep, "/")
    try:
        return check_notebook_path(posixpath.normpath(session))
    except ValueError:  # not one the API takes: the job goes without it
        return None


#: The magics as a user types them; every usage error starts with the one it is about.
TRAIN, JOBS, GPU_LEASE, CANCEL = "%%elastic_train", "%elastic_jobs", "%gpu_lease", "%elastic_cancel"


def parsed(magic: Callable, line: str, name: str) -> argparse.Namespace:
    """``line`` parsed by ``magic``'s options; a usage error names the magic as typed, as the
    command line's errors name the command."""
    try:
        return parse_argstring(magic, line)
    except UsageError as e:
        raise UsageError(f"{name}: {in_our_voice(str(e))}") from None


@magics_class
class ElasticMagics(Magics):
    _client: SchedulerClient | None = None

    @property
    def client(self) -> SchedulerClient:
        if self._client is None:
            try:
                self._client = discover().client()
            except SchedulerError as e:
                raise UsageError(e.message) from None
        return self._client

    def _call(self, fn, *args):
        try:
            return fn(*args)
        except SchedulerError as e:
            if e.status is None:
                self._client = None  # the server may have moved: find it again next time
            raise UsageError(as_flags(e.message)) from None

    @magic_arguments()
    @magic_job_options
    @argument(
        "--pass",
        dest="pass_vars",
        default="",
        metavar="A,B",
        help="notebook variables to send to the trainer (pickled); the cell runs in its own "
        "process and sees nothing else of the notebook",
    )
    @argument("--wait", action="store_true", help="block the kernel until the job ends")
    @argument("--as", dest="as_var", metavar="NAME", help="also store the job handle in NAME")
    @cell_magic
    def elastic_train(self, line: str, cell: str):
        """Train the code of this cell (Keras, PyTorch Lightning, a Hugging Face Trainer or a
        torchrun script: --framework) as an elastic GPU job.

        The cell becomes a job: it runs in its own process under a sidecar, on as many GPUs as
        the scheduler gives it between --min-gpus and --max-gpus, and is resized while it
        trains without losing work. The kernel stays free (unless --wait); the cell's output is
        the job's live card (its text where the lab extension is not installed), and `job = _`
        keeps a handle: job.status(), job.wait(), job.logs(), job.cancel(), job.load_model(),
        job.history. The options are those of `jupyter elastic-gpu submit`.
        """
        args = parsed(self.elastic_train, line, TRAIN)
        if not cell.strip():
            raise UsageError(f"{TRAIN}: the cell is empty: put the training code below it")
        passed = [n.strip() for n in args.pass_vars.split(",") if n.strip()]
        user_ns = self.shell.user_ns
        try:
            check_cell(cell, user_ns, passed)
            request = job_request(
                args,
                kind=JobKind.SCRIPT,
                script=build_script(cell, passed),
                cwd=os.getcwd(),
                inputs=pack(passed, user_ns),
                notebook=submitting_notebook(user_ns),
            )
        except (CellError, BadRequest) as e:
            raise UsageError(f"{TRAIN}: {e}") from None
        job = self._call(self.client.submit, request.model_dump(mode="json", exclude_none=True))
        for note in job.get("notes") or []:
            print(f"note: {as_flags(note)}")
        handle = ElasticJob(self.client, job["id"], job["name"])
        if args.as_var:
            user_ns[args.as_var] = handle
        # Waiting in a notebook: the card shows while the kernel is busy, and is the cell's one
        # output (in a terminal, wait() prints progress and the result prints the end).
        shown = args.wait and in_kernel()
        if shown:
            handle.show()
        if args.wait:
            try:
                handle.wait()
            except KeyboardInterrupt:
                print(
                    f"stopped waiting; the job goes on (cancel it with %elastic_cancel {handle.id})"
                )
        handle._skip_display = shown
        return handle

    @magic_arguments()
    @magic_filter_options
    @line_magic
    def elastic_jobs(self, line: str = "") -> None:
        """Print my jobs (open ones and those finished in the last 24 h, unless --all or
        --since says otherwise) and the queue (others' jobs as owner, size and state). The
        options are those of `jupyter elastic-gpu status`."""
        args = parsed(self.elastic_jobs, line, JOBS)
        try:
            query = job_filter(args, time.time())
        except ValueError as e:
            raise UsageError(f"{JOBS}: {e}") from None
        me = self._call(self.client.whoami)["user"]
        user = query.user or me
        listed = self._call(self.client.jobs, query.model_copy(update={"user": user}).as_query())
        who = "of yours" if user == me else f"of {user}"
        print(jobs_table(listed["jobs"]) if listed["jobs"] else f"no jobs {who}")
        note = hidden_line(listed.get("hidden") or 0, args)
        if note:
            print(note)
        if query.user is not None:
            return
        queue = self._call(self.client.queue)["queue"]
        others = [
            q for q in queue if q["user"] != me and (not query.state or q["state"] in query.state)
        ]
        if others:
            print("\nothers' jobs:")
            for q in others:
                print(
                    f"  {q['id']}  {q['user']}  {q['state']}  {len(q['gpus'])} GPUs "
                    f"({gpu_range(q['min_gpus'], q['max_gpus'])})"
                )

    # -- interactive GPU leases (docs/interactive-gpus.md) -------------------------------------
    @magic_arguments()
    @argument(
        "what",
        metavar="N|PROFILE",
        help="GPUs this kernel should have (0: give them back), or a MIG profile such as "
        "1g.10gb: one MIG slice of it",
    )
    @argument("-y", "--yes", action="store_true", help="do not ask before restarting")
    @line_magic
    def gpu_lease(self, line: str) -> None:
        """%gpu_lease N | PROFILE: restart this kernel with a lease of N GPUs, or of one MIG
        slice of PROFILE (asks first)."""
        from ..core.slices import check_profile
        from .lease import gpu_lease

        args = parsed(self.gpu_lease, line, GPU_LEASE)
        usage = f"usage: {GPU_LEASE} N (GPUs, 0 to give them back) or {GPU_LEASE} 1g.10gb"
        gpus, mig = 1, None
        if args.what.lstrip("-").isdigit():
            gpus = int(args.what)
            if gpus < 0:
                raise UsageError(f"{GPU_LEASE}: N must be at least 0, got {gpus}; {usage}")
        else:
            try:
                mig = check_profile(args.what)
            except ValueError as e:
                raise UsageError(f"{GPU_LEASE}: {e}; {usage}") from None
        print(self._call(gpu_lease, self.client, gpus, args.yes, mig))

    # -- end of interactive GPU leases ----------------------------------------------------------

    @line_magic
    def elastic_cancel(self, line: str) -> None:
        """%elastic_cancel JOB_ID: checkpoint and stop the job."""
        job_id = line.strip()
        if not job_id:
            raise UsageError(f"{CANCEL}: a job id is required; usage: {CANCEL} JOB_ID (see {JOBS})")
        job = self._call(self.client.cancel, job_id)
        print(f"{job['id']} ({job['name']}): {job['state']}")
