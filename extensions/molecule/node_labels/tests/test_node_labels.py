"""node_labels read back by the real nfd-worker, against the labels of the
real GPU Feature Discovery run one-shot on the same node, never against the
collection's own code; and the same labels read back from the Node objects
of the test ground's real Kubernetes API server (tests/harness/kube.sh)."""

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
sys.path.insert(0, os.path.join(HERE, "..", "..", "_shared"))

# pylint: disable=wrong-import-position
from stack import host_vars, kube_core, node, run_role, set_aside, sha256

DIR = "/etc/kubernetes/node-feature-discovery/features.d"
FILE = DIR + "/gpufleet-gpu"
UNIT = "gpufleet-node-labels.service"
FIELD_MANAGER = "gpufleet-node-labels"
# What someone else (prepare.yml) labelled each Node with before the role ran.
FOREIGN = {"team": "ml", "nvidia.com/gpu.deploy.driver": "false"}
NFD = "NODE_NAME=test nfd-worker -oneshot -no-publish -feature-sources=local -label-sources=local -kubeconfig /usr/local/etc/nfd-kubeconfig -v=1"


def nfd_labels(host) -> dict[str, str]:
    """The labels nfd-worker would publish: its klog line `"feature discovery completed" labels=<YAML>`."""
    out = node(host).run(NFD)
    assert out.rc == 0, out.stderr
    found = re.search(r'"feature discovery completed" labels=<\n(.*?)\n >', out.stderr, re.DOTALL)
    assert found, out.stderr
    # BaseLoader: every value a string, as in a label ("05" stays "05").
    return yaml.load(found.group(1).replace("\n\t", "\n").lstrip("\t"), Loader=yaml.BaseLoader) or {}


def node_name(host) -> str:
    """The host's name in Kubernetes (no underscore: _shared/kube.yml)."""
    return host.backend.host.replace("_", "-")


def kube_node(host):
    """The host's Node object, read from the API server as someone else (site-operator)."""
    return kube_core().read_node(node_name(host))


def owned_labels(obj, manager: str = FIELD_MANAGER) -> set[str]:
    """The label keys a field manager owns on an object (its managedFields entries)."""
    keys: set[str] = set()
    for entry in obj.metadata.managed_fields or []:
        if entry.manager == manager:
            keys |= {key.removeprefix("f:") for key in ((entry.fields_v1 or {}).get("f:metadata") or {}).get("f:labels") or {}}
    return keys


def assert_node_carries(host, labels: dict[str, str]) -> None:
    """The Node has exactly these labels under our field manager, and someone else's beside them, untouched."""
    obj = kube_node(host)
    assert owned_labels(obj) == set(labels), sorted(owned_labels(obj) ^ set(labels))
    assert {key: obj.metadata.labels.get(key) for key in labels} == labels
    assert {key: obj.metadata.labels.get(key) for key in FOREIGN} == FOREIGN
    assert not owned_labels(obj) & set(FOREIGN)


def gfd_labels(host) -> dict[str, str]:
    """GFD's labels for the node as it is now: one-shot, with the device plugin's config file the device_plugin
    role wrote (the MIG strategy and sharing a cluster's GFD would load), this node's DMI and PCI entries."""
    config = host_vars(host).get("device_plugin_config_path", "/etc/gpufleet/device-plugin/config.yaml")
    out = node(host).run("gpu-feature-discovery --oneshot --no-timestamp --use-node-feature-api=false --output-file=/run/gfd-labels --config-file=" + config)
    assert out.rc == 0, out.stdout + out.stderr
    text = node(host).file("/run/gfd-labels").content_string
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_nfd_worker_reports_gfds_labels(host):
    labels = nfd_labels(host)
    assert labels == gfd_labels(host)
    # What each node is there to show, in case both were wrong alike.
    if host_vars(host)["node_labels_test_case"] == "time_sliced":
        assert (labels["nvidia.com/gpu.sharing-strategy"], labels["nvidia.com/gpu.replicas"]) == ("time-slicing", "4")
    else:
        assert labels["nvidia.com/mig.strategy"] == "mixed" and labels["nvidia.com/mig-1g.5gb.count"] == "9"


