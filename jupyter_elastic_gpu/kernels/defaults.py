"""The server-wide default: every kernel this Jupyter server starts goes through the
provisioner (no GPU unless it holds a lease), whatever its kernel spec, unless the spec names
a provisioner of its own or the deployment chose another default."""

from __future__ import annotations

from typing import Any

from jupyter_client.provisioning import KernelProvisionerFactory

from . import PROVISIONER_NAME


def provision_server_kernels(serverapp: Any, log: Any) -> bool:
    """Make the provisioner the default of ``serverapp``'s kernels; False (and a log line)
    when the deployment set ``c.KernelProvisionerFactory.default_provisioner_name`` or
    ``$JUPYTER_DEFAULT_PROVISIONER_NAME`` to another one, which wins."""
    factory = KernelProvisionerFactory.instance(parent=serverapp)
    chosen = factory.default_provisioner_name
    configured = "default_provisioner_name" in serverapp.config.get("KernelProvisionerFactory", {})
    if chosen == PROVISIONER_NAME:
        return True
    if configured or chosen != "local-provisioner":
        log.warning(
            "elastic-gpu: kernels use the provisioner %r chosen by this deployment, so kernels "
            "without a lease may see every GPU (set it to %r to hide them)",
            chosen,
            PROVISIONER_NAME,
        )
        return False
    factory.default_provisioner_name = PROVISIONER_NAME
    return True
