"""verify on a converged node, and precise findings when something is tampered.

The node (Debian 13) was converged by the whole playbooks/site.yml, every
layer real. The tamperings are what happens to real fleets: another tool
re-templates containerd's config.toml without our import while the node runs
another driver than pinned (two independent findings from one run); a GPU is
swapped while the CDI spec still names the old one; MIG is switched on by
hand against the declared layout. Each runs playbooks/site.yml --tags verify,
then the node is put back.

GPU health reaches the node's Node object in the test ground's cluster (the
real API server): read back, the healthy node's condition is False and it
carries no taint; Xid 79 sets both, from a verify run and from the boot-time
check, and clearing it takes them off, while another manager's taint and
condition stay; the node's credential reaches its own Node and nothing else.

Then the fast path: the tampering tests left a failing report on a node put
back by hand, so the first plain run must not skip it on its fingerprint; the
next plain run skips every layer on the unchanged node and still returns its
verify result;
a file edited by hand is named, repaired, and the run after is fast again;
--skip-tags fast_path runs every layer and changes nothing (site.yml's own
idempotence, which Molecule's idempotence step no longer sees).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import yaml

# The scenarios' shared helpers (../../_shared/stack.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "_shared"))

# pylint: disable=wrong-import-position
from stack import kube_api, kube_core, scenario_playbook, set_aside

ROOT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", os.getcwd()))
EPHEMERAL = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])
REPORTS = EPHEMERAL / "reports"
CONFIG = "/etc/containerd/config.toml"
STATE = "/var/lib/nvml-sim/state"


def host_name(host) -> str:
    return host.backend.get_hostname()


def site(host, *args: str, **env_extra: str) -> subprocess.CompletedProcess:
    return scenario_playbook(ROOT / "playbooks" / "site.yml", "--limit", host_name(host), *args, **env_extra)


def report(host) -> dict:
    return json.loads(host.file("/var/lib/gpufleet/verify.json").content_string)


def checks(host, found: dict | None = None) -> dict:
    return {c["layer"]: c for c in (found or report(host))["checks"]}


def test_converged_node_passes(host):
    node_report = report(host)
    found = checks(host, node_report)
    for layer in ("driver", "container_toolkit", "container_runtime", "cdi", "crictl", "health"):
        assert found[layer]["status"] == "pass", found[layer]
    assert found["mig"]["status"] == "pass", found["mig"]
    assert node_report["status"] in ("pass", "warn")
    assert json.loads((REPORTS / "{0}.json".format(host_name(host))).read_text()) == node_report


def test_removed_runtime_import_and_another_driver_are_found(host):
    with set_aside(host, CONFIG), set_aside(host, STATE):
        host.check_output("printf 'version = 2\\n' > {0}".format(CONFIG))
        host.check_output("nvml-simctl set driver_version=550.127.05")
        run = site(host, "--tags", "verify")
        assert run.returncode != 0, run.stdout
        assert ("containerd's effective config (`containerd config dump`) has no `nvidia` runtime; imports: /etc/containerd/config.toml") in run.stdout
        assert "loaded driver 550.127.05 differs from the pinned driver_version 550.163.01" in run.stdout
        found = checks(host)
        assert found["container_runtime"]["status"] == "fail"
        assert found["driver"]["status"] == "fail"
        assert found["cdi"]["status"] == "pass"  # each layer is judged on its own
        # The failed run gave the node back: a run from another controller (a new AWX job), which cannot see
        # that this one ended, does not wait for it.
        assert "TASK [gpufleet.nvidia.fast_path : Give the node back to other runs, since this run fails here]" in run.stdout
        assert not host.file("/var/lib/gpufleet/run-lease.json").exists, host.file("/var/lib/gpufleet/run-lease.json").content_string


def test_a_swapped_gpu_leaves_the_cdi_spec_stale(host):
    """The spec generated before still names the GPU that was replaced."""
    old_uuid = json.loads(host.check_output("nvml-simctl show"))["gpus"][7]["uuid"]
    with set_aside(host, STATE):
        host.check_output("nvml-simctl set --gpu 7 uuid=GPU-00000000-0000-0000-0000-0000000000a7")
        run = site(host, "--tags", "verify")
        assert run.returncode != 0, run.stdout
        found = checks(host)
        assert found["mig"]["status"] == "pass", found["mig"]  # each layer is judged on its own
        cdi = found["cdi"]
        assert cdi["status"] == "fail", cdi
        messages = [f["message"] for f in cdi["findings"]]
        assert "CDI spec is stale: it lists {0}, which NVML does not report".format(old_uuid) in messages, messages


# -- DRA readiness ------------------------------------------------------------------------------------------------

DROP_IN = "/etc/containerd/conf.d/99-nvidia.toml"
IMEX_UNIT = "/usr/lib/systemd/system/nvidia-imex.service"


@contextmanager
def host_imex(host):
    """An nvidia-imex.service where a package would put it, enabled and running (as nvidia-imex-* installs it)."""
    host.check_output(
        "printf '[Unit]\\nDescription=stand-in nvidia-imex\\n[Service]\\nExecStart=/bin/sleep infinity\\n[Install]\\nWantedBy=multi-user.target\\n' > "
        + IMEX_UNIT
    )
    host.check_output("systemctl daemon-reload && systemctl enable --now nvidia-imex.service")
    try:
        yield
    finally:
        host.run("systemctl unmask nvidia-imex.service; systemctl disable --now nvidia-imex.service")
        host.check_output("rm -f {0} && systemctl daemon-reload".format(IMEX_UNIT))


def dra_check(host, *skip: str) -> tuple[subprocess.CompletedProcess, dict]:
    """verify, and the dra check of its report. The fault runs skip health and workload (their own tests judge
    them); the last run of this section runs them all, so that the report the next tests read is whole."""
    run = site(host, "--tags", "verify", *(("--skip-tags", ",".join(skip)) if skip else ()))
    return run, checks(host)["dra"]


FAST = ("verify_health", "verify_workload")


def dra_errors(check: dict) -> list[tuple[str, str]]:
    return [(f["subject"], f["message"]) for f in check["findings"] if f["severity"] == "error"]


def test_the_prepared_node_is_ready_for_the_dra_driver(host):
    dra = checks(host)["dra"]
    assert dra["status"] == "pass", dra
    assert dra["observed"]["cdi"] is True and "/var/run/cdi" in dra["observed"]["cdi_spec_dirs"]
    assert dra["observed"]["nvidia_cdi_hook"] == "/usr/bin/nvidia-cdi-hook"
    # Resolved like the DRA driver resolves them: Debian's nvidia-smi is an alternatives link.
    assert dra["observed"]["driver_root"]["nvidia_smi"].endswith("/nvidia-smi"), dra["observed"]
    assert dra["observed"]["driver_root"]["library"], dra["observed"]
    assert dra["observed"]["imex"]["load"] == "not-found"


def test_dra_cdi_off_in_containerd_fails(host):
    with set_aside(host, DROP_IN):
        host.check_output("sed -i 's/enable_cdi = true/enable_cdi = false/' " + DROP_IN)
        run, dra = dra_check(host, *FAST)
    assert run.returncode != 0, run.stdout
    assert dra_errors(dra) == [("cdi", "CDI is off in containerd: the DRA driver hands GPUs to containers only through CDI")]
    assert "CDI is off in containerd" in run.stdout


def test_dra_spec_dirs_without_var_run_cdi_fail(host):
    with set_aside(host, DROP_IN):
        host.check_output("sed -i 's|^\\( *cdi_spec_dirs *=\\).*|\\1 [\"/etc/cdi\"]|' " + DROP_IN)
        run, dra = dra_check(host, *FAST)
    assert run.returncode != 0, run.stdout
    assert dra_errors(dra) == [
        ("cdi_spec_dirs", "containerd's CDI spec directories (/etc/cdi) do not include /var/run/cdi, where the DRA driver writes its CDI specs")
    ]


def test_dra_without_nvidia_cdi_hook_fails(host):
    with set_aside(host, "/usr/bin/nvidia-cdi-hook", keep_copy=False):
        run, dra = dra_check(host, *FAST)
    assert run.returncode != 0, run.stdout
    assert [subject for subject, message in dra_errors(dra)] == ["nvidia-cdi-hook"], dra
    assert "nvidia-cdi-hook is not on the host" in run.stdout


def test_dra_driver_root_without_nvidia_smi_fails(host):
    with set_aside(host, "/usr/bin/nvidia-smi", keep_copy=False):
        run, dra = dra_check(host, *FAST)
    assert run.returncode != 0, run.stdout
    assert [subject for subject, message in dra_errors(dra)] == ["driver_root"], dra
    assert "the driver root / has no nvidia-smi (looked in /, /opt/bin, /usr/bin, /usr/sbin, /bin, /sbin)" in dra_errors(dra)[0][1]


def test_dra_host_imex_fails_until_masked(host):
    with host_imex(host):
        run, dra = dra_check(host, *FAST)
        assert run.returncode != 0, run.stdout
        assert dra_errors(dra) == [
            (
                "imex",
                "nvidia-imex.service is enabled and active (loaded), not masked: it clashes with the IMEX daemons the DRA driver runs for ComputeDomains",
            )
        ]
        host.check_output("systemctl disable --now nvidia-imex.service && systemctl mask nvidia-imex.service")
        run, dra = dra_check(host)
        assert dra["status"] == "pass", dra
        assert run.returncode == 0, run.stdout


# -- GPU health ---------------------------------------------------------------------------------------------------

TEXTFILE = "/var/lib/prometheus/node-exporter/gpufleet-health.prom"
KMSG = "/run/nvml-sim/kmsg"
SIM_STATE = "/var/lib/nvml-sim/state"


def gauges(host) -> dict:
    """The health textfile's status gauges: {(check, gpu): value}, node-level ones under gpu None."""
    found = {}
    for line in host.file(TEXTFILE).content_string.splitlines():
        match = re.match(r"gpufleet_gpu_health_status\{(.*)\} (\d+)$", line)
        if match:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
            found[(labels["check"], labels.get("gpu"))] = int(match.group(2))
    return found


