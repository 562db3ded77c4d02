"""cdi with the real nvidia-ctk against the simulated NVML library.

The expected devices come from the simulator's own state (nvml-simctl show),
the spec is checked against the CDI project's schema (the files the role
ships) with the real jsonschema package - never with the collection's own
code - and the refresh units are read from systemd. Specs are read with json,
or PyYAML for YAML.
"""

from __future__ import annotations

import json
import os
import sys

import jsonschema
import pytest
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

HERE = os.path.dirname(__file__)
ROOT = os.environ.get("MOLECULE_PROJECT_DIRECTORY", os.path.join(HERE, "..", "..", "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "_shared"))

# pylint: disable=wrong-import-position
from stack import host_vars, node, run_playbook, run_role, sha256

SCHEMA_DIR = os.path.join(ROOT, "roles", "cdi", "files", "cdi-schema")
ALL_SPECS = [d + "/nvidia." + f for d in ("/etc/cdi", "/var/run/cdi") for f in ("yaml", "json")]


def settings(host) -> dict:
    hv = host_vars(host)
    directory = hv.get("cdi_spec_dir", "/etc/cdi")
    fmt = hv.get("cdi_format", "json")
    return {
        "path": "{0}/nvidia.{1}".format(directory, fmt),
        "format": fmt,
        "strategies": hv.get("cdi_device_name_strategy", ["index", "uuid"]),
        "bake": hv.get("cdi_bake", False),
    }


def gpu_node(host):
    if settings(host)["bake"]:
        pytest.skip("the baked node has no spec by design")


def read_spec(host) -> dict:
    s = settings(host)
    text = node(host).file(s["path"]).content_string
    return json.loads(text) if s["format"] == "json" else yaml.safe_load(text)


def simulated_gpus(host) -> list[dict]:
    return json.loads(node(host).check_output("nvml-simctl show"))["gpus"]


def expected_names(host) -> set[str]:
    names = {"all"}
    for gpu in simulated_gpus(host):
        for strategy in settings(host)["strategies"]:
            names.add({"index": str(gpu["index"]), "uuid": gpu["uuid"], "type-index": "gpu{0}".format(gpu["index"])}[strategy])
    return names


def test_spec_names_exactly_the_simulated_gpus(host):
    gpu_node(host)
    spec = read_spec(host)
    assert spec["kind"] == "nvidia.com/gpu"
    assert {d["name"] for d in spec["devices"]} == expected_names(host)


def cdi_schema_validator() -> jsonschema.protocols.Validator:
    """schema.json with its defs.json (which it names by that URI) in a referencing registry."""
    with open(os.path.join(SCHEMA_DIR, "schema.json"), encoding="utf-8") as handle:
        schema = json.load(handle)
    with open(os.path.join(SCHEMA_DIR, "defs.json"), encoding="utf-8") as handle:
        defs = Resource.from_contents(json.load(handle), default_specification=DRAFT7)
    return jsonschema.Draft7Validator(schema, registry=Registry().with_resource("defs.json", defs))


def test_spec_matches_the_cdi_schema(host):
    gpu_node(host)
    check = cdi_schema_validator()
    assert [e.message for e in check.iter_errors(read_spec(host))] == []
    # The schema does bite: a device node's major as a string is refused (through defs.json).
    broken = read_spec(host)
    broken["devices"][0]["containerEdits"]["deviceNodes"][0]["major"] = "195"
    assert [list(e.absolute_path) for e in check.iter_errors(broken)] == [["devices", 0, "containerEdits", "deviceNodes", 0, "major"]]


def test_each_gpu_device_carries_its_device_node(host):
    gpu_node(host)
    spec = read_spec(host)
    by_name = {d["name"]: d for d in spec["devices"]}
    for gpu in simulated_gpus(host):
        nodes = [n["path"] for n in by_name[str(gpu["index"])]["containerEdits"]["deviceNodes"]]
        assert "/dev/nvidia{0}".format(gpu["minor"]) in nodes
    common = [n["path"] for n in spec["containerEdits"]["deviceNodes"]]
    assert "/dev/nvidiactl" in common


def test_only_our_spec_exists_and_it_is_world_readable(host):
    gpu_node(host)
    ours = settings(host)["path"]
    for path in ALL_SPECS:
        assert node(host).file(path).exists == (path == ours), path
    f = node(host).file(ours)
    assert (f.user, f.group, f.mode) == ("root", "root", 0o644)


def test_refresh_unit_matches_the_toolkit(host):
    n = node(host)
    nvidia_unit = n.file("/lib/systemd/system/nvidia-cdi-refresh.service").exists
    version = host_vars(host)["container_toolkit_version"]
    assert nvidia_unit == (version >= "1.18")
    s = settings(host)
    if nvidia_unit:
        env = n.file("/etc/nvidia-container-toolkit/gpufleet-cdi-refresh.env").content_string
        assert "NVIDIA_CTK_CDI_OUTPUT_FILE_PATH={0}\n".format(s["path"]) in env
        assert "NVIDIA_CTK_CDI_GENERATE_DEVICE_NAME_STRATEGIES={0}\n".format(",".join(s["strategies"])) in env
        # systemd itself: ours is the last environment file the unit loads, so its settings win over NVIDIA's.
        files = n.check_output("systemctl show --property=EnvironmentFiles --value nvidia-cdi-refresh.service").splitlines()
        assert files and files[-1].split()[0] == "/etc/nvidia-container-toolkit/gpufleet-cdi-refresh.env", files
        after = n.check_output("systemctl show --property=After --value nvidia-cdi-refresh.service").split()
        assert {"gpufleet-mig.service", "nvidia-persistenced.service"} <= set(after)
        for unit in ("nvidia-cdi-refresh.service", "nvidia-cdi-refresh.path"):
            assert n.service(unit).is_enabled, unit
        assert not n.file("/etc/systemd/system/gpufleet-cdi-refresh.service").exists
    else:
        after = n.check_output("systemctl show --property=After --value gpufleet-cdi-refresh.service").split()
        assert {"gpufleet-mig.service", "nvidia-persistenced.service"} <= set(after)
        for unit in ("gpufleet-cdi-refresh.service", "gpufleet-cdi-refresh.path"):
            assert n.service(unit).is_enabled, unit


def test_our_refresh_unit_regenerates_a_missing_spec(host):
    n = node(host)
    if not n.file("/etc/systemd/system/gpufleet-cdi-refresh.service").exists:
        pytest.skip("this node uses NVIDIA's refresh unit (its conditions need a real driver)")
    path = settings(host)["path"]
    before = read_spec(host)
    n.run_expect([0], "rm -f %s && systemctl start gpufleet-cdi-refresh.service", path)
    assert {d["name"] for d in read_spec(host)["devices"]} == {d["name"] for d in before["devices"]}


def test_a_reformatted_spec_with_the_same_content_is_left_alone(host):
    gpu_node(host)
    s = settings(host)
    spec = read_spec(host)
    spec["devices"].reverse()
    # Same data, other key order, indentation and device order.
    text = json.dumps(spec, indent=1, sort_keys=True) if s["format"] == "json" else yaml.safe_dump(spec, sort_keys=True, default_flow_style=False, indent=4)
    node(host).run_expect([0], "printf %%s %s > %s", text, s["path"])
    before = sha256(host, s["path"])
    run = run_role(host, "cdi")
    assert not run.failed, run
    assert "changed=0" in run.output, run
    assert sha256(host, s["path"]) == before


def test_a_stale_spec_is_replaced(host):
    """A spec from before a GPU change (here: one device dropped) is regenerated."""
    gpu_node(host)
    s = settings(host)
    spec = read_spec(host)
    spec["devices"] = spec["devices"][1:]
    node(host).run_expect([0], "printf %%s %s > %s", json.dumps(spec), s["path"])
    run = run_role(host, "cdi")
    assert not run.failed, run
    assert {d["name"] for d in read_spec(host)["devices"]} == expected_names(host)


def test_a_spec_of_the_old_default_format_is_removed(host):
    """Runs before cdi_format's default became json left /etc/cdi/nvidia.yaml; two specs would clash."""
    gpu_node(host)
    s = settings(host)
    old = "/etc/cdi/nvidia.yaml"
    assert s["path"] != old
    n = node(host)
    n.run_expect([0], "mkdir -p /etc/cdi && printf %%s %s > %s", yaml.safe_dump(read_spec(host)), old)
    before = sha256(host, s["path"])
    run = run_role(host, "cdi")
    assert not run.failed, run
    assert not n.file(old).exists
    assert sha256(host, s["path"]) == before  # ours was already right: left alone
    for path in ALL_SPECS:
        assert n.file(path).exists == (path == s["path"]), path


def test_yaml_without_pyyaml_on_the_node_fails_first_with_the_fix(host):
    """cdi_format: yaml needs PyYAML on the node; these images have none, so nothing may change."""
    gpu_node(host)
    s = settings(host)
    n = node(host)
    assert n.run("python3 -c 'import yaml'").rc != 0, "the image has PyYAML now; this test needs a node without"
    watched = [s["path"], "/etc/nvidia-container-toolkit/gpufleet-cdi-refresh.env", "/etc/systemd/system/gpufleet-cdi-refresh.service"]
    before = {path: sha256(host, path) for path in watched}
    run = run_role(host, "cdi", extra_vars={"cdi_format": "yaml"})
    assert run.failed, run
    assert "cdi_format: yaml needs PyYAML" in run.output and "use cdi_format: json" in run.output, run
    assert "install python3-yaml" in run.output, run
    assert {path: sha256(host, path) for path in watched} == before
    for path in ALL_SPECS:
        assert n.file(path).exists == (path == s["path"]), path


def test_without_a_running_driver_generation_waits_for_boot(host):
    gpu_node(host)
    n = node(host)
    path = settings(host)["path"]
    before = sha256(host, path)
    n.run_expect([0], "nvml-simctl set driver_loaded=0")
    try:
        run = run_role(host, "cdi")
    finally:
        n.run_expect([0], "nvml-simctl set driver_loaded=1")
    assert not run.failed, run
    assert "deferred to" in run.output and "no NVIDIA driver is running" in run.output, run
    assert sha256(host, path) == before


def test_the_runs_nvml_read_is_used_and_a_forgotten_one_read_again(host):
    """The role plans from the run's NVML read without reading again; once a change made it stale (run_state
    forget), it reads NVML itself. The shared read here says no driver runs while the simulator has one running, so
    only a role that used it defers generation."""
    gpu_node(host)
    path = settings(host)["path"]
    before = sha256(host, path)
    play = [
        {
            "name": "The run's NVML read, shared and forgotten",
            "hosts": host.backend.host,
            "gather_facts": False,
            "tasks": [
                {"ansible.builtin.command": "nvml-simctl set driver_loaded=0", "changed_when": False},
                {
                    "block": [{"gpufleet.nvidia.nvml_info": {"run_read": "shared"}, "register": "test_read"}],
                    "always": [{"ansible.builtin.command": "nvml-simctl set driver_loaded=1", "changed_when": False}],
                },
                {"ansible.builtin.import_role": {"name": "gpufleet.nvidia.cdi"}},
                {
                    "ansible.builtin.assert": {
                        "that": [
                            "test_read.run_read == 'read'",
                            "__cdi_nvml_read.run_read == 'held'",
                            "not __cdi_generate_now",
                            "__cdi_nvml_read.nvml == test_read.nvml",
                        ],
                        "fail_msg": "cdi read NVML again, or did not plan from the run's read",
                    }
                },
                {"gpufleet.nvidia.run_state": {"forget": ["nvml"]}},
                {"ansible.builtin.import_role": {"name": "gpufleet.nvidia.cdi"}},
                {
                    "ansible.builtin.assert": {
                        "that": ["__cdi_nvml_read.run_read == 'read'", "__cdi_generate_now", "__cdi_nvml_read.nvml.driver_loaded"],
                        "fail_msg": "cdi did not read NVML again once the run's read was forgotten",
                    }
                },
            ],
        }
    ]
    run = run_playbook(play)
    assert not run.failed, run
    assert run.output.count("no NVIDIA driver is running") >= 1, run
    assert sha256(host, path) == before


def test_baked_node_has_no_spec_and_an_enabled_refresh_unit(host):
    if not settings(host)["bake"]:
        pytest.skip("only the baked node")
    n = node(host)
    for path in ALL_SPECS:
        assert not n.file(path).exists, path
    assert n.service("nvidia-cdi-refresh.service").is_enabled
    assert n.service("nvidia-cdi-refresh.path").is_enabled
