"""The native nvidia-smi (build/nvidia-smi) and the state served on the persistenced socket.

The native tool is what a container gets through CDI: it must list the same
GPUs and MIG devices as the Python stand-in, through NVML calls only, and
still work when the only way to the state is nvml-sim-persistenced's socket.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Any, Dict, List

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SIM_DIR = os.path.join(ROOT, "tests", "nvml-sim")
NODES_DIR = os.path.join(SIM_DIR, "nodes")
LIB_PATH = os.path.join(SIM_DIR, "build", "libnvidia-ml.so.1")
NATIVE_SMI = os.path.join(SIM_DIR, "build", "nvidia-smi")
PYTHON_SMI = os.path.join(SIM_DIR, "nvidia-smi")
ALL_FIELDS = ["index", "uuid", "name", "driver_version", "pci.bus_id"]
# the newest glibc symbol version either binary may need (README: Build)
GLIBC_CEILING = (2, 14)


@pytest.fixture
def node(tmp_path: Any, simctl: Any, libpath: str) -> Any:
    """Factory: node(name) renders nodes/<name>.yml, booted; returns the environment pointing at it."""

    def render(name: str = "dgx-a100-mig-mixed") -> Dict[str, str]:
        env = dict(
            os.environ,
            NVML_SIM_STATE=str(tmp_path / name / "state"),
            NVML_SIM_RUNDIR=str(tmp_path / name / "run"),
            NVML_SIM_SOCKET=str(tmp_path / "no-persistenced" / "socket"),
            LD_LIBRARY_PATH=os.path.dirname(libpath),
        )
        env.pop("NVML_SIM_EUID", None)
        state = simctl.render_node(os.path.join(NODES_DIR, name + ".yml"))
        with simctl.locked(env["NVML_SIM_STATE"]):
            simctl.write_state(env["NVML_SIM_STATE"], state)
        simctl.mark_booted(env["NVML_SIM_RUNDIR"])
        return env

    return render


def run(env: Dict[str, str], *args: str, binary: str = NATIVE_SMI) -> subprocess.CompletedProcess:
    return subprocess.run([binary, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False, timeout=30)


def python_smi(env: Dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["python3", PYTHON_SMI, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False, timeout=30)


def shown(simctl: Any, env: Dict[str, str]) -> Dict[str, Any]:
    return simctl.show_state(simctl.read_state(env["NVML_SIM_STATE"]), "", "")


def uuids(listing: str) -> List[str]:
    return re.findall(r"\(UUID: ((?:GPU|MIG)-[0-9a-f-]+)\)", listing)


# ---- build ---------------------------------------------------------------------


def _symbol_versions(path: str) -> List[tuple]:
    out = subprocess.run(["objdump", "-T", path], stdout=subprocess.PIPE, text=True, check=True).stdout
    return sorted({tuple(int(p) for p in v.split(".")) for v in re.findall(r"GLIBC_([0-9.]+)", out)})


def _needed(path: str) -> List[str]:
    out = subprocess.run(["objdump", "-p", path], stdout=subprocess.PIPE, text=True, check=True).stdout
    return re.findall(r"NEEDED\s+(\S+)", out)


@pytest.mark.skipif(shutil.which("objdump") is None, reason="needs binutils' objdump")
@pytest.mark.parametrize("path", [LIB_PATH, NATIVE_SMI], ids=["library", "nvidia-smi"])
def test_glibc_ceiling(libpath: str, path: str) -> None:
    """Both binaries run wherever glibc >= 2.14 does (CUDA images with an older glibc than the host's)."""
    del libpath
    versions = _symbol_versions(path)
    assert versions and max(versions) <= GLIBC_CEILING, versions


@pytest.mark.skipif(shutil.which("objdump") is None, reason="needs binutils' objdump")
def test_native_smi_is_not_linked_to_nvml(libpath: str) -> None:
    """Like the real tool it dlopen()s libnvidia-ml.so.1: only libc and libdl are linked."""
    del libpath
    assert set(_needed(NATIVE_SMI)) <= {"libc.so.6", "libdl.so.2"}


# ---- -L ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["dgx-a100-8x40gb", "dgx-a100-mig-mixed", "mixed-a100-h100-l40s", "t4-1x", "hgx-h100-8x80gb"])
def test_list_matches_the_python_one(node: Any, simctl: Any, name: str) -> None:
    env = node(name)
    native, python = run(env, "-L"), python_smi(env, "-L")
    assert (native.returncode, python.returncode) == (0, 0), native.stderr + python.stderr
    assert native.stdout == python.stdout
    state = shown(simctl, env)
    expected = []
    for gpu in state["gpus"]:
        expected.append(gpu["uuid"])
        expected.extend(ci["uuid"] for gi in gpu["gis"] for ci in gi["cis"])
    assert uuids(native.stdout) == expected
    assert run(env, "--list-gpus").stdout == native.stdout


def test_list_shows_partial_compute_instances(node: Any) -> None:
    """dgx-a100-mig-mixed has a 1c.3g.20gb device: the MIG column is the device's profile."""
    out = run(node(), "-L").stdout
    assert re.search(r"^  MIG 1c\.3g\.20gb   Device  \d: \(UUID: MIG-", out, re.MULTILINE), out


# ---- --query-gpu -----------------------------------------------------------------


@pytest.mark.parametrize("fields", [ALL_FIELDS, ["uuid"], ["pci.bus_id", "index"], ["driver_version", "name", "uuid"], ["gpu_name", "gpu_bus_id"]])
def test_query(node: Any, simctl: Any, fields: List[str]) -> None:
    env = node("mixed-a100-h100-l40s")
    state = shown(simctl, env)
    out = run(env, "--query-gpu=" + ",".join(fields), "--format=csv,noheader")
    assert out.returncode == 0, out.stdout + out.stderr
    canon = {"gpu_name": "name", "gpu_bus_id": "bus_id", "pci.bus_id": "bus_id"}
    rows = []
    for gpu in state["gpus"]:
        values = dict(gpu, driver_version=state["system"]["driver_version"])
        rows.append(", ".join(str(values[canon.get(f, f)]) for f in fields))
    assert out.stdout.splitlines() == rows


def test_query_header_ids_and_spaced_options(node: Any, simctl: Any) -> None:
    env = node()
    gpus = shown(simctl, env)["gpus"]
    out = run(env, "--query-gpu", "index,uuid", "--format", "csv", "-i", "3,1")
    assert out.returncode == 0, out.stdout
    assert out.stdout.splitlines() == ["index, uuid", "3, " + gpus[3]["uuid"], "1, " + gpus[1]["uuid"]]
    assert run(env, "--query-gpu=uuid", "--format=csv,noheader,nounits", "--id=0").stdout == gpus[0]["uuid"] + "\n"


@pytest.mark.parametrize(
    ("args", "code", "text"),
    [
        (("--query-gpu=uuid,temperature.gpu", "--format=csv"), 2, 'Field "temperature.gpu" is not a valid field'),
        (("--query-gpu=uuid", "--format=json"), 2, 'Invalid format option "json"'),
        (("--query-gpu=uuid", "--format=csv", "-i", "12"), 6, 'No devices were found matching "12"'),
    ],
)
def test_query_errors(node: Any, args: Any, code: int, text: str) -> None:
    out = run(node(), *args)
    assert out.returncode == code and text in out.stdout, (out.returncode, out.stdout)


# ---- exit codes like the real tool ----------------------------------------------------


def test_driver_not_loaded(node: Any, simctl: Any) -> None:
    env = node()
    with simctl.editing(env["NVML_SIM_STATE"]) as state:
        state.system().fields["driver_loaded"] = "0"
    for args in (["-L"], ["--query-gpu=uuid", "--format=csv"]):
        out = run(env, *args)
        assert out.returncode == 9 and "couldn't communicate with the NVIDIA driver" in out.stdout


def test_no_state_and_no_socket_is_driver_not_loaded(node: Any) -> None:
    env = node()
    os.unlink(env["NVML_SIM_STATE"])
    out = run(env, "-L")
    assert out.returncode == 9 and "couldn't communicate with the NVIDIA driver" in out.stdout
    assert "no state socket" in out.stderr


def test_init_failure_exits_with_the_nvml_code(node: Any, simctl: Any) -> None:
    env = node()
    assert simctl.main(["fault", "add", "nvmlInit", "LIB_RM_VERSION_MISMATCH", "--state", env["NVML_SIM_STATE"]]) == 0
    out = run(env, "-L")
    assert out.returncode == 18 and out.stdout == "Failed to initialize NVML: Driver/library version mismatch\n"


def test_a_lost_gpu_is_reported_and_the_rest_listed(node: Any, simctl: Any) -> None:
    env = node("dgx-a100-8x40gb")
    assert simctl.main(["fault", "add", "nvmlDeviceGetHandleByIndex_v2", "GPU_IS_LOST", "--gpu", "3", "--state", env["NVML_SIM_STATE"]]) == 0
    out = run(env, "-L")
    assert out.returncode == 15
    assert "Unable to determine the device handle for GPU3: GPU is lost" in out.stdout
    assert len(re.findall(r"^GPU \d", out.stdout, re.MULTILINE)) == 7


def test_no_library(node: Any) -> None:
    env = dict(node(), LD_LIBRARY_PATH="/nonexistent")
    out = run(env, "-L")
    assert out.returncode == 12 and "couldn't find libnvidia-ml.so" in out.stdout


# ---- everything else goes to the Python implementation ------------------------------------


def test_reset_is_handed_to_the_python_one(node: Any, simctl: Any) -> None:
    """build/nvidia-smi.py (a link to ../nvidia-smi) is next to the binary, as it is installed on a node."""
    env = node()
    assert shown(simctl, env)["gpus"][4]["mig_current"] == 0
    out = run(env, "--gpu-reset", "-i", "4")
    assert out.returncode == 0 and "was successfully reset" in out.stdout, out.stdout + out.stderr
    assert shown(simctl, env)["gpus"][4]["mig_current"] == 1
    unsupported = run(env, "-q")
    assert unsupported.returncode == 2 and "implements only -L and --gpu-reset" in unsupported.stderr


@pytest.mark.skipif(os.path.exists("/usr/local/lib/nvml-sim/nvidia-smi.py"), reason="this host has the Python one installed")
def test_without_the_python_one(node: Any, tmp_path: Any) -> None:
    """A container has only the binary: -L works, the rest says what is missing."""
    alone = tmp_path / "bin" / "nvidia-smi"
    alone.parent.mkdir()
    shutil.copy(NATIVE_SMI, alone)
    env = node()
    assert run(env, "-L", binary=str(alone)).returncode == 0
    out = run(env, "--gpu-reset", "-i", "0", binary=str(alone))
    assert out.returncode == 2 and "nvidia-smi.py" in out.stderr


# ---- the state served on the persistenced socket (what a container sees) -------------------


def gi_cap(minor: int, gi: int) -> int:
    """The driver's static mig-minors numbering (config 1, monitor 2, 15 x (1 + 8) per GPU)."""
    return 3 + minor * 135 + gi * 9


def _dev_tree(root: str, state: Dict[str, Any], gpus: Any = None, migs: Any = None) -> str:
    """The /dev a CDI container gets: each GPU's node and each MIG device's two caps nodes (plain files: the
    library only looks for them). `gpus`/`migs`: only these indices / MIG UUIDs (default: everything)."""
    os.makedirs(os.path.join(root, "dev", "nvidia-caps"), exist_ok=True)
    for index, gpu in enumerate(state["gpus"]):
        if gpus is not None and index not in gpus:
            continue
        open(os.path.join(root, "dev", "nvidia{0}".format(gpu["minor"])), "w").close()
        for gi in gpu["gis"]:
            for ci in gi["cis"]:
                if migs is not None and ci["uuid"] not in migs:
                    continue
                for cap in (gi_cap(gpu["minor"], gi["id"]), gi_cap(gpu["minor"], gi["id"]) + 1 + ci["id"]):
                    open(os.path.join(root, "dev", "nvidia-caps", "nvidia-cap{0}".format(cap)), "w").close()
    return root


def _container_env(env: Dict[str, str], socket_path: str, dev_root: str = "") -> Dict[str, str]:
    """No state file, no run dir: only the socket (and the device nodes CDI gives), as inside a CDI container."""
    missing = os.path.join(os.path.dirname(env["NVML_SIM_STATE"]), "not-mounted")
    return dict(
        env,
        NVML_SIM_STATE=os.path.join(missing, "state"),
        NVML_SIM_RUNDIR=os.path.join(missing, "run"),
        NVML_SIM_SOCKET=socket_path,
        NVML_SIM_DEV_ROOT=dev_root,
    )


@pytest.mark.parametrize("name", ["dgx-a100-mig-mixed", "hgx-h200-8x141gb"])
def test_native_smi_through_the_socket_only(node: Any, simctl: Any, persistenced: Any, name: str) -> None:
    env = node(name)
    server = persistenced(env["NVML_SIM_STATE"], env["NVML_SIM_RUNDIR"])
    state = shown(simctl, env)
    dev = _dev_tree(os.path.join(os.path.dirname(env["NVML_SIM_STATE"]), "ctr"), state)
    inside = _container_env(env, server.socket, dev)
    out = run(inside, "-L")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout == python_smi(env, "-L").stdout
    expected = [g["uuid"] for g in state["gpus"]]
    assert [u for u in uuids(out.stdout) if u.startswith("GPU-")] == expected
    assert [u for u in uuids(out.stdout) if u.startswith("MIG-")] == [ci["uuid"] for g in state["gpus"] for gi in g["gis"] for ci in gi["cis"]]
    query = run(inside, "--query-gpu=uuid,driver_version", "--format=csv,noheader")
    assert query.stdout.splitlines() == ["{0}, {1}".format(u, state["system"]["driver_version"]) for u in expected]
    assert not os.path.exists(os.path.dirname(inside["NVML_SIM_STATE"]))  # nothing written on the reader's side
    assert server.stop() == 0
    assert not os.path.exists(server.socket)


def test_served_state_follows_the_host(node: Any, simctl: Any, persistenced: Any) -> None:
    """Every connection reads the file anew: a change on the host is seen by the next container."""
    env = node("dgx-a100-8x40gb")
    server = persistenced(env["NVML_SIM_STATE"], env["NVML_SIM_RUNDIR"])
    dev = _dev_tree(os.path.join(os.path.dirname(env["NVML_SIM_STATE"]), "ctr"), shown(simctl, env))
    inside = _container_env(env, server.socket, dev)
    assert run(inside, "--query-gpu=driver_version", "--format=csv,noheader", "-i", "0").stdout == "550.127.05\n"
    assert simctl.main(["set", "driver_version=535.261.03", "--state", env["NVML_SIM_STATE"]]) == 0
    assert run(inside, "--query-gpu=driver_version", "--format=csv,noheader", "-i", "0").stdout == "535.261.03\n"


def test_server_applies_a_pending_boot(node: Any, simctl: Any, persistenced: Any) -> None:
    """Without the boot marker the server boots the state first, as any driver client would."""
    env = node()
    os.unlink(os.path.join(env["NVML_SIM_RUNDIR"], "booted"))
    server = persistenced(env["NVML_SIM_STATE"], env["NVML_SIM_RUNDIR"])
    dev = _dev_tree(os.path.join(os.path.dirname(env["NVML_SIM_STATE"]), "ctr"), shown(simctl, env))
    out = run(_container_env(env, server.socket, dev), "-L")
    assert out.returncode == 0 and "MIG-" not in out.stdout
    assert os.path.exists(os.path.join(env["NVML_SIM_RUNDIR"], "booted"))
    assert all(g["gis"] == [] for g in shown(simctl, env)["gpus"])


def test_a_container_sees_only_the_devices_its_nodes_reach(node: Any, simctl: Any, persistenced: Any) -> None:
    """As the driver does: GPUs without their /dev/nvidia<minor> and MIG devices without both caps nodes are not
    enumerated, and what is left is numbered from 0 (a CDI spec that lacks a device shows this way)."""
    env = node("dgx-a100-mig-mixed")
    server = persistenced(env["NVML_SIM_STATE"], env["NVML_SIM_RUNDIR"])
    state = shown(simctl, env)
    one_mig = state["gpus"][1]["gis"][2]["cis"][0]["uuid"]
    dev = _dev_tree(os.path.join(os.path.dirname(env["NVML_SIM_STATE"]), "ctr"), state, gpus={1, 6}, migs={one_mig})
    out = run(_container_env(env, server.socket, dev), "-L")
    assert out.returncode == 0, out.stdout + out.stderr
    assert uuids(out.stdout) == [state["gpus"][1]["uuid"], one_mig, state["gpus"][6]["uuid"]]
    assert out.stdout.startswith("GPU 0: ") and "\nGPU 1: " in out.stdout
    nothing = _dev_tree(os.path.join(os.path.dirname(env["NVML_SIM_STATE"]), "none"), state, gpus=set())
    assert run(_container_env(env, server.socket, nothing), "-L").returncode == 6


def test_server_without_state_means_no_driver(node: Any, persistenced: Any) -> None:
    env = node()
    os.unlink(env["NVML_SIM_STATE"])
    server = persistenced(env["NVML_SIM_STATE"], env["NVML_SIM_RUNDIR"])
    out = run(_container_env(env, server.socket), "-L")
    assert out.returncode == 9 and "sent no state" in out.stderr


def test_socket_and_directory_modes(node: Any, persistenced: Any) -> None:
    env = node()
    server = persistenced(env["NVML_SIM_STATE"], env["NVML_SIM_RUNDIR"])
    assert os.stat(server.socket).st_mode & 0o777 == 0o666
    assert os.stat(os.path.dirname(server.socket)).st_mode & 0o777 == 0o755


def test_against_the_real_library_without_a_gpu(node: Any) -> None:
    """NVIDIA's libnvidia-ml.so.1 on this GPU-less host: the real tool's 'no driver' answer, exit 9."""
    real = os.environ.get("GPUFLEET_REAL_LIBNVML", "")
    if not real or not os.path.exists(real):
        pytest.skip("GPUFLEET_REAL_LIBNVML not set (tests/harness/real-nvml.sh provides it)")
    out = run(dict(node(), LD_LIBRARY_PATH=os.path.dirname(real)), "-L")
    assert out.returncode == 9 and "couldn't communicate with the NVIDIA driver" in out.stdout