@contextmanager
def sick(host, *injections: str):
    """Inject faults with nvml-simctl; afterwards every GPU is healthy again and the kernel log empty."""
    try:
        for injection in injections:
            host.check_output("nvml-simctl inject " + injection)
        yield
    finally:
        for gpu in range(8):
            host.check_output("nvml-simctl inject clear --gpu {0}".format(gpu))
        host.check_output(": > " + KMSG)


def test_a_healthy_node_passes_health_and_publishes_zero_gauges(host):
    health = checks(host)["health"]
    assert health["status"] == "pass", health
    assert health["findings"] == [] or all(f["severity"] == "info" for f in health["findings"]), health
    found = gauges(host)
    assert {gpu for _check, gpu in found if gpu is not None} == {str(i) for i in range(8)}
    assert set(found.values()) == {0}, found
    assert host.file(TEXTFILE).mode == 0o644


# -- GPU health to Kubernetes (verify_kubernetes_health) ----------------------------------------------------------

CONDITION = "GpufleetGpuHealth"
TAINT_KEY = "gpufleet.nvidia/gpu-health"
CREDENTIAL = "/etc/gpufleet/kubernetes/node-health.json"
# Another manager's: NVSentinel's documented example taint and one of its conditions.
FOREIGN_TAINT = {"key": "nvidia.com/gpu-error", "value": "fatal", "effect": "NoSchedule"}
FOREIGN_CONDITION = {
    "type": "GpuXidError",
    "status": "True",
    "reason": "GpuXidErrorIsNotHealthy",
    "message": "ErrorCode:48 GPU:0 Recommended Action=RESTART_BM;",
    "lastHeartbeatTime": "2026-12-01T00:00:00Z",
    "lastTransitionTime": "2026-12-01T00:00:00Z",
}
# What the node's own credential may do, asked from the node: (method, path, body) -> HTTP status.
ASK_AS_THE_NODE = r"""
import base64, json, ssl, sys, urllib.error, urllib.request
cred = json.load(open(sys.argv[1]))
context = ssl.create_default_context(cadata=base64.b64decode(cred["certificate_authority_data"]).decode())
for method, path in (("GET", "/api/v1/nodes/" + cred["node"]), ("GET", "/api/v1/nodes/someone-else"),
                     ("PATCH", "/api/v1/nodes/someone-else"), ("GET", "/api/v1/namespaces/kube-system/secrets")):
    body = b"{}" if method == "PATCH" else None
    request = urllib.request.Request(cred["server"] + path, method=method, data=body,
                                     headers={"Authorization": "Bearer " + cred["token"], "Content-Type": "application/merge-patch+json"})
    try:
        code = urllib.request.urlopen(request, context=context, timeout=10).status
    except urllib.error.HTTPError as error:
        code = error.code
    print(method, path, code)
"""


