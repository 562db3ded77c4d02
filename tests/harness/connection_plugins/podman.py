# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The test ground's podman connection: containers.podman's, with pipelining.

Molecule's podman driver names its nodes' connection ``podman``. A plugin of
that name in a configured ``connection_plugins`` directory is found before
the collection's, so the scenarios get this one (.config/molecule/config.yml).

containers.podman runs ``podman exec`` without ``-i``, so a module's input
cannot be piped: every module costs a ``podman mount`` and three ``podman
exec`` (make a temporary directory; make the copied module executable; run
it and remove the directory). Here ``exec -i`` carries the
module on stdin, as the docker connection does, so Ansible pipelines: one
``podman exec`` per module. The container's filesystem is mounted only when
a file is really copied (copy, template, fetch).
"""

from __future__ import annotations

DOCUMENTATION = """
    name: podman
    short_description: Run tasks in a podman container, pipelined (gpufleet test ground)
    description:
        - containers.podman.podman with C(podman exec -i), so that Ansible's pipelining works.
    extends_documentation_fragment: []
    options:
      remote_addr:
        description: The ID of the container.
        default: inventory_hostname
        vars:
          - name: ansible_host
          - name: inventory_hostname
          - name: ansible_podman_host
      remote_user:
        description: User to run commands as inside the container.
        ini:
          - section: defaults
            key: remote_user
        env:
          - name: ANSIBLE_REMOTE_USER
        vars:
          - name: ansible_user
      podman_extra_args:
        description: Extra arguments to pass to the podman command line.
        default: ''
        ini:
          - section: defaults
            key: podman_extra_args
        vars:
          - name: ansible_podman_extra_args
        env:
          - name: ANSIBLE_PODMAN_EXTRA_ARGS
      podman_executable:
        description: Executable for podman command.
        default: podman
        vars:
          - name: ansible_podman_executable
        env:
          - name: ANSIBLE_PODMAN_EXECUTABLE
      pipelining:
        description: Pipe modules to the node's Python instead of copying them.
        default: true
        type: boolean
        ini:
          - section: connection
            key: pipelining
        env:
          - name: ANSIBLE_PIPELINING
        vars:
          - name: ansible_pipelining
"""

import shlex

from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.connection import ConnectionBase, ensure_connect
from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection


class Connection(PodmanConnection):
    """containers.podman.podman with stdin attached, so modules are pipelined."""

    transport = "podman"
    has_pipelining = True

    def _connect(self):
        # No `podman mount` for every task: put_file/fetch_file mount on first use.
        ConnectionBase._connect(self)  # pylint: disable=protected-access
        self._mounted = False
        self._connected = True

    def _ensure_mounted(self):
        if not self._mounted:
            PodmanConnection._connect(self)  # pylint: disable=protected-access
            self._mounted = True

    @ensure_connect
    def exec_command(self, cmd, in_data=None, sudoable=False):
        ConnectionBase.exec_command(self, cmd, in_data=in_data, sudoable=sudoable)
        exec_args = ["exec"]
        if in_data is not None:
            exec_args.append("-i")
        if self.user:
            exec_args.extend(("--user", self.user))
        return self._podman(exec_args, shlex.split(to_native(cmd, errors="surrogate_or_strict")), in_data)

    def put_file(self, in_path, out_path):
        self._ensure_mounted()
        super().put_file(in_path, out_path)

    def fetch_file(self, in_path, out_path):
        self._ensure_mounted()
        super().fetch_file(in_path, out_path)
