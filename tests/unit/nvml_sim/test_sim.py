"""ABI and behaviour tests of the simulated libnvidia-ml.so.1 (tests/nvml-sim).

Every call goes through raw ctypes with struct layouts written out from
nvml.h, so a layout or semantics drift in the C library shows up here.
"""

# ctypes structs have no methods; a few ABI walk-throughs need many locals.
# pylint: disable=too-few-public-methods,too-many-locals
from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import threading
from typing import Any, Dict, List, Tuple

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml.structs import PROTOTYPES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SIM_DIR = os.path.join(ROOT, "tests", "nvml-sim")
NODES_DIR = os.path.join(SIM_DIR, "nodes")
MODELS_DIR = os.path.join(SIM_DIR, "models")

# ---- nvml.h constants ------------------------------------------------------
SUCCESS = 0
UNINITIALIZED = 1
INVALID_ARGUMENT = 2
NOT_SUPPORTED = 3
NO_PERMISSION = 4
NOT_FOUND = 6
INSUFFICIENT_SIZE = 7
DRIVER_NOT_LOADED = 9
LIBRARY_NOT_FOUND = 12
GPU_IS_LOST = 15
RESET_REQUIRED = 16
LIB_RM_VERSION_MISMATCH = 18
IN_USE = 19
INSUFFICIENT_RESOURCES = 23
ARGUMENT_VERSION_MISMATCH = 25
GPU_NOT_FOUND = 28
UNKNOWN = 999

GI_PROFILE_COUNT = 0x12
CI_PROFILE_COUNT = 0x9
NOT_IN_MIG = 0xFFFFFFFF

U = ctypes.c_uint
ULL = ctypes.c_ulonglong
P = ctypes.c_void_p


class PciInfo(ctypes.Structure):
    """nvmlPciInfo_t (v3 layout)."""

    _fields_ = [
        ("busIdLegacy", ctypes.c_char * 16),
        ("domain", U),
        ("bus", U),
        ("device", U),
        ("pciDeviceId", U),
        ("pciSubSystemId", U),
        ("busId", ctypes.c_char * 32),
    ]


class Memory(ctypes.Structure):
    """nvmlMemory_t."""

    _fields_ = [("total", ULL), ("free", ULL), ("used", ULL)]


class MemoryV2(ctypes.Structure):
    """nvmlMemory_v2_t."""

    _fields_ = [("version", U), ("total", ULL), ("reserved", ULL), ("free", ULL), ("used", ULL)]


class ProcessInfo(ctypes.Structure):
    """nvmlProcessInfo_t as filled by nvmlDeviceGetComputeRunningProcesses_v3."""

    _fields_ = [("pid", U), ("usedGpuMemory", ULL), ("gpuInstanceId", U), ("computeInstanceId", U)]


class DeviceAttributes(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint)
        for name in (
            "multiprocessorCount",
            "sharedCopyEngineCount",
            "sharedDecoderCount",
            "sharedEncoderCount",
            "sharedJpegCount",
            "sharedOfaCount",
            "gpuInstanceSliceCount",
            "computeInstanceSliceCount",
        )
    ] + [("memorySizeMB", ctypes.c_ulonglong)]


class Placement(ctypes.Structure):
    """nvmlGpuInstancePlacement_t / nvmlComputeInstancePlacement_t."""

    _fields_ = [("start", U), ("size", U)]


# The _v2 structures are version word, the first version's fields, name.
GI_PROFILE_FIELDS = [
    ("id", U),
    ("isP2pSupported", U),
    ("sliceCount", U),
    ("instanceCount", U),
    ("multiprocessorCount", U),
    ("copyEngineCount", U),
    ("decoderCount", U),
    ("encoderCount", U),
    ("jpegCount", U),
    ("ofaCount", U),
    ("memorySizeMB", ULL),
]


class GiProfile(ctypes.Structure):
    """nvmlGpuInstanceProfileInfo_t."""

    _fields_ = GI_PROFILE_FIELDS


class GiProfileV2(ctypes.Structure):
    """nvmlGpuInstanceProfileInfo_v2_t."""

    _fields_ = [("version", U), *GI_PROFILE_FIELDS, ("name", ctypes.c_char * 96)]


class GiInfo(ctypes.Structure):
    """nvmlGpuInstanceInfo_t."""

    _fields_ = [("device", P), ("id", U), ("profileId", U), ("placement", Placement)]


CI_PROFILE_FIELDS = [
    ("id", U),
    ("sliceCount", U),
    ("instanceCount", U),
    ("multiprocessorCount", U),
    ("sharedCopyEngineCount", U),
    ("sharedDecoderCount", U),
    ("sharedEncoderCount", U),
    ("sharedJpegCount", U),
    ("sharedOfaCount", U),
]


class CiProfile(ctypes.Structure):
    """nvmlComputeInstanceProfileInfo_t."""

    _fields_ = CI_PROFILE_FIELDS


class CiProfileV2(ctypes.Structure):
    """nvmlComputeInstanceProfileInfo_v2_t."""

    _fields_ = [("version", U), *CI_PROFILE_FIELDS, ("name", ctypes.c_char * 96)]


class CiInfo(ctypes.Structure):
    """nvmlComputeInstanceInfo_t."""

    _fields_ = [("device", P), ("gpuInstance", P), ("id", U), ("profileId", U), ("placement", Placement)]


def version_word(struct: Any, ver: int) -> int:
    """NVML_STRUCT_VERSION(struct, ver)."""
    return ctypes.sizeof(struct) | (ver << 24)


MEMORY_V2 = version_word(MemoryV2, 2)
GI_PROFILE_V2 = version_word(GiProfileV2, 2)
CI_PROFILE_V2 = version_word(CiProfileV2, 2)


def ref(obj: Any) -> Any:
    """ctypes.byref shorthand."""
    return ctypes.byref(obj)


def model(ctl: Any, key: str) -> Dict[str, Any]:
    """A GPU model fixture, normalised like simctl does."""
    return ctl.load_model(MODELS_DIR, key)


def node_names() -> List[str]:
    """Every node fixture name."""
    return sorted(f[:-4] for f in os.listdir(NODES_DIR) if f.endswith(".yml"))


class Api:
    """Typed access to the library: api.NAME(args) -> return code."""

    # The C signatures several a line, as nvml.h groups them: ruff format would give each its own line.
    # fmt: off
    SIGS: Dict[str, List[Any]] = {
        "nvmlInit": [], "nvmlInit_v2": [], "nvmlInitWithFlags": [U], "nvmlShutdown": [],
        "nvmlSystemGetDriverVersion": [ctypes.c_char_p, U], "nvmlSystemGetNVMLVersion": [ctypes.c_char_p, U],
        "nvmlSystemGetCudaDriverVersion": [P], "nvmlSystemGetCudaDriverVersion_v2": [P],
        "nvmlDeviceGetCount": [P], "nvmlDeviceGetCount_v2": [P],
        "nvmlDeviceGetHandleByIndex": [U, P], "nvmlDeviceGetHandleByIndex_v2": [U, P],
        "nvmlDeviceGetHandleByUUID": [ctypes.c_char_p, P], "nvmlDeviceGetHandleByPciBusId": [ctypes.c_char_p, P],
        "nvmlDeviceGetHandleByPciBusId_v2": [ctypes.c_char_p, P],
        "nvmlDeviceGetIndex": [P, P], "nvmlDeviceGetName": [P, ctypes.c_char_p, U],
        "nvmlDeviceGetUUID": [P, ctypes.c_char_p, U], "nvmlDeviceGetSerial": [P, ctypes.c_char_p, U],
        "nvmlDeviceGetBoardPartNumber": [P, ctypes.c_char_p, U], "nvmlDeviceGetMinorNumber": [P, P],
        "nvmlDeviceGetPciInfo": [P, P], "nvmlDeviceGetPciInfo_v2": [P, P], "nvmlDeviceGetPciInfo_v3": [P, P],
        "nvmlDeviceGetMemoryInfo": [P, P], "nvmlDeviceGetMemoryInfo_v2": [P, P],
        "nvmlDeviceGetArchitecture": [P, P], "nvmlDeviceGetCudaComputeCapability": [P, P, P],
        "nvmlDeviceGetAttributes": [P, P], "nvmlDeviceGetAttributes_v2": [P, P],
        "nvmlDeviceGetPersistenceMode": [P, P], "nvmlDeviceGetComputeRunningProcesses_v3": [P, P, P],
        "nvmlDeviceGetMigMode": [P, P, P], "nvmlDeviceSetMigMode": [P, U, P],
        "nvmlDeviceGetGpuInstanceProfileInfo": [P, U, P], "nvmlDeviceGetGpuInstanceProfileInfoV": [P, U, P],
        "nvmlDeviceGetGpuInstanceProfileInfoByIdV": [P, U, P],
        "nvmlDeviceGetGpuInstancePossiblePlacements_v2": [P, U, P, P],
        "nvmlDeviceGetGpuInstanceRemainingCapacity": [P, U, P], "nvmlDeviceCreateGpuInstance": [P, U, P],
        "nvmlDeviceCreateGpuInstanceWithPlacement": [P, U, P, P], "nvmlGpuInstanceDestroy": [P],
        "nvmlDeviceGetGpuInstances": [P, U, P, P], "nvmlDeviceGetGpuInstanceById": [P, U, P],
        "nvmlGpuInstanceGetInfo": [P, P], "nvmlGpuInstanceGetComputeInstanceProfileInfo": [P, U, U, P],
        "nvmlGpuInstanceGetComputeInstanceProfileInfoV": [P, U, U, P],
        "nvmlGpuInstanceGetComputeInstancePossiblePlacements": [P, U, P, P],
        "nvmlGpuInstanceGetComputeInstanceRemainingCapacity": [P, U, P],
        "nvmlGpuInstanceCreateComputeInstance": [P, U, P],
        "nvmlGpuInstanceCreateComputeInstanceWithPlacement": [P, U, P, P], "nvmlComputeInstanceDestroy": [P],
        "nvmlGpuInstanceGetComputeInstances": [P, U, P, P], "nvmlGpuInstanceGetComputeInstanceById": [P, U, P],
        "nvmlComputeInstanceGetInfo_v2": [P, P], "nvmlDeviceGetMaxMigDeviceCount": [P, P],
        "nvmlDeviceGetMigDeviceHandleByIndex": [P, U, P], "nvmlDeviceGetDeviceHandleFromMigDeviceHandle": [P, P],
        "nvmlDeviceIsMigDeviceHandle": [P, P], "nvmlDeviceGetGpuInstanceId": [P, P],
        "nvmlDeviceGetComputeInstanceId": [P, P],
        "nvmlDeviceGetEccMode": [P, P, P], "nvmlDeviceGetTotalEccErrors": [P, ctypes.c_int, ctypes.c_int, P],
        "nvmlDeviceGetRetiredPages": [P, ctypes.c_int, P, P], "nvmlDeviceGetRetiredPages_v2": [P, ctypes.c_int, P, P, P],
        "nvmlDeviceGetRetiredPagesPendingStatus": [P, P], "nvmlDeviceGetRemappedRows": [P, P, P, P, P],
        "nvmlDeviceGetFieldValues": [P, ctypes.c_int, P], "nvmlDeviceGetCurrPcieLinkGeneration": [P, P],
        "nvmlDeviceGetMaxPcieLinkGeneration": [P, P], "nvmlDeviceGetCurrPcieLinkWidth": [P, P],
        "nvmlDeviceGetMaxPcieLinkWidth": [P, P], "nvmlDeviceGetPcieReplayCounter": [P, P],
        "nvmlDeviceGetNvLinkState": [P, U, P], "nvmlDeviceGetGpuFabricInfo": [P, P],
        "nvmlDeviceGetGpuFabricInfoV": [P, P], "nvmlDeviceGetTemperature": [P, ctypes.c_int, P],
        "nvmlDeviceGetTemperatureThreshold": [P, ctypes.c_int, P], "nvmlDeviceGetCurrentClocksEventReasons": [P, P],
        "nvmlDeviceGetCurrentClocksThrottleReasons": [P, P], "nvmlDeviceGetPowerUsage": [P, P],
        "nvmlDeviceGetEnforcedPowerLimit": [P, P],
        "nvmlDeviceGetCpuAffinity": [P, U, P],
        "nvmlDeviceGetNvLinkRemotePciInfo_v2": [P, U, P],
        "nvmlDeviceGetSupportedMemoryClocks": [P, P, P],
        "nvmlDeviceGetSupportedGraphicsClocks": [P, U, P, P],
        "nvmlDeviceGetApplicationsClock": [P, U, P],
        "nvmlDeviceSetApplicationsClocks": [P, U, U],
        "nvmlDeviceResetApplicationsClocks": [P],
        "nvmlDeviceGetGraphicsRunningProcesses_v3": [P, P, P],
        "nvmlDeviceGetProcessUtilization": [P, P, P, ULL],
    }
    # fmt: on

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        for name, argtypes in self.SIGS.items():
            func = getattr(lib, name)
            func.argtypes = argtypes
            func.restype = ctypes.c_int

    def __getattr__(self, name: str) -> Any:
        return getattr(self.lib, name)

    # -- convenience wrappers (assert success) --------------------------------
    def init(self) -> None:
        """nvmlInit_v2, which must succeed."""
        assert self.lib.nvmlInit_v2() == SUCCESS

    def handle(self, index: int) -> int:
        """Device handle of GPU `index`."""
        out = P()
        assert self.lib.nvmlDeviceGetHandleByIndex_v2(index, ref(out)) == SUCCESS
        return out.value

    def text(self, func: str, handle: Any, size: int = 96) -> Tuple[int, str]:
        """(rc, string) of a string query."""
        buf = ctypes.create_string_buffer(size)
        rc = getattr(self.lib, func)(handle, buf, size)
        return rc, buf.value.decode()

    def mig_mode(self, handle: int) -> Tuple[int, int, int]:
        """(rc, current, pending)."""
        cur, pend = U(9), U(9)
        rc = self.lib.nvmlDeviceGetMigMode(handle, ref(cur), ref(pend))
        return rc, cur.value, pend.value

    def set_mig(self, handle: int, mode: int) -> Tuple[int, int]:
        """(rc, activationStatus)."""
        act = ctypes.c_int(-1)
        rc = self.lib.nvmlDeviceSetMigMode(handle, mode, ref(act))
        return rc, act.value

    def enable_mig(self, handle: int) -> None:
        """Switch MIG on (immediate toggle)."""
        assert self.set_mig(handle, 1) == (SUCCESS, SUCCESS)

    def create_gi(self, handle: int, profile_id: int, start: Any = None) -> Tuple[int, int]:
        """(rc, GI handle) -- with a placement when start is given."""
        out = P()
        if start is None:
            rc = self.lib.nvmlDeviceCreateGpuInstance(handle, profile_id, ref(out))
        else:
            prof = [p for p in PROFILE_SIZES if p[0] == profile_id]
            size = prof[0][1] if prof else 1
            rc = self.lib.nvmlDeviceCreateGpuInstanceWithPlacement(handle, profile_id, ref(Placement(start, size)), ref(out))
        return rc, out.value or 0

    def gi_info(self, gih: int) -> GiInfo:
        """nvmlGpuInstanceGetInfo, which must succeed."""
        info = GiInfo()
        assert self.lib.nvmlGpuInstanceGetInfo(gih, ref(info)) == SUCCESS
        return info

    def create_ci(self, gih: int, profile: int, start: Any = None, size: Any = None) -> Tuple[int, int]:
        """(rc, CI handle)."""
        out = P()
        if start is None:
            rc = self.lib.nvmlGpuInstanceCreateComputeInstance(gih, profile, ref(out))
        else:
            rc = self.lib.nvmlGpuInstanceCreateComputeInstanceWithPlacement(gih, profile, ref(Placement(start, size)), ref(out))
        return rc, out.value or 0


