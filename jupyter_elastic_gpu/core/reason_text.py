"""The words of a reason, made from its kind and figures: the one formatter on the Python side.

Every text the API sends as ``reason`` (and the idle-GPU line, and the event log's resize
messages) is made here; the lab extension's ``reasons.ts`` makes the same text from the same
data, and both are tested against ``tests/fixtures/reasons.json``. The words are short (a line
of the sidebar) and round their figures ("~6 s", "~3 min"): the figures are estimates, and a
text that changed at every progress report would be pushed to every viewer each time.

A text is a head (opening with a state word where it has one: ``lead``) and a detail after
": ", so a front end can show the detail alone (after the grant it explains) or drop the
state it already shows, without reading the words.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .reason_kinds import JobRef, ReasonKind

K = ReasonKind
#: How many holders of a waiting job's GPUs its reason names; the rest are counted.
NAMED_HOLDERS = 2

AHEAD = {
    "critical": "on the critical path",
    "shorter": "shorter",
    "waited": "has waited longer",
    "priority": "higher priority",
    "running": "already running",
    "earlier": "submitted earlier",
    "less_left": "less time left",
    "less_service": "less attained service",
    "less_weighted": "less progress-weighted service",
}
BECAUSE = {
    "in_progress": "its resize is in progress",
    "finishing": "it is about to finish",
    "resized": "it was resized moments ago",
    "started": "it started moments ago",
}


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def gpu_range(lo: int, hi: int) -> str:
    """A job's GPU range, the one way every front end writes it: '1–4 GPUs', '2 GPUs'."""
    return plural(lo, "GPU") if lo == hi else f"{lo}\u2013{hi} GPUs"


def about(seconds: float) -> str:
    """A duration as an estimate: '~6 s', '~35 s', '~3 min', '~1.5 h', '~2 days'.

    Coarser as it grows (whole seconds under 10 s, then steps of 5 s, minutes, hours), so that
    a figure that drifts as a job progresses changes its text rarely."""
    if not math.isfinite(seconds):
        return "never"
    s = max(seconds, 0.0)
    if s < 0.5:
        return "under 1 s"
    if s < 10:
        return f"~{round(s)} s"
    if s < 57.5:
        return f"~{5 * round(s / 5)} s"
    if s < 59.5 * 60:
        return f"~{max(round(s / 60), 1)} min"
    if s < 23.5 * 3600:
        h = s / 3600
        return f"~{h:.1f} h" if h < 9.95 else f"~{round(h)} h"
    d = s / 86400
    return f"~{d:.1f} days" if d < 9.95 else f"~{round(d)} days"


def format_days(seconds: float) -> str:
    """A half-life as people say it: '7 days', '36 hours', '20 minutes'."""
    for unit, size in (("day", 86400.0), ("hour", 3600.0), ("minute", 60.0)):
        if seconds >= size:
            n = seconds / size
            text = f"{n:.0f}" if abs(n - round(n)) < 0.05 else f"{n:.1f}"
            return f"{text} {unit}{'' if text == '1' else 's'}"
    return f"{seconds:.0f} seconds"


def _num(x: float) -> str:
    return f"{x:g}" if x == int(x) else f"{x:.2g}"


def job_name(ref: JobRef | Mapping[str, Any]) -> str:
    """A job as a reason names it: 'its name' in quotes, its id when it has none."""
    name = ref.get("name")
    return f"'{name}'" if name else str(ref.get("id", "?"))


def named(figures: Mapping[str, Any], name_of: Callable[[str], str | None]) -> dict[str, Any]:
    """``figures`` with a name on every job they mention that ``name_of`` names (a reader's
    own jobs, say: the core knows only ids)."""

    def ref(job: Mapping[str, Any]) -> dict[str, Any]:
        name = name_of(job["id"])
        return {**job, "name": name} if name else dict(job)

    out = dict(figures)
    for key in ("for_job", "start_after"):
        if key in out:
            out[key] = ref(out[key])
    if "holders" in out:
        out["holders"] = [ref(h) for h in out["holders"]]
    if "causes" in out:
        out["causes"] = [{**c, "job": ref(c["job"])} for c in out["causes"]]
    return out


@dataclass(frozen=True, slots=True)
class Parts:
    """A reason's text in its parts: ``head`` (opening with the state word ``lead``, where
    it has one) and ``detail`` (after ": "; "" for none)."""

    lead: str | None
    head: str
    detail: str = ""

    @property
    def text(self) -> str:
        return f"{self.head}: {self.detail}" if self.detail else self.head


