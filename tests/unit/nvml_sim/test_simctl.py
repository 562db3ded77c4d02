"""Tests of tests/nvml-sim/simctl.py: CLI, fixtures, file protocol."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from typing import Any, List

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SIM_DIR = os.path.join(ROOT, "tests", "nvml-sim")
SIMCTL = os.path.join(SIM_DIR, "simctl.py")
NODES_DIR = os.path.join(SIM_DIR, "nodes")
MODELS_DIR = os.path.join(SIM_DIR, "models")
REQUIRED_MODELS = ("a100-sxm4-40gb", "a100-sxm4-80gb", "h100-sxm5-80gb", "h200-sxm5-141gb", "l40s", "t4", "v100-sxm2-16gb")


def run(args: List[str], env: Any = None, block_yaml: bool = False) -> subprocess.CompletedProcess:
    """Run simctl.py in a subprocess; block_yaml makes `import yaml` fail."""
    if block_yaml:
        code = "import runpy, sys; sys.modules['yaml'] = None; sys.argv = [sys.argv[1]] + sys.argv[2:]; runpy.run_path(sys.argv[0], run_name='__main__')"
        cmd = [sys.executable, "-c", code, SIMCTL] + args
    else:
        cmd = [sys.executable, SIMCTL] + args
    return subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)


@pytest.fixture
def state(tmp_path: Any, simctl: Any) -> str:
    """A rendered default node."""
    path = str(tmp_path / "state")
    node = simctl.render_node(os.path.join(NODES_DIR, "dgx-a100-8x40gb.yml"))
    with simctl.locked(path):
        simctl.write_state(path, node)
    return path


def test_python38_syntax() -> None:
    """simctl.py parses as Python 3.8."""
    with open(SIMCTL, "r", encoding="utf-8") as handle:
        ast.parse(handle.read(), feature_version=(3, 8))


def test_required_models_exist(simctl: Any) -> None:
    """One fixture per GPU model the collection targets, each with a source note."""
    for key in REQUIRED_MODELS:
        path = os.path.join(MODELS_DIR, key + ".yml")
        with open(path, "r", encoding="utf-8") as handle:
            assert "source:" in handle.read(), key
        model = simctl.load_model(MODELS_DIR, key)
        assert model["key"] == key
        assert bool(model["profiles"]) == bool(model["mig_capable"])


@pytest.mark.parametrize("key", ["a100-sxm4-40gb", "a100-sxm4-80gb", "h100-sxm5-80gb", "h200-sxm5-141gb"])
def test_mig_models_follow_the_reference(simctl: Any, key: str) -> None:
    """Profiles agree with /work/shared/reference/mig-profiles.yaml where it is available."""
    ref_path = os.path.join(os.path.dirname(ROOT), "shared", "reference", "mig-profiles.yaml")
    if not os.path.exists(ref_path):
        pytest.skip("shared reference not present")
    reference = simctl.load_yaml(ref_path)
    ref_key = {"a100-sxm4-40gb": "a100-40gb", "a100-sxm4-80gb": "a100-80gb", "h100-sxm5-80gb": "h100-80gb", "h200-sxm5-141gb": "h200-141gb"}[key]
    entry = [g for g in reference["gpus"] if g["key"] == ref_key][0]
    model = simctl.load_model(MODELS_DIR, key)
    assert model["name"] in entry["product_names"]
    assert model["pci_device_id"] in entry["pci_device_ids"]
    assert model["arch"] == entry["nvml_arch"]
    ours = {p["id"]: p for p in model["profiles"]}
    assert sorted(ours) == sorted(p["id"] for p in entry["profiles"])
    for ref in entry["profiles"]:
        prof = ours[ref["id"]]
        assert (prof["name"], prof["index"], prof["slices"], prof["instances"]) == (
            ref["name"],
            ref["nvml_profile_index"],
            ref["compute_slices"],
            ref["instances"],
        )
        assert prof["placements"] == [(p["start"], p["size"]) for p in ref["placements"]]
        if "memory_gib_reported" in ref:
            # nvidia-smi prints GiB with two decimals (19.625 GiB shows as 19.62)
            assert abs(prof["memory_mib"] / 1024 - ref["memory_gib_reported"]) < 0.01, ref["name"]
        if "sm_count_reported" in ref:
            assert prof["sm"] == ref["sm_count_reported"]


@pytest.mark.parametrize("node", sorted(f for f in os.listdir(NODES_DIR) if f.endswith(".yml")))
def test_render_cli(tmp_path: Any, node: str) -> None:
    """Every node renders through the CLI, to stdout and to a file."""
    out = run(["render", os.path.join(NODES_DIR, node)])
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("nvml-sim 1\n")
    path = str(tmp_path / "s")
    rundir = str(tmp_path / "run")
    done = run(["render", os.path.join(NODES_DIR, node), "-o", path, "--booted", "--rundir", rundir])
    assert done.returncode == 0, done.stderr
    assert os.path.exists(os.path.join(rundir, "booted"))
    with open(path, "r", encoding="utf-8") as handle:
        assert handle.read().split("\n")[2:] == out.stdout.split("\n")[2:]


def test_show_and_edit_need_no_yaml(state: str) -> None:
    """Everything but render works with PyYAML unavailable."""
    shown = run(["show", "--state", state], block_yaml=True)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["system"]["cuda_driver_version"] == 12040 and len(data["gpus"]) == 8
    gpu = data["gpus"][0]
    assert gpu["pci_device_id"] == 0x20B010DE and gpu["mig_capable"] == 1
    assert [p["id"] for p in gpu["profiles"]] == [19, 20, 15, 14, 9, 5, 0]
    assert gpu["profiles"][0]["placements"][6] == {"start": 6, "size": 1}
    assert run(["fault", "add", "nvmlInit", "DRIVER_NOT_LOADED", "--state", state], block_yaml=True).returncode == 0
    assert run(["set", "driver_loaded=0", "--state", state], block_yaml=True).returncode == 0
    failed = run(["render", os.path.join(NODES_DIR, "t4-1x.yml")], block_yaml=True)
    assert failed.returncode == 2 and "PyYAML" in failed.stderr


def test_fault_commands(state: str, simctl: Any) -> None:
    """add (number, NVML_ERROR_ name, short name), list, clear with filters."""
    for args in (["nvmlDeviceGetName", "15", "--gpu", "2"], ["nvmlInit", "NVML_ERROR_DRIVER_NOT_LOADED", "--once"], ["nvmlShutdown", "unknown", "--skip", "3"]):
        assert simctl.main(["fault", "add"] + args + ["--state", state]) == 0
    listed = run(["fault", "list", "--state", state]).stdout.splitlines()
    assert listed == [
        "fault call=nvmlDeviceGetName error=15 mode=always skip=0 gpu=2",
        "fault call=nvmlInit error=9 mode=once skip=0 gpu=-1",
        "fault call=nvmlShutdown error=999 mode=always skip=3 gpu=-1",
    ]
    assert simctl.main(["fault", "clear", "--gpu", "2", "--state", state]) == 0
    assert simctl.main(["fault", "clear", "nvmlInit", "--state", state]) == 0
    assert len(run(["fault", "list", "--state", state]).stdout.splitlines()) == 1
    assert simctl.main(["fault", "clear", "--state", state]) == 0
    assert run(["fault", "list", "--state", state]).stdout == ""
    bad = run(["fault", "add", "nvmlInit", "NO_SUCH_ERROR", "--state", state])
    assert bad.returncode == 2 and "unknown NVML error" in bad.stderr
    assert run(["fault", "add", "Init", "9", "--state", state]).returncode == 2


def test_set_command(state: str, simctl: Any) -> None:
    """System keys, GPU keys, unknown keys need --force."""
    assert simctl.main(["set", "driver_version=570.133.20", "cuda_driver_version=12080", "--state", state]) == 0
    assert simctl.main(["set", "persistence=0", "mig_pending=1", "--gpu", "3", "--state", state]) == 0
    data = json.loads(run(["show", "--state", state]).stdout)
    assert data["system"]["driver_version"] == "570.133.20" and data["system"]["cuda_driver_version"] == 12080
    assert (data["gpus"][3]["persistence"], data["gpus"][3]["mig_pending"]) == (0, 1)
    assert run(["set", "colour=blue", "--state", state]).returncode == 2
    assert run(["set", "persistence=1", "--gpu", "9", "--state", state]).returncode == 2


def test_process_commands(state: str, simctl: Any) -> None:
    """process add (size suffixes) / list / clear."""
    assert simctl.main(["process", "add", "--gpu", "1", "--pid", "7", "--used-memory", "2GiB", "--name", "vllm serve", "--state", state]) == 0
    assert simctl.main(["process", "add", "--gpu", "2", "--pid", "8", "--state", state]) == 0
    data = json.loads(run(["show", "--state", state]).stdout)
    assert data["gpus"][1]["processes"] == [{"pid": 7, "used_memory": 2 << 30, "gi": -1, "ci": -1, "name": "vllm serve"}]
    assert "name=vllm%20serve" in run(["process", "list", "--state", state]).stdout
    assert simctl.main(["process", "clear", "--gpu", "1", "--state", state]) == 0
    data = json.loads(run(["show", "--state", state]).stdout)
    assert not data["gpus"][1]["processes"] and data["gpus"][2]["processes"]
    assert run(["process", "add", "--gpu", "1", "--state", state]).returncode == 2


def test_reboot_apply(tmp_path: Any, simctl: Any) -> None:
    """reboot --apply performs the boot in the file and re-marks the boot."""
    path = str(tmp_path / "state")
    rundir = str(tmp_path / "run")
    assert simctl.main(["render", os.path.join(NODES_DIR, "dgx-a100-mig-mixed.yml"), "-o", path, "--booted", "--rundir", rundir]) == 0
    assert simctl.main(["reboot", "--apply", "--state", path, "--rundir", rundir]) == 0
    data = json.loads(run(["show", "--state", path, "--rundir", rundir]).stdout)
    assert data["booted"]
    assert [g["mig_current"] for g in data["gpus"]] == [1, 1, 1, 1, 1, 0, 0, 0]
    assert all(not g["gis"] and not g["processes"] for g in data["gpus"])


@pytest.mark.parametrize(
    "fixture,message",
    [
        ("gpus: [{model: t4, count: 1, mig: 1}]", "does not support MIG"),
        ("gpus: [{model: a100-sxm4-40gb, count: 1, gis: [{profile: 1g.5gb}]}]", "need mig_current=1"),
        ("gpus: [{model: a100-sxm4-40gb, count: 1, mig: 1, gis: [{profile: 3g.20gb, start: 2}]}]", "not one of"),
        ("gpus: [{model: a100-sxm4-40gb, count: 1, mig: 1, gis: [{profile: 4g.20gb}, {profile: 4g.20gb}]}]", "no free placement"),
        ("gpus: [{model: a100-sxm4-40gb, count: 1, mig: 1, gis: [{profile: 7g.40gb, cis: [{profile: 6c.7g.40gb}]}]}]", "no compute-instance profile"),
        ("gpus: [{model: a100-sxm4-40gb, count: 2, uuid: GPU-x}]", "cannot be shared"),
        ("gpus: [{model: h999}]", "unknown GPU model"),
        ("gpus: [{model: t4, colour: red}]", "unknown GPU keys"),
        ("gpus: [{model: t4, processes: [{pid: 1, gi: 3, ci: 0}]}]", "does not create"),
    ],
)
def test_render_rejects_impossible_fixtures(tmp_path: Any, simctl: Any, fixture: str, message: str) -> None:
    """The renderer enforces the same MIG rules as the library."""
    nodes = tmp_path / "nodes"
    nodes.mkdir()
    os.symlink(MODELS_DIR, str(tmp_path / "models"))
    path = nodes / "bad.yml"
    path.write_text("name: bad\nsystem: {driver_version: '550.127.05'}\n" + fixture + "\n")
    with pytest.raises(simctl.SimError, match=message):
        simctl.render_node(str(path))


def test_auto_placement_in_fixtures_matches_library(tmp_path: Any, simctl: Any) -> None:
    """Fixture GIs without start use the library's highest-start-first rule."""
    nodes = tmp_path / "nodes"
    nodes.mkdir()
    os.symlink(MODELS_DIR, str(tmp_path / "models"))
    path = nodes / "auto.yml"
    path.write_text(
        "name: auto\nsystem: {driver_version: '550.127.05'}\n"
        "gpus: [{model: a100-sxm4-40gb, mig: 1, gis: [{profile: 3g.20gb}, {profile: 1g.5gb},"
        " {profile: 2g.10gb}, {profile: 1g.5gb}]}]\n"
    )
    state = simctl.render_node(str(path))
    placed = [(r.num("id"), r.num("start")) for r in state.of_type("gi")]
    assert placed == [(2, 4), (10, 3), (3, 0), (9, 2)]


