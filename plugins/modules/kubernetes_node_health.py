#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: kubernetes_node_health
short_description: Tell the Kubernetes scheduler, from the node, whether its GPUs are fit for work
version_added: 0.1.0
description:
  - Runs on the GPU node. Sets the condition C(GpufleetGpuHealth) on the node's own Node object, and the taint
    C(gpufleet.nvidia/gpu-health=critical:NoSchedule), while the health judgement of the verify role finds a
    critical GPU, or NVML does not start at all. Both are cleared when the judgement finds nothing critical. The
    condition follows NVSentinel's conventions for its GPU conditions (docs/kubernetes.md says which, with sources)
    under a type of its own; no other condition and no other taint on the Node is touched.
  - It talks to the API server with the node's own credential (O(credential)), a ServiceAccount token whose RBAC
    names this Node only. The credential is kept on the node (O(credential_path), mode 0600) for the boot-time
    check, C(gpufleet-verify-boot), which publishes the same way at every boot, before Ansible runs.
  - The condition's heartbeat is written on every call; the module reports a change only when the condition's
    status, reason or message, or the taint, changes.
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.mutating
  - gpufleet.nvidia.attributes.internal
attributes:
  check_mode:
    support: full
    details: Reads the Node and reports what would change; writes neither the Node nor the credential file.
  diff_mode:
    support: full
    details: The condition's status, reason and message, and the Node's taints, before and after.
  idempotent:
    support: full
    details: A second call with the same judgement changes nothing but the condition's heartbeat time.
options:
  health:
    description:
      - The verify role's health check of this node (C(layer=health)), as its report holds it. Its
        C(observed.judged) findings of severity V(critical) set the condition and the taint.
      - A check whose status is V(not_available) (NVML did not answer) counts as critical; one that was not
        judged (V(not_managed), deferred to first boot) changes nothing.
    type: dict
    required: true
  credential:
    description:
      - The node's credential. Written to O(credential_path) when it differs from the file there; without it, the
        file is read.
    type: dict
    suboptions:
      server:
        description: The API server's URL, as the node reaches it.
        type: str
        required: true
      certificate_authority_data:
        description: The API server's CA certificate, PEM, base64-encoded (as a kubeconfig's).
        type: str
        required: true
      token:
        description: The ServiceAccount's bearer token.
        type: str
        required: true
      node:
        description: The node's name in Kubernetes.
        type: str
        required: true
  credential_path:
    description: Where the node keeps its credential, for the boot-time check.
    type: path
    default: /etc/gpufleet/kubernetes/node-health.json
  timeout:
    description: Seconds to wait for each answer of the API server.
    type: int
    default: 10
"""

EXAMPLES = r"""
- name: Publish the GPUs' health to the Node
  gpufleet.nvidia.kubernetes_node_health:
    health: "{{ __verify_health }}"
    credential:
      server: https://api.cluster.example:6443
      certificate_authority_data: "{{ secret.data['ca.crt'] }}"
      token: "{{ secret.data.token | b64decode }}"
      node: gpu-node-07
"""

RETURN = r"""
status:
  description: The condition's status now, V(True) while a GPU is critical; V(null) where the health was not judged.
  returned: always
  type: str
  sample: "True"
critical:
  description: The critical findings behind the condition, as its message lists them.
  returned: always
  type: list
  elements: dict
condition_changed:
  description: Whether the condition's status, reason or message changed.
  returned: always
  type: bool
taint_changed:
  description: Whether the taint was added or removed.
  returned: always
  type: bool
credential_changed:
  description: Whether the credential file was written.
  returned: always
  type: bool
"""

import json
import os
import typing as t

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils._durable import write_json
from ansible_collections.gpufleet.nvidia.plugins.module_utils._kube_node_health import (
    NodeApi,
    NodeHealthError,
    nvml_unusable,
    read_credential,
)

CREDENTIAL_KEYS = ("server", "certificate_authority_data", "token", "node")


def health_findings(health: dict[str, t.Any]) -> list[dict[str, t.Any]] | None:
    """The findings the Node's condition is made of; None where the health was not judged."""
    status = health.get("status")
    if status == "not_available":
        return [nvml_unusable(str(health.get("summary") or "NVML did not answer"))]
    if status not in ("pass", "warn", "fail"):
        return None
    return list((health.get("observed") or {}).get("judged") or [])


class NodeHealthPublisher:
    """The credential file and the Node's condition and taint, in that order: a run killed in between leaves a
    credential the next boot can use, and the Node as it was."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        self.params = module.params

    def credential(self) -> tuple[dict[str, t.Any], bool]:
        """(the credential, whether the file changes)."""
        path = self.params["credential_path"]
        given = self.params["credential"]
        if given is None:
            return read_credential(path), False
        wanted = {key: given[key] for key in CREDENTIAL_KEYS}
        try:
            current = read_credential(path)
        except NodeHealthError:
            current = None
        if current == wanted and (os.stat(path).st_mode & 0o777) == 0o600:
            return wanted, False
        if not self.module.check_mode:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            write_json(path, wanted)
        return wanted, True

    def run(self) -> dict[str, t.Any]:
        findings = health_findings(self.params["health"])
        try:
            credential, credential_changed = self.credential()
            if findings is None:
                return {
                    "changed": credential_changed,
                    "status": None,
                    "critical": [],
                    "condition_changed": False,
                    "taint_changed": False,
                    "credential_changed": credential_changed,
                }
            api = NodeApi(credential, timeout=float(self.params["timeout"]))
            published = api.publish(findings, check_mode=self.module.check_mode)
        except NodeHealthError as exc:
            hint = {
                401: " - the token was refused: delete its Secret and run verify again to make a new one",
                403: " - the credential may not touch this Node: is verify_kubernetes_node_name the name kubectl get nodes shows?",
                404: " - Kubernetes has no such node: set verify_kubernetes_node_name to the name kubectl get nodes shows",
            }.get(exc.code or 0, "")
            self.module.fail_json(msg="kubernetes_node_health: {0}{1}".format(exc, hint))
        result = {
            "changed": credential_changed or published["condition"] or published["taint"],
            "status": published["status"],
            "critical": [finding for finding in findings if finding.get("severity") == "critical"],
            "condition_changed": published["condition"],
            "taint_changed": published["taint"],
            "credential_changed": credential_changed,
        }
        if self.module._diff:
            result["diff"] = {
                "before_header": "Node {0}".format(credential["node"]),
                "after_header": "Node {0}".format(credential["node"]),
                "before": json.dumps(published["before"], indent=2, sort_keys=True) + "\n",
                "after": json.dumps(published["after"], indent=2, sort_keys=True) + "\n",
            }
        return result


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "health": {"type": "dict", "required": True},
            "credential": {
                "type": "dict",
                "options": {
                    "server": {"type": "str", "required": True},
                    "certificate_authority_data": {"type": "str", "required": True},
                    "token": {"type": "str", "required": True, "no_log": True},
                    "node": {"type": "str", "required": True},
                },
            },
            "credential_path": {"type": "path", "default": "/etc/gpufleet/kubernetes/node-health.json"},
            "timeout": {"type": "int", "default": 10},
        },
        supports_check_mode=True,
    )
    module.exit_json(**NodeHealthPublisher(module).run())


if __name__ == "__main__":
    main()
