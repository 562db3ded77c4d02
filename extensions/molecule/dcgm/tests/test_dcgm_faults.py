"""dcgm's faults, on one node (each is a playbook run): a failing diag fails the gate and the burn-in with the
test named; bad settings are refused before the node is touched. STAND-IN packages (see test_dcgm.py)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "_shared"))

# pylint: disable=wrong-import-position
from stack import mirror_url, node, run_playbook, run_role, sha256

ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
testinfra_hosts = ["ansible://dcgm-debian13"]


def test_failing_diag_fails_the_gate_naming_the_test(host):
    node(host).run("mkdir -p /etc/dcgm-stand-in && echo 'pcie: PCIe link width is x8, expected x16' > /etc/dcgm-stand-in/diag-fail")
    try:
        # The gate's own task file: the rest of the role was proven by converge and idempotence.
        run = run_role(host, "dcgm", {"dcgm_diag_gate": True}, tasks_from="diag.yml")
    finally:
        node(host).run("rm -f /etc/dcgm-stand-in/diag-fail")
    assert run.failed, run
    assert "dcgmi diag -r 1 failed on {0}: pcie: GPU 0: PCIe link width is x8, expected x16".format(host.backend.host) in run.output, run


def test_bad_attribution_is_refused_before_the_node_is_touched(host):
    unit = "/etc/systemd/system/dcgm-exporter.service"
    before = node(host).file(unit).sha256sum
    run = run_role(host, "dcgm", {"dcgm_exporter_attribution": "hpc", "dcgm_exporter_hpc_job_mapping_dir": "relative/dir"})
    assert run.failed, run
    assert node(host).file(unit).sha256sum == before
    assert "dcgm_exporter_attribution=hpc needs dcgm_exporter_hpc_job_mapping_dir" in run.output, run


def test_cuda_major_against_the_running_driver_is_refused(host):
    run = run_role(host, "dcgm", {"dcgm_cuda_major": "11"})
    assert run.failed, run
    assert "DCGM's CUDA flavour must be the driver's CUDA major" in run.output, run


def test_burn_in_runs_level_3_one_node_and_stops_at_the_failing_one(host):
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


def test_a_key_file_with_the_pinned_key_and_another_is_refused_and_nothing_written(host):
    """A tampered key download: the mirror's key and another in one file. Before, the role compared the first key's
    fingerprint only and wrote the whole file, so apt accepted the other key's signatures too."""
    keyring = "/etc/apt/keyrings/nvidia-dcgm.asc"
    before = sha256(host, keyring)
    mirror_key = subprocess.run(["curl", "-fsS", mirror_url(host) + "/keys/gpufleet-mirror.asc"], capture_output=True, check=True).stdout
    with tempfile.TemporaryDirectory() as home:
        gpg = ["gpg", "--batch", "--quiet", "--homedir", home]
        subprocess.run([*gpg, "--passphrase", "", "--quick-gen-key", "other <other@gpufleet.invalid>", "ed25519", "sign", "never"], check=True)
        other = subprocess.run([*gpg, "--armor", "--export"], capture_output=True, check=True).stdout
        subprocess.run(["gpgconf", "--homedir", home, "--kill", "all"], check=False)
    served = "/tmp/gpufleet-two-keys.asc"
    node(host).check_output("echo {0} | base64 -d > {1}".format(base64.b64encode(mirror_key + other).decode(), served))
    try:
        run = run_role(host, "dcgm", {"dcgm_gpg_key_url": "file://" + served})
    finally:
        node(host).run("rm -f " + served)
    assert run.failed, run
    assert "which is not pinned" in run.output and "Nothing was written" in run.output, run
    assert sha256(host, keyring) == before