def _limit(f: Mapping[str, Any]) -> str:
    share = f.get("share")
    if not share:
        return f"{f.get('user', '?')} may hold at most {plural(f.get('cap', 0), 'GPU')} at a time"
    text = (
        f"fair share: {share['user']}'s share now is {share['due']} of {share['total']} GPUs "
        f"(weight {_num(share['weight'])} of {_num(share['weights'])})"
    )
    if share.get("over"):
        text += (
            f"; {share['over']} has used {share['ratio']:.1f}x their share over the last "
            f"{format_days(share['half_life_s'])}"
        )
    return text


def _holders(f: Mapping[str, Any]) -> str:
    """'; GPUs held by 'resnet' (on the critical path), j-3 and j-4 (shorter)': the named
    holders, those with the same cause together, then how many more."""
    holders = f.get("holders") or []
    if not holders:
        return ""
    groups: dict[str, list[str]] = {}
    for h in holders[:NAMED_HOLDERS]:
        groups.setdefault(h.get("ahead", ""), []).append(job_name(h))
    named = [_listed(names) + (f" ({AHEAD[why]})" if why else "") for why, names in groups.items()]
    others = f.get("others", 0) + max(len(holders) - NAMED_HOLDERS, 0)
    if others:
        named.append(plural(others, "more job"))
    return f"; GPUs held by {_listed(named)}"


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def start_words(in_s: float, kind: str | None = None, after: str | None = None) -> str:
    """``starts in ~3 min on A100-80GB, when 'mnist' finishes``: a forecast start in words."""
    when = "starts in under a minute" if in_s < 60 else f"starts in {about(in_s)}"
    on = f" on {kind}" if kind else ""
    return f"{when}{on}, when {after} finishes" if after else f"{when}{on}"


def _start(f: Mapping[str, Any]) -> str:
    if "start_in_s" not in f:
        return ""
    after = f.get("start_after")
    return "; " + start_words(f["start_in_s"], f.get("start_kind"), after and job_name(after))


def _kept_figures(f: Mapping[str, Any]) -> str:
    if "left_s" in f and "cost_s" in f:
        return f" ({about(f['left_s'])} left; a resize costs {about(f['cost_s'])})"
    if "hold_s" in f:
        return f" (left alone {about(f['hold_s'])} after a change)"
    return ""


def _unpaid(f: Mapping[str, Any]) -> str:
    text = f"would save {about(f['gain_s'])}, a resize costs {about(f['cost_s'])}"
    if f["gain_s"] >= f["cost_s"]:  # saves more than it costs, but not by the margin
        text += f" (must save {about(f['need_s'])})"
    return text


def _together(f: Mapping[str, Any]) -> str:
    """Where a job's GPUs must be: on one server, of one kind where kinds are mixed."""
    return "of one kind on one server" if f.get("kinds") else "on one server"


def _spread(f: Mapping[str, Any]) -> str:
    kinds = f" ({f['kinds']})" if f.get("kinds") else ""
    return (
        f"needs {plural(f.get('needs', 0), 'GPU')} {_together(f)}: {f.get('free', 0)} free, "
        f"at most {f.get('widest', 0)} together{kinds}"
    )


def _slice(f: Mapping[str, Any]) -> str:
    n, before = f.get("slices", 0), f.get("before", 0)
    if not n and f.get("drained"):
        return (
            f"needs a {f.get('profile', '')} MIG slice: none in service now ({f['drained']} on "
            "a GPU drained for maintenance)"
        )
    if not n:
        return (
            f"needs a {f.get('profile', '')} MIG slice: none here now (a GPU's MIG layout changed)"
        )
    text = f"needs a {f.get('profile', '')} MIG slice: {n} here, {'held' if n == 1 else 'all held'}"
    if before:
        text += f"; {before} more wait{'s' if before == 1 else ''} before it"
    return text


def _resized(f: Mapping[str, Any]) -> str:
    held, gpus = f.get("held", 0), f.get("gpus", 0)
    if gpus > held:
        return (
            f"grown from {held}, saves {about(f.get('change_s', 0.0))}, "
            f"a resize costs {about(f.get('cost_s', 0.0))}"
        )
    later = f"(it ends {about(-f.get('change_s', 0.0))} later)"
    room = f.get("for_job")
    if not room:
        return f"shrunk from {held} for jobs its GPUs help more {later}"
    does = "start now" if room.get("starts") else "grow"
    return f"shrunk from {held} so that {job_name(room)} can {does} {later}"