def test_the_node_object_carries_the_labels_beside_someone_elses(host):
    assert_node_carries(host, nfd_labels(host))


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
    if host_vars(host)["node_labels_test_case"] != "time_sliced":
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
    # The Node's labels, in the API server's dry run of the apply (Molecule's ANSIBLE_FORCE_COLOR colours the lines).
    plain = re.sub(r"\x1b\[[0-9;]*m", "", run.stdout)
    for line in (
        r'-\s+"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-SHARED",?$',
        r'\+\s+"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",?$',
        r'-\s+"nvidia.com/gpu.replicas": "4",?$',
        r'\+\s+"nvidia.com/gpu.replicas": "1",?$',
    ):
        assert re.search(line, plain, re.MULTILINE), (line, plain)
    assert sha256(host, FILE) == before
    assert kube_node(host).metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB-SHARED"


def test_nfd_worker_drops_labels_past_their_expiry(host):
    if host_vars(host)["node_labels_test_case"] != "mig_mixed":
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


# --- the refresh unit: the labels follow the node between runs -----------------------------------------------------
def refresh_through_systemd(host) -> str:
    """Start the refresh unit as its triggers do (boot, a CDI refresh unit that wants it); its journal of this run."""
    n = node(host)
    n.run_expect([0], "systemctl start " + UNIT)
    assert n.run("systemctl is-failed " + UNIT).stdout.strip() == "inactive"  # a oneshot that ran and succeeded
    invocation = n.check_output("systemctl show -p InvocationID --value " + UNIT)
    return n.check_output("journalctl -o cat _SYSTEMD_INVOCATION_ID=" + invocation)


def test_the_unit_runs_at_boot_and_with_each_cdi_refresh_after_the_gpus_settle(host):
    show = dict(
        line.split("=", 1) for line in node(host).check_output("systemctl show {0} -p WantedBy -p After -p UnitFileState -p Type".format(UNIT)).splitlines()
    )
    assert (show["UnitFileState"], show["Type"]) == ("enabled", "oneshot")
    assert "multi-user.target" in show["WantedBy"].split()
    after = show["After"].split()
    for unit in ("nvidia-persistenced.service", "gpufleet-mig.service", "nvidia-cdi-refresh.service", "gpufleet-cdi-refresh.service"):
        assert unit in after, show["After"]
    # The CDI refresh units pull it in whenever they start (their .wants links, as `systemctl enable` makes them).
    for trigger in ("nvidia-cdi-refresh.service", "gpufleet-cdi-refresh.service"):
        link = node(host).file("/etc/systemd/system/{0}.wants/{1}".format(trigger, UNIT))
        assert link.is_symlink and link.linked_to == "/etc/systemd/system/" + UNIT


def test_the_unit_writes_what_the_role_wrote(host):
    """Same node, same settings: the unit finds the role's file up to date and leaves it alone."""
    before = node(host).check_output("stat -c '%i %Y' " + FILE)
    journal = refresh_through_systemd(host)
    assert "{0} is up to date".format(FILE) in journal, journal
    assert node(host).check_output("stat -c '%i %Y' " + FILE) == before


# Another MIG owner's change, through NVML (the simulated library) as the DRA driver makes one: GPU 0's 3g.20gb
# instance goes, GPU 3 (MIG on, empty) gets a 1g.5gb instance. Run with the node runtime's NVML binding.
OTHER_OWNER = r"""
import re, sys
sys.path.insert(0, re.search(r'^RUNTIME = "(.*)"$', open("/usr/local/sbin/gpufleet-node-labels").read(), re.M).group(1))
from gpufleet_runtime._nvml.session import NvmlSession
with NvmlSession() as nvml:
    gpu0, gpu3 = nvml.device_by_index(0), nvml.device_by_index(3)
    three_slices = nvml.gpu_instance_profile(gpu0, 2)  # NVML_GPU_INSTANCE_PROFILE_3_SLICE
    (gi,) = nvml.gpu_instances(gpu0, three_slices)
    for ci in nvml.compute_instances(gi, nvml.full_compute_instance_profile(gi)):
        nvml.destroy_compute_instance(ci)
    nvml.destroy_gpu_instance(gi)
    one_slice = nvml.gpu_instance_profile(gpu3, 0)  # NVML_GPU_INSTANCE_PROFILE_1_SLICE
    nvml.create_compute_instance(nvml.create_gpu_instance(gpu3, one_slice.id))
"""


