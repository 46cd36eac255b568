"""Sidecar and non-intrusive trainer bootstrap for elastic GPU jobs.

The sidecar (``python -m elastic_gpu_sidecar run ...``) supervises one training job; the
trainer (``python -m elastic_gpu_sidecar.trainer``) runs the user's unmodified Keras script
under a ``tf.distribute`` strategy it injects. Importing this package is cheap on purpose: it
pulls in nothing but the standard library, so the sidecar and the synthetic workload stay tiny.
"""

__version__ = "0.1.0"
