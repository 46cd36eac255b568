"""Resize pause and lost work of the sidecar vs termination, and our per-step overhead.

Everything is measured side by side in one run on this machine (simulated GPUs = logical CPU
devices for Keras, one CPU process each with gloo for PyTorch, so absolute times are CPU times;
the ratios are what carry over):

* pause: resize request -> first training step on the new devices, and the work lost, for
  the sidecar (with and without its standby interpreter) and for the termination mechanism
  (kill at once, restart from the last periodic checkpoint); Keras 2 <-> 4 replicas;
* floor: a fresh Python process that imports TensorFlow, builds the model under the target
  strategy and restores the checkpoint; pause/floor says how close to that limit we are;
* step overhead: ``model.fit`` with our callbacks vs a bare ``model.fit``, interleaved calls
  (4 epochs each, the first dropped), medians of per-step times;
* the same pause for PyTorch, 2 <-> 1 ranks, of a torchrun DDP script, a Lightning
  ``Trainer.fit`` and a Hugging Face ``Trainer.train`` (``_torch_workloads.py``), with and
  without the standby, against the floor of one rank (a fresh Python importing torch and the
  framework, building the model and loading the checkpoint).

    python benchmarks/resize_overhead.py [--frameworks keras,torchrun,lightning,transformers]
        [--resizes 3] [--pairs 21] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import output_file, positive, sidecar_env, whole, write_json
from _resize_runs import measure_floor, measure_resizes, sh
from _torch_workloads import WORKLOADS

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

    # the gradient noise meter (--measure-noise): the same model twice, one with the meter on
    # its optimizer (a traced train step cannot drop it again), bare fits interleaved
    from elastic_gpu_sidecar.trainer.keras.gradnoise import GradientNoise

    metered = workload.build_model()
    metered.set_weights(model.get_weights())
    meter = GradientNoise(metered)
    why = meter.install()
    if why:
        raise SystemExit(why)
    for m in (model, metered):
        bare(m, ds, epochs=1, verbose=0, shuffle=False)
    plain_t, meter_t = [], []
    for i in range(pairs):
        order = ((model, plain_t), (metered, meter_t))
        for m, sink in order if i % 2 == 0 else order[::-1]:
            timer = Timer()
            bare(m, ds, epochs=4, verbose=0, shuffle=False, callbacks=[timer])
            sink.extend(timer.times)
    results["noise"] = {
        "plain_step_ms": statistics.median(plain_t) * 1e3,
        "meter_step_ms": statistics.median(meter_t) * 1e3,
        "overhead": statistics.median(meter_t) / statistics.median(plain_t) - 1,
        "best_overhead": min(meter_t) / min(plain_t) - 1,
        "noise_scale": (meter.read(workload.BATCH) or {}).get("noise_scale"),
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
    from elastic_gpu_sidecar.trainer.keras import modelstate as tfstate

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
KERAS_MECHANISMS = [
    ("sidecar", "sidecar + standby", []),
    ("sidecar-fresh", "sidecar, fresh process", ["--no-standby"]),
    ("termination", "termination", ["--mechanism", "termination"]),
]
TORCH_MECHANISMS = KERAS_MECHANISMS[:2]
FRAMEWORKS = ("keras", *WORKLOADS)


def frameworks(text: str) -> list[str]:
    """An argparse type: frameworks from FRAMEWORKS separated by commas, each once."""
    names = [n.strip() for n in text.split(",")]
    bad = [n for n in names if n not in FRAMEWORKS]
    if bad or not names or len(set(names)) < len(names):
        raise argparse.ArgumentTypeError(
            f"must be one or more of {','.join(FRAMEWORKS)} separated by commas, each once, "
            f"got {text!r}"
        )
    return [n for n in FRAMEWORKS if n in names]


def measure_keras(args, work: Path) -> dict:
    (work / "workload.py").write_text(WORKLOAD)
    resizes = {}
    for key, label, extra in KERAS_MECHANISMS:
        print(f"keras: measuring {args.resizes} resizes: {label} ...", flush=True)
        resizes[key] = measure_resizes(
            work / f"job-{key}",
            [str(work / "workload.py")],
            extra,
            args.resizes,
            args.settle,
            args.checkpoint_interval,
        )
    state = max((work / "job-sidecar" / "checkpoints").glob("ckpt-*/state.npz"))
    floors = {}
    for n in (2, 4):
        print(f"keras: measuring the floor on {n} replicas ...", flush=True)
        floor_args = [str(work), str(state), str(n)]
        floors[n] = statistics.median(
            measure_floor(FLOOR, floor_args) for _ in range(args.floor_runs)
        )
    print(f"keras: measuring the step overhead ({args.pairs} interleaved pairs) ...", flush=True)
    over = measure_overhead(work, args.pairs, args.overhead_replicas)
    return {"resizes": resizes, "floors": floors, "overhead": over}


def measure_torch(args, work: Path, name: str) -> dict:
    """One PyTorch framework: 2 -> 1 -> 2 ... resizes with and without the standby, and the
    floor of one rank restoring the checkpoint the last resize wrote."""
    w = WORKLOADS[name]
    folder = work / name
    folder.mkdir()
    (folder / f"{name}_workload.py").write_text(w.source)
    resizes = {}
    for key, label, extra in TORCH_MECHANISMS:
        print(f"{name}: measuring {args.resizes} resizes: {label} ...", flush=True)
        out = folder / f"out-{key}"
        out.mkdir()
        resizes[key] = measure_resizes(
            folder / f"job-{key}",
            [str(folder / f"{name}_workload.py"), str(out)],
            ["--framework", name, *extra],
            args.resizes,
            args.settle,
            args.checkpoint_interval,
            grants=("0", "0,1"),
        )
    if w.own_checkpoint:
        state = folder / "out-sidecar" / "ckpt.pt"
    else:
        state = max((folder / "job-sidecar" / "checkpoints").glob("ckpt-*"))
    print(f"{name}: measuring the floor (one rank) ...", flush=True)
    floor_args = [str(folder), f"{name}_workload", str(state)]
    floor = statistics.median(measure_floor(w.floor, floor_args) for _ in range(args.floor_runs))
    return {"resizes": resizes, "floor": floor}


def report_keras(k: dict) -> dict:
    resizes, floors = k["resizes"], k["floors"]
    print("\nResize pause (request -> first step on the new devices) and work lost")
    head = (
        f"{'mechanism':<24}{'resize':>8}{'pause s':>9}{'floor s':>9}{'pause/floor':>13}"
        f"{'lost steps':>12}{'lost s':>8}"
    )
    print(head)
    print("-" * len(head))
    summary = {}
    for key, label, _ in KERAS_MECHANISMS:
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
    for key, label, _ in KERAS_MECHANISMS:
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

    return summary


def report_overhead(args, over: dict) -> None:
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
    n = over["noise"]
    print(
        f"gradient noise meter (--measure-noise) on the same model, bare fits: "
        f"{n['plain_step_ms']:.3f} -> {n['meter_step_ms']:.3f} ms/step, {n['overhead']:+.1%} "
        f"(minima {n['best_overhead']:+.1%}); it read a noise scale of "
        f"{n['noise_scale'] or float('nan'):,.0f} samples"
    )
    print(
        f"(target < 2%; one checkpoint of this {over['params']:,}-parameter model takes "
        f"{over['checkpoint_ms']:.0f} ms, i.e. "
        f"{over['checkpoint_ms'] / 1e3 / 60:.2%} of the time at the default --checkpoint-interval 60)"
    )


def report_torch(results: dict) -> dict:
    print("\nPyTorch resize pause (request -> first step of rank 0 on the new devices), 2 <-> 1")
    head = (
        f"{'framework':<16}{'mechanism':<24}{'resize':>8}{'pause s':>9}{'floor s':>9}"
        f"{'pause/floor':>13}{'lost steps':>12}"
    )
    print(head)
    print("-" * len(head))
    summary = {}
    for name, res in results.items():
        floor = res["floor"]
        for key, label, _ in TORCH_MECHANISMS:
            for r in res["resizes"][key]:
                frm, to = len(r["from_gpus"]), len(r["to_gpus"])
                print(
                    f"{WORKLOADS[name].label:<16}{label:<24}{f'{frm}->{to}':>8}"
                    f"{r['pause_s']:>9.2f}{floor:>9.2f}{r['pause_s'] / floor:>13.2f}"
                    f"{r['lost_steps']:>12}"
                )
            pauses = [r["pause_s"] for r in res["resizes"][key]]
            summary.setdefault(name, {})[key] = {
                "pause_s": statistics.median(pauses),
                "pause_over_floor": statistics.median(pauses) / floor,
                "floor_s": floor,
                "lost_steps": sum(r["lost_steps"] or 0 for r in res["resizes"][key]),
            }
    print("\nMedians")
    print(f"{'framework':<16}{'mechanism':<24}{'pause s':>9}{'floor s':>9}{'pause/floor':>13}")
    for name, by_key in summary.items():
        for key, label, _ in TORCH_MECHANISMS:
            s = by_key[key]
            print(
                f"{WORKLOADS[name].label:<16}{label:<24}{s['pause_s']:>9.2f}{s['floor_s']:>9.2f}"
                f"{s['pause_over_floor']:>13.2f}"
            )
    print(
        "(floor = one fresh python importing torch and the framework, building the model and "
        "its optimizer and loading the checkpoint; the ranks of a DDP job do that side by side)"
    )
    return summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--frameworks",
        type=frameworks,
        default=list(FRAMEWORKS),
        help=f"which to measure, separated by commas (default all: {','.join(FRAMEWORKS)})",
    )
    ap.add_argument("--resizes", type=whole(), default=3, help="resizes per mechanism")
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
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"machine: {os.cpu_count()} CPUs (load average {load}), simulated GPUs on the CPU\n")
    work = Path(tempfile.mkdtemp(prefix="elastic-bench-"))
    keras_results = measure_keras(args, work) if "keras" in args.frameworks else None
    torch_results = {n: measure_torch(args, work, n) for n in args.frameworks if n in WORKLOADS}
    raw = {}
    if keras_results is not None:
        raw.update(keras_results, summary=report_keras(keras_results))
        report_overhead(args, keras_results["overhead"])
    if torch_results:
        raw["pytorch"] = {"results": torch_results, "summary": report_torch(torch_results)}
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n(load average at the end: {load})")
    if args.json:
        write_json(args.json, raw)
    if args.keep:
        print(f"job dirs kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