def test_with_the_dra_driver_owning_mig_the_labels_follow_its_changes(host):
    if host_vars(host)["node_labels_test_case"] != "mig_mixed":
        pytest.skip("run on the MIG node")
    n = node(host)
    with set_aside(host, "/var/lib/nvml-sim/state"):
        before = json.loads(n.check_output("nvml-simctl show"))
        # The mig role with a layout unlike the node's, under mig_owner: dra_driver: MIG stays as it is.
        declared = {"version": "v1", "mig-configs": {"all-1g.5gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}]}}
        run = run_role(host, "mig", {"mig_owner": "dra_driver", "mig_label": "all-1g.5gb", "mig_config": declared})
        assert not run.failed, run
        # Molecule's ANSIBLE_FORCE_COLOR wins over NOCOLOR: the recap's counts come wrapped in colour codes.
        plain = re.sub(r"\x1b\[[0-9;]*m", "", run.output)
        recap = re.search(r"{0}\s+: ok=\d+\s+changed=(\d+)".format(re.escape(host.backend.host)), plain)
        assert recap and recap.group(1) == "0", run.output
        assert json.loads(n.check_output("nvml-simctl show")) == before
        # The other owner changes the layout; the CDI refresh it triggers starts the unit.
        n.run_expect([0], "python3 - <<'EOF'\n{0}EOF".format(OTHER_OWNER))
        journal = refresh_through_systemd(host)
        assert "rewrote " + FILE in journal, journal
        labels = nfd_labels(host)
        assert labels == gfd_labels(host)
        # The change itself: GPU 0's 3g.20gb resource gone, one more 1g.5gb device (2 + 7 + 1).
        assert "nvidia.com/mig-3g.20gb.count" not in labels and labels["nvidia.com/mig-1g.5gb.count"] == "10", labels
        assert n.file(DIR).listdir() == ["gpufleet-gpu"]
        # The role's next run takes the Node along: the 3g.20gb labels it applied before are gone from it.
        assert not run_role(host, "node_labels").failed
        assert_node_carries(host, labels)
        assert not any(key.startswith("nvidia.com/mig-3g.20gb.") for key in kube_node(host).metadata.labels)
    # The fixture's layout back, and the labels with it.
    assert "rewrote " + FILE in refresh_through_systemd(host)
    labels = nfd_labels(host)
    assert labels == gfd_labels(host)
    assert not run_role(host, "node_labels").failed
    assert_node_carries(host, labels)
    assert "nvidia.com/mig-3g.20gb.count" in labels


def test_a_label_someone_else_changed_is_a_conflict_never_taken_over(host):
    """Someone else sets one of our labels to another value: it is theirs now (the API server moves the field to
    them). The next run fails naming the label and that manager, and leaves their value; once they set it back, a
    run shares the label again."""
    if host_vars(host)["node_labels_test_case"] != "time_sliced":
        pytest.skip("run on the whole-GPU node")
    name = node_name(host)
    labels = nfd_labels(host)
    kube_core().patch_node(name, {"metadata": {"labels": {"nvidia.com/gpu.count": "99"}}}, field_manager="site-operator")
    try:
        run = run_role(host, "node_labels")
        assert run.failed, run
        message = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", run.output).split())
        assert "conflict" in message and "site-operator" in message and "nvidia.com/gpu.count" in message, run.output
        assert kube_node(host).metadata.labels["nvidia.com/gpu.count"] == "99"
    finally:
        kube_core().patch_node(name, {"metadata": {"labels": {"nvidia.com/gpu.count": labels["nvidia.com/gpu.count"]}}}, field_manager="site-operator")
    assert not run_role(host, "node_labels").failed
    assert_node_carries(host, labels)


def test_switched_off_the_refresh_goes_and_the_file_stays(host):
    if host_vars(host)["node_labels_test_case"] != "time_sliced":
        pytest.skip("run on the whole-GPU node")
    n = node(host)
    before = sha256(host, FILE)
    paths = ["/etc/systemd/system/" + UNIT, "/usr/local/sbin/gpufleet-node-labels", "/etc/gpufleet/node-labels/config.json"]
    paths += ["/etc/systemd/system/{0}.wants/{1}".format(t, UNIT) for t in ("multi-user.target", "nvidia-cdi-refresh.service", "gpufleet-cdi-refresh.service")]
    try:
        off = run_role(host, "node_labels", {"node_labels_refresh_unit": False})
        assert not off.failed, off
        assert [p for p in paths if n.file(p).exists or n.file(p).is_symlink] == []
        assert n.check_output("systemctl show -p LoadState --value " + UNIT) == "not-found"  # systemd was told
        assert sha256(host, FILE) == before
    finally:
        on = run_role(host, "node_labels")
        assert not on.failed, on
    assert n.check_output("systemctl is-enabled " + UNIT) == "enabled"
