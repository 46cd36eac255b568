"""The scheduler as a JupyterHub-managed service (``jupyter elastic-gpu hub-service``), its
activity reports to the Hub, and ``hub-demo``: a local JupyterHub to try it on."""
