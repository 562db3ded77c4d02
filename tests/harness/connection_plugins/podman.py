# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The test ground's podman connection: containers.podman's, with pipelining.

Molecule's podman driver names its nodes' connection ``podman``. A plugin of
that name in a configured ``connection_plugins`` directory is found before
the collection's, so the scenarios get this one (.config/molecule/config.yml).

containers.podman 1.18 (ansible 12) runs ``podman exec`` without ``-i``, so a module's input
cannot be piped: every module costs a ``podman mount`` and three ``podman
exec`` (make a temporary directory; make the copied module executable; run
it and remove the directory). Here ``exec -i`` carries the
module on stdin, as the docker connection does, so Ansible pipelines: one
``podman exec`` per module. The container's filesystem is mounted only when
a file is really copied (copy, template, fetch). containers.podman 1.21
(ansible 14) does both itself; then this plugin only names it ``podman``.
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
      container_timeout:
        description: Timeout in seconds for container operations, 0 for none (containers.podman 1.21's option).
        default: 0
        type: int
        vars:
          - name: ansible_podman_timeout
        env:
          - name: ANSIBLE_PODMAN_TIMEOUT
      mount_detection:
        description: Copy files through the container's mount point (containers.podman 1.21's option).
        default: true
        type: bool
        vars:
          - name: ansible_podman_mount_detection
        env:
          - name: ANSIBLE_PODMAN_MOUNT_DETECTION
      ignore_mount_errors:
        description: Fall back to C(podman cp) when mounting fails (containers.podman 1.21's option).
        default: true
        type: bool
        vars:
          - name: ansible_podman_ignore_mount_errors
      extra_env_vars:
        description: Additional environment variables to set in the container (containers.podman 1.21's option).
        default: {}
        type: dict
        vars:
          - name: ansible_podman_extra_env
      privilege_escalation_method:
        description: Method to use for privilege escalation inside the container (containers.podman 1.21's option).
        default: auto
        choices: [auto, sudo, su, none]
        type: str
        vars:
          - name: ansible_podman_privilege_escalation
      working_directory:
        description: Working directory for commands executed in the container (containers.podman 1.21's option).
        type: str
        vars:
          - name: ansible_podman_working_directory
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
    """containers.podman.podman with stdin attached, so modules are pipelined.

    The containers.podman that ansible 14 ships (1.21.0) does this itself:
    `exec -i` when a module comes on stdin, the mount only for a copy. Then
    this class only gives its connection the name `podman`, and its options
    above are a superset of that release's, which reads them all. The older
    one that ansible 12 ships (1.18.0, the fallback venv) gets the overrides.
    """

    transport = "podman"
    has_pipelining = True
    _UPSTREAM_PIPELINES = bool(PodmanConnection.has_pipelining)

    def _connect(self):
        if self._UPSTREAM_PIPELINES:
            super()._connect()
            return
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
        if self._UPSTREAM_PIPELINES:
            return super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        ConnectionBase.exec_command(self, cmd, in_data=in_data, sudoable=sudoable)
        exec_args = ["exec"]
        if in_data is not None:
            exec_args.append("-i")
        if self.user:
            exec_args.extend(("--user", self.user))
        return self._podman(exec_args, shlex.split(to_native(cmd, errors="surrogate_or_strict")), in_data)

    def put_file(self, in_path, out_path):
        if not self._UPSTREAM_PIPELINES:
            self._ensure_mounted()
        super().put_file(in_path, out_path)

    def fetch_file(self, in_path, out_path):
        if not self._UPSTREAM_PIPELINES:
            self._ensure_mounted()
        super().fetch_file(in_path, out_path)