def node_health(host) -> tuple[dict, dict, list[dict]]:
    """The Node as the API server has it: (our condition or {}, every condition by type, the taints)."""
    node = kube_core().read_node(host_name(host)).to_dict()
    conditions = {c["type"]: c for c in node["status"]["conditions"] or []}
    return conditions.get(CONDITION) or {}, conditions, node["spec"]["taints"] or []


def keyed(taints: list[dict], key: str = TAINT_KEY) -> list[tuple]:
    """The taints of `key` (ours by default) as (key, value, effect)."""
    return [(t["key"], t["value"], t["effect"]) for t in taints if t["key"] == key]


def test_the_healthy_node_says_so_on_its_node_with_a_credential_for_that_node_only(host):
    name = host_name(host)
    condition, _conditions, taints = node_health(host)
    assert (condition["status"], condition["reason"], condition["message"]) == ("False", "GpufleetGpuHealthIsHealthy", "No Health Failures")
    assert keyed(taints) == []
    credential = host.file(CREDENTIAL)
    assert (credential.mode, credential.user) == (0o600, "root")
    client, api = kube_api()
    role = client.RbacAuthorizationV1Api(api).read_cluster_role("gpufleet-node-health-" + name)
    assert [(r.resources, r.resource_names, sorted(r.verbs)) for r in role.rules] == [
        (["nodes"], [name], ["get", "patch"]),
        (["nodes/status"], [name], ["patch"]),
    ]
    host.check_output("cat > /tmp/ask-as-the-node.py <<'EOF'\n{0}\nEOF".format(ASK_AS_THE_NODE))
    answers = host.check_output("python3 /tmp/ask-as-the-node.py " + CREDENTIAL).splitlines()
    assert answers == [
        "GET /api/v1/nodes/{0} 200".format(name),
        "GET /api/v1/nodes/someone-else 403",
        "PATCH /api/v1/nodes/someone-else 403",
        "GET /api/v1/namespaces/kube-system/secrets 403",
    ], answers


