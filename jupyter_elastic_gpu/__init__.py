"""jupyter-elastic-gpu: elastic, adaptive GPU scheduling for shared Jupyter GPU servers."""

from ._version import __version__

__all__ = ["__version__"]