# (profile id, placement size) on 8-unit A100/H100 grids
PROFILE_SIZES = [(19, 1), (20, 1), (15, 2), (14, 2), (9, 4), (5, 4), (0, 8)]


@pytest.fixture(scope="session")
def api(nvml: ctypes.CDLL) -> Api:
    """Typed API over the session's library."""
    return Api(nvml)


# ============================================================================
# build, symbols, layouts
# ============================================================================

# Every entry point the collection's binding declares (its PROTOTYPES) but
# nvmlDeviceGetTemperatureV, which the simulator leaves out so the binding's
# fallback (nvmlDeviceGetTemperature) runs against it; plus what the binding
# calls without a prototype (nvmlErrorString) and what only the simulator's own
# nvidia-smi, older NVML clients and Slurm's gpu/nvml plugin call.
SIM_ONLY_SYMBOLS = {
    "nvmlErrorString",
    "nvmlDeviceGetCount",
    "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
    "nvmlDeviceGetGpuInstanceProfileInfoByIdV",
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetHandleByPciBusId",
    "nvmlDeviceGetPciInfo",
    "nvmlDeviceGetRetiredPages_v2",
    "nvmlDeviceIsMigDeviceHandle",
    # What Slurm's gpu/nvml plugin (AutoDetect=nvml) calls besides.
    "nvmlDeviceGetCpuAffinity",
    "nvmlDeviceGetNvLinkRemotePciInfo_v2",
    "nvmlDeviceGetSupportedMemoryClocks",
    "nvmlDeviceGetSupportedGraphicsClocks",
    "nvmlDeviceGetApplicationsClock",
    "nvmlDeviceSetApplicationsClocks",
    "nvmlDeviceResetApplicationsClocks",
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "nvmlDeviceGetProcessUtilization",
}
EXPECTED_SYMBOLS = sorted((set(PROTOTYPES) - {"nvmlDeviceGetTemperatureV"}) | SIM_ONLY_SYMBOLS)


def test_exports_exactly_the_nvml_subset(libpath: str) -> None:
    """Only NVML entry points are exported (no helper leaks)."""
    out = subprocess.run(["nm", "-D", "--defined-only", libpath], stdout=subprocess.PIPE, check=True, text=True).stdout
    names = sorted(line.split()[-1] for line in out.splitlines() if line.strip())
    assert names == EXPECTED_SYMBOLS


def test_soname_and_symlink(libpath: str) -> None:
    """The library carries the real soname and loads by it, like the driver's."""
    out = subprocess.run(["readelf", "-d", libpath], stdout=subprocess.PIPE, check=True, text=True).stdout
    assert "Library soname: [libnvidia-ml.so.1]" in out
    needed = [line for line in out.splitlines() if "(NEEDED)" in line]
    assert len(needed) == 1 and "libc.so.6" in needed[0], needed
    link = os.path.join(os.path.dirname(libpath), "libnvidia-ml.so")
    assert os.path.islink(link) and os.readlink(link) == "libnvidia-ml.so.1"
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(libpath))
    code = "import ctypes; lib = ctypes.CDLL('libnvidia-ml.so.1'); print(bool(lib.nvmlInit_v2))"
    proc = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, check=True, text=True)
    assert proc.stdout.strip() == "True"


@pytest.mark.parametrize(
    "struct,size",
    [
        (PciInfo, 68),
        (Memory, 24),
        (MemoryV2, 40),
        (ProcessInfo, 24),
        (Placement, 8),
        (GiProfile, 48),
        (GiProfileV2, 152),
        (GiInfo, 24),
        (CiProfile, 36),
        (CiProfileV2, 136),
        (CiInfo, 32),
    ],
)
def test_struct_sizes_match_nvml_h(struct: Any, size: int) -> None:
    """The ctypes mirrors used below have nvml.h's sizes (x86_64 / aarch64 LP64)."""
    assert ctypes.sizeof(struct) == size


def test_version_words() -> None:
    """NVML_STRUCT_VERSION values that pynvml hard-codes."""
    assert MEMORY_V2 == 0x02000028
    assert GI_PROFILE_V2 == 0x02000098
    assert CI_PROFILE_V2 == 0x02000088


# ============================================================================
# init / shutdown / errors / versions
# ============================================================================


def test_calls_before_init_are_uninitialized(sim: Any, api: Api) -> None:
    """Device and driver queries need nvmlInit; a surplus shutdown is no error (real library)."""
    sim.render()
    count = U()
    assert api.nvmlDeviceGetCount_v2(ref(count)) == UNINITIALIZED
    assert api.nvmlSystemGetDriverVersion(ctypes.create_string_buffer(80), 80) == UNINITIALIZED
    cuda = ctypes.c_int()
    assert api.nvmlSystemGetCudaDriverVersion(ref(cuda)) == UNINITIALIZED
    assert api.nvmlSystemGetCudaDriverVersion_v2(ref(cuda)) == UNINITIALIZED
    assert api.nvmlShutdown() == SUCCESS


def test_init_is_reference_counted(sim: Any, api: Api) -> None:
    """Each init needs its shutdown; the last one closes the session."""
    sim.render()
    assert api.nvmlInit() == SUCCESS
    assert api.nvmlInit_v2() == SUCCESS
    assert api.nvmlInitWithFlags(0) == SUCCESS
    handle = api.handle(0)
    for _cycle in range(2):
        assert api.nvmlShutdown() == SUCCESS
        assert api.text("nvmlDeviceGetName", handle)[0] == SUCCESS
    assert api.nvmlShutdown() == SUCCESS
    assert api.text("nvmlDeviceGetName", handle)[0] == UNINITIALIZED
    assert api.nvmlShutdown() == SUCCESS
    assert api.nvmlDeviceGetCount_v2(ref(U())) == UNINITIALIZED


def test_handles_are_stable(sim: Any, api: Api) -> None:
    """The same GPU always yields the same pointer, also across sessions."""
    sim.render()
    api.init()
    first = [api.handle(i) for i in range(8)]
    assert len(set(first)) == 8
    assert first == [api.handle(i) for i in range(8)]
    assert api.nvmlShutdown() == SUCCESS
    api.init()
    assert first == [api.handle(i) for i in range(8)]


ERROR_STRINGS = {
    0: "Success",
    1: "Uninitialized",
    2: "Invalid Argument",
    3: "Not Supported",
    4: "Insufficient Permissions",
    5: "Already Initialized",
    6: "Not Found",
    7: "Insufficient Size",
    8: "Insufficient External Power",
    9: "Driver Not Loaded",
    10: "Timeout",
    11: "Interrupt Request Issue",
    12: "NVML Shared Library Not Found",
    13: "Function Not Found",
    14: "Corrupted infoROM",
    15: "GPU is lost",
    16: "GPU requires reset",
    17: "GPU access blocked by the operating system",
    18: "Driver/library version mismatch",
    19: "In use by another client",
    20: "Insufficient Memory",
    21: "No data",
    22: "vGPU ECC not supported",
    23: "Insufficient Resources",
    24: "Invalid Frequency",
    25: "Argument version mismatch",
    26: "Requested functionality has been deprecated",
    27: "System is not in ready state",
    999: "Unknown Error",
    12345: "Unknown Error",
}


@pytest.mark.parametrize("code,text", sorted(ERROR_STRINGS.items()))
def test_error_strings(nvml: ctypes.CDLL, code: int, text: str) -> None:
    """nvmlErrorString works without init and returns the driver's wording."""
    assert nvml.nvmlErrorString(code).decode() == text


def test_every_code_has_a_string(nvml: ctypes.CDLL, simctl: Any) -> None:
    """All known return codes map to a non-generic string."""
    for name, code in simctl.NVML_ERRORS.items():
        text = nvml.nvmlErrorString(code).decode()
        assert text and (text != "Unknown Error" or name == "UNKNOWN"), name


