"""Resize pause and lost work of the sidecar vs termination, and our per-step overhead.

Everything is measured side by side in one run on this machine (simulated GPUs = logical CPU
devices, so absolute times are CPU times; the ratios are what carry over):

* pause: resize request -> first training step on the new devices, and the work lost, for
  the sidecar (with and without its standby interpreter) and for the termination mechanism
  (kill at once, restart from the last periodic checkpoint);
* floor: a fresh Python process that imports TensorFlow, builds the model under the target
  strategy and restores the checkpoint; pause/floor says how close to that limit we are;
* step overhead: ``model.fit`` with our callbacks vs a bare ``model.fit``, interleaved calls
  (4 epochs each, the first dropped), medians of per-step times.

    python benchmarks/resize_overhead.py [--resizes 3] [--pairs 21] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import output_file, positive, progress_records, sidecar_env, whole, write_json
from elastic_gpu_sidecar.jobdir import read_json
from elastic_gpu_sidecar.protocol import STATUS

WORKLOAD = '''
"""Benchmark workload: an MLP on a tf.data pipeline; an ordinary Keras script."""
import numpy as np
import tensorflow as tf
import keras

N, FEATURES, BATCH, WIDTH = 8192, 64, 64, 512


def data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, FEATURES)).astype("float32")
    y = (x @ rng.normal(size=(FEATURES, 1))).astype("float32")
    return x, y


def build_model():
    model = keras.Sequential([
        keras.Input((FEATURES,)),
        keras.layers.Dense(WIDTH, activation="relu"),
        keras.layers.Dense(WIDTH, activation="relu"),
        keras.layers.Dense(1),
    ])
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")
    return model


if __name__ == "__main__":
    x, y = data()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(N, seed=1).batch(BATCH)
    build_model().fit(ds, epochs=10000, verbose=0)
'''

FLOOR = """
import sys, time
t_import = time.monotonic()
import numpy as np
import tensorflow as tf
sys.path.insert(0, sys.argv[1])
import workload
n = int(sys.argv[3])
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * n)
if n > 1:
    tf.distribute.experimental_set_strategy(tf.distribute.MirroredStrategy(
        [d.name for d in tf.config.list_logical_devices("CPU")][:n]))
model = workload.build_model()
with model.distribute_strategy.scope():
    model.optimizer.build(model.trainable_variables)
state = np.load(sys.argv[2])
keys = sorted(state.files)
vs = list(model.variables) + list(model.optimizer.variables)
mk = [k for k in keys if k.startswith("model/")] + [k for k in keys if k.startswith("optimizer/")]
assert len(vs) == len(mk), (len(vs), len(mk))
for v, k in zip(vs, mk):
    v.assign(state[k])
