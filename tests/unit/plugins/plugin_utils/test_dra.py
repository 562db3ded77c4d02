# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""verify's dra check: a prepared node passes; each missing prerequisite
fails on its own, naming it and the fix. The paths command is run for real
against a temporary driver root to show that its output is what the check
reads."""

from __future__ import annotations

import json
import subprocess
import typing as t

import pytest

from ansible_collections.gpufleet.nvidia.plugins.filter.verify import verify_check, verify_dra_reads
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _dra, _verify

CONTAINERD = """version = 3
[plugins."io.containerd.cri.v1.runtime"]
  enable_cdi = {cdi}
  cdi_spec_dirs = {dirs}
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options]
    BinaryName = "/usr/bin/nvidia-container-runtime"
"""

PREPARED_PATHS = "\n".join(
    [
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.163.01",
        "/usr/bin/nvidia-smi /usr/bin/nvidia-smi",
        "/usr/bin/nvidia-cdi-hook /usr/bin/nvidia-cdi-hook",
        "PATH:nvidia-cdi-hook /usr/bin/nvidia-cdi-hook",
    ]
)
IMEX_ABSENT = "LoadState=not-found\nActiveState=inactive\nUnitFileState=\n"
IMEX_MASKED = "LoadState=masked\nActiveState=inactive\nUnitFileState=masked\n"
IMEX_RUNNING = "LoadState=loaded\nActiveState=active\nUnitFileState=enabled\n"


def containerd(cdi: bool = True, dirs: t.Sequence[str] = ("/etc/cdi", "/var/run/cdi")) -> str:
    return CONTAINERD.format(cdi="true" if cdi else "false", dirs=json.dumps(list(dirs)))


def observed(**changes: t.Any) -> dict[str, t.Any]:
    seen = {"engine": containerd(), "engine_error": "", "paths": PREPARED_PATHS, "imex": IMEX_ABSENT, "imex_nodes": None}
    seen.update(changes)
    return seen


def judge(settings: dict[str, t.Any] | None = None, **changes: t.Any) -> dict[str, t.Any]:
    return verify_check(observed(**changes), "dra", dict({"enabled": True, "engine": "containerd", "imex": "masked"}, **(settings or {})))


def errors(check: dict[str, t.Any]) -> list[tuple[str, str]]:
    return [(f["subject"], f["message"]) for f in check["findings"] if f["severity"] == "error"]


def subjects(check: dict[str, t.Any]) -> list[str]:
    return [subject for subject, message in errors(check)]


def test_a_prepared_node_passes():
    check = judge()
    assert check["status"] == "pass", check
    assert check["observed"]["driver_root"] == {
        "root": "/",
        "library": "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.163.01",
        "nvidia_smi": "/usr/bin/nvidia-smi",
    }
    assert check["observed"]["nvidia_cdi_hook"] == "/usr/bin/nvidia-cdi-hook"


def test_off_is_not_managed_and_reads_nothing():
    assert judge({"enabled": False})["status"] == "not_managed"
    assert verify_dra_reads({"enabled": False}) == {"files": {}, "commands": {}}


def test_cdi_off_in_the_engine_fails():
    check = judge(engine=containerd(cdi=False))
    assert check["status"] == "fail"
    assert errors(check) == [("cdi", "CDI is off in containerd: the DRA driver hands GPUs to containers only through CDI")]
    assert "container_runtime_cdi: true" in check["findings"][0]["fix"]


def test_spec_dirs_without_var_run_cdi_fail():
    check = judge(engine=containerd(dirs=["/etc/cdi"]))
    assert errors(check) == [
        ("cdi_spec_dirs", "containerd's CDI spec directories (/etc/cdi) do not include /var/run/cdi, where the DRA driver writes its CDI specs")
    ]
    assert "add /var/run/cdi to containerd's CDI spec directories" in check["findings"][0]["fix"]


def test_run_cdi_is_the_same_directory():
    assert judge(engine=containerd(dirs=["/etc/cdi", "/run/cdi"]))["status"] == "pass"


def test_no_engine_output_fails_naming_the_engine():
    check = judge(engine="", engine_error="containerd: command not found")
    assert subjects(check) == ["cdi"]
    assert "containerd gave nothing to judge: containerd: command not found" in errors(check)[0][1]


def test_docker_and_crio_views():
    docker_on = json.dumps({"CDISpecDirs": ["/etc/cdi", "/var/run/cdi"], "Runtimes": {"nvidia": {}}})
    assert judge({"engine": "docker"}, engine=docker_on)["status"] == "pass"
    docker_off = json.dumps({"Runtimes": {"nvidia": {}}})
    assert subjects(judge({"engine": "docker"}, engine=docker_off)) == ["cdi"]
    crio = '[crio.runtime]\ncdi_spec_dirs = ["/etc/cdi"]\n'
    assert subjects(judge({"engine": "crio"}, engine=crio)) == ["cdi_spec_dirs"]


def test_missing_nvidia_cdi_hook_fails():
    paths = "\n".join(line for line in PREPARED_PATHS.splitlines() if "cdi-hook" not in line)
    check = judge(paths=paths)
    assert errors(check) == [
        (
            "nvidia-cdi-hook",
            "nvidia-cdi-hook is not on the host (not in PATH, nor /usr/bin/nvidia-cdi-hook, "
            "/usr/local/nvidia/toolkit/nvidia-cdi-hook): the CDI specs' hooks cannot run",
        )
    ]
    assert "nvidiaCDIHookPath: /usr/bin/nvidia-cdi-hook" in check["findings"][0]["fix"]


def test_the_hook_on_path_or_in_the_operators_toolkit_dir_counts():
    only_path = "\n".join(line for line in PREPARED_PATHS.splitlines() if not line.startswith("/usr/bin/nvidia-cdi-hook"))
    assert judge(paths=only_path)["status"] == "pass"
    operator = PREPARED_PATHS.replace("/usr/bin/nvidia-cdi-hook /usr/bin/nvidia-cdi-hook", "/usr/local/nvidia/toolkit/nvidia-cdi-hook /x")
    operator = "\n".join(line for line in operator.splitlines() if not line.startswith("PATH:"))
    assert judge(paths=operator)["status"] == "pass"


@pytest.mark.parametrize("missing", ["libnvidia-ml.so.1", "nvidia-smi"])
def test_a_driver_root_without_the_driver_fails(missing: str):
    paths = "\n".join(line for line in PREPARED_PATHS.splitlines() if missing not in line)
    check = judge(paths=paths)
    assert subjects(check) == ["driver_root"]
    assert errors(check)[0][1].startswith("the driver root / has no {0} (looked in /, ".format(missing))
    assert "the driver layer" in check["findings"][0]["fix"]


def test_a_running_host_imex_fails_unless_the_host_runs_imex():
    check = judge(imex=IMEX_RUNNING)
    assert errors(check) == [
        (
            "imex",
            "nvidia-imex.service is enabled and active (loaded), not masked: it clashes with the IMEX daemons the DRA driver runs for ComputeDomains",
        )
    ]
    assert check["findings"][0]["fix"].startswith("systemctl disable --now nvidia-imex.service && systemctl mask nvidia-imex.service")
    assert judge(imex=IMEX_MASKED)["status"] == "pass"


def test_host_imex_needs_the_unit_enabled_and_a_nodes_file():
    assert judge({"imex": "host"}, imex=IMEX_RUNNING, imex_nodes="# domain\n10.0.0.1\n10.0.0.2\n")["status"] == "pass"
    assert subjects(judge({"imex": "host"}, imex=IMEX_RUNNING, imex_nodes="# only a comment\n")) == ["imex_nodes"]
    assert subjects(judge({"imex": "host"}, imex=IMEX_MASKED, imex_nodes="10.0.0.1\n")) == ["imex"]
    assert subjects(judge({"imex": "host"}, imex=IMEX_ABSENT)) == ["imex", "imex_nodes"]


def test_an_unknown_imex_mode_is_a_bug_not_a_finding():
    from ansible.errors import AnsibleFilterError

    with pytest.raises(AnsibleFilterError, match="verify_dra_imex must be one of masked, host"):
        judge({"imex": "maybe"})


def test_each_prerequisite_fails_on_its_own():
    """Breaking one prerequisite leaves the others passing: one error each."""
    broken = {
        "cdi": {"engine": containerd(cdi=False)},
        "cdi_spec_dirs": {"engine": containerd(dirs=["/etc/cdi"])},
        "nvidia-cdi-hook": {"paths": "\n".join(line for line in PREPARED_PATHS.splitlines() if "cdi-hook" not in line)},
        "driver_root": {"paths": "\n".join(line for line in PREPARED_PATHS.splitlines() if "libnvidia-ml" not in line)},
        "imex": {"imex": IMEX_RUNNING},
    }
    for subject, changes in broken.items():
        assert subjects(judge(**changes)) == [subject], subject


def test_the_paths_command_resolves_like_the_dra_driver(tmp_path):
    """The real script on a real tree: a file and a link are found, a dangling link is not."""
    lib = tmp_path / "usr/lib/x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libnvidia-ml.so.550.163.01").write_text("")
    (lib / "libnvidia-ml.so.1").symlink_to("libnvidia-ml.so.550.163.01")
    (tmp_path / "usr/bin").mkdir()
    (tmp_path / "usr/bin/nvidia-smi").symlink_to("/nonexistent/nvidia-smi")
    argv = ["sh", "-c", _dra.DRA_PATHS_SCRIPT, "sh", str(lib / "libnvidia-ml.so.1"), str(tmp_path / "usr/bin/nvidia-smi")]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin"}).stdout
    found = _dra.parse_paths(out)
    found.pop(_dra.HOOK_ON_PATH, None)  # whatever this machine has
    assert found == {str(lib / "libnvidia-ml.so.1"): str(lib / "libnvidia-ml.so.550.163.01")}


def test_the_reads_cover_the_dra_drivers_search_order():
    reads = verify_dra_reads({"enabled": True, "engine": "containerd", "imex": "host"})
    paths = reads["commands"]["dra_paths"][4:]
    assert paths[0] == "/libnvidia-ml.so.1" and "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1" in paths
    assert "/usr/bin/nvidia-smi" in paths and "/usr/bin/nvidia-cdi-hook" in paths
    assert reads["commands"]["dra_imex"][-1] == "nvidia-imex.service"
    assert reads["files"] == {"dra_imex_nodes": "/etc/nvidia-imex/nodes_config.cfg"}


def test_the_report_orders_dra_after_the_layers():
    check = judge()
    report = _verify.build_report("n", [check, _verify.check("driver", "pass", "ok")], {})
    assert [c["layer"] for c in report["checks"]] == ["driver", "dra"]