@contextmanager
def another_manager_on_the_node(host):
    """NVSentinel's taint and condition put on the Node by someone else first; taken off afterwards."""
    core, name = kube_core(), host_name(host)
    taints = core.read_node(name).to_dict()["spec"]["taints"] or []
    core.patch_node(name, {"spec": {"taints": taints + [FOREIGN_TAINT]}})
    core.patch_node_status(name, {"status": {"conditions": [FOREIGN_CONDITION]}})
    try:
        yield
    finally:
        taints = [t for t in core.read_node(name).to_dict()["spec"]["taints"] or [] if t["key"] != FOREIGN_TAINT["key"]]
        core.patch_node(name, [{"op": "replace", "path": "/spec/taints", "value": taints}])


def assert_tainted_for(host, gpu: dict) -> None:
    condition, conditions, taints = node_health(host)
    assert (condition["status"], condition["reason"]) == ("True", "GpufleetGpuHealthIsNotHealthy"), condition
    # NVSentinel's message form, the GPU named by its PCI bus id.
    entry = re.search(r"ErrorCode:xid GPU:(\S+) (.*?) Recommended Action=(\w+);", condition["message"])
    assert entry and entry.group(1).lower() == gpu["bus_id"].lower() and "79" in entry.group(2), condition["message"]
    assert keyed(taints) == [(TAINT_KEY, "critical", "NoSchedule")]
    assert keyed(taints, FOREIGN_TAINT["key"]) == [tuple(FOREIGN_TAINT.values())]
    assert conditions["GpuXidError"]["status"] == "True"


def assert_cleared(host) -> None:
    condition, conditions, taints = node_health(host)
    assert (condition["status"], condition["message"]) == ("False", "No Health Failures"), condition
    assert keyed(taints) == []
    # Only ours is cleared: another manager's taint and condition stay as they were.
    assert keyed(taints, FOREIGN_TAINT["key"]) == [tuple(FOREIGN_TAINT.values())]
    assert conditions["GpuXidError"]["message"] == FOREIGN_CONDITION["message"]


def test_xid_79_taints_the_node_and_clearing_it_untaints_it_from_verify_and_at_boot(host):
    """A verify run sets them and the boot-time check clears them; then the boot-time check sets them and a verify
    run clears them. Each read back from the API server."""
    gpu = json.loads(host.check_output("nvml-simctl show"))["gpus"][5]
    with another_manager_on_the_node(host):
        with sick(host, "xid --gpu 5 --xid 79"):
            run = site(host, "--tags", "verify")
            assert run.returncode != 0, run.stdout
            assert_tainted_for(host, gpu)
        boot = host.run("gpufleet-verify-boot --report /tmp/verify-boot-test.json")
        assert boot.rc == 0, boot.stdout
        assert "kubernetes   pass" in boot.stdout, boot.stdout
        assert_cleared(host)
        with sick(host, "xid --gpu 5 --xid 79"):
            boot = host.run("gpufleet-verify-boot --report /tmp/verify-boot-test.json")
            assert boot.rc == 1, boot.stdout
            assert_tainted_for(host, gpu)
        run = site(host, "--tags", "verify")
        assert run.returncode == 0, run.stdout
        assert_cleared(host)


