"""jupyter-elastic-gpu: elastic, adaptive GPU scheduling for shared Jupyter GPU servers."""

from ._version import __version__

__all__ = ["__version__"]


def _jupyter_server_extension_points() -> list[dict]:
    """The server extension (auto-enabled on install through jupyter-config/)."""
    from .server.extension import ElasticGPUApp

    return [{"module": "jupyter_elastic_gpu", "app": ElasticGPUApp}]


def _jupyter_labextension_paths() -> list[dict]:
    """The prebuilt JupyterLab extension (the sidebar), for ``jupyter labextension develop``;
    an installed wheel ships it in ``share/jupyter/labextensions`` already."""
    return [{"src": "labextension", "dest": "jupyter-elastic-gpu"}]


def load_ipython_extension(ipython) -> None:
    """``%load_ext jupyter_elastic_gpu``: the %%elastic_train magic and its friends."""
    from .notebook.magics import ElasticMagics

    ipython.register_magics(ElasticMagics)