def test_system_versions(sim: Any, api: Api) -> None:
    """Driver/NVML/CUDA versions come from the system record."""
    sim.render()
    api.init()
    buf = ctypes.create_string_buffer(80)
    assert api.nvmlSystemGetDriverVersion(buf, 80) == SUCCESS and buf.value == b"550.127.05"
    assert api.nvmlSystemGetNVMLVersion(buf, 80) == SUCCESS and buf.value == b"12.550.127.05"
    cuda = ctypes.c_int()
    assert api.nvmlSystemGetCudaDriverVersion(ref(cuda)) == SUCCESS and cuda.value == 12040
    assert api.nvmlSystemGetCudaDriverVersion_v2(ref(cuda)) == SUCCESS and cuda.value == 12040
    assert api.nvmlSystemGetCudaDriverVersion(None) == INVALID_ARGUMENT
    assert api.nvmlSystemGetDriverVersion(None, 80) == INVALID_ARGUMENT


def test_version_buffers_too_small(sim: Any, api: Api) -> None:
    """length must hold the string and its NUL."""
    sim.render()
    api.init()
    size = len("550.127.05")
    assert api.nvmlSystemGetDriverVersion(ctypes.create_string_buffer(size), size) == INSUFFICIENT_SIZE
    assert api.nvmlSystemGetDriverVersion(ctypes.create_string_buffer(size + 1), size + 1) == SUCCESS
    size = len("12.550.127.05")
    assert api.nvmlSystemGetNVMLVersion(ctypes.create_string_buffer(size), size) == INSUFFICIENT_SIZE
    assert api.nvmlSystemGetNVMLVersion(ctypes.create_string_buffer(size), 0) == INSUFFICIENT_SIZE


def test_nvml_version_works_before_init(sim: Any, api: Api) -> None:
    """The NVML version answers without nvmlInit, as the real library's does."""
    sim.render()
    buf = ctypes.create_string_buffer(80)
    assert api.nvmlSystemGetNVMLVersion(buf, 80) == SUCCESS and buf.value == b"12.550.127.05"
    size = len(b"12.550.127.05")
    assert api.nvmlSystemGetNVMLVersion(buf, size) == INSUFFICIENT_SIZE
    assert api.nvmlSystemGetNVMLVersion(None, 80) == INVALID_ARGUMENT


def test_libcuda_missing(sim: Any, api: Api) -> None:
    """libcuda=0: _v2 reports LIBRARY_NOT_FOUND, v1 still answers."""
    sim.render()
    with sim.edit() as state:
        state.system().fields["libcuda"] = "0"
    api.init()
    cuda = ctypes.c_int(-1)
    assert api.nvmlSystemGetCudaDriverVersion_v2(ref(cuda)) == LIBRARY_NOT_FOUND
    assert api.nvmlSystemGetCudaDriverVersion(ref(cuda)) == SUCCESS and cuda.value == 12040


def test_driver_not_loaded(sim: Any, api: Api) -> None:
    """driver_loaded=0 fails every init variant; the library stays uninitialised."""
    sim.render()
    with sim.edit() as state:
        state.system().fields["driver_loaded"] = "0"
    assert api.nvmlInit() == DRIVER_NOT_LOADED
    assert api.nvmlInit_v2() == DRIVER_NOT_LOADED
    assert api.nvmlInitWithFlags(1) == DRIVER_NOT_LOADED
    assert api.nvmlDeviceGetCount_v2(ref(U())) == UNINITIALIZED
    with sim.edit() as state:
        state.system().fields["driver_loaded"] = "1"
    assert api.nvmlInit_v2() == SUCCESS


def test_missing_state_file_is_driver_not_loaded(sim: Any, api: Api) -> None:
    """No state file = no driver on this simulated node."""
    assert not os.path.exists(sim.state_path)
    assert api.nvmlInit_v2() == DRIVER_NOT_LOADED


# ---- the state served on the persistenced socket (inside a container) -------------


