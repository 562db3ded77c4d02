"""dcgm with STAND-IN packages: what the role did with them (never DCGM itself).

The stand-ins (tests/harness/stand-in-dcgm/) record their arguments; these
tests read those records, the units, the held packages and the files.
"""

from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "_shared"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", ".."))

# pylint: disable=wrong-import-position
from stack import host_vars, node

ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
FLAVOUR = {"dcgm-debian12": "12", "dcgm-debian13": "13"}


def _json(host, path):
    return json.loads(node(host).file(path).content_string)


def test_packages_of_the_drivers_cuda_major_are_installed_pinned_and_held(host):
    major = FLAVOUR[host.backend.host]
    wanted = ["datacenter-gpu-manager-4-core", "datacenter-gpu-manager-4-cuda" + major]
    if host_vars(host).get("dcgm_proprietary"):
        wanted += ["datacenter-gpu-manager-4-proprietary", "datacenter-gpu-manager-4-proprietary-cuda" + major]
    rows = node(host).check_output("dpkg-query -W -f '${Package} ${Version} ${db:Status-Abbrev}\\n' 'datacenter-gpu-manager-4-*'")
    installed = {line.split()[0]: line.split()[1:] for line in rows.splitlines() if line.split()[2:] and line.split()[2].startswith("hi")}
    assert sorted(installed) == sorted(wanted), rows
    assert all(version == "1:4.5.3-1" for version, _status in installed.values()), rows
    other = "12" if major == "13" else "13"
    assert "datacenter-gpu-manager-4-cuda" + other not in installed


def test_apt_source_is_signed_by_its_own_key(host):
    source = node(host).file("/etc/apt/sources.list.d/nvidia-dcgm.sources").content_string
    assert "Signed-By: /etc/apt/keyrings/nvidia-dcgm.asc" in source
    assert "/cuda-stand-in/debian1" in source


def test_hostengine_runs_under_the_packaged_unit(host):
    unit = node(host).check_output("systemctl show --property=FragmentPath --value nvidia-dcgm.service")
    # Debian 12 merged /lib into /usr/lib; systemd names the path it loaded.
    assert unit in ("/usr/lib/systemd/system/nvidia-dcgm.service", "/lib/systemd/system/nvidia-dcgm.service")
    assert node(host).service("nvidia-dcgm").is_running
    assert node(host).service("nvidia-dcgm").is_enabled
    assert not node(host).file("/etc/systemd/system/nvidia-dcgm.service").exists


def test_exporter_runs_with_the_arguments_we_chose(host):
    hv = host_vars(host)
    assert node(host).service("dcgm-exporter").is_running
    argv = _json(host, "/run/dcgm-stand-in/dcgm-exporter.argv.json")
    address = hv.get("dcgm_exporter_address", ":9400")
    expected = ["--collectors", "/etc/dcgm-exporter/default-counters.csv", "--address", address, "--remote-hostengine-info", "localhost:5555"]
    if hv["dcgm_exporter_attribution"] == "kubernetes":
        expected += ["--kubernetes", "--pod-resources-kubelet-socket", "/var/lib/kubelet/pod-resources/kubelet.sock"]
    else:
        expected += ["--hpc-job-mapping-dir", "/run/dcgm-job-map"]
        assert node(host).file("/run/dcgm-job-map").is_directory
    assert argv == expected


def test_counters_file_is_the_roles_and_served(host):
    installed = node(host).file("/etc/dcgm-exporter/default-counters.csv")
    with open(os.path.join(ROOT, "roles", "dcgm", "files", "default-counters.csv"), encoding="utf-8") as fh:
        assert installed.content_string == fh.read()
    assert (installed.user, installed.mode) == ("root", 0o644)
    port = host_vars(host).get("dcgm_exporter_address", ":9400").rsplit(":", 1)[1]
    metrics = node(host).check_output(
        "python3 -c \"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:{0}/metrics').read().decode())\"".format(port)
    )
    assert "DCGM_FI_DEV_GPU_TEMP{" in metrics and "DCGM_FI_DEV_XID_ERRORS{" in metrics


def test_health_watches_were_set(host):
    calls = [json.loads(line) for line in node(host).file("/run/dcgm-stand-in/dcgmi.log").content_string.splitlines()]
    assert ["health", "--set", host_vars(host).get("dcgm_health_watches", "a")] in calls
    # Set once: the second (idempotence) run read them back and left them.
    assert sum(1 for call in calls if call[:2] == ["health", "--set"]) == 1


def test_diag_gate_ran_level_1(host):
    calls = [json.loads(line) for line in node(host).file("/run/dcgm-stand-in/dcgmi.log").content_string.splitlines()]
    assert ["diag", "--run", "1", "--json"] in calls
