"""The workload check on real engines, and six ways to break a node.

Each node converged the layers a GPU container depends on; verify started
containers through the node's engine (containerd 1.7 and 2.2 through CRI,
Docker through docker run), each asking for GPUs through the CDI spec that
nvidia-ctk generated. The probe image has no NVML library and no nvidia-smi:
what a container lists, it saw through the injected ones.

The faults run verify alone (verify-only.yml) and read the host's report;
after each, the node is put back and nothing the check started is left.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

# The scenarios' shared helpers (../../_shared/stack.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "_shared"))

# pylint: disable=wrong-import-position
from stack import scenario_playbook, set_aside

ROOT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", os.getcwd()))
EPHEMERAL = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])
SCENARIO = Path(__file__).resolve().parents[1]
LABEL = "gpufleet.nvidia/workload-check=true"
SPEC = "/etc/cdi/nvidia.json"


def name(host) -> str:
    return host.backend.get_hostname()


def engine(host) -> str:
    return "docker" if name(host).endswith("docker") else "containerd"


def verify_only(*args: str) -> None:
    """verify-only.yml with the scenario's inventory and configuration; it must not fail."""
    run = scenario_playbook(SCENARIO / "verify-only.yml", *args)
    assert run.returncode == 0, run.stdout[-3000:]


def verify(host, *extra: str) -> dict:
    """verify-only.yml on this host (its findings never fail the play); its report from the node."""
    verify_only("--limit", name(host), "-e", "verify_fail_on=never", *extra)
    return json.loads(host.file("/var/lib/gpufleet/verify.json").content_string)


def layer(report: dict, which: str) -> dict:
    return next(c for c in report["checks"] if c["layer"] == which)


def leftovers(host) -> list[str]:
    """What the check started and did not remove, as the engine lists it."""
    if engine(host) == "docker":
        return host.check_output("docker ps --all --quiet --filter label=%s", LABEL).split()
    pods = host.check_output("crictl pods --quiet --label %s", LABEL).split()
    containers = host.check_output("crictl ps --all --quiet --label %s", LABEL).split()
    return pods + containers


def edit(host, path: str, code: str) -> None:
    """Rewrite a file on the node: `code` turns the text `text` into `text` (python3 on the node)."""
    script = "import sys\np = sys.argv[1]\ntext = open(p).read()\n" + code + "\nopen(p, 'w').write(text)\n"
    host.check_output("python3 -c %s %s", script, path)


def node_state(host) -> dict:
    """The simulated GPUs as the host's NVML state holds them."""
    return json.loads(host.check_output("nvml-simctl show"))


def failure(report: dict) -> str:
    check = layer(report, "workload")
    assert check["status"] == "fail", check
    return " ".join(f["message"] for f in check["findings"])


# -- the converged node --------------------------------------------------------------


def test_gpu_containers_see_the_hosts_gpus_and_driver(host):
    report = json.loads(host.file("/var/lib/gpufleet/verify.json").content_string)
    check = layer(report, "workload")
    assert check["status"] == "pass", check
    runs = check["observed"]["runs"]
    everything = runs[0]
    assert everything["cdi"] == ["nvidia.com/gpu=all"]
    # Every GPU that is a device (not in MIG mode, or with MIG devices) and every MIG device, as the host's
    # NVML state has them: what the container listed through the injected library and nvidia-smi.
    gpus = node_state(host)["gpus"]
    migs = [ci["uuid"] for g in gpus for gi in g["gis"] for ci in gi["cis"]]
    assert sorted(everything["gpus"]) == sorted(g["uuid"] for g in gpus if not g["mig_current"] or g["gis"])
    assert sorted(everything["migs"]) == sorted(migs)
    assert everything["driver_version"] == report["versions"]["driver"]
    assert all(run["status"] == "pass" for run in runs)
    assert leftovers(host) == []


