"""``python -m elastic_gpu_sidecar``: the command-line interface."""

import sys

from .cli import main

sys.exit(main())
