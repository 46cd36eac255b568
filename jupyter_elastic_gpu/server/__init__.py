"""Jupyter server extension: the scheduler's REST API and websocket inside JupyterLab."""