def test_each_mig_device_is_asked_for_by_its_cdi_name(host):
    """The MIG devices of one GPU in one container: it sees them and that GPU, nothing else."""
    if name(host) != "workload-containerd17":
        pytest.skip("the MIG fixture runs on containerd 1.7")
    report = json.loads(host.file("/var/lib/gpufleet/verify.json").content_string)
    runs = [run for run in layer(report, "workload")["observed"]["runs"] if all(cdi.startswith("nvidia.com/gpu=MIG-") for cdi in run["cdi"])]
    migs = {ci["uuid"]: g["uuid"] for g in node_state(host)["gpus"] for gi in g["gis"] for ci in gi["cis"]}
    assert len(migs) == 14
    assert sorted(cdi for run in runs for cdi in run["cdi"]) == sorted("nvidia.com/gpu=" + uuid for uuid in migs)
    assert len(runs) == len(set(migs.values()))  # one container per GPU in MIG mode
    for run in runs:
        asked = [cdi.split("=", 1)[1] for cdi in run["cdi"]]
        assert run["status"] == "pass", run
        assert (sorted(run["migs"]), run["gpus"]) == (sorted(asked), [migs[asked[0]]]), run
        assert {migs[mig] for mig in asked} == set(run["gpus"])


def test_the_fleet_report_shows_the_cuda_image_matrix(host):
    if name(host) != "workload-containerd17":
        pytest.skip("one fleet report for all nodes")
    # verify over every node (testinfra runs one host's tests, faults included, before the next host's).
    verify_only()
    report = (EPHEMERAL / "reports" / "fleet-report.md").read_text()
    engines_read(report)
    table = report[report.index("## CUDA images") : report.index("\n## ", report.index("## CUDA images") + 1)]
    for node in ("workload-containerd17", "workload-containerd2", "workload-docker"):
        rows = [line for line in table.splitlines() if line.startswith("| ") and node in line]
        assert len(rows) == 1, table
        probe, cuda13 = [cell.strip() for cell in rows[0].strip("| ").split(" | ")][3:5]
        # The probe (declared CUDA 12.4) ran on every node; CUDA 13.0 is newer than these drivers (550, 570):
        # judged (compat on data-center GPUs, else a newer driver), never run.
        assert probe == "runs; ran: pass", rows[0]
        assert cuda13 in ("needs compat", "needs driver >= 580.65.06"), rows[0]


# Each node's engine as the fleet report shows it: containerd 1.7 and Docker from Debian's packages,
# containerd 2.2 from its release tarball (no package: `containerd --version` answers). Never "?".
ENGINE_CELLS = {
    "workload-containerd17": r"containerd 1\.7\.\d+",
    "workload-containerd2": r"containerd 2\.2\.9",
    "workload-docker": r"docker \d+\.\d+\.\d+",
}


def engines_read(markdown: str) -> None:
    """The fleet report's Engine column holds the version each node's engine was read at."""
    # The hosts table: its header, then one row per host (the |---| rule does not start with "| ").
    header, *rows = [line for line in markdown.split("\n## ", 1)[0].splitlines() if line.startswith("| ")]
    column = [cell.strip() for cell in header.strip("| ").split(" | ")].index("Engine")
    for node, pattern in ENGINE_CELLS.items():
        [row] = [line for line in rows if line.startswith("| {0} |".format(node))]
        cell = [cell.strip() for cell in row.strip("| ").split(" | ")][column]
        assert re.fullmatch(pattern, cell), (node, cell, row)
    tarball = json.loads((EPHEMERAL / "reports" / "workload-containerd2.json").read_text())
    assert tarball["versions"]["engine"] == "containerd 2.2.9" and "not_checked" not in tarball, tarball.get("not_checked")
    # The version reached the matrix: containerd 2.2 is judged against its end of life (2026-11-06).
    matrix = layer(tarball, "matrix")
    assert any(f["rule"] == "engine_lifecycle" and f["subject"] == "containerd 2.2.9" for f in matrix["findings"]), matrix


# -- the faults (containerd 2.2 and Docker) ------------------------------------------

FAULT_HOSTS = ("workload-containerd2", "workload-docker")


def only_on(host, *names: str) -> None:
    if name(host) not in names:
        pytest.skip("this fault runs on " + ", ".join(names))


def test_a_cdi_spec_without_a_gpu_nvml_has(host):
    only_on(host, *FAULT_HOSTS)
    gpu = node_state(host)["gpus"][1]
    with set_aside(host, SPEC):
        # As a spec generated before GPU 1 came back from a reset would be.
        edit(
            host,
            SPEC,
            "import json\nspec = json.loads(text)\n"
            "spec['devices'] = [d for d in spec['devices'] if d['name'] not in ('1', %r)]\n"
            "for d in spec['devices']:\n"
            "    e = d['containerEdits']\n"
            "    e['deviceNodes'] = [n for n in e.get('deviceNodes') or [] if n['path'] != '/dev/nvidia%d']\n"
            "text = json.dumps(spec)" % (gpu["uuid"], gpu["minor"]),
        )
        message = failure(verify(host))
    assert "does not see every device NVML reports" in message and gpu["uuid"] in message
    assert leftovers(host) == []