def test_check_mode_shows_the_taint_it_would_set_and_sets_nothing(host):
    with sick(host, "xid --gpu 5 --xid 79"):
        run = site(host, "--tags", "verify", "--check", "--diff")
        condition, _conditions, taints = node_health(host)
    assert '+    "gpufleet.nvidia/gpu-health=critical:NoSchedule"' in run.stdout, run.stdout
    assert condition["status"] == "False" and keyed(taints) == []


# -- the GPU Operator handover (playbooks/operator_values.yml) ----------------------------------------------------

HARNESS = ROOT / "tests" / "harness"


def rendered_chart(values: Path) -> list[dict]:
    """NVIDIA's GPU Operator chart (tests/harness/gpu-operator-chart.sh) rendered by the real helm with `values`, CRDs
    included, as `helm install` renders it for Kubernetes 1.36."""
    helm = subprocess.check_output([str(HARNESS / "go-build.sh"), "helm", "v3.22.0"], text=True).strip() + "/helm"
    chart = subprocess.check_output([str(HARNESS / "gpu-operator-chart.sh")], text=True).strip()
    out = subprocess.run(
        [helm, "template", "gpu-operator", chart, "--namespace", "gpu-operator", "--include-crds", "--kube-version", "v1.36.3", "-f", str(values)],
        env=dict(os.environ, HOME=str(values.parent)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def dry_run(dynamic, obj: dict):
    """Create `obj` as a server-side dry run with strict field validation: an unknown or misplaced field, or a value
    the schema refuses (a CRD's OpenAPI schema for the ClusterPolicy), is an error; nothing is stored."""
    resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    namespace = "gpu-operator" if resource.namespaced else None
    return resource.create(body=obj, namespace=namespace, dry_run="All", query_params=[("fieldValidation", "Strict")])


def test_the_operator_values_render_in_nvidias_chart_and_the_api_server_takes_every_object(host, tmp_path):
    """The handover values of this converged node, rendered by helm in the GPU Operator's own chart; every object,
    the ClusterPolicy against the chart's CRD, passes the API server's strict validation; and the ClusterPolicy
    leaves the driver, the toolkit and MIG to us."""
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import ApiException

    values = tmp_path / "gpu-operator-values.yaml"
    run = scenario_playbook(ROOT / "playbooks" / "operator_values.yml", "--limit", host_name(host), "-e", "operator_values_path={0}".format(values))
    assert run.returncode == 0, run.stdout
    objects = rendered_chart(values)
    client, api = kube_api()
    dynamic = DynamicClient(api)
    crds = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
    assert "clusterpolicies.nvidia.com" in [c["metadata"]["name"] for c in crds]
    for crd in crds:
        dynamic.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition").server_side_apply(body=crd, field_manager="gpufleet-test")
    for _second in range(60):
        established = [
            c
            for c in dynamic.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition").get().items
            if any(cond.type == "Established" and cond.status == "True" for cond in c.status.conditions or [])
        ]
        if len(established) >= len(crds):
            break
        time.sleep(1)
    dynamic.resources.invalidate_cache()
    try:
        client.CoreV1Api(api).create_namespace({"metadata": {"name": "gpu-operator"}})
    except ApiException as exc:
        assert exc.status == 409, exc  # made by an earlier run of this test
    accepted = {}
    for obj in objects:
        if obj["kind"] != "CustomResourceDefinition":
            accepted[(obj["kind"], obj["metadata"]["name"])] = dry_run(dynamic, obj)
    policy = accepted[("ClusterPolicy", "cluster-policy")].to_dict()["spec"]
    assert policy["driver"]["enabled"] is False and policy["toolkit"]["enabled"] is False, policy
    assert policy["cdi"]["enabled"] is True and policy["migManager"]["enabled"] is False, policy
    assert {"name": "DISABLE_DEV_CHAR_SYMLINK_CREATION", "value": "true"} in policy["validator"]["driver"]["env"]
    # The check can fail: a misspelt field is refused by name.
    wrong = next(o for o in objects if o["kind"] == "ClusterPolicy")
    wrong["spec"]["driver"]["enabeld"] = False
    try:
        dry_run(dynamic, wrong)
    except ApiException as exc:
        assert exc.status == 400 and "spec.driver.enabeld" in str(exc), str(exc)
    else:
        raise AssertionError("the API server took a ClusterPolicy with an unknown field")


def test_each_hardware_fault_fails_health_naming_the_gpu_and_what_to_do(host):
    """One fault per GPU of the 8-GPU node, all in one verify run; Xid 13 is on the ignore list."""
    gpus = json.loads(host.check_output("nvml-simctl show"))["gpus"]
    with sick(
        host,
        "ecc-burst --gpu 0 --uncorrected 1",
        "remap-failure --gpu 1",
        "link-degrade --gpu 2",
        "nvlink-down --gpu 3 --link 5",
        "gpu-lost --gpu 4",
        "xid --gpu 5 --xid 79",
        "xid --gpu 6 --xid 13",
        "xid --gpu 7 --fallen-off-bus",
    ):
        run = site(host, "--tags", "verify")
        found = gauges(host)
        health = checks(host)["health"]
    assert run.returncode != 0, run.stdout
    assert health["status"] == "fail", health
    errors = [f for f in health["findings"] if f["severity"] == "error"]
    expected = {0: "ecc_uncorrected_volatile", 1: "remap_failure", 2: "pcie_width", 3: "nvlink_down", 4: "gpu_lost", 5: "xid", 7: "fallen_off_bus"}
    for index, check in expected.items():
        gpu = gpus[index]
        mine = [f for f in errors if "GPU {0} ".format(index) in f["message"] + " "]
        assert mine, (index, health["findings"])
        # Named by index, UUID and PCI bus id, with what to do; NVML gives neither for a lost GPU.
        if check != "gpu_lost":
            assert any(gpu["uuid"] in f["message"] and gpu["bus_id"].lower() in f["message"].lower() for f in mine), mine
        assert all(f["fix"] for f in mine), mine
        assert found[(check, str(index))] == 2, (check, index, found)
    assert not [f for f in health["findings"] if "GPU 6 " in f["message"] + " "], health["findings"]
    assert found[("xid", "6")] == 0
    assert "GPU 1" in run.stdout and "remap" in run.stdout.lower()


def test_a_pending_row_remap_warns_without_failing_the_host(host):
    """Below verify_fail_on: the run passes, the layer warns, the gauge says 1."""
    gpu = json.loads(host.check_output("nvml-simctl show"))["gpus"][2]
    with sick(host, "remap-pending --gpu 2"):
        run = site(host, "--tags", "verify")
        found = gauges(host)
        health = checks(host)["health"]
    assert run.returncode == 0, run.stdout
    assert health["status"] == "warn", health
    # The row waits for a GPU reset after an uncorrectable error: two warnings on GPU 2, nothing else.
    warnings = {f["message"].split(":")[0]: f for f in health["findings"] if f["severity"] == "warning"}
    assert sorted(warnings) == ["remap_pending", "remap_uncorrectable"], health["findings"]
    assert all("GPU 2 " in w["message"] and gpu["uuid"] in w["message"] and w["fix"] for w in warnings.values())
    assert found[("remap_pending", "2")] == 1 and found[("remap_uncorrectable", "2")] == 1
    assert {value for key, value in found.items() if key[1] != "2"} == {0}


def test_a_fabric_still_registering_after_the_wait_or_failed_fails_and_one_that_finishes_in_it_passes(host):
    """GPU 3 stays in progress; GPU 4's registration completed with an error; Fabric Manager registers GPU 5 two
    seconds into the health read's wait."""
    gpus = json.loads(host.check_output("nvml-simctl show"))["gpus"]
    gpu = gpus[3]
    # The simulator's state is put back whole: `inject clear` leaves fabric states alone.
    with set_aside(host, SIM_STATE), sick(host):
        host.check_output("nvml-simctl set --gpu 3 fabric_state=in_progress")
        host.check_output("nvml-simctl set --gpu 4 fabric_state=completed fabric_status=NVML_ERROR_UNKNOWN")
        host.check_output("nvml-simctl set --gpu 5 fabric_state=not_started")
        host.check_output("(sleep 2; nvml-simctl set --gpu 5 fabric_state=completed fabric_status=0) >/dev/null 2>&1 &")
        run = site(host, "--tags", "verify", "-e", "verify_health_fabric_wait=6")
        health = checks(host)["health"]
        found = gauges(host)
    assert run.returncode != 0, run.stdout
    fabric = [f for f in health["findings"] if f["message"].startswith("fabric:")]
    assert len(fabric) == 2, health["findings"]
    assert all(f["severity"] == "error" and f["fix"] and "nvidia-fabricmanager" in f["message"] for f in fabric), fabric
    waited = re.search(r"GPU fabric registration is still in_progress after (\d+) s on GPU 3 ", fabric[0]["message"])
    assert waited and int(waited.group(1)) >= 6, fabric[0]["message"]
    assert gpu["uuid"] in fabric[0]["message"] and "nvidia-fabricmanager" in fabric[0]["message"]
    assert "GPU fabric registration completed with status NVML_ERROR_UNKNOWN on GPU 4 " in fabric[1]["message"], fabric[1]
    assert gpus[4]["uuid"] in fabric[1]["message"] and "reset the GPU" in fabric[1]["message"]
    assert found[("fabric", "3")] == 2 and found[("fabric", "4")] == 2 and found[("fabric", "5")] == 0


def test_mig_switched_on_by_hand_is_found(host):
    """`nvidia-smi -i 0 -mig 1` on a node declared all-disabled: a finding that names GPU 0 and the fix."""
    line = "GPU 0: expected MIG disabled, found MIG enabled, no GPU instances"
    try:
        host.check_output("nvml-simctl set --gpu 0 mig_current=1 mig_pending=1")
        run = site(host, "--tags", "verify")
        assert run.returncode != 0, run.stdout
        assert "MIG layout 'all-disabled' is not applied: " + line in run.stdout
        found = checks(host)
        mig = found["mig"]
        assert mig["status"] == "fail", mig
        assert [(f["severity"], f["subject"], f["message"], f["fix"]) for f in mig["findings"]] == [
            ("error", "GPU 0", "MIG layout 'all-disabled' is not applied: " + line, "disable MIG on GPU 0: run the mig layer (--tags mig)")
        ]
        assert found["driver"]["status"] == "pass"  # each layer is judged on its own
    finally:
        host.check_output("nvml-simctl set --gpu 0 mig_current=0 mig_pending=0")
    gpu0 = json.loads(host.check_output("nvml-simctl show"))["gpus"][0]
    assert (gpu0["mig_current"], gpu0["mig_pending"]) == (0, 0)


def recap(run: subprocess.CompletedProcess, host) -> dict:
    """The PLAY RECAP counters of the host, e.g. {'ok': 3, 'changed': 0, ...}."""
    for line in re.sub(r"\x1b\[[0-9;]*m", "", run.stdout).splitlines():
        if line.startswith(host_name(host) + " ") and "ok=" in line:
            return {key: int(value) for key, value in (field.split("=") for field in line.split(":", 1)[1].split())}
    raise AssertionError("no recap for the host:\n" + run.stdout)


def test_a_failed_re_check_is_not_skipped_on_its_fingerprint(host):
    """The last --tags verify run above failed; the node was put back by hand, so its fingerprint matches again.

    The fast path must still run every layer: the report says fail, and only a verify that passes may let the
    node be skipped."""
    assert report(host)["status"] == "fail"
    run = site(host)
    assert run.returncode == 0, run.stdout
    assert "verify report /var/lib/gpufleet/verify.json says fail: the last verify did not pass" in run.stdout, run.stdout
    assert "TASK [gpufleet.nvidia.driver" in run.stdout
    assert report(host)["status"] in ("pass", "warn")


def test_a_no_op_run_takes_the_fast_path(host):
    """The converge recorded the node's fingerprint; a plain run compares it in one call and skips every layer.

    AWX still gets the node's verify result: its last report, marked unchanged since the record."""
    run = site(host, ANSIBLE_SHOW_CUSTOM_STATS="true")
    assert run.returncode == 0, run.stdout
    assert "every layer is skipped" in run.stdout, run.stdout
    stats = run.stdout.split("CUSTOM STATS", 1)[-1]
    assert "gpufleet_verify" in stats and "unchanged_since" in stats and host_name(host) in stats, run.stdout
    assert "TASK [gpufleet.nvidia.driver" not in run.stdout
    assert recap(run, host)["changed"] == 0
    record = json.loads(host.file("/var/lib/gpufleet/fingerprint.json").content_string)
    assert host.file("/var/lib/gpufleet/fingerprint.json").mode == 0o600
    assert "path:/etc/containerd/config.toml" in record["state"]


def test_drift_runs_every_layer_and_repairs_it(host):
    """A file a role manages, edited by hand: the fast path names it, every layer runs, the next run is fast again."""
    before = host.file("/etc/crictl.yaml").content_string
    host.check_output("printf 'runtime-endpoint: unix:///run/elsewhere.sock\\n' > /etc/crictl.yaml")
    run = site(host)
    assert run.returncode == 0, run.stdout
    assert "every layer runs: node changed: /etc/crictl.yaml" in run.stdout, run.stdout
    assert recap(run, host)["changed"] >= 1
    assert host.file("/etc/crictl.yaml").content_string == before
    again = site(host)
    assert again.returncode == 0 and "every layer is skipped" in again.stdout, again.stdout


def test_the_full_no_op_run_changes_nothing(host):
    """--skip-tags fast_path runs every layer: site.yml's own idempotence, which the fast path would hide.

    After the fast-path tests: their full runs rewrote the reports that the tampering tests' --tags verify runs
    left failing, so nothing is left to change."""
    run = site(host, "--skip-tags", "fast_path")
    assert run.returncode == 0, run.stdout
    assert "TASK [gpufleet.nvidia.driver" in run.stdout
    assert recap(run, host)["changed"] == 0, run.stdout


# -- one run at a time --------------------------------------------------------------------------------------------

LEASE = "/var/lib/gpufleet/run-lease.json"


def start_site(host, *args: str, **env_extra: str) -> subprocess.Popen:
    """site.yml in the background, as scenario_playbook runs it (its inventory, ansible.cfg and collection)."""
    ephemeral = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", **env_extra)
    env.setdefault("ANSIBLE_CONFIG", str(ephemeral / "ansible.cfg"))
    env["ANSIBLE_COLLECTIONS_PATH"] = str(ROOT / "build" / "collections")
    inventory = os.environ.get("MOLECULE_INVENTORY_FILE", str(ephemeral / "inventory" / "ansible_inventory.yml"))
    return subprocess.Popen(
        ["ansible-playbook", str(ROOT / "playbooks" / "site.yml"), "-i", inventory, "--limit", host_name(host), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # Its own process group: a test can stop and continue the whole run (ansible-playbook and its workers).
        start_new_session=True,
    )


def wait_for_lease(host, run: subprocess.Popen) -> dict:
    """The lease the background run took (its ansible-playbook's pid is in it)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        held = host.run("cat " + LEASE)
        if held.rc == 0 and json.loads(held.stdout).get("pid") == run.pid:
            return json.loads(held.stdout)
        assert run.poll() is None, run.communicate()[0]
        time.sleep(0.5)
    raise AssertionError("the run took no lease")


def test_two_runs_at_once_the_second_waits_or_fails_naming_the_first(host):
    """Two runs against one node: the one that does not wait fails naming the other, the one that waits runs after
    it; nothing is interleaved (the waiting run's layers start after the first gave the node back)."""
    host.run("rm -f " + LEASE)
    first = start_site(host, "--tags", "verify")
    held = wait_for_lease(host, first)
    # The first run holds the node, stopped, until both others have met it: however slow the machine, neither finds
    # the node free (a run that is alive but stopped keeps its lease; only a dead one is taken over).
    os.killpg(first.pid, signal.SIGSTOP)
    try:
        patient = start_site(host, "--tags", "verify")
        impatient = site(host, "--tags", "verify", "-e", "gpufleet_lock_timeout=0")
        # The patient run started with the impatient one and walks the same way to the lease: give it a margin.
        time.sleep(10)
        assert patient.poll() is None, patient.communicate()[0]
    finally:
        os.killpg(first.pid, signal.SIGCONT)
    assert impatient.returncode != 0, impatient.stdout
    assert "another run holds this node: run {0} by {1} on {2}".format(held["run_id"], held["user"], held["controller"]) in impatient.stdout
    assert "-e gpufleet_lock_take_over={0}".format(held["run_id"]) in impatient.stdout
    first_output = first.communicate(timeout=600)[0]
    assert first.returncode == 0, first_output
    patient_output = patient.communicate(timeout=600)[0]
    assert patient.returncode == 0, patient_output
    # It waited for the first, then ran its layers.
    assert "s for run {0} ({1} on {2}) to give the node back".format(held["run_id"], held["user"], held["controller"]) in patient_output, patient_output
    assert "TASK [gpufleet.nvidia.verify" in patient_output and not host.file(LEASE).exists


def test_a_run_killed_holding_the_node_is_taken_over_by_the_next(host):
    """A cancelled run (the controller killed): the next run on the same controller sees its process gone, takes
    the node over with a warning, and converges."""
    killed = start_site(host, "--tags", "verify")
    held = wait_for_lease(host, killed)
    killed.kill()
    killed.communicate()
    assert host.file(LEASE).exists
    run = site(host, "--tags", "verify")
    assert run.returncode == 0, run.stdout
    assert "run {0} died (its ansible-playbook, pid {1}, is gone) holding this node; taking it over".format(held["run_id"], held["pid"]) in run.stdout
    assert not host.file(LEASE).exists