def parts(kind: ReasonKind | str, figures: Mapping[str, Any] | None = None) -> Parts:
    """The text of a reason of ``kind`` with ``figures``, in its parts; a queued job's
    forecast (``start_in_s``, ``start_kind``, ``start_after``) at the end."""
    p = _parts(kind, figures or {})
    start = _start(figures or {})
    if not start:
        return p
    if p.detail:
        return Parts(p.lead, p.head, p.detail + start)
    return Parts(p.lead, p.head + start)


def _parts(kind: ReasonKind | str, f: Mapping[str, Any]) -> Parts:
    kind = K(kind)
    gpus = f.get("gpus", 0)
    # what a job runs on: its GPUs, or its MIG slice (``core/slices.py``)
    held = f"a {f['profile']} MIG slice" if f.get("profile") else plural(gpus, "GPU")
    on = f"running on {held}"
    elastic = f"running on {gpus} of up to {f.get('top', 0)} GPUs"
    waits = "suspended" if f.get("suspended") else "queued"
    if kind == K.NEW:
        return Parts("queued", "queued", "waiting for the first decision")
    if kind == K.WAITING:
        detail = f"needs {plural(f.get('needs', 0), 'GPU')}, {f.get('free', 0)} free"
        return Parts(waits, waits, detail + _holders(f))
    if kind == K.SPREAD:
        return Parts(waits, waits, _spread(f))
    if kind == K.MIG_SLICE:
        return Parts(waits, waits, _slice(f))
    if kind == K.RUNNING:
        return Parts(
            "running", f"running on a {f['profile']} MIG slice" if f.get("profile") else on
        )
    if kind == K.AT_MAXIMUM:
        return Parts("running", f"{on} (its maximum)")
    if kind == K.KEPT:
        because = BECAUSE[f.get("because", "in_progress")]
        return Parts("running", on, f"kept as is because {because}{_kept_figures(f)}")
    if kind == K.CRITICAL:
        detail = "on the critical path, these end it in time with the rest of the work"
        return Parts("running", elastic, detail)
    if kind == K.CROWDED:
        return Parts("running", elastic, "the others help other jobs more")
    if kind == K.NO_FASTER:
        return Parts("running", elastic, "more would not make it faster")
    if kind == K.RESIZE_WOULD_NOT_PAY:
        return Parts("running", elastic, f"{f.get('to', 0)} {_unpaid(f)}")
    if kind == K.RESIZED:
        return Parts("running", elastic, _resized(f))
    if kind == K.LIMITED:
        if gpus:
            return Parts("running", elastic, _limit(f))
        return Parts(waits, waits, _limit(f))
    if kind == K.WAITING_FOR_SERVER:
        detail = (
            "your jobs start from your own Jupyter server, which is not running; start it "
            "(on JupyterHub: Start My Server) and this job is scheduled"
        )
        return Parts(None, "waiting for your server", detail)
    if kind == K.STARTING:
        return Parts("starting", f"starting on {held}")
    if kind == K.RESUMING:
        return Parts("resuming", f"resuming on {held} from its checkpoint")
    if kind == K.RESIZING:
        head = f"resizing to {plural(gpus, 'GPU')}"
        return Parts("resizing", head, "checkpoint, then restart on them")
    by = f.get("by", "?")
    if kind == K.HELD:
        if f.get("stopping"):
            head, detail = (
                f"suspending at {by}'s request",
                "checkpoint, then stop; held until resumed",
            )
            return Parts("suspending", head, detail)
        if f.get("admin"):
            detail = "it gets no GPUs until an admin resumes it"
            return Parts(
                "suspended",
                f"suspended by {by} (an admin)",
                f"{detail}; it resumes from its checkpoint",
            )
        detail = f"it gets no GPUs until resumed (POST jobs/{f.get('job_id', '?')}/resume)"
        return Parts("suspended", f"suspended by {by}", f"{detail}; it resumes from its checkpoint")
    if kind == K.SUSPENDED:
        why = "its GPUs went to jobs that need them more; " if f.get("for_others") else ""
        return Parts("suspended", "suspended", f"{why}it resumes from its checkpoint")
    if kind == K.UNHELD:
        return Parts("resumed", f"resumed by {by}", "waiting for the next decision")
    if kind == K.CANCELLING:
        return Parts("cancelling", f"cancelling at {by}'s request", "checkpoint, then stop")
    if kind == K.CANCELLED:
        if f.get("by"):
            return Parts("cancelled", f"cancelled by {by}")
        return Parts("cancelled", "cancelled", f.get("detail", ""))
    if kind == K.DONE:
        return Parts("done", "done")
    if kind == K.FAILED:
        return Parts("failed", "failed", f.get("detail") or "error")
    if kind == K.REQUEUED:
        if "silent_s" in f:
            detail = (
                f"its sidecar stopped answering {f['silent_s']:.0f} s ago; it resumes from its "
                "last checkpoint"
            )
            return Parts("queued", "queued again", detail)
        return Parts("queued", "queued again", f.get("detail", ""))
    if kind == K.KERNEL:
        return Parts(None, f"holds {held} for its notebook kernel")
    if kind in (K.IDLE_WARNING, K.RELEASED):
        return Parts(None, f.get("detail", ""))
    if kind == K.KERNEL_ENDED:
        if f.get("withdrawn"):
            return Parts(None, "withdrawn by its kernel before it got GPUs")
        return Parts(None, "ended", f"its kernel {'died' if f.get('died') else 'shut down'}")
    if kind == K.PUBLIC:
        state = f.get("state", "queued")
        return Parts(state, state if state == "queued" else f"{state} on {plural(gpus, 'GPU')}")
    return Parts(None, f"{plural(gpus, 'GPU')} idle", _idle(f))  # K.IDLE