def test_a_runtime_handler_containerd_does_not_load(host):
    only_on(host, "workload-containerd2")
    drop_in = "/etc/containerd/conf.d/99-nvidia.toml"
    try:
        with set_aside(host, drop_in):
            # Another tool rewrote the drop-in: the handler is gone, containerd still starts.
            edit(host, drop_in, "text = text.replace('containerd.runtimes.nvidia', 'containerd.runtimes.other')")
            host.check_output("systemctl restart containerd")
            message = failure(verify(host))
    finally:
        host.check_output("systemctl restart containerd")
    assert "runtime handler nvidia" in message and "does not know the runtime handler" in message
    assert leftovers(host) == []


def test_a_mig_device_the_spec_does_not_have(host):
    only_on(host, "workload-containerd17")
    gone = node_state(host)["gpus"][0]["gis"][0]["cis"][0]["uuid"]
    with set_aside(host, SPEC):
        # As a spec generated before the MIG layout changed would be.
        edit(
            host,
            SPEC,
            "import json\nspec = json.loads(text)\n"
            "spec['devices'] = [d for d in spec['devices'] if d['name'] not in ('0:0', %r)]\n"
            "text = json.dumps(spec)" % gone,
        )
        message = failure(verify(host))
    assert "CDI device nvidia.com/gpu={0}".format(gone) in message
    assert "cannot resolve the CDI device" in message
    assert leftovers(host) == []


def test_a_missing_image_and_no_registry(host):
    only_on(host, *FAULT_HOSTS)
    if engine(host) == "docker":
        host.check_output("docker image rm --force $(docker image ls --quiet localhost/gpufleet/cuda-probe)")
    else:
        for ref in host.check_output("ctr -n k8s.io images ls -q").split():
            if "cuda-probe" in ref:
                host.check_output("ctr -n k8s.io images rm %s", ref)
    message = failure(verify(host, "-e", "verify_workload_image_archive_url=''", "-e", "verify_workload_pull=true"))
    assert "the image is missing" in message and "cuda-probe" in message
    assert leftovers(host) == []
    # Put back from the archive (the scenario's own settings).
    assert layer(verify(host), "workload")["status"] == "pass"


def test_a_check_command_that_hangs(host):
    only_on(host, *FAULT_HOSTS)
    message = failure(verify(host, "-e", '{"verify_workload_command": ["sleep", "60"], "verify_workload_timeout": 5}'))
    assert "did not finish in time" in message and "5 s" in message
    assert leftovers(host) == []


def test_deleted_dev_char_links_are_found(host):
    only_on(host, "workload-containerd2")
    links = host.check_output("ls /dev/char | grep '^195:' | tr '\\n' ' '").split()
    assert "195:0" in links
    host.check_output("rm -f /dev/char/195:0")
    try:
        report = verify(host)
    finally:
        host.check_output("ln -s /dev/nvidia0 /dev/char/195:0")
    toolkit = layer(report, "container_toolkit")
    messages = " ".join(f["message"] for f in toolkit["findings"])
    assert toolkit["status"] == "fail" and "/dev/char/195:0" in messages and "daemon-reload" in messages
    assert leftovers(host) == []


def test_a_container_keeps_its_gpus_over_a_daemon_reload(host):
    """The toolkit's most reported problem (NVIDIA/nvidia-container-toolkit#48), with the links in place."""
    only_on(host, "workload-docker")
    image = host.check_output("docker image ls --quiet localhost/gpufleet/cuda-probe | head -1")
    container = host.check_output("docker run --detach --label %s --network none --device nvidia.com/gpu=all %s sleep 300", LABEL, image)
    try:
        before = host.check_output("docker exec %s nvidia-smi -L", container)
        host.check_output("systemctl daemon-reload")
        after = host.check_output("docker exec %s nvidia-smi -L", container)
    finally:
        host.check_output("docker rm --force %s", container)
    assert "UUID: GPU-" in before and after == before