def test_percent_coding_round_trip(simctl: Any) -> None:
    """'%', '=', blanks and control characters survive a write/read."""
    text = "a b=c%d\te\nf"
    assert simctl.pct_decode(simctl.pct_encode(text)) == text
    assert simctl.pct_encode("NVIDIA A100") == "NVIDIA%20A100"
    assert simctl.pct_decode("100%") == "100%"
    record = simctl.Record("gpu", {"index": "0", "name": "x = y"})
    parsed = simctl.State.parse("nvml-sim 1\n" + record.line() + "\n")
    assert parsed.records[0].fields == {"index": "0", "name": "x = y"}


def test_parse_errors(simctl: Any) -> None:
    """Header, unknown record type and malformed fields are rejected."""
    with pytest.raises(simctl.SimError, match="first line"):
        simctl.State.parse("nvml-sim 2\n")
    with pytest.raises(simctl.SimError, match="unknown record type"):
        simctl.State.parse("nvml-sim 1\nwidget a=1\n")
    with pytest.raises(simctl.SimError, match="expected key=value"):
        simctl.State.parse("nvml-sim 1\ngpu index\n")
    assert simctl.parse_int("0x10") == 16 and simctl.parse_int("010") == 10 and simctl.parse_int("-1") == -1


def test_errors_listing() -> None:
    """`errors` prints every code with its NVML_ERROR_ name."""
    out = run(["errors"]).stdout
    assert "  15  NVML_ERROR_GPU_IS_LOST" in out and " 999  NVML_ERROR_UNKNOWN" in out
