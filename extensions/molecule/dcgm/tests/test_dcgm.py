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
from stack import host_vars, node, run_playbook, run_role

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
    assert all(version == "1:4.5.2-1" for version, _status in installed.values()), rows
    other = "12" if major == "13" else "13"
    assert "datacenter-gpu-manager-4-cuda" + other not in installed


def test_apt_source_is_signed_by_its_own_key(host):
    source = node(host).file("/etc/apt/sources.list.d/nvidia-dcgm.sources").content_string
    assert "Signed-By: /etc/apt/keyrings/nvidia-dcgm.asc" in source
    assert "/cuda-stand-in/debian1" in source


def test_hostengine_runs_under_the_packaged_unit(host):
    unit = node(host).check_output("systemctl show --property=FragmentPath --value nvidia-dcgm.service")
    assert unit == "/usr/lib/systemd/system/nvidia-dcgm.service"
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
    assert ["health", "--set", host_vars(host)["dcgm_health_watches"]] in calls
    # Set once: the second (idempotence) run read them back and left them.
    assert sum(1 for call in calls if call[:2] == ["health", "--set"]) == 1


def test_diag_gate_ran_level_1(host):
    calls = [json.loads(line) for line in node(host).file("/run/dcgm-stand-in/dcgmi.log").content_string.splitlines()]
    assert ["diag", "--run", "1", "--json"] in calls


def test_failing_diag_fails_the_gate_naming_the_test(host):
    node(host).run("mkdir -p /etc/dcgm-stand-in && echo 'pcie: PCIe link width is x8, expected x16' > /etc/dcgm-stand-in/diag-fail")
    try:
        run = run_role(host, "dcgm")
    finally:
        node(host).run("rm -f /etc/dcgm-stand-in/diag-fail")
    assert run.failed, run
    assert "dcgmi diag -r 1 failed on {0}: pcie: GPU 0: PCIe link width is x8, expected x16".format(host.backend.host) in run.output, run


def test_bad_attribution_is_refused_before_the_node_is_touched(host):
    run = run_role(host, "dcgm", {"dcgm_exporter_attribution": "hpc", "dcgm_exporter_hpc_job_mapping_dir": "relative/dir"})
    assert run.failed, run
    assert "dcgm_exporter_attribution=hpc needs dcgm_exporter_hpc_job_mapping_dir" in run.output, run


def test_cuda_major_against_the_running_driver_is_refused(host):
    run = run_role(host, "dcgm", {"dcgm_cuda_major": "11"})
    assert run.failed, run
    assert "DCGM's CUDA flavour must be the driver's CUDA major" in run.output, run


def test_burn_in_runs_level_3_one_node_and_stops_at_the_failing_one(host):
    if host.backend.host != "dcgm-debian13":
        return
    node(host).run("mkdir -p /etc/dcgm-stand-in && echo 'memtest: memory errors found' > /etc/dcgm-stand-in/diag-fail")
    try:
        play = [{"ansible.builtin.import_playbook": os.path.join(ROOT, "playbooks", "burn_in.yml")}]
        run = run_playbook(play, {"burn_in_hosts": "gpu_nodes"})
        checked = run_playbook(play, {"burn_in_hosts": "gpu_nodes"}, check=True)
    finally:
        node(host).run("rm -f /etc/dcgm-stand-in/diag-fail")
    assert run.failed, run
    assert "burn-in stopped at dcgm-debian13" in run.output and "memtest" in run.output, run
    assert "dcgmi diag -r 3 passed on dcgm-debian12" in run.output, run
    assert not checked.failed, checked
    assert "would run dcgmi diag --run 3 --json on dcgm-debian12" in checked.output, checked
