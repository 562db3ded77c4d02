# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""verify_kubernetes_health's settings are refused first thing in the verify role, each naming its variable and the
fix, before the role reads or writes anything on the node (the first task after the layers' declaration). The
publication itself is tested against the real API server in the verify scenario."""

from __future__ import annotations

import json
import re
import sys

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.playbook_run import playbook

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c1, cluster: {server: "https://10.0.0.1:6443"}}]
contexts: [{name: ctx1, context: {cluster: c1, user: u1}}]
current-context: ctx1
users: [{name: u1, user: {token: t}}]
"""


def verify_declaration(tmp_path, **settings):
    """The verify role's first tasks (declared.yml) on localhost, with `settings`; no node is read."""
    (tmp_path / "kubeconfig").write_text(KUBECONFIG)
    play = [
        {
            "name": "The verify role's declaration and its checks",
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "vars": dict({"verify_kubernetes_health": True, "verify_kubernetes_kubeconfig": str(tmp_path / "kubeconfig")}, **settings),
            "tasks": [
                {"ansible.builtin.import_role": {"name": "gpufleet.nvidia.verify", "tasks_from": "declared"}},
            ],
        }
    ]
    path = tmp_path / "play.yml"
    path.write_text(json.dumps(play))
    return playbook("-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable, "--check", str(path))


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"verify_health": False}, "verify_kubernetes_health: the Node condition is made from the health judgement; set verify_health: true"),
        ({"verify_bake": True}, "verify_kubernetes_health: an image bake (verify_bake) has no Kubernetes node yet"),
        ({"verify_kubernetes_node_name": "gpu_node_07"}, 'verify_kubernetes_node_name: "gpu_node_07" is not a Kubernetes node name'),
        ({"verify_kubernetes_kubeconfig": "/nonexistent/kubeconfig"}, "verify_kubernetes_kubeconfig: /nonexistent/kubeconfig is not a file on the controller"),
        ({"verify_kubernetes_context": "elsewhere"}, "verify_kubernetes_server: the API server the node reaches is not known"),
    ],
)
def test_a_bad_setting_is_named_with_its_fix(tmp_path, settings, message):
    run = verify_declaration(tmp_path, **settings)
    assert run.returncode != 0, run.stdout
    assert message in " ".join(run.stdout.split()), run.stdout[-3000:]


def test_good_settings_pass_the_check_with_the_server_of_the_kubeconfigs_context(tmp_path):
    """The server comes from the kubeconfig's current context (no verify_kubernetes_server given). The run goes on
    past the check (to read NVML on this machine, which is not this test's)."""
    run = verify_declaration(tmp_path, verify_kubernetes_node_name="gpu-node-07")
    checked = re.search(r"TASK \[gpufleet\.nvidia\.verify : Check the settings that tell Kubernetes[^\n]*\n(?:[^\n]*\n)*?ok: \[localhost\]", run.stdout)
    assert checked, run.stdout[-3000:]
    assert "verify_kubernetes_" not in run.stdout, run.stdout[-3000:]
