# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""kubernetes_node_health: which judgements reach the Node, and the node's credential file. The Node itself is
written against the real API server in the verify scenario."""

from __future__ import annotations

import json
import os
import types

from ansible_collections.gpufleet.nvidia.plugins.modules import kubernetes_node_health as knh

XID79 = {"check": "xid", "severity": "critical", "gpu": {"index": 5}, "seen": "Xid 79", "action": "reboot"}
CREDENTIAL = {"server": "https://10.0.0.1:6443", "certificate_authority_data": "Q0E=", "token": "secret-token", "node": "gpu-7"}


def test_the_judgement_of_the_health_check_reaches_the_node_and_no_judgement_changes_nothing():
    judged = {"status": "fail", "observed": {"judged": [XID79]}}
    assert knh.health_findings(judged) == [XID79]
    assert knh.health_findings({"status": "pass", "observed": {"judged": []}}) == []
    unusable = knh.health_findings({"status": "not_available", "summary": "GPU health not read: NVML status driver_not_loaded"})
    assert [(f["check"], f["severity"]) for f in unusable] == [("nvml", "critical")]
    assert "driver_not_loaded" in unusable[0]["seen"]
    for status in ("not_managed", "deferred", None):
        assert knh.health_findings({"status": status}) is None


def publisher(tmp_path, check_mode: bool = False, given: bool = True) -> knh.NodeHealthPublisher:
    params = {
        "credential": dict(CREDENTIAL) if given else None,
        "credential_path": str(tmp_path / "kubernetes" / "node-health.json"),
        "health": {},
        "timeout": 10,
    }
    return knh.NodeHealthPublisher(types.SimpleNamespace(params=params, check_mode=check_mode))


def test_the_credential_is_kept_mode_0600_and_written_only_when_it_differs(tmp_path):
    path = tmp_path / "kubernetes" / "node-health.json"
    assert publisher(tmp_path, check_mode=True).credential() == (CREDENTIAL, True)
    assert not path.exists()
    assert publisher(tmp_path).credential() == (CREDENTIAL, True)
    assert json.loads(path.read_text()) == CREDENTIAL and (path.stat().st_mode & 0o777) == 0o600
    assert (os.stat(path.parent).st_mode & 0o777) == 0o700
    assert publisher(tmp_path).credential() == (CREDENTIAL, False)
    os.chmod(path, 0o644)  # a mode put wrong by hand is put right
    assert publisher(tmp_path).credential()[1] is True and (path.stat().st_mode & 0o777) == 0o600
    # Without a credential given, the file is what the boot-time check would use.
    assert publisher(tmp_path, given=False).credential() == (CREDENTIAL, False)
