# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""pinned_packages: which modules run, in which order, with which arguments, for apt and dnf.

The apt modules themselves are exercised against the real apt-get and dpkg (test_apt_install.py,
test_apt_signed_source.py) and through the container_toolkit and dcgm scenarios; here the node answers
from a table, so that the dnf path (no Red Hat node in the test ground) is held to its sequence too.
"""

from __future__ import annotations

import typing as t
from unittest import mock

import pytest
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nvidia.plugins.action.pinned_packages import ActionModule
from ansible_collections.gpufleet.nvidia.plugins.module_utils._driver_state import versionlock_names
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _pinned

PACKAGES = ["libnvidia-container1", "nvidia-container-toolkit"]
APT_REPOSITORY = {
    "key_url": "https://mirror.example/gpgkey",
    "key_fingerprint": "C95B321B61E88C1809C4F759DDCAE044F796ECB0",
    "allow_unpinned_key": False,
    "key_path": "/etc/apt/keyrings/t.asc",
    "sources_path": "/etc/apt/sources.list.d/t.sources",
    "sources_content": "Types: deb\nURIs: https://mirror.example/deb/amd64\nSuites: /\nSigned-By: /etc/apt/keyrings/t.asc\n",
    "release_url": "https://mirror.example/deb/amd64/Release",
    "auth_login": "",
    "auth_password": "",
}
DNF_REPOSITORY = {
    "key_url": "https://mirror.example/gpgkey",
    "key_fingerprint": "C95B321B61E88C1809C4F759DDCAE044F796ECB0",
    "allow_unpinned_key": False,
    "id": "nvidia-container-toolkit",
    "description": "NVIDIA Container Toolkit",
    "baseurl": "https://mirror.example/rpm/$basearch",
    "repomd_url": "https://mirror.example/rpm/x86_64/repodata/repomd.xml",
}


def run(args: dict[str, t.Any], answers: dict[str, t.Any], check: bool = False) -> tuple[dict[str, t.Any], list[tuple[str, dict[str, t.Any]]]]:
    """The action with the node answering from `answers` (by module; a list is answered in turn)."""
    calls: list[tuple[str, dict[str, t.Any]]] = []

    def execute(module_name: str, module_args: dict[str, t.Any], task_vars: dict[str, t.Any]) -> dict[str, t.Any]:
        calls.append((module_name, module_args))
        answer = answers.get(module_name, {"changed": False})
        return dict(answer.pop(0) if isinstance(answer, list) else answer)

    task = mock.MagicMock(args=args, check_mode=check, diff=True)
    action = ActionModule(task, mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock())
    with mock.patch.object(ActionBase, "run", return_value={}), mock.patch.object(action, "_execute_module", side_effect=execute):
        return action.run(task_vars={}), calls


def apt(**more: t.Any) -> dict[str, t.Any]:
    return dict({"owner": "container_toolkit", "manager": "apt", "packages": PACKAGES, "version": "1.20.1-1", "repository": APT_REPOSITORY}, **more)


def dnf(**more: t.Any) -> dict[str, t.Any]:
    return dict({"owner": "container_toolkit", "manager": "dnf", "packages": PACKAGES, "version": "1.20.1-1", "repository": DNF_REPOSITORY}, **more)


def test_apt_is_the_source_then_one_install_that_holds() -> None:
    result, calls = run(
        apt(),
        {
            "gpufleet.nvidia.apt_signed_source": {"changed": True, "changed_paths": [APT_REPOSITORY["sources_path"]], "diff": {"before": "", "after": "x"}},
            "gpufleet.nvidia.apt_install": {"changed": True, "changed_packages": PACKAGES, "held_packages": PACKAGES, "rehearsed": True},
        },
    )
    assert [name for name, _args in calls] == ["gpufleet.nvidia.apt_signed_source", "gpufleet.nvidia.apt_install"]
    source, install = calls[0][1], calls[1][1]
    assert source["key_fingerprint"] == APT_REPOSITORY["key_fingerprint"] and "url_username" not in source
    assert install["name"] == ["libnvidia-container1=1.20.1-1", "nvidia-container-toolkit=1.20.1-1"]
    assert install["hold"] == PACKAGES and install["release"] == [] and install["rehearse"]
    assert install["update_sources"] == [APT_REPOSITORY["sources_path"]] and install["allow_downgrade"]
    assert result["changed"] and result["held_packages"] == PACKAGES and len(result["diff"]) == 1


def test_apt_check_mode_with_a_new_repository_predicts_the_install() -> None:
    predicted = {"changed": True, "changed_packages": ["nvidia-container-toolkit"], "rehearsed": False}
    result, calls = run(apt(), {"gpufleet.nvidia.apt_signed_source": {"changed": True}, "gpufleet.nvidia.apt_install": predicted}, check=True)
    assert calls[1][1]["rehearse"] is False
    assert result["msg"] == "would install nvidia-container-toolkit at 1.20.1-1 and hold them" and not result["rehearsed"]
    _result, calls = run(apt(), {"gpufleet.nvidia.apt_signed_source": {"changed": False}}, check=True)
    assert calls[1][1]["rehearse"] is True


def test_apt_without_hold_releases_and_a_site_repository_writes_nothing() -> None:
    _result, calls = run(apt(hold="false", repository=None), {})
    assert [name for name, _args in calls] == ["gpufleet.nvidia.apt_install"]
    assert calls[0][1]["hold"] == [] and calls[0][1]["release"] == PACKAGES and calls[0][1]["update_sources"] == []


def test_a_login_reaches_the_module_and_apt_but_is_never_returned() -> None:
    result, calls = run(apt(repository=dict(APT_REPOSITORY, auth_login="fleet", auth_password="hunter2")), {})
    assert calls[0][1]["url_username"] == "fleet" and calls[0][1]["auth_password"] == "hunter2"
    assert "hunter2" not in repr(result)


def test_a_failure_is_the_owners_with_its_hints() -> None:
    with pytest.raises(AnsibleActionFail) as failed:
        run(apt(hints="Check container_toolkit_apt_repo_url."), {"gpufleet.nvidia.apt_signed_source": {"failed": True, "msg": "the mirror answered 503."}})
    assert str(failed.value) == "container_toolkit: the mirror answered 503. Check container_toolkit_apt_repo_url."


@pytest.mark.parametrize(
    "args,message",
    [
        ({"manager": "yum"}, "manager: 'yum' is none of apt, dnf"),
        ({"packages": []}, "packages: give the package names, in install order"),
        ({"packages": ["Bad Name"]}, "packages[0]: 'Bad Name' is not a package name"),
        ({"version": "latest"}, "version: 'latest' is not a package version, as apt spells it"),
        ({"repository": dict(APT_REPOSITORY, key_fingerprint="")}, "repository.key_fingerprint: empty, so nothing would check the key"),
        ({"repository": dict(APT_REPOSITORY, sources_path="")}, "repository.sources_path: required for apt"),
        ({"repository": dict(APT_REPOSITORY, surprise=1)}, "repository: unknown keys surprise"),
        ({"hold": "maybe"}, "hold: 'maybe' is not true or false"),
    ],
)
def test_bad_arguments_name_the_field_before_any_call(args: dict[str, t.Any], message: str) -> None:
    with pytest.raises(AnsibleActionFail) as failed:
        _result, _calls = run(apt(**args), {})
    assert str(failed.value).startswith(message)


def reads(rpm: str, locks: str) -> dict[str, t.Any]:
    return {"commands": {"rpm": {"rc": 0, "stdout": rpm}, "locks": {"rc": 0, "stdout": locks}}}


def test_dnf_fresh_node_reads_checks_imports_unlocks_installs_locks() -> None:
    read = reads("libnvidia-container1\t0:1.17.8-1\n", "libnvidia-container1-0:1.17.8-1.*\n")
    result, calls = run(dnf(), {"gpufleet.nvidia.node_reads_info": read, "ansible.legacy.dnf": {"changed": True}})
    names = [name for name, _args in calls]
    assert names == [
        "gpufleet.nvidia.node_reads_info",
        "ansible.legacy.uri",
        "ansible.legacy.rpm_key",
        "ansible.legacy.yum_repository",
        "ansible.legacy.dnf",
        "ansible.legacy.command",
        "ansible.legacy.dnf",
        "ansible.legacy.command",
    ]
    assert calls[0][1]["commands"] == _pinned.dnf_reads(_pinned.request(dnf()))
    assert calls[2][1] == {"key": DNF_REPOSITORY["key_url"], "fingerprint": DNF_REPOSITORY["key_fingerprint"]}
    assert calls[3][1]["repo_gpgcheck"] and calls[3][1]["gpgcheck"] and calls[3][1]["baseurl"] == DNF_REPOSITORY["baseurl"]
    assert calls[4][1]["name"] == [_pinned.VERSIONLOCK_PACKAGE]
    assert calls[5][1]["argv"] == ["dnf", "versionlock", "delete", "libnvidia-container1"]
    assert calls[6][1]["name"] == ["libnvidia-container1-1.20.1-1", "nvidia-container-toolkit-1.20.1-1"]
    assert calls[7][1]["argv"] == ["dnf", "versionlock", "add", "libnvidia-container1-1.20.1-1", "nvidia-container-toolkit-1.20.1-1"]
    assert result["changed"] and result["changed_packages"] == PACKAGES and result["held_packages"] == PACKAGES


def test_dnf_nothing_to_do_is_the_read_and_the_repository() -> None:
    read = reads(
        "libnvidia-container1\t0:1.20.1-1\nnvidia-container-toolkit\t0:1.20.1-1\n",
        "libnvidia-container1-0:1.20.1-1.*\nnvidia-container-toolkit-0:1.20.1-1.*\n",
    )
    result, calls = run(dnf(), {"gpufleet.nvidia.node_reads_info": read})
    assert [name for name, _args in calls] == ["gpufleet.nvidia.node_reads_info", "ansible.legacy.rpm_key", "ansible.legacy.yum_repository"]
    assert not result["changed"]


def test_dnf_check_mode_with_a_new_repository_predicts_and_runs_no_command() -> None:
    result, calls = run(dnf(), {"gpufleet.nvidia.node_reads_info": reads("", ""), "ansible.legacy.yum_repository": {"changed": True}}, check=True)
    assert "ansible.legacy.command" not in [name for name, _args in calls] and "ansible.legacy.uri" not in [name for name, _args in calls]
    assert [name for name, _args in calls].count("ansible.legacy.dnf") == 1  # the versionlock plugin, rehearsed
    assert (
        result["changed"]
        and not result["rehearsed"]
        and result["msg"] == "would install libnvidia-container1, nvidia-container-toolkit at 1.20.1-1 and hold them"
    )


def test_dnf_without_hold_releases_every_lock() -> None:
    read = reads("libnvidia-container1\t0:1.20.1-1\nnvidia-container-toolkit\t0:1.20.1-1\n", "nvidia-container-toolkit-0:1.20.1-1.*\n")
    result, calls = run(dnf(hold=False, repository=None), {"gpufleet.nvidia.node_reads_info": read})
    assert [args["argv"] for name, args in calls if name == "ansible.legacy.command"] == [["dnf", "versionlock", "delete", "nvidia-container-toolkit"]]
    assert result["released_packages"] == ["nvidia-container-toolkit"] and result["changed"]


def test_dnf_unpinned_key_warns() -> None:
    result, _calls = run(dnf(repository=dict(DNF_REPOSITORY, key_fingerprint="", allow_unpinned_key=True)), {"gpufleet.nvidia.node_reads_info": reads("", "")})
    assert any("UNPINNED KEY" in warning for warning in result["warnings"])


@pytest.mark.parametrize(
    "installed,version,matches",
    [
        ("0:1.20.1-1", "1.20.1-1", True),
        ("0:1.20.1-1.el9", "1.20.1-1", True),
        ("0:1.20.1-2", "1.20.1-1", False),
        ("0:1.20.1-2", "1.20.1", True),
        ("1:4.5.3-1", "1:4.5.3-1", True),
        ("0:4.5.3-1", "1:4.5.3-1", False),
        ("0:1.20.10-1", "1.20.1", False),
    ],
)
def test_rpm_versions_match_as_declared(installed: str, version: str, matches: bool) -> None:
    wanted = {"packages": ["p"], "version": version, "hold": True}
    plan = _pinned.dnf_plan(wanted, "p\t{0}\n".format(installed), "")
    assert (plan["missing"] == []) is matches


def test_dnf5_locks_are_read_too() -> None:
    assert versionlock_names("# Added by 'versionlock add' command\nPackage name: nvidia-container-toolkit\nevr = 1.20.1-1\n") == {"nvidia-container-toolkit"}


def test_an_excluded_package_is_not_taken_for_locked() -> None:
    """dnf's `!name-...` line excludes those versions; it is no lock, so the step locks the package after its install."""
    plan = _pinned.dnf_plan({"packages": ["p"], "version": "1.0-1", "hold": True}, "", "!p-0:1.0-1.*\n")
    assert plan["unlock"] == [] and plan["locking"] == ["p"]
