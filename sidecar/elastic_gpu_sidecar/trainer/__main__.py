"""``python -m elastic_gpu_sidecar.trainer``: the trainer process (``run.py``)."""

import sys

from .run import main

sys.exit(main())
