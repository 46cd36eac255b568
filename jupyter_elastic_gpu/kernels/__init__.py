"""Notebook kernels and GPUs: no GPU unless the kernel holds a lease (docs/interactive-gpus.md).

``provisioner.py`` is a jupyter_client kernel provisioner that every Jupyter front end uses
(JupyterLab through the server's kernel manager, nbclient, Voila): it hides the GPUs from a
kernel, or leases GPUs from the scheduler and shows the kernel exactly those. ``channel.py``
is how it reaches the scheduler, ``specs.py`` the "Python 3 (N GPUs)" kernel specs, and
``restart.py`` the route ``%gpu_lease`` uses to restart a running kernel with a lease.
"""

#: The provisioner's entry point name (group ``jupyter_client.kernel_provisioners``), as kernel
#: specs and ``KernelProvisionerFactory.default_provisioner_name`` name it.
PROVISIONER_NAME = "elastic-gpu-provisioner"
#: What CUDA_VISIBLE_DEVICES holds in a kernel without a lease: an index CUDA rejects, so it
#: enumerates no device (an empty string does too, but some libraries read it as "unset").
NO_GPU = "-1"
#: Environment of a kernel: CUDA's own, TensorFlow's memory growth, and ours.
ENV_CUDA = "CUDA_VISIBLE_DEVICES"
ENV_TF_GROWTH = "TF_FORCE_GPU_ALLOW_GROWTH"
ENV_LEASE = "ELASTIC_GPU_LEASE"  # the lease's job id, in a kernel that holds one
#: jupyter_client's own variable for the default provisioner: set in a kernel's environment, so
#: that a kernel it starts itself (nbclient in a notebook) is provisioned the same way.
ENV_DEFAULT_PROVISIONER = "JUPYTER_DEFAULT_PROVISIONER_NAME"
