"""node_labels read back by the real nfd-worker, against GFD's labels worked
out by hand (tests/unit/plugins/filter/gfd_tables.py), never by the
collection's own code."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile

import pytest
import yaml

HERE = os.path.dirname(__file__)
ROOT = os.environ.get("MOLECULE_PROJECT_DIRECTORY", os.path.join(HERE, "..", "..", "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "_shared"))
sys.path.insert(0, os.path.join(ROOT, "tests", "unit", "plugins", "filter"))

# pylint: disable=wrong-import-position
import gfd_tables
from stack import host_vars, node, sha256

DIR = "/etc/kubernetes/node-feature-discovery/features.d"
FILE = DIR + "/gpufleet-gpu"
NFD = "NODE_NAME=test nfd-worker -oneshot -no-publish -feature-sources=local -label-sources=local -kubeconfig /usr/local/etc/nfd-kubeconfig -v=1"


def nfd_labels(host) -> dict[str, str]:
    """The labels nfd-worker would publish: its klog line `"feature discovery completed" labels=<YAML>`."""
    out = node(host).run(NFD)
    assert out.rc == 0, out.stderr
    found = re.search(r'"feature discovery completed" labels=<\n(.*?)\n >', out.stderr, re.DOTALL)
    assert found, out.stderr
    # BaseLoader: every value a string, as in a label ("05" stays "05").
    return yaml.load(found.group(1).replace("\n\t", "\n").lstrip("\t"), Loader=yaml.BaseLoader) or {}


def expected(host) -> dict[str, str]:
    table = dict(gfd_tables.WHOLE)
    name = host_vars(host)["node_labels_test_table"]
    table.update(gfd_tables.MIXED if name == "MIXED" else getattr(gfd_tables, name))
    n = node(host)
    # gpu.machine: GFD's sanitise() of this container's DMI product name, by hand.
    machine = n.file("/sys/class/dmi/id/product_name")
    product = machine.content_string.strip() if machine.exists else None
    table["nvidia.com/gpu.machine"] = "-".join(re.sub(r"[^A-Za-z0-9\-_. ]", "", product).split()) if product else "unknown"
    # gpu.mode: the simulated GPUs have no sysfs PCI entries here, so GFD's nvpci lookup fails: "unknown".
    assert not any(n.file("/sys/bus/pci/devices/" + bus[-12:].lower() + "/class").exists for bus in simulated_bus_ids(host))
    table["nvidia.com/gpu.mode"] = "unknown"
    return table


def simulated_bus_ids(host) -> list[str]:
    return [gpu["bus_id"] for gpu in json.loads(node(host).check_output("nvml-simctl show"))["gpus"]]


def test_nfd_worker_reports_gfds_labels(host):
    assert nfd_labels(host) == expected(host)


def test_the_file_is_root_owned_world_readable_and_alone(host):
    f = node(host).file(FILE)
    assert (f.user, f.group, f.mode) == ("root", "root", 0o644)
    assert node(host).file(DIR).listdir() == ["gpufleet-gpu"]  # no dotfile left from the rename
    first = f.content_string.splitlines()
    expiry = host_vars(host).get("node_labels_expiry_time", "")
    directives = [line for line in first if line.startswith("# +")]
    assert directives == (["# +expiry-time=" + expiry] if expiry else [])


def run_with_diff(host, extra_vars: dict) -> subprocess.CompletedProcess:
    play = [{"name": "check", "hosts": host.backend.host, "gather_facts": False, "roles": [{"role": "gpufleet.nvidia.node_labels"}]}]
    with tempfile.TemporaryDirectory() as tmp:
        book, varfile = os.path.join(tmp, "play.yml"), os.path.join(tmp, "vars.json")
        with open(book, "w", encoding="utf-8") as handle:
            yaml.safe_dump(play, handle)
        with open(varfile, "w", encoding="utf-8") as handle:
            json.dump(extra_vars, handle)
        cmd = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], book, "-e", "@" + varfile, "--check", "--diff"]
        return subprocess.run(cmd, capture_output=True, text=True, check=False, env=dict(os.environ, ANSIBLE_NOCOLOR="1"))


def test_check_diff_shows_the_label_changes_and_changes_nothing(host):
    if host_vars(host)["node_labels_test_table"] != "WHOLE_TIME_SLICED":
        pytest.skip("run on the time-sliced node")
    before = sha256(host, FILE)
    # Sharing dropped: the product loses -SHARED, replicas go back to 1.
    run = run_with_diff(host, {"node_labels_time_slicing": []})
    assert run.returncode == 0, run.stdout + run.stderr
    for line in (
        "-nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB-SHARED",
        "+nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB",
        "-nvidia.com/gpu.replicas=4",
        "+nvidia.com/gpu.replicas=1",
        "+nvidia.com/gpu.sharing-strategy=none",
    ):
        assert line in run.stdout, run.stdout
    assert sha256(host, FILE) == before


def test_nfd_worker_drops_labels_past_their_expiry(host):
    if host_vars(host)["node_labels_test_table"] != "MIXED":
        pytest.skip("run on the node with an expiry")
    n = node(host)
    # A second file with our labels under an expiry in the past: nfd-worker reports only the live file's.
    stale = DIR + "/test-expired"
    content = n.file(FILE).content_string.replace("# +expiry-time=2099-01-01T00:00:00Z", "# +expiry-time=2000-01-01T00:00:00Z")
    content = content.replace("nvidia.com/gpu.count=8", "nvidia.com/gpu.count=99")
    assert "expiry-time=2000" in content and "count=99" in content
    n.run_expect([0], "cat > {0} <<'EOF'\n{1}EOF".format(stale, content))
    try:
        assert nfd_labels(host)["nvidia.com/gpu.count"] == "8"
    finally:
        n.run_expect([0], "rm -f " + stale)