def cause(
    ref: JobRef | Mapping[str, Any],
    kind: ReasonKind | str,
    figures: Mapping[str, Any] | None,
    public: bool = False,
    at: float | None = None,
) -> str | None:
    """Why the job ``ref`` takes none of the idle GPUs, as part of the idle line (None: its
    reason has nothing to do with them); ``public``: for a reader who may not see the job (no
    figures), ``at``: when the line is said (how long ago a kept job changed)."""
    f, who = figures or {}, job_name(ref)
    kind = K(kind)
    if kind == K.WAITING:
        return f"{who} needs {f['needs']}" if f.get("needs", 0) > f.get("free", 0) else None
    if kind == K.SPREAD:
        return f"{who} needs {f.get('needs', 0)} {_together(f)}"
    if kind == K.KEPT:
        because = f.get("because", "in_progress")
        if public or because not in ("resized", "started"):  # (public: its cause alone)
            return f"{who} is kept as is because {BECAUSE[because]}" + (
                "" if public else _kept_figures(f)
            )
        if at is None or "changed_at" not in f or "hold_s" not in f:
            return f"{who} is kept as is because {BECAUSE[because]}{_kept_figures(f)}"
        since = at - f["changed_at"]
        return (
            f"{who} {'was resized' if because == 'resized' else 'started'} {about(since)} ago "
            f"and is kept as is for {about(f['hold_s'] - since)} more"
        )
    if kind == K.CRITICAL:
        return f"{who} has what ends it in time with the rest of the work"
    if kind == K.NO_FASTER:
        return f"{who} would go no faster on more"
    if kind == K.RESIZE_WOULD_NOT_PAY:
        if public:
            return f"growing {who} would not pay for its resize"
        return f"growing {who} to {f['to']} {_unpaid(f)}"
    if kind == K.LIMITED:
        return f"{who} is at its user's limit" if public else f"{who}: {_limit(f)}"
    return None


def _idle(f: Mapping[str, Any]) -> str:
    said = [
        cause(c["job"], c["kind"], c.get("figures"), c.get("public", False), f.get("at"))
        for c in f.get("causes") or []
    ]
    return "; ".join(s for s in said if s) or "no job can use more"


def say(kind: ReasonKind | str, figures: Mapping[str, Any] | None = None) -> str:
    """The text of a reason of ``kind`` with ``figures``."""
    return parts(kind, figures).text


def after_state(state: str, kind: ReasonKind | str, figures: Mapping[str, Any] | None) -> str:
    """The text shown next to a badge of ``state``: without its opening state word when it
    has that one ("queued: needs 2 GPUs" beside "queued" reads "needs 2 GPUs")."""
    p = parts(kind, figures)
    if p.lead != state:
        return p.text
    rest = p.head[len(p.lead) :].strip()
    return f"{rest}: {p.detail}" if rest and p.detail else rest or p.detail


__all__ = [
    "NAMED_HOLDERS",
    "Parts",
    "about",
    "after_state",
    "cause",
    "format_days",
    "gpu_range",
    "job_name",
    "named",
    "parts",
    "plural",
    "say",
]
