"""Shared by every scenario's testinfra tests: reach the nodes with `podman exec`.

Molecule's podman driver gives the nodes the connection `podman`, which
testinfra's Ansible backend does not know: it then runs every command of a
test (host.file, host.run, ...) through a new `ansible` ad-hoc process, about
half a second of CPU each before the node is even reached. Here a podman node
gets testinfra's own podman backend for its commands, as Docker nodes get the
docker backend out of the box. Everything else stays with the Ansible backend:
the host's name and variables, and host.ansible(...) for modules.

pytest loads this file for every scenario because its tests live below it.
"""

from __future__ import annotations

import testinfra
from testinfra.utils import ansible_runner

_ansible_host = ansible_runner.get_ansible_host


def _podman_or_ansible_host(config, inventory, host, **kwargs):
    hostvars = inventory.get("_meta", {}).get("hostvars", {}).get(host, {})
    if hostvars.get("ansible_connection") == "podman":
        return testinfra.get_host("podman://" + hostvars.get("ansible_host", host))
    return _ansible_host(config, inventory, host, **kwargs)


ansible_runner.get_ansible_host = _podman_or_ansible_host
