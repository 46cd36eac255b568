"""The trainer process: the user's unmodified script run under a framework adapter.

``run.py`` is the process (``python -m elastic_gpu_sidecar.trainer``), the same for every
framework; ``adapter.py`` is what it asks of a framework, and each framework's adapter is a
subpackage (``keras``: Keras on TensorFlow). What every trainer kind shares, the synthetic one
included: the stop request (``stopsignal``), checkpoints (``checkpoint``), progress records
(``progress``) and log stamps (``tlog``).
"""