print("restored", flush=True)
"""


def sh(cmd: list[str]) -> str:
    return " ".join(shlex.quote(c) for c in cmd)


def wait(pred, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


def wait_running(job: Path, generation: int) -> dict:
    def first():
        return next(
            (r for r in progress_records(job) if r["generation"] == generation and r.get("first")),
            None,
        )

    return wait(first, 180, f"generation {generation} to train")


# -- part A: resize pause and lost work ----------------------------------------------------------
def measure_resizes(
    work: Path, name: str, extra: list[str], resizes: int, settle: float, every: float
) -> list[dict]:
    job = work / f"job-{name}"
    cmd = [
        sys.executable,
        "-m",
        "elastic_gpu_sidecar",
        "run",
        "--job-dir",
        str(job),
        "--gpus",
        "0,1",
        "--simulated",
        "--checkpoint-interval",
        str(every),
        "--quiet",
        *extra,
        "--",
        str(work / "workload.py"),
    ]
    proc = subprocess.Popen(
        cmd,
        env=sidecar_env(3),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        grants = ["0,1,2,3", "0,1"]
        for i in range(resizes):
            wait_running(job, i + 1)
            time.sleep(settle)
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "elastic_gpu_sidecar",
                    "resize",
                    "--job-dir",
                    str(job),
                    "--gpus",
                    grants[i % 2],
                ],
                env=sidecar_env(3),
                check=True,
                capture_output=True,
            )
        wait_running(job, resizes + 1)
        time.sleep(1.0)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "elastic_gpu_sidecar",
                "cancel",
                "--job-dir",
                str(job),
                "--wait",
            ],
            env=sidecar_env(3),
            check=True,
            capture_output=True,
        )
        proc.wait(120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    recs = progress_records(job)
    out = []
    for r in read_json(job / STATUS, {}).get("resizes", []):
        gen = r["generation"]
        rates = [
            x["samples_per_s"] for x in recs if x["generation"] == gen - 1 and x["samples_per_s"]
        ]
        step_s = 64 / statistics.median(rates) if rates else None
        out.append(dict(r, replicas=len(r["to_gpus"]), step_s=step_s))
    return out


# -- part B: the floor ----------------------------------------------------------------------------
def measure_floor(work: Path, state: Path, replicas: int) -> float:
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", FLOOR, str(work), str(state), str(replicas)],
        env=sidecar_env(3),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = proc.stdout.readline()
    elapsed = time.monotonic() - t0
    proc.wait()
    if line.strip() != "restored":
        raise SystemExit("floor measurement failed")
    return elapsed


# -- part C: per-step overhead (runs in a worker process) -----------------------------------------
def overhead_worker(work: Path, pairs: int, replicas: int) -> dict:
    import numpy as np
    import tensorflow as tf

    sys.path.insert(0, str(work))
    import workload
    from elastic_gpu_sidecar.jobdir import JobDir
    from elastic_gpu_sidecar.trainer.keras import bootstrap, strategy
    from elastic_gpu_sidecar.trainer.keras.callback import ElasticCallback
    from elastic_gpu_sidecar.trainer.keras.session import FitSession
    from elastic_gpu_sidecar.trainer.stopsignal import StopRequest

    gpus = [str(i) for i in range(replicas)]
    strategy.setup_strategy(gpus, simulated=True)
    job = JobDir(work / "overhead-job")
    job.create()
    rt = bootstrap.Runtime(job, {"checkpoint_interval": 3600, "seed": 1}, 1, gpus, StopRequest())
    import keras

    bare = keras.Model.fit
    bootstrap.install(rt)
    ours = keras.Model.fit
    x, y = workload.data()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(workload.BATCH).cache()
    model = workload.build_model()

    class Timer(keras.callbacks.Callback):
        """Per-step time of each epoch but the first of a call (iterator warm-up)."""

        def on_train_begin(self, logs=None):
            self.times = []

        def on_epoch_begin(self, epoch, logs=None):
            self.t0 = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            if epoch > 0:
                self.times.append((time.perf_counter() - self.t0) / steps)

    steps = len(x) // workload.BATCH
    results = {}
    for label, args in (("tf.data", (ds,)), ("numpy", (x, y))):
        kw = {"batch_size": workload.BATCH} if label == "numpy" else {}
        for fit in (bare, ours):  # warm up: trace both paths
            fit(model, *args, epochs=1, verbose=0, shuffle=False, **kw)
        b_times, o_times = [], []
        for i in range(pairs):
            order = (
                ((bare, b_times), (ours, o_times))
                if i % 2 == 0
                else ((ours, o_times), (bare, b_times))
            )
            for fit, sink in order:
                timer = Timer()
                fit(model, *args, epochs=4, verbose=0, shuffle=False, callbacks=[timer], **kw)
                sink.extend(timer.times)
        results[label] = {
            "bare_step_ms": statistics.median(b_times) * 1e3,
            "ours_step_ms": statistics.median(o_times) * 1e3,
            "overhead": statistics.median(o_times) / statistics.median(b_times) - 1,
            "bare_best_ms": min(b_times) * 1e3,
            "ours_best_ms": min(o_times) * 1e3,
            "best_overhead": min(o_times) / min(b_times) - 1,
        }

    # the callbacks' own cost, measured directly: Keras dispatching a step's hooks to the
    # user's callbacks alone vs with ours added (same logs, same CallbackList code)
    fargs = {"x": ds, "y": None, "batch_size": None, "epochs": 1, "verbose": 0,
             "callbacks": None, "validation_split": 0.0, "validation_data": None,
             "shuffle": False, "class_weight": None, "sample_weight": None,
             "initial_epoch": 0, "steps_per_epoch": None, "validation_steps": None,
             "validation_batch_size": None, "validation_freq": 1}  # fmt: skip
    session = FitSession(rt, model, 10_000, 0, fargs, None)
    session.cb = ElasticCallback(session)
    logs = {"loss": tf.constant(0.5)}
    dispatch = {}
    for name, extra in (("bare", []), ("ours", [session.cb.gate, session.lr, session.cb])):
        cl = keras.callbacks.CallbackList([Timer(), *extra], add_history=True, model=model,
                                          epochs=1, steps=10**6, verbose=0)  # fmt: skip
        cl.on_train_begin()
        cl.on_epoch_begin(0)
        samples = []
        for _ in range(7):
            t0 = time.perf_counter()
            for i in range(5000):
                cl.on_train_batch_begin(i)
                cl.on_train_batch_end(i, logs)
            samples.append((time.perf_counter() - t0) / 5000)
        dispatch[name] = min(samples)
    results["callback_us_per_step"] = (dispatch["ours"] - dispatch["bare"]) * 1e6
    # the cost of one periodic checkpoint (amortised over --checkpoint-interval)
    from elastic_gpu_sidecar.trainer.keras import tfstate

    t0 = time.perf_counter()
    for _ in range(5):
        arrays, _ = tfstate.capture(model)
        rt.store.write({"state.npz": tfstate.save_npz(arrays)}, {"benchmark": True})
    results["checkpoint_ms"] = (time.perf_counter() - t0) / 5 * 1e3
    results["params"] = int(sum(np.prod(v.shape) for v in model.trainable_variables))
    return results


def measure_overhead(work: Path, pairs: int, replicas: int) -> dict:
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--overhead-worker",
            str(work),
            "--pairs",
            str(pairs),
            "--overhead-replicas",
            str(replicas),
        ],
        env=sidecar_env(3),
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"overhead worker failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- report ---------------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--resizes", type=whole(), default=3, help="resizes per mechanism (2<->4)")
    ap.add_argument("--settle", type=positive, default=8.0, help="seconds of training between")
    ap.add_argument("--checkpoint-interval", type=positive, default=10.0)
    ap.add_argument("--pairs", type=whole(), default=21, help="interleaved bare/ours fit pairs")
    ap.add_argument("--floor-runs", type=whole(), default=3)
    ap.add_argument("--overhead-replicas", type=whole(), default=1)
    ap.add_argument("--json", help="also write the raw figures here")
    ap.add_argument("--keep", action="store_true", help="keep the job dirs (printed at the end)")
    ap.add_argument("--overhead-worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    output_file(ap, args.json, "--json")
    if args.overhead_worker:
        print(
            json.dumps(
                overhead_worker(Path(args.overhead_worker), args.pairs, args.overhead_replicas)
            )
        )
        return 0

    print("$", sh([sys.executable, *sys.argv]))
    print(f"machine: {os.cpu_count()} CPUs, simulated GPUs (logical CPU devices)\n")
    work = Path(tempfile.mkdtemp(prefix="elastic-bench-"))
    (work / "workload.py").write_text(WORKLOAD)
    mechanisms = [
        ("sidecar", "sidecar + standby", []),
        ("sidecar-fresh", "sidecar, fresh process", ["--no-standby"]),
        ("termination", "termination", ["--mechanism", "termination"]),
    ]
    resizes = {}
    for key, label, extra in mechanisms:
        print(f"measuring {args.resizes} resizes: {label} ...", flush=True)
        resizes[key] = measure_resizes(
            work, key, extra, args.resizes, args.settle, args.checkpoint_interval
        )
    state = max((work / "job-sidecar" / "checkpoints").glob("ckpt-*/state.npz"))
    floors = {}
    for n in (2, 4):
        print(f"measuring the floor on {n} replicas ...", flush=True)
        floors[n] = statistics.median(measure_floor(work, state, n) for _ in range(args.floor_runs))
    print(f"measuring the step overhead ({args.pairs} interleaved pairs) ...", flush=True)
    over = measure_overhead(work, args.pairs, args.overhead_replicas)

    print("\nResize pause (request -> first step on the new devices) and work lost")
    head = (
        f"{'mechanism':<24}{'resize':>8}{'pause s':>9}{'floor s':>9}{'pause/floor':>13}"
        f"{'lost steps':>12}{'lost s':>8}"
    )
    print(head)
    print("-" * len(head))
    summary = {}
    for key, label, _ in mechanisms:
        ratios, pauses, lost = [], [], []
        for r in resizes[key]:
            frm, to = len(r["from_gpus"]), len(r["to_gpus"])
            ratio = r["pause_s"] / floors[to]
            lost_s = (r["lost_steps"] or 0) * (r["step_s"] or 0)
            ratios.append(ratio)
            pauses.append(r["pause_s"])
            lost.append(lost_s)
            print(
                f"{label:<24}{f'{frm}->{to}':>8}{r['pause_s']:>9.2f}{floors[to]:>9.2f}"
                f"{ratio:>13.2f}{r['lost_steps']:>12}{lost_s:>8.2f}"
            )
        summary[key] = {
            "pause_s": statistics.median(pauses),
            "pause_over_floor": statistics.median(ratios),
            "lost_s": statistics.mean(lost),
        }
    print("\nMedians")
    print(
        f"{'mechanism':<24}{'pause s':>9}{'pause/floor':>13}{'lost s (mean)':>15}"
        f"{'pause vs termination':>22}"
    )
    base = summary["termination"]["pause_s"] + summary["termination"]["lost_s"]
    for key, label, _ in mechanisms:
        s = summary[key]
        cost = s["pause_s"] + s["lost_s"]
        print(
            f"{label:<24}{s['pause_s']:>9.2f}{s['pause_over_floor']:>13.2f}{s['lost_s']:>15.2f}"
            f"{cost / base:>21.2f}x"
        )
    print(
        f"(floor = fresh python + import tensorflow + build + restore: "
        f"{floors[2]:.2f} s on 2 replicas, {floors[4]:.2f} s on 4; target pause/floor <= 1.3;"
        f" 'vs termination' compares pause + lost work)"
    )

    print(
        f"\nStep overhead of our callbacks over a bare model.fit "
        f"({args.overhead_replicas} replica(s), {args.pairs} interleaved pairs, medians)"
    )
    print(
        f"{'input':<10}{'bare ms/step':>14}{'ours ms/step':>14}{'overhead':>10}"
        f"{'bare best':>11}{'ours best':>11}{'overhead':>10}"
    )
    for label in ("tf.data", "numpy"):
        o = over[label]
        print(
            f"{label:<10}{o['bare_step_ms']:>14.3f}{o['ours_step_ms']:>14.3f}"
            f"{o['overhead']:>9.1%}{o['bare_best_ms']:>11.3f}{o['ours_best_ms']:>11.3f}"
            f"{o['best_overhead']:>9.1%}"
        )
    cb_us = over["callback_us_per_step"]
    step_ms = over["tf.data"]["bare_step_ms"]
    print(
        f"(medians/minima over {3 * args.pairs} epochs each; this machine's step times are "
        f"noisy, so also measured directly: our callbacks add {cb_us:.1f} us of dispatch per "
        f"step = {cb_us / 1e3 / step_ms:.2%} of this {step_ms:.1f} ms step)"
    )
    print(
        f"(target < 2%; one checkpoint of this {over['params']:,}-parameter model takes "
        f"{over['checkpoint_ms']:.0f} ms, i.e. "
        f"{over['checkpoint_ms'] / 1e3 / 60:.2%} of the time at the default --checkpoint-interval 60)"
    )
    if args.json:
        write_json(
            args.json,
            {"resizes": resizes, "floors": floors, "summary": summary, "overhead": over},
        )
    if args.keep:
        print(f"job dirs kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
