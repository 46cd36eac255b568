# The Jupyter server's settings on Binder; binder/start puts this folder on JUPYTER_CONFIG_PATH.
c = get_config()  # noqa: F821

# Binder's machines have no GPU: four simulated ones, each a logical CPU device inside the
# trainer, so that the real mechanism runs (strategy, checkpoint, restart on another count),
# only without the speed-up.
c.ElasticGPUApp.simulated_gpus = 4

# Binder runs every server under a JupyterHub and sets JUPYTERHUB_* for it, but there is no
# elastic-gpu service on that Hub: the scheduler stays embedded in this server (personal mode).
c.ElasticGPUApp.hub_service_url = ""