def _inside_container(sim_obj: Any, socket_path: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point the library at a state file that is not there, at the server's socket, and at a /dev with every
    device's nodes (as CDI's `all` device gives them; the driver's mig-minors numbering); the missing dir."""
    missing = os.path.join(sim_obj.tmp, "not-mounted")
    dev = os.path.join(sim_obj.tmp, "container")
    os.makedirs(os.path.join(dev, "dev", "nvidia-caps"), exist_ok=True)
    for gpu in sim_obj.show()["gpus"]:
        open(os.path.join(dev, "dev", "nvidia{0}".format(gpu["minor"])), "w").close()
        for gi in gpu["gis"]:
            first = 3 + gpu["minor"] * 135 + gi["id"] * 9
            for cap in [first] + [first + 1 + ci["id"] for ci in gi["cis"]]:
                open(os.path.join(dev, "dev", "nvidia-caps", "nvidia-cap{0}".format(cap)), "w").close()
    monkeypatch.setenv("NVML_SIM_STATE", os.path.join(missing, "state"))
    monkeypatch.setenv("NVML_SIM_RUNDIR", os.path.join(missing, "run"))
    monkeypatch.setenv("NVML_SIM_SOCKET", socket_path)
    monkeypatch.setenv("NVML_SIM_DEV_ROOT", dev)
    return missing


def test_socket_snapshot_is_read_only(sim: Any, api: Api, persistenced: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls that would change the served state are NO_PERMISSION, even as root; reads work."""
    sim.render("dgx-a100-mig-mixed")
    before = sim.text()
    missing = _inside_container(sim, persistenced(sim.state_path, sim.run_dir).socket, monkeypatch)
    monkeypatch.setenv("NVML_SIM_EUID", "0")
    api.init()
    gpu0, gpu3 = api.handle(0), api.handle(3)
    assert api.set_mig(gpu3, 0) == (NO_PERMISSION, -1)
    assert api.mig_mode(gpu3) == (SUCCESS, 1, 1)
    assert api.create_gi(gpu3, 19) == (NO_PERMISSION, 0)
    assert api.create_gi(gpu3, 19, start=0) == (NO_PERMISSION, 0)
    count = U()
    assert api.nvmlDeviceGetGpuInstanceRemainingCapacity(gpu3, 19, ref(count)) == SUCCESS and count.value == 7
    gih, cih = P(), P()
    assert api.nvmlDeviceGetGpuInstanceById(gpu0, 2, ref(gih)) == SUCCESS
    assert api.nvmlGpuInstanceGetComputeInstanceById(gih, 0, ref(cih)) == SUCCESS
    assert api.create_ci(gih.value, 0) == (NO_PERMISSION, 0)
    assert api.nvmlComputeInstanceDestroy(cih) == NO_PERMISSION
    assert api.nvmlGpuInstanceDestroy(gih) == NO_PERMISSION
    assert api.nvmlGpuInstanceGetInfo(gih, ref(GiInfo())) == SUCCESS  # still there
    assert sim.text() == before
    assert not os.path.exists(missing)  # no state, lock or boot marker on the reader's side


def test_socket_snapshot_faults_fire_per_session(sim: Any, api: Api, persistenced: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A once fault fires once per reading session; the host's file keeps it."""
    sim.render()
    _fault(sim, "nvmlDeviceGetName", "GPU_IS_LOST", "--once")
    _inside_container(sim, persistenced(sim.state_path, sim.run_dir).socket, monkeypatch)
    for _session in range(2):
        api.init()
        handle = api.handle(0)
        assert api.text("nvmlDeviceGetName", handle)[0] == GPU_IS_LOST
        assert api.text("nvmlDeviceGetName", handle)[0] == SUCCESS
        assert api.nvmlShutdown() == SUCCESS
    assert len(sim.show()["faults"]) == 1


def test_socket_snapshot_answers_before_init(sim: Any, api: Api, persistenced: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    sim.render()
    _inside_container(sim, persistenced(sim.state_path, sim.run_dir).socket, monkeypatch)
    buf = ctypes.create_string_buffer(80)
    assert api.nvmlSystemGetNVMLVersion(buf, 80) == SUCCESS and buf.value == b"12.550.127.05"


def test_no_state_file_and_no_socket_is_driver_not_loaded(sim: Any, api: Api, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A socket path nobody listens on (a stale socket file included) is no driver."""
    stale = tmp_path / "stale.sock"
    stale.write_text("")
    for path in (sim.socket_path, str(stale)):
        monkeypatch.setenv("NVML_SIM_SOCKET", path)
        assert api.nvmlInit_v2() == DRIVER_NOT_LOADED


def test_no_gpus_needs_the_no_gpus_flag(sim: Any, api: Api) -> None:
    """NVML_INIT_FLAG_NO_GPUS lets nvmlInit succeed on a node without GPUs."""
    sim.render("t4-1x")
    with sim.edit() as state:
        state.remove(lambda r: r.rtype in ("gpu", "giprofile", "placement", "gi", "ci", "process"))
    assert api.nvmlInit_v2() == GPU_NOT_FOUND
    assert api.nvmlInitWithFlags(1) == SUCCESS
    count = U(7)
    assert api.nvmlDeviceGetCount_v2(ref(count)) == SUCCESS and count.value == 0


def _run_init_subprocess(sim_obj: Any, libpath: str) -> subprocess.CompletedProcess:
    code = "import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); print(lib.nvmlInit_v2())"
    env = dict(os.environ, NVML_SIM_STATE=sim_obj.state_path, NVML_SIM_RUNDIR=sim_obj.run_dir)
    return subprocess.run([sys.executable, "-c", code, libpath], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True)


def test_unknown_record_type_is_unknown_error(sim: Any, libpath: str) -> None:
    """An unknown record type fails init with UNKNOWN and names the line."""
    sim.render()
    with open(sim.state_path, "a", encoding="utf-8") as handle:
        handle.write("bogus gpu=0 x=1\n")
    proc = _run_init_subprocess(sim, libpath)
    assert proc.stdout.strip() == str(UNKNOWN)
    assert "unknown record type 'bogus'" in proc.stderr and "bogus gpu=0 x=1" in proc.stderr


def test_bad_header_is_unknown_error(sim: Any, libpath: str) -> None:
    """Line 1 must be exactly 'nvml-sim 1'."""
    with open(sim.state_path, "w", encoding="utf-8") as handle:
        handle.write("nvml-sim 2\n")
    proc = _run_init_subprocess(sim, libpath)
    assert proc.stdout.strip() == str(UNKNOWN)
    assert "nvml-sim 1" in proc.stderr


# ============================================================================
# device discovery and attributes
# ============================================================================


def test_count_and_index(sim: Any, api: Api) -> None:
    """v1 and v2 count/handle entry points agree."""
    sim.render()
    api.init()
    for func in ("nvmlDeviceGetCount", "nvmlDeviceGetCount_v2"):
        count = U()
        assert getattr(api, func)(ref(count)) == SUCCESS and count.value == 8
        assert getattr(api, func)(None) == INVALID_ARGUMENT
    out = P()
    assert api.nvmlDeviceGetHandleByIndex(3, ref(out)) == SUCCESS and out.value == api.handle(3)
    assert api.nvmlDeviceGetHandleByIndex_v2(8, ref(out)) == INVALID_ARGUMENT
    assert api.nvmlDeviceGetHandleByIndex_v2(0, None) == INVALID_ARGUMENT
    for i in range(8):
        index = U(99)
        assert api.nvmlDeviceGetIndex(api.handle(i), ref(index)) == SUCCESS and index.value == i


def test_bad_handles_are_invalid_argument(sim: Any, api: Api) -> None:
    """NULL and foreign pointers are rejected without being dereferenced."""
    sim.render()
    api.init()
    buf = ctypes.create_string_buffer(96)
    for bad in (None, 0x1234, 0x7FF0DEAD0):
        assert api.nvmlDeviceGetName(bad, buf, 96) == INVALID_ARGUMENT
        assert api.nvmlGpuInstanceDestroy(bad) == INVALID_ARGUMENT
        assert api.nvmlComputeInstanceDestroy(bad) == INVALID_ARGUMENT


def test_identity_strings(sim: Any, api: Api, simctl: Any) -> None:
    """Name, UUID, serial, part number and minor come from the fixture."""
    sim.render()
    api.init()
    shown = sim.show()["gpus"]
    for i in (0, 7):
        handle = api.handle(i)
        assert api.text("nvmlDeviceGetName", handle, 64) == (SUCCESS, "NVIDIA A100-SXM4-40GB")
        assert api.text("nvmlDeviceGetUUID", handle, 80) == (SUCCESS, shown[i]["uuid"])
        assert api.text("nvmlDeviceGetSerial", handle, 30) == (SUCCESS, shown[i]["serial"])
        assert api.text("nvmlDeviceGetBoardPartNumber", handle, 80) == (SUCCESS, "692-2G506-0200-002")
        minor = U()
        assert api.nvmlDeviceGetMinorNumber(handle, ref(minor)) == SUCCESS and minor.value == i
    uuid = shown[0]["uuid"]
    assert uuid.startswith("GPU-") and len(uuid) == 40
    assert len(shown[0]["serial"]) == 13 and shown[0]["serial"].isdigit()
    assert simctl.render_node(os.path.join(NODES_DIR, "dgx-a100-8x40gb.yml")).dump().split("\n")[2:] == sim.text().split("\n")[2:], (
        "rendering must be deterministic"
    )


@pytest.mark.parametrize("func,value", [("nvmlDeviceGetName", "NVIDIA A100-SXM4-40GB"), ("nvmlDeviceGetBoardPartNumber", "692-2G506-0200-002")])
def test_string_insufficient_size(sim: Any, api: Api, func: str, value: str) -> None:
    """A buffer one byte short of string+NUL is INSUFFICIENT_SIZE."""
    sim.render()
    api.init()
    handle = api.handle(0)
    size = len(value)
    assert getattr(api, func)(handle, ctypes.create_string_buffer(size), size) == INSUFFICIENT_SIZE
    assert api.text(func, handle, size + 1) == (SUCCESS, value)
    assert getattr(api, func)(handle, None, 96) == INVALID_ARGUMENT


def test_uuid_and_serial_insufficient_size(sim: Any, api: Api) -> None:
    """UUID (40 chars) and serial (13 chars) obey the same rule."""
    sim.render()
    api.init()
    handle = api.handle(0)
    assert api.nvmlDeviceGetUUID(handle, ctypes.create_string_buffer(40), 40) == INSUFFICIENT_SIZE
    assert api.nvmlDeviceGetUUID(handle, ctypes.create_string_buffer(41), 41) == SUCCESS
    assert api.nvmlDeviceGetSerial(handle, ctypes.create_string_buffer(13), 13) == INSUFFICIENT_SIZE


def test_handle_by_uuid(sim: Any, api: Api) -> None:
    """Lookup by GPU UUID; unknown and malformed UUIDs."""
    sim.render()
    api.init()
    uuid = api.text("nvmlDeviceGetUUID", api.handle(5))[1]
    out = P()
    assert api.nvmlDeviceGetHandleByUUID(uuid.encode(), ref(out)) == SUCCESS and out.value == api.handle(5)
    assert api.nvmlDeviceGetHandleByUUID(b"GPU-00000000-0000-0000-0000-000000000000", ref(out)) == NOT_FOUND
    assert api.nvmlDeviceGetHandleByUUID(b"not-a-uuid", ref(out)) == INVALID_ARGUMENT
    assert api.nvmlDeviceGetHandleByUUID(None, ref(out)) == INVALID_ARGUMENT
    assert api.nvmlDeviceGetHandleByUUID(uuid.encode(), None) == INVALID_ARGUMENT


@pytest.mark.parametrize("text,index", [(b"00000000:0F:00.0", 1), (b"0000:0f:00.0", 1), (b"0F:00.0", 1), (b"00000000:BD:00.0", 7)])
def test_handle_by_pci_bus_id(sim: Any, api: Api, text: bytes, index: int) -> None:
    """8-digit, legacy 4-digit and domain-less bus ids all resolve."""
    sim.render()
    api.init()
    for func in ("nvmlDeviceGetHandleByPciBusId", "nvmlDeviceGetHandleByPciBusId_v2"):
        out = P()
        assert getattr(api, func)(text, ref(out)) == SUCCESS and out.value == api.handle(index)


def test_handle_by_pci_bus_id_errors(sim: Any, api: Api) -> None:
    """Unknown bus id: NOT_FOUND; unparsable: INVALID_ARGUMENT."""
    sim.render()
    api.init()
    out = P()
    assert api.nvmlDeviceGetHandleByPciBusId_v2(b"0000:99:00.0", ref(out)) == NOT_FOUND
    assert api.nvmlDeviceGetHandleByPciBusId_v2(b"garbage", ref(out)) == INVALID_ARGUMENT
    assert api.nvmlDeviceGetHandleByPciBusId_v2(None, ref(out)) == INVALID_ARGUMENT


def test_pci_info_v3_layout(sim: Any, api: Api) -> None:
    """Every nvmlPciInfo_t field, and nothing written past the struct."""
    sim.render()
    api.init()
    raw = (ctypes.c_ubyte * 80)(*([0xAA] * 80))
    assert api.nvmlDeviceGetPciInfo_v3(api.handle(1), ref(raw)) == SUCCESS
    pci = PciInfo.from_buffer_copy(bytes(raw[:68]))
    assert pci.busIdLegacy == b"0000:0F:00.0"
    assert pci.busId == b"00000000:0F:00.0"
    assert (pci.domain, pci.bus, pci.device) == (0, 0x0F, 0)
    assert pci.pciDeviceId == 0x20B010DE and pci.pciSubSystemId == 0x134F10DE
    assert list(raw[68:]) == [0xAA] * 12
    assert api.nvmlDeviceGetPciInfo_v3(api.handle(1), None) == INVALID_ARGUMENT


@pytest.mark.parametrize("func", ["nvmlDeviceGetPciInfo", "nvmlDeviceGetPciInfo_v2"])
def test_pci_info_legacy_writes_only_shared_prefix(sim: Any, api: Api, func: str) -> None:
    """The pre-v3 calls never touch busId[32] (old callers' structs are shorter)."""
    sim.render()
    api.init()
    raw = (ctypes.c_ubyte * 68)(*([0xAA] * 68))
    assert getattr(api, func)(api.handle(7), ref(raw)) == SUCCESS
    pci = PciInfo.from_buffer_copy(bytes(raw))
    assert pci.busIdLegacy == b"0000:BD:00.0" and pci.bus == 0xBD and pci.pciDeviceId == 0x20B010DE
    assert list(raw[36:]) == [0xAA] * 32


def test_memory_info_v1_v2(sim: Any, api: Api) -> None:
    """v2 splits reserved from used; v1 'used' includes reserved."""
    sim.render("dgx-a100-mig-mixed")
    api.init()
    total = 40960 << 20
    reserved = 571 << 20
    held = 1 << 30  # the process on GPU 5
    mem = Memory()
    assert api.nvmlDeviceGetMemoryInfo(api.handle(5), ref(mem)) == SUCCESS
    assert (mem.total, mem.used, mem.free) == (total, reserved + held, total - reserved - held)
    mem2 = MemoryV2(version=MEMORY_V2)
    assert api.nvmlDeviceGetMemoryInfo_v2(api.handle(5), ref(mem2)) == SUCCESS
    assert (mem2.version, mem2.total, mem2.reserved, mem2.used, mem2.free) == (MEMORY_V2, total, reserved, held, total - reserved - held)
    assert api.nvmlDeviceGetMemoryInfo_v2(api.handle(6), ref(mem2)) == SUCCESS and mem2.used == 0


@pytest.mark.parametrize("version", [0, 1, 0x01000028, 0x02000018, 0x03000028])
def test_memory_info_v2_version_mismatch(sim: Any, api: Api, version: int) -> None:
    """A wrong version word is ARGUMENT_VERSION_MISMATCH and writes nothing."""
    sim.render()
    api.init()
    mem2 = MemoryV2(version=version, total=7)
    assert api.nvmlDeviceGetMemoryInfo_v2(api.handle(0), ref(mem2)) == ARGUMENT_VERSION_MISMATCH
    assert mem2.total == 7
    assert api.nvmlDeviceGetMemoryInfo_v2(api.handle(0), None) == INVALID_ARGUMENT


@pytest.mark.parametrize("node", node_names())
def test_every_node_matches_its_models(sim: Any, api: Api, node: str, simctl: Any) -> None:
    """Name, PCI id, memory, arch, CC, persistence of every GPU of every node."""
    sim.render(node)
    api.init()
    fixture = simctl.load_yaml(os.path.join(NODES_DIR, node + ".yml"))
    gpus = simctl.expand_gpus(fixture)
    count = U()
    assert api.nvmlDeviceGetCount_v2(ref(count)) == SUCCESS and count.value == len(gpus)
    for index, gpu in enumerate(gpus):
        mod = model(simctl, gpu["model"])
        handle = api.handle(index)
        assert api.text("nvmlDeviceGetName", handle, 64) == (SUCCESS, mod["name"])
        pci = PciInfo()
        assert api.nvmlDeviceGetPciInfo_v3(handle, ref(pci)) == SUCCESS
        assert pci.pciDeviceId == int(mod["pci_device_id"], 16)
        mem = Memory()
        assert api.nvmlDeviceGetMemoryInfo(handle, ref(mem)) == SUCCESS
        assert mem.total == mod["memory_total_mib"] << 20
        arch = U()
        assert api.nvmlDeviceGetArchitecture(handle, ref(arch)) == SUCCESS and arch.value == mod["arch"]
        major, minor = ctypes.c_int(), ctypes.c_int()
        assert api.nvmlDeviceGetCudaComputeCapability(handle, ref(major), ref(minor)) == SUCCESS
        assert [major.value, minor.value] == mod["cuda_compute_capability"]
        mode = U(9)
        assert api.nvmlDeviceGetPersistenceMode(handle, ref(mode)) == SUCCESS
        assert mode.value == (1 if gpu.get("persistence") else 0)


@pytest.mark.parametrize(
    "node,arch,cc",
    [
        ("l40s-4x", 8, (8, 9)),
        ("t4-1x", 6, (7, 5)),
        ("v100-8x", 5, (7, 0)),
        ("hgx-h100-8x80gb", 9, (9, 0)),
        ("hgx-h200-8x141gb", 9, (9, 0)),
        ("a100-80gb-2x", 7, (8, 0)),
    ],
)
def test_architecture_values(sim: Any, api: Api, node: str, arch: int, cc: Tuple[int, int]) -> None:
    """NVML_DEVICE_ARCH_* and compute capability per model."""
    sim.render(node)
    api.init()
    value = U()
    assert api.nvmlDeviceGetArchitecture(api.handle(0), ref(value)) == SUCCESS and value.value == arch
    major, minor = ctypes.c_int(), ctypes.c_int()
    assert api.nvmlDeviceGetCudaComputeCapability(api.handle(0), ref(major), ref(minor)) == SUCCESS
    assert (major.value, minor.value) == cc


# ============================================================================
# processes
# ============================================================================


def test_processes_count_query_and_insufficient_size(sim: Any, api: Api) -> None:
    """count=0/infos=NULL asks for the count; a short array is INSUFFICIENT_SIZE."""
    sim.render("dgx-a100-mig-mixed")
    assert sim.ctl.main(["process", "add", "--gpu", "5", "--pid", "5000", "--used-memory", "512MiB", "--name", "torch", "--state", sim.state_path]) == 0
    api.init()
    handle = api.handle(5)
    count = U(0)
    assert api.nvmlDeviceGetComputeRunningProcesses_v3(handle, ref(count), None) == INSUFFICIENT_SIZE
    assert count.value == 2
    infos = (ProcessInfo * 2)()
    count = U(1)
    assert api.nvmlDeviceGetComputeRunningProcesses_v3(handle, ref(count), infos) == INSUFFICIENT_SIZE
    assert count.value == 2
    count = U(2)
    assert api.nvmlDeviceGetComputeRunningProcesses_v3(handle, ref(count), infos) == SUCCESS
    assert count.value == 2
    got = sorted((p.pid, p.usedGpuMemory, p.gpuInstanceId, p.computeInstanceId) for p in infos)
    assert got == [(4242, 1 << 30, NOT_IN_MIG, NOT_IN_MIG), (5000, 512 << 20, NOT_IN_MIG, NOT_IN_MIG)]
    count = U(3)
    assert api.nvmlDeviceGetComputeRunningProcesses_v3(handle, ref(count), None) == INVALID_ARGUMENT
    assert api.nvmlDeviceGetComputeRunningProcesses_v3(handle, None, infos) == INVALID_ARGUMENT


def test_processes_none_running(sim: Any, api: Api) -> None:
    """An idle GPU answers SUCCESS with count 0 to the count query."""
    sim.render("dgx-a100-mig-mixed")
    api.init()
    count = U(0)
    assert api.nvmlDeviceGetComputeRunningProcesses_v3(api.handle(6), ref(count), None) == SUCCESS
    assert count.value == 0


def test_processes_in_mig_mode(sim: Any, api: Api) -> None:
    """Parent handle: aggregate with GI/CI ids; MIG handle: only its own."""
    sim.render("dgx-a100-mig-mixed")
    api.init()
    parent = api.handle(1)
    infos = (ProcessInfo * 4)()
    count = U(4)
    assert api.nvmlDeviceGetComputeRunningProcesses_v3(parent, ref(count), infos) == SUCCESS
    assert count.value == 1
    assert (infos[0].pid, infos[0].gpuInstanceId, infos[0].computeInstanceId) == (4194404, 7, 0)
    for index, expected in ((0, 1), (1, 0)):
        mig = P()
        assert api.nvmlDeviceGetMigDeviceHandleByIndex(parent, index, ref(mig)) == SUCCESS
        count = U(4)
        assert api.nvmlDeviceGetComputeRunningProcesses_v3(mig.value, ref(count), infos) == SUCCESS
        assert count.value == expected


# ============================================================================
# MIG on GPUs without MIG
# ============================================================================


@pytest.mark.parametrize("node", ["t4-1x", "l40s-4x", "v100-8x"])
def test_non_mig_gpus_are_not_supported(sim: Any, api: Api, node: str) -> None:
    """Every MIG entry point says NOT_SUPPORTED (or 0 / NOT_FOUND where nvml.h says so)."""
    sim.render(node)
    api.init()
    handle = api.handle(0)
    assert api.mig_mode(handle) == (NOT_SUPPORTED, 9, 9)
    assert api.set_mig(handle, 1)[0] == NOT_SUPPORTED
    assert api.set_mig(handle, 0)[0] == NOT_SUPPORTED
    for index in range(GI_PROFILE_COUNT):
        assert api.nvmlDeviceGetGpuInstanceProfileInfo(handle, index, ref(GiProfile())) == NOT_SUPPORTED
        assert api.nvmlDeviceGetGpuInstanceProfileInfoV(handle, index, ref(GiProfileV2(version=GI_PROFILE_V2))) == NOT_SUPPORTED
    assert api.nvmlDeviceGetGpuInstanceProfileInfo(handle, GI_PROFILE_COUNT, ref(GiProfile())) == INVALID_ARGUMENT
    count = U(5)
    assert api.nvmlDeviceGetGpuInstancePossiblePlacements_v2(handle, 19, None, ref(count)) == NOT_SUPPORTED
    assert api.nvmlDeviceGetGpuInstanceRemainingCapacity(handle, 19, ref(count)) == NOT_SUPPORTED
    assert api.create_gi(handle, 19)[0] == NOT_SUPPORTED
    assert api.nvmlDeviceGetGpuInstances(handle, 19, (P * 7)(), ref(count)) == NOT_SUPPORTED
    assert api.nvmlDeviceGetGpuInstanceById(handle, 0, ref(P())) == NOT_SUPPORTED
    assert api.nvmlDeviceGetMaxMigDeviceCount(handle, ref(count)) == SUCCESS and count.value == 0
    assert api.nvmlDeviceGetMigDeviceHandleByIndex(handle, 0, ref(P())) == NOT_FOUND
    is_mig = U(9)
    assert api.nvmlDeviceIsMigDeviceHandle(handle, ref(is_mig)) == SUCCESS and is_mig.value == 0
    assert api.nvmlDeviceGetGpuInstanceId(handle, ref(count)) == INVALID_ARGUMENT
    assert api.nvmlDeviceGetComputeInstanceId(handle, ref(count)) == INVALID_ARGUMENT
    assert api.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle, ref(P())) == INVALID_ARGUMENT


# ============================================================================
# MIG mode
# ============================================================================


def test_set_mig_mode_immediate(sim: Any, api: Api) -> None:
    """An idle GPU with mig_toggle=immediate switches at once, both ways."""
    sim.render()
    api.init()
    handle = api.handle(0)
    assert api.mig_mode(handle) == (SUCCESS, 0, 0)
    assert api.set_mig(handle, 1) == (SUCCESS, SUCCESS)
    assert api.mig_mode(handle) == (SUCCESS, 1, 1)
    assert api.set_mig(handle, 1) == (SUCCESS, SUCCESS)
    assert api.set_mig(handle, 0) == (SUCCESS, SUCCESS)
    assert api.mig_mode(handle) == (SUCCESS, 0, 0)
    assert api.mig_mode(api.handle(1)) == (SUCCESS, 0, 0)


def test_set_mig_mode_arguments(sim: Any, api: Api) -> None:
    """Bad mode / NULL status are INVALID_ARGUMENT and write nothing."""
    sim.render()
    api.init()
    handle = api.handle(0)
    assert api.set_mig(handle, 2) == (INVALID_ARGUMENT, -1)
    assert api.nvmlDeviceSetMigMode(handle, 1, None) == INVALID_ARGUMENT
    assert api.nvmlDeviceGetMigMode(handle, None, ref(U())) == INVALID_ARGUMENT
    assert api.mig_mode(handle) == (SUCCESS, 0, 0)


def test_set_mig_mode_reboot_and_boot_marker(sim: Any, api: Api) -> None:
    """mig_toggle=reboot: RESET_REQUIRED, pending only; the next boot applies it."""
    sim.render()
    assert sim.ctl.main(["set", "mig_toggle=reboot", "--gpu", "2", "--state", sim.state_path]) == 0
    api.init()
    handle = api.handle(2)
    assert api.set_mig(handle, 1) == (SUCCESS, RESET_REQUIRED)
    assert api.mig_mode(handle) == (SUCCESS, 0, 1)
    assert api.create_gi(handle, 19)[0] == NOT_SUPPORTED
    assert api.nvmlShutdown() == SUCCESS
    assert sim.show()["gpus"][2]["mig_pending"] == 1
    api.init()  # same boot: still pending
    assert api.mig_mode(api.handle(2)) == (SUCCESS, 0, 1)
    assert api.nvmlShutdown() == SUCCESS
    assert sim.ctl.main(["reboot", "--rundir", sim.run_dir]) == 0
    assert not os.path.exists(os.path.join(sim.run_dir, "booted"))
    api.init()
    assert os.path.exists(os.path.join(sim.run_dir, "booted"))
    assert api.mig_mode(api.handle(2)) == (SUCCESS, 1, 1)
    assert sim.show()["gpus"][2]["mig_current"] == 1


def test_boot_drops_instances_and_processes(sim: Any, api: Api) -> None:
    """Without the boot marker, nvmlInit applies a boot: GIs, CIs, processes go."""
    sim.render("dgx-a100-mig-mixed", booted=False)
    api.init()
    shown = sim.show()
    assert shown["booted"]
    assert all(not g["gis"] and not g["processes"] for g in shown["gpus"])
    assert [g["mig_current"] for g in shown["gpus"]] == [1, 1, 1, 1, 1, 0, 0, 0]  # GPU 4's pending enable
    count = U(9)
    assert api.nvmlDeviceGetGpuInstances(api.handle(0), 9, (P * 2)(), ref(count)) == SUCCESS and count.value == 0


def test_disable_mig_with_instances_is_in_use(sim: Any, api: Api) -> None:
    """The driver refuses to disable MIG while GPU instances exist."""
    sim.render("dgx-a100-mig-mixed")
    api.init()
    assert api.set_mig(api.handle(0), 0) == (IN_USE, IN_USE)
    assert api.mig_mode(api.handle(0)) == (SUCCESS, 1, 1)
    assert api.set_mig(api.handle(3), 0) == (SUCCESS, SUCCESS)  # MIG on but empty


def test_enable_mig_with_busy_gpu_reports_in_use(sim: Any, api: Api) -> None:
    """A client process blocks the reset: pending set, activationStatus IN_USE."""
    sim.render("dgx-a100-mig-mixed")
    api.init()
    assert api.set_mig(api.handle(5), 1) == (SUCCESS, IN_USE)
    assert api.mig_mode(api.handle(5)) == (SUCCESS, 0, 1)
    assert api.mig_mode(api.handle(4)) == (SUCCESS, 0, 1)  # fixture: pending enable


def test_privileged_calls_need_root(sim: Any, api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """NVML_SIM_EUID=1000 (read at init) makes privileged calls NO_PERMISSION."""
    sim.render("dgx-a100-mig-mixed")
    monkeypatch.setenv("NVML_SIM_EUID", "1000")
    api.init()
    handle = api.handle(3)
    assert api.set_mig(handle, 0) == (NO_PERMISSION, -1)
    assert api.mig_mode(handle) == (SUCCESS, 1, 1)
    count = U()
    assert api.nvmlDeviceGetGpuInstancePossiblePlacements_v2(handle, 19, None, ref(count)) == NO_PERMISSION
    assert api.nvmlDeviceGetGpuInstanceRemainingCapacity(handle, 19, ref(count)) == NO_PERMISSION
    assert api.create_gi(handle, 19) == (NO_PERMISSION, 0)
    gih = P()
    assert api.nvmlDeviceGetGpuInstanceById(api.handle(0), 2, ref(gih)) == SUCCESS  # listing is allowed
    assert api.nvmlGpuInstanceDestroy(gih) == NO_PERMISSION
    assert api.nvmlDeviceGetGpuInstanceProfileInfo(handle, 0, ref(GiProfile())) == SUCCESS
    assert api.set_mig(api.handle(0), 1)[0] == NO_PERMISSION
    assert api.set_mig(api.handle(0), 5)[0] == INVALID_ARGUMENT  # arguments first


# ============================================================================
# GPU-instance profiles and placements
# ============================================================================

MIG_MODELS = [
    ("dgx-a100-8x40gb", "a100-sxm4-40gb"),
    ("a100-80gb-2x", "a100-sxm4-80gb"),
    ("hgx-h100-8x80gb", "h100-sxm5-80gb"),
    ("hgx-h200-8x141gb", "h200-sxm5-141gb"),
]


@pytest.mark.parametrize("node,key", MIG_MODELS)
def test_gi_profile_info_v1_v2_match_model(sim: Any, api: Api, simctl: Any, node: str, key: str) -> None:
    """Every NVML_GPU_INSTANCE_PROFILE_* index, through all three entry points."""
    sim.render(node)
    api.init()
    handle = api.handle(0)
    api.enable_mig(handle)
    by_index = {p["index"]: p for p in model(simctl, key)["profiles"]}
    assert len(by_index) == 7
    for index in range(GI_PROFILE_COUNT):
        v1 = GiProfile()
        v2 = GiProfileV2(version=GI_PROFILE_V2)
        rc1 = api.nvmlDeviceGetGpuInstanceProfileInfo(handle, index, ref(v1))
        rc2 = api.nvmlDeviceGetGpuInstanceProfileInfoV(handle, index, ref(v2))
        if index not in by_index:
            assert (rc1, rc2) == (NOT_SUPPORTED, NOT_SUPPORTED), index
            continue
        prof = by_index[index]
        assert (rc1, rc2) == (SUCCESS, SUCCESS)
        expect = (
            prof["id"],
            prof["p2p"],
            prof["slices"],
            prof["instances"],
            prof["sm"],
            prof["ce"],
            prof["dec"],
            prof["enc"],
            prof["jpeg"],
            prof["ofa"],
            prof["memory_mib"],
        )
        for info in (v1, v2):
            assert (
                info.id,
                info.isP2pSupported,
                info.sliceCount,
                info.instanceCount,
                info.multiprocessorCount,
                info.copyEngineCount,
                info.decoderCount,
                info.encoderCount,
                info.jpegCount,
                info.ofaCount,
                info.memorySizeMB,
            ) == expect
        assert v2.version == GI_PROFILE_V2 and v2.name.decode() == prof["name"]
        by_id = GiProfileV2(version=GI_PROFILE_V2)
        assert api.nvmlDeviceGetGpuInstanceProfileInfoByIdV(handle, prof["id"], ref(by_id)) == SUCCESS
        assert bytes(by_id) == bytes(v2)
    assert api.nvmlDeviceGetGpuInstanceProfileInfo(handle, GI_PROFILE_COUNT, ref(GiProfile())) == INVALID_ARGUMENT
    assert api.nvmlDeviceGetGpuInstanceProfileInfo(handle, 0, None) == INVALID_ARGUMENT
    by_id = GiProfileV2(version=GI_PROFILE_V2)
    assert api.nvmlDeviceGetGpuInstanceProfileInfoByIdV(handle, 77, ref(by_id)) == NOT_SUPPORTED


@pytest.mark.parametrize("version", [0, 1, 0x01000098, 0x02000030, 0x04000098])
def test_gi_profile_info_v_checks_version(sim: Any, api: Api, version: int) -> None:
    """nvml.h: an invalid info->version is INVALID_ARGUMENT; nothing is written."""
    sim.render()
    api.init()
    handle = api.handle(0)
    api.enable_mig(handle)
    info = GiProfileV2(version=version, id=4242)
    assert api.nvmlDeviceGetGpuInstanceProfileInfoV(handle, 0, ref(info)) == INVALID_ARGUMENT
    assert api.nvmlDeviceGetGpuInstanceProfileInfoByIdV(handle, 19, ref(info)) == INVALID_ARGUMENT
    assert info.id == 4242


def test_gi_profile_info_needs_mig_enabled(sim: Any, api: Api) -> None:
    """With MIG off, profile info is NOT_SUPPORTED; placements still answer."""
    sim.render()
    api.init()
    handle = api.handle(0)
    assert api.nvmlDeviceGetGpuInstanceProfileInfo(handle, 0, ref(GiProfile())) == NOT_SUPPORTED
    count = U()
    assert api.nvmlDeviceGetGpuInstancePossiblePlacements_v2(handle, 19, None, ref(count)) == SUCCESS
    assert count.value == 7
    assert api.nvmlDeviceGetGpuInstanceRemainingCapacity(handle, 19, ref(count)) == NOT_SUPPORTED
    assert api.create_gi(handle, 19)[0] == NOT_SUPPORTED


@pytest.mark.parametrize("node,key", MIG_MODELS)
def test_possible_placements_match_model(sim: Any, api: Api, simctl: Any, node: str, key: str) -> None:
    """NULL placements return the count; the array matches the model."""
    sim.render(node)
    api.init()
    handle = api.handle(0)
    for prof in model(simctl, key)["profiles"]:
        count = U(0)
        assert api.nvmlDeviceGetGpuInstancePossiblePlacements_v2(handle, prof["id"], None, ref(count)) == SUCCESS
        assert count.value == len(prof["placements"])
        arr = (Placement * (count.value + 1))((0xEE, 0xEE))
        arr[count.value] = Placement(0xEE, 0xEE)
        assert api.nvmlDeviceGetGpuInstancePossiblePlacements_v2(handle, prof["id"], arr, ref(count)) == SUCCESS
        assert [(p.start, p.size) for p in arr[: count.value]] == prof["placements"]
        assert (arr[count.value].start, arr[count.value].size) == (0xEE, 0xEE)
    assert api.nvmlDeviceGetGpuInstancePossiblePlacements_v2(handle, 77, None, ref(U())) == NOT_SUPPORTED
    assert api.nvmlDeviceGetGpuInstancePossiblePlacements_v2(handle, 19, None, None) == INVALID_ARGUMENT


# ============================================================================
# GPU-instance create / destroy
# ============================================================================


@pytest.mark.parametrize(
    "profile_id,start,gi_id",
    [(0, 0, 0), (5, 0, 1), (9, 0, 1), (9, 4, 2), (14, 0, 3), (14, 2, 4), (14, 4, 5), (15, 6, 6), (19, 0, 7), (19, 3, 10), (19, 6, 13), (20, 5, 12)],
)
def test_gi_ids_follow_the_placement_grid(sim: Any, api: Api, profile_id: int, start: int, gi_id: int) -> None:
    """7g -> 0, size-4 -> 1..2, size-2 -> 3..6, size-1 -> 7..14 by start."""
    sim.render()
    api.init()
    handle = api.handle(0)
    api.enable_mig(handle)
    rc, gih = api.create_gi(handle, profile_id, start)
    assert rc == SUCCESS
    info = api.gi_info(gih)
    assert (info.device, info.id, info.profileId) == (handle, gi_id, profile_id)
    assert info.placement.start == start
    out = P()
    assert api.nvmlDeviceGetGpuInstanceById(handle, gi_id, ref(out)) == SUCCESS and out.value == gih


def test_create_with_placement_rules(sim: Any, api: Api) -> None:
    """Overlap and instance limits: INSUFFICIENT_RESOURCES; foreign placement: INVALID_ARGUMENT."""
    sim.render()
    api.init()
    handle = api.handle(0)
    api.enable_mig(handle)
    assert api.create_gi(handle, 9, 4)[0] == SUCCESS  # 3g.20gb on units 4-7
    assert api.create_gi(handle, 19, 5)[0] == INSUFFICIENT_RESOURCES  # overlaps
    assert api.create_gi(handle, 5, 0)[0] == SUCCESS  # 4g.20gb on units 0-3
    assert api.create_gi(handle, 19, 0)[0] == INSUFFICIENT_RESOURCES
    out = P()
    bad = Placement(1, 2)  # 2g.10gb never starts at 1
    assert api.nvmlDeviceCreateGpuInstanceWithPlacement(handle, 14, ref(bad), ref(out)) == INVALID_ARGUMENT
    bad = Placement(7, 1)  # 1g can never start at 7
    assert api.nvmlDeviceCreateGpuInstanceWithPlacement(handle, 19, ref(bad), ref(out)) == INVALID_ARGUMENT
    assert api.nvmlDeviceCreateGpuInstanceWithPlacement(handle, 19, None, ref(out)) == INVALID_ARGUMENT
    assert api.nvmlDeviceCreateGpuInstanceWithPlacement(handle, 19, ref(Placement(0, 1)), None) == INVALID_ARGUMENT
    assert api.create_gi(handle, 77, 0)[0] == NOT_SUPPORTED


def test_instance_limits(sim: Any, api: Api) -> None:
    """At most `instanceCount` GIs of a profile (one +me, one 4g)."""
    sim.render()
    api.init()
    handle = api.handle(0)
    api.enable_mig(handle)
    assert api.create_gi(handle, 20, 0)[0] == SUCCESS
    assert api.create_gi(handle, 20, 3)[0] == INSUFFICIENT_RESOURCES
    remaining = U()
    assert api.nvmlDeviceGetGpuInstanceRemainingCapacity(handle, 20, ref(remaining)) == SUCCESS
    assert remaining.value == 0
    assert api.nvmlDeviceGetGpuInstanceRemainingCapacity(handle, 19, ref(remaining)) == SUCCESS
    assert remaining.value == 6


def test_auto_placement_reproduces_mig_guide_example(sim: Any, api: Api) -> None:
    """MIG user guide: -cgi 19,19,14,9 fails at 9; -cgi 9,19,14,19 succeeds."""
    sim.render()
    api.init()
    first, second = api.handle(0), api.handle(1)
    api.enable_mig(first)
    api.enable_mig(second)
    results = [api.create_gi(first, p)[0] for p in (19, 19, 14, 9)]
    assert results == [SUCCESS, SUCCESS, SUCCESS, INSUFFICIENT_RESOURCES]
    handles = [api.create_gi(second, p) for p in (9, 19, 14, 19)]
    assert [rc for rc, _handle in handles] == [SUCCESS] * 4
    placed = [(api.gi_info(h).id, api.gi_info(h).placement.start) for _rc, h in handles]
    assert placed == [(2, 4), (10, 3), (3, 0), (9, 2)]


def test_remaining_capacity_on_empty_and_partial_gpu(sim: Any, api: Api) -> None:
    """Capacity simulates successive creations."""
    sim.render()
    api.init()
    handle = api.handle(0)
    api.enable_mig(handle)
    empty = {19: 7, 20: 1, 15: 4, 14: 3, 9: 2, 5: 1, 0: 1}
    for profile_id, want in empty.items():
        count = U(99)
        assert api.nvmlDeviceGetGpuInstanceRemainingCapacity(handle, profile_id, ref(count)) == SUCCESS
        assert count.value == want, profile_id
    assert api.create_gi(handle, 9, 4)[0] == SUCCESS
    partial = {19: 4, 9: 1, 5: 1, 0: 0, 14: 2, 15: 2}
    for profile_id, want in partial.items():
        count = U(99)
        assert api.nvmlDeviceGetGpuInstanceRemainingCapacity(handle, profile_id, ref(count)) == SUCCESS
        assert count.value == want, profile_id


def test_get_gpu_instances_and_by_id(sim: Any, api: Api) -> None:
    """Listing by profile id; unknown GI id is NOT_FOUND."""
    sim.render("dgx-a100-mig-mixed")
    api.init()
    handle = api.handle(1)
    arr = (P * 7)()
    count = U(0)
    assert api.nvmlDeviceGetGpuInstances(handle, 19, arr, ref(count)) == SUCCESS
    assert count.value == 7
    assert [api.gi_info(arr[i]).id for i in range(7)] == list(range(7, 14))
    assert api.nvmlDeviceGetGpuInstances(handle, 9, arr, ref(count)) == SUCCESS and count.value == 0
    assert api.nvmlDeviceGetGpuInstances(handle, 19, None, ref(count)) == INVALID_ARGUMENT
    assert api.nvmlDeviceGetGpuInstances(handle, 77, arr, ref(count)) == NOT_SUPPORTED
    assert api.nvmlDeviceGetGpuInstanceById(handle, 3, ref(P())) == NOT_FOUND
    assert api.nvmlDeviceGetGpuInstanceById(handle, 7, None) == INVALID_ARGUMENT


def test_destroy_gpu_instance(sim: Any, api: Api) -> None:
    """Destroy frees the placement; the stale handle becomes invalid."""
    sim.render()
    api.init()
    handle = api.handle(0)
    api.enable_mig(handle)
    rc, gih = api.create_gi(handle, 0)
    assert rc == SUCCESS and api.gi_info(gih).id == 0
    assert api.create_gi(handle, 19)[0] == INSUFFICIENT_RESOURCES
    assert api.nvmlGpuInstanceDestroy(gih) == SUCCESS
    assert api.nvmlGpuInstanceGetInfo(gih, ref(GiInfo())) == INVALID_ARGUMENT
    assert api.nvmlGpuInstanceDestroy(gih) == INVALID_ARGUMENT
    assert api.create_gi(handle, 19)[0] == SUCCESS


# ============================================================================
# compute instances
# ============================================================================


def _mixed_gi(sim_obj: Any, api: Api, gpu: int, gi_id: int) -> Tuple[int, int]:
    sim_obj.render("dgx-a100-mig-mixed")
    api.init()
    handle = api.handle(gpu)
    out = P()
    assert api.nvmlDeviceGetGpuInstanceById(handle, gi_id, ref(out)) == SUCCESS
    return handle, out.value


def test_ci_profiles_of_a_3g_instance(sim: Any, api: Api) -> None:
    """1c/2c/3c exist on 3g.20gb (shared engines = the GI's); 4c/7c do not."""
    sim.render()
    api.init()
    handle = api.handle(0)
    api.enable_mig(handle)
    rc, gih = api.create_gi(handle, 9, 0)
    assert rc == SUCCESS
    expect = {0: (1, 3, 14, "1c.3g.20gb"), 1: (2, 1, 28, "2c.3g.20gb"), 2: (3, 1, 42, "3g.20gb")}
    for index in range(CI_PROFILE_COUNT):
        v1 = CiProfile()
        v2 = CiProfileV2(version=CI_PROFILE_V2)
        rc1 = api.nvmlGpuInstanceGetComputeInstanceProfileInfo(gih, index, 0, ref(v1))
        rc2 = api.nvmlGpuInstanceGetComputeInstanceProfileInfoV(gih, index, 0, ref(v2))
        if index not in expect:
            assert (rc1, rc2) == (NOT_SUPPORTED, NOT_SUPPORTED), index
            continue
        slices, instances, sms, name = expect[index]
        assert (rc1, rc2) == (SUCCESS, SUCCESS)
        for info in (v1, v2):
            assert (info.id, info.sliceCount, info.instanceCount, info.multiprocessorCount) == (index, slices, instances, sms)
            assert (info.sharedCopyEngineCount, info.sharedDecoderCount, info.sharedEncoderCount, info.sharedJpegCount, info.sharedOfaCount) == (3, 2, 0, 0, 0)
        assert v2.name.decode() == name and v2.version == CI_PROFILE_V2
    assert api.nvmlGpuInstanceGetComputeInstanceProfileInfo(gih, CI_PROFILE_COUNT, 0, ref(CiProfile())) == INVALID_ARGUMENT
    assert api.nvmlGpuInstanceGetComputeInstanceProfileInfo(gih, 0, 1, ref(CiProfile())) == INVALID_ARGUMENT
    bad = CiProfileV2(version=GI_PROFILE_V2)
    assert api.nvmlGpuInstanceGetComputeInstanceProfileInfoV(gih, 0, 0, ref(bad)) == INVALID_ARGUMENT


def test_ci_placements_and_create(sim: Any, api: Api) -> None:
    """CI placements in compute slices; lowest-free ids and starts; overlap rules."""
    sim.render()
    api.init()
    handle = api.handle(0)
    api.enable_mig(handle)
    _rc, gih = api.create_gi(handle, 9, 0)
    count = U()
    assert api.nvmlGpuInstanceGetComputeInstancePossiblePlacements(gih, 0, None, ref(count)) == SUCCESS
    arr = (Placement * 3)()
    assert api.nvmlGpuInstanceGetComputeInstancePossiblePlacements(gih, 0, arr, ref(count)) == SUCCESS
    assert [(p.start, p.size) for p in arr[: count.value]] == [(0, 1), (1, 1), (2, 1)]
    assert api.nvmlGpuInstanceGetComputeInstancePossiblePlacements(gih, 1, arr, ref(count)) == SUCCESS
    assert [(p.start, p.size) for p in arr[: count.value]] == [(0, 2)]
    rc, ci2 = api.create_ci(gih, 1)  # 2c auto -> slices 0-1
    assert rc == SUCCESS
    assert api.create_ci(gih, 0, 1, 1)[0] == INSUFFICIENT_RESOURCES  # overlaps the 2c
    assert api.create_ci(gih, 0, 1, 2)[0] == INVALID_ARGUMENT  # wrong size
    rc, ci1 = api.create_ci(gih, 0)  # 1c auto -> slice 2
    assert rc == SUCCESS
    assert api.create_ci(gih, 0)[0] == INSUFFICIENT_RESOURCES
    remaining = U(9)
    assert api.nvmlGpuInstanceGetComputeInstanceRemainingCapacity(gih, 0, ref(remaining)) == SUCCESS
    assert remaining.value == 0
    infos = []
    for cih in (ci2, ci1):
        info = CiInfo()
        assert api.nvmlComputeInstanceGetInfo_v2(cih, ref(info)) == SUCCESS
        infos.append((info.device, info.gpuInstance, info.id, info.profileId, info.placement.start, info.placement.size))
    assert infos == [(handle, gih, 0, 1, 0, 2), (handle, gih, 1, 0, 2, 1)]
    arr2 = (P * 3)()
    assert api.nvmlGpuInstanceGetComputeInstances(gih, 0, arr2, ref(count)) == SUCCESS
    assert count.value == 1 and arr2[0] == ci1
    out = P()
    assert api.nvmlGpuInstanceGetComputeInstanceById(gih, 0, ref(out)) == SUCCESS and out.value == ci2
    assert api.nvmlGpuInstanceGetComputeInstanceById(gih, 5, ref(out)) == NOT_FOUND


def test_destroy_gi_with_cis_is_in_use(sim: Any, api: Api) -> None:
    """Teardown order: CIs first, then the GI."""
    sim.render()
    api.init()
    handle = api.handle(0)
    api.enable_mig(handle)
    _rc, gih = api.create_gi(handle, 14, 0)
    _rc, cih = api.create_ci(gih, 1)
    assert api.nvmlGpuInstanceDestroy(gih) == IN_USE
    assert api.nvmlComputeInstanceDestroy(cih) == SUCCESS
    assert api.nvmlComputeInstanceGetInfo_v2(cih, ref(CiInfo())) == INVALID_ARGUMENT
    assert api.nvmlGpuInstanceDestroy(gih) == SUCCESS


def test_busy_compute_instance_is_in_use(sim: Any, api: Api) -> None:
    """A process in a CI blocks destroying it."""
    _rc, gih = _mixed_gi(sim, api, 1, 7)
    out = P()
    assert api.nvmlGpuInstanceGetComputeInstanceById(gih, 0, ref(out)) == SUCCESS
    assert api.nvmlComputeInstanceDestroy(out) == IN_USE


# ============================================================================
# MIG device handles
# ============================================================================


def test_mig_device_handles(sim: Any, api: Api, simctl: Any) -> None:
    """Index order, names, UUIDs, memory, ids and parent of MIG devices."""
    sim.render("dgx-a100-mig-mixed")
    api.init()
    parent = api.handle(0)
    gpu_uuid = api.text("nvmlDeviceGetUUID", parent)[1]
    count = U()
    assert api.nvmlDeviceGetMaxMigDeviceCount(parent, ref(count)) == SUCCESS and count.value == 7
    expect = [(2, "3g.20gb", 19968), (4, "2g.10gb", 9856), (7, "1g.5gb", 4864), (8, "1g.5gb", 4864)]
    for index, (gi_id, prof, mib) in enumerate(expect):
        mig = P()
        assert api.nvmlDeviceGetMigDeviceHandleByIndex(parent, index, ref(mig)) == SUCCESS
        handle = mig.value
        assert api.text("nvmlDeviceGetName", handle) == (SUCCESS, "NVIDIA A100-SXM4-40GB MIG " + prof)
        uuid = api.text("nvmlDeviceGetUUID", handle)[1]
        assert uuid == simctl.mig_uuid(gpu_uuid, gi_id, 0) and uuid.startswith("MIG-") and len(uuid) == 40
        mem = MemoryV2(version=MEMORY_V2)
        assert api.nvmlDeviceGetMemoryInfo_v2(handle, ref(mem)) == SUCCESS
        assert (mem.total, mem.reserved, mem.used) == (mib << 20, 0, 0)
        # What nvidia-ctk reads for a MIG device: the instance's slices and memory (one full-size CI each).
        attrs = DeviceAttributes()
        assert api.nvmlDeviceGetAttributes_v2(handle, ref(attrs)) == SUCCESS
        slices = int(prof[0])
        assert (attrs.gpuInstanceSliceCount, attrs.computeInstanceSliceCount, attrs.memorySizeMB) == (slices, slices, mib)
        value = U(99)
        assert api.nvmlDeviceIsMigDeviceHandle(handle, ref(value)) == SUCCESS and value.value == 1
        assert api.nvmlDeviceGetGpuInstanceId(handle, ref(value)) == SUCCESS and value.value == gi_id
        assert api.nvmlDeviceGetComputeInstanceId(handle, ref(value)) == SUCCESS and value.value == 0
        assert api.nvmlDeviceGetIndex(handle, ref(value)) == SUCCESS and value.value == index
        out = P()
        assert api.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle, ref(out)) == SUCCESS
        assert out.value == parent
        assert api.nvmlDeviceGetHandleByUUID(uuid.encode(), ref(out)) == SUCCESS and out.value == handle
        assert api.nvmlDeviceGetMinorNumber(handle, ref(value)) == NOT_SUPPORTED
        assert api.mig_mode(handle)[0] == NOT_SUPPORTED
        assert api.create_gi(handle, 19)[0] == INVALID_ARGUMENT
    assert api.nvmlDeviceGetMigDeviceHandleByIndex(parent, 4, ref(P())) == NOT_FOUND
    assert api.nvmlDeviceGetMigDeviceHandleByIndex(parent, 0, None) == INVALID_ARGUMENT


def test_partial_ci_mig_device_name(sim: Any, api: Api) -> None:
    """A 1c CI of a 3g GI is 'MIG 1c.3g.20gb' and shares the GI's memory."""
    sim.render("dgx-a100-mig-mixed")
    api.init()
    parent = api.handle(2)
    for index in range(3):
        mig = P()
        assert api.nvmlDeviceGetMigDeviceHandleByIndex(parent, index, ref(mig)) == SUCCESS
        assert api.text("nvmlDeviceGetName", mig.value) == (SUCCESS, "NVIDIA A100-SXM4-40GB MIG 1c.3g.20gb")
        mem = Memory()
        assert api.nvmlDeviceGetMemoryInfo(mig.value, ref(mem)) == SUCCESS and mem.total == 19968 << 20
        ci_id = U()
        assert api.nvmlDeviceGetComputeInstanceId(mig.value, ref(ci_id)) == SUCCESS and ci_id.value == index


def test_mig_handle_goes_stale_after_destroy(sim: Any, api: Api) -> None:
    """Destroying the CI invalidates its MIG device handle."""
    sim.render()
    api.init()
    handle = api.handle(0)
    api.enable_mig(handle)
    _rc, gih = api.create_gi(handle, 19)
    _rc, cih = api.create_ci(gih, 0)
    mig = P()
    assert api.nvmlDeviceGetMigDeviceHandleByIndex(handle, 0, ref(mig)) == SUCCESS
    assert api.text("nvmlDeviceGetName", mig.value)[0] == SUCCESS
    assert api.nvmlComputeInstanceDestroy(cih) == SUCCESS
    assert api.text("nvmlDeviceGetName", mig.value)[0] == INVALID_ARGUMENT


# ============================================================================
# persistence of state
# ============================================================================


def test_state_persists_across_sessions(sim: Any, api: Api, simctl: Any) -> None:
    """Mutations are written back at once and re-read by the next init."""
    sim.render()
    api.init()
    handle = api.handle(0)
    api.enable_mig(handle)
    _rc, gih = api.create_gi(handle, 9, 4)
    _rc, cih = api.create_ci(gih, 2)
    gpu_uuid = api.text("nvmlDeviceGetUUID", handle)[1]
    shown = sim.show()["gpus"][0]  # visible before shutdown
    assert shown["mig_current"] == 1
    assert shown["gis"] == [
        {
            "id": 2,
            "profile": 9,
            "start": 4,
            "size": 4,
            "profile_name": "3g.20gb",
            "cis": [{"id": 0, "profile": 2, "start": 0, "size": 3, "uuid": simctl.mig_uuid(gpu_uuid, 2, 0)}],
        }
    ]
    assert api.nvmlShutdown() == SUCCESS
    api.init()
    out = P()
    assert api.nvmlDeviceGetGpuInstanceById(api.handle(0), 2, ref(out)) == SUCCESS and out.value == gih
    assert api.nvmlGpuInstanceGetComputeInstanceById(gih, 0, ref(out)) == SUCCESS and out.value == cih
    assert api.nvmlComputeInstanceDestroy(cih) == SUCCESS
    assert api.nvmlGpuInstanceDestroy(gih) == SUCCESS
    assert sim.show()["gpus"][0]["gis"] == []


def test_unknown_keys_survive_a_write_back(sim: Any, api: Api) -> None:
    """Forward compatibility: keys the library does not know are kept."""
    sim.render()
    assert sim.ctl.main(["set", "future_key=hello%20world", "--gpu", "0", "--force", "--state", sim.state_path]) == 0
    with sim.edit() as state:
        state.system().fields["site"] = "lab 7"
    api.init()
    api.enable_mig(api.handle(0))  # forces a write by the library
    text = sim.text()
    assert "future_key=hello%2520world" in text and "site=lab%207" in text
    shown = sim.show()
    assert shown["gpus"][0]["future_key"] == "hello%20world" and shown["system"]["site"] == "lab 7"


def test_concurrent_calls_are_safe(sim: Any, api: Api) -> None:
    """NVML is thread-safe; so is the simulator."""
    sim.render()
    api.init()
    handles = [api.handle(i) for i in range(8)]
    errors: List[Any] = []

    def worker(index: int) -> None:
        for _attempt in range(300):
            rc, name = api.text("nvmlDeviceGetName", handles[index % 8])
            if (rc, name) != (SUCCESS, "NVIDIA A100-SXM4-40GB"):
                errors.append((rc, name))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors


# ============================================================================
# fault injection
# ============================================================================


def _fault(sim_obj: Any, *args: str) -> None:
    assert sim_obj.ctl.main(["fault", "add", *args, "--state", sim_obj.state_path]) == 0


def test_fault_once(sim: Any, api: Api) -> None:
    """mode=once fires once and disappears from the file."""
    sim.render()
    _fault(sim, "nvmlDeviceGetName", "GPU_IS_LOST", "--once")
    api.init()
    handle = api.handle(0)
    assert api.text("nvmlDeviceGetName", handle)[0] == GPU_IS_LOST
    assert sim.show()["faults"] == []
    assert api.text("nvmlDeviceGetName", handle)[0] == SUCCESS


def test_fault_always(sim: Any, api: Api) -> None:
    """mode=always keeps firing and stays in the file."""
    sim.render()
    _fault(sim, "nvmlDeviceGetUUID", "NVML_ERROR_UNKNOWN", "--always")
    api.init()
    for _cycle in range(3):
        assert api.text("nvmlDeviceGetUUID", api.handle(0))[0] == UNKNOWN
    faults = sim.show()["faults"]
    assert [(f["call"], f["error"], f["error_name"], f["mode"]) for f in faults] == [("nvmlDeviceGetUUID", 999, "NVML_ERROR_UNKNOWN", "always")]


def test_fault_skip(sim: Any, api: Api) -> None:
    """skip=N lets N calls pass, counting down in the file."""
    sim.render()
    _fault(sim, "nvmlDeviceGetCount_v2", "18", "--skip", "2", "--once")
    api.init()
    count = U()
    assert api.nvmlDeviceGetCount_v2(ref(count)) == SUCCESS
    assert sim.show()["faults"][0]["skip"] == 1
    assert api.nvmlDeviceGetCount_v2(ref(count)) == SUCCESS
    assert api.nvmlDeviceGetCount_v2(ref(count)) == LIB_RM_VERSION_MISMATCH
    assert api.nvmlDeviceGetCount_v2(ref(count)) == SUCCESS
    assert sim.show()["faults"] == []


def test_fault_gpu_filter(sim: Any, api: Api) -> None:
    """gpu=N matches only calls on that GPU (device, GI/CI handles, HandleByIndex)."""
    sim.render("dgx-a100-mig-mixed")
    _fault(sim, "nvmlDeviceGetName", "GPU_IS_LOST", "--gpu", "1")
    _fault(sim, "nvmlDeviceGetHandleByIndex_v2", "GPU_IS_LOST", "--gpu", "3")
    _fault(sim, "nvmlGpuInstanceGetInfo", "UNKNOWN", "--gpu", "1")
    api.init()
    assert api.text("nvmlDeviceGetName", api.handle(0))[0] == SUCCESS
    assert api.text("nvmlDeviceGetName", api.handle(1))[0] == GPU_IS_LOST
    mig = P()
    assert api.nvmlDeviceGetMigDeviceHandleByIndex(api.handle(1), 0, ref(mig)) == SUCCESS
    assert api.text("nvmlDeviceGetName", mig.value)[0] == GPU_IS_LOST  # MIG device of GPU 1
    out = P()
    assert api.nvmlDeviceGetHandleByIndex_v2(3, ref(out)) == GPU_IS_LOST
    assert api.nvmlDeviceGetHandleByIndex_v2(2, ref(out)) == SUCCESS
    gi0, gi1 = P(), P()
    assert api.nvmlDeviceGetGpuInstanceById(api.handle(0), 2, ref(gi0)) == SUCCESS
    assert api.nvmlDeviceGetGpuInstanceById(api.handle(1), 7, ref(gi1)) == SUCCESS
    assert api.nvmlGpuInstanceGetInfo(gi0, ref(GiInfo())) == SUCCESS
    assert api.nvmlGpuInstanceGetInfo(gi1, ref(GiInfo())) == UNKNOWN


def test_fault_on_init_matches_every_variant(sim: Any, api: Api) -> None:
    """call=nvmlInit covers nvmlInit, nvmlInit_v2 and nvmlInitWithFlags."""
    sim.render()
    _fault(sim, "nvmlInit", "DRIVER_NOT_LOADED", "--skip", "1", "--once")
    assert api.nvmlInitWithFlags(0) == SUCCESS  # skipped
    assert api.nvmlShutdown() == SUCCESS
    assert api.nvmlInit_v2() == DRIVER_NOT_LOADED
    assert api.nvmlDeviceGetCount_v2(ref(U())) == UNINITIALIZED
    assert api.nvmlInit() == SUCCESS
    assert sim.show()["faults"] == []


def test_fault_on_exact_call_name_only(sim: Any, api: Api) -> None:
    """Apart from nvmlInit, a fault names one exact entry point."""
    sim.render()
    _fault(sim, "nvmlDeviceGetPciInfo_v3", "GPU_IS_LOST")
    api.init()
    assert api.nvmlDeviceGetPciInfo_v3(api.handle(0), ref(PciInfo())) == GPU_IS_LOST
    assert api.nvmlDeviceGetPciInfo(api.handle(0), ref(PciInfo())) == SUCCESS


def test_fault_on_mig_mutation(sim: Any, api: Api) -> None:
    """A failed create changes nothing; the next one succeeds."""
    sim.render()
    _fault(sim, "nvmlDeviceCreateGpuInstanceWithPlacement", "INSUFFICIENT_RESOURCES", "--once")
    api.init()
    handle = api.handle(0)
    api.enable_mig(handle)
    assert api.create_gi(handle, 0, 0)[0] == INSUFFICIENT_RESOURCES
    assert sim.show()["gpus"][0]["gis"] == []
    assert api.create_gi(handle, 0, 0)[0] == SUCCESS


def test_fault_on_shutdown_keeps_session(sim: Any, api: Api) -> None:
    """A failing nvmlShutdown does not drop the reference."""
    sim.render()
    _fault(sim, "nvmlShutdown", "UNKNOWN", "--once")
    api.init()
    assert api.nvmlShutdown() == UNKNOWN
    assert api.nvmlDeviceGetCount_v2(ref(U())) == SUCCESS
    assert api.nvmlShutdown() == SUCCESS


# ============================================================================
# the mixed fixture as facts code would read it
# ============================================================================


def test_mixed_fixture_overview(sim: Any, api: Api) -> None:
    """Modes, GI ids and MIG device counts of dgx-a100-mig-mixed."""
    sim.render("dgx-a100-mig-mixed")
    api.init()
    modes = [api.mig_mode(api.handle(i))[1:] for i in range(8)]
    assert modes == [(1, 1), (1, 1), (1, 1), (1, 1), (0, 1), (0, 0), (0, 0), (0, 0)]
    devices = []
    for i in range(8):
        n = 0
        while api.nvmlDeviceGetMigDeviceHandleByIndex(api.handle(i), n, ref(P())) == SUCCESS:
            n += 1
        devices.append(n)
    assert devices == [4, 7, 3, 0, 0, 0, 0, 0]
    shown = sim.show()
    assert [g["id"] for g in shown["gpus"][0]["gis"]] == [2, 4, 7, 8]
    assert json.dumps(shown)  # serialisable


def test_every_entry_point_checks_faults(sim: Any, api: Api) -> None:
    """Each exported function (but nvmlErrorString) consults the fault records first."""
    sim.render()
    names = [n for n in EXPECTED_SYMBOLS if n != "nvmlErrorString" and not n.startswith("nvmlInit") and n != "nvmlShutdown"]
    with sim.edit() as state:
        for name in names:
            state.records.append(sim.ctl.Record("fault", {"call": name, "error": "999"}))
    api.init()
    for name in names:
        args = [None if t in (P, ctypes.c_char_p) else 0 for t in Api.SIGS[name]]
        assert getattr(api, name)(*args) == UNKNOWN, name
    assert len(sim.show()["faults"]) == len(names)  # 'always' records stay


# ============================================================================
# cross-check against NVIDIA's real library (no GPU or driver needed)
# ============================================================================

# exported here but newer than the R535 library the harness unpacks
# (the versioned fabric call: assumed newer, not checked against R535's symbol table)
NEWER_THAN_R535 = {"nvmlDeviceGetGpuInstanceProfileInfoByIdV", "nvmlDeviceGetGpuFabricInfoV"}


@pytest.fixture(scope="module")
def real_nvml() -> ctypes.CDLL:
    """Debian's libnvidia-ml.so.1, path from $GPUFLEET_REAL_LIBNVML (make units)."""
    path = os.environ.get("GPUFLEET_REAL_LIBNVML", "")
    if not path or not os.path.exists(path):
        pytest.skip("GPUFLEET_REAL_LIBNVML not set (tests/harness/real-nvml.sh provides it)")
    lib = ctypes.CDLL(path)
    lib.nvmlErrorString.restype = ctypes.c_char_p
    lib.nvmlErrorString.argtypes = [ctypes.c_int]
    return lib


def test_real_library_exports_our_symbols(real_nvml: ctypes.CDLL) -> None:
    """Every entry point we export exists under the same name in the real library."""
    missing = [n for n in EXPECTED_SYMBOLS if n not in NEWER_THAN_R535 and not hasattr(real_nvml, n)]
    assert not missing


def test_real_library_error_strings(real_nvml: ctypes.CDLL, nvml: ctypes.CDLL) -> None:
    """nvmlErrorString agrees for every code the real library knows."""
    for code in list(range(28)) + [999, 4242]:
        assert nvml.nvmlErrorString(code) == real_nvml.nvmlErrorString(code), code


def test_real_library_pre_init_behaviour(real_nvml: ctypes.CDLL, sim: Any, api: Api) -> None:
    """Before nvmlInit both libraries answer the same codes (the real one has no driver here)."""
    sim.render()
    buf = ctypes.create_string_buffer(80)
    cuda = ctypes.c_int()
    for lib in (real_nvml, api):
        assert lib.nvmlShutdown() == SUCCESS
        assert lib.nvmlSystemGetNVMLVersion(buf, 80) == SUCCESS
        assert lib.nvmlSystemGetNVMLVersion(buf, 3) == INSUFFICIENT_SIZE
        assert lib.nvmlSystemGetCudaDriverVersion(ref(cuda)) == UNINITIALIZED
        assert lib.nvmlSystemGetCudaDriverVersion_v2(ref(cuda)) == UNINITIALIZED
        assert lib.nvmlSystemGetDriverVersion(buf, 80) == UNINITIALIZED
        assert lib.nvmlDeviceGetCount_v2(ref(U())) == UNINITIALIZED


def test_cpu_affinity_is_every_online_cpu(sim: Any, api: Api) -> None:
    """The fixtures carry no NUMA topology: each GPU is local to every online CPU (what Slurm's Cores= comes from)."""
    sim.render()
    api.init()
    handle = api.handle(0)
    words = (ctypes.c_ulong * 4)()
    assert api.nvmlDeviceGetCpuAffinity(handle, 4, words) == 0
    bits = sum(word.bit_count() for word in words)
    assert bits == os.sysconf("SC_NPROCESSORS_ONLN")
    assert api.nvmlDeviceGetCpuAffinity(handle, 0, words) == 2  # NVML_ERROR_INVALID_ARGUMENT
    assert api.nvmlDeviceGetSupportedMemoryClocks(handle, None, None) == 3  # NVML_ERROR_NOT_SUPPORTED
