# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The fleet report, built from real per-host data and rendered by a real browser.

The hosts' facts come from nvml_info on simulated nodes (the mixed-MIG DGX
A100 and an HGX H100), judged by the verify checks, so the report sees the
data shapes the verify role produces. Debian's chromium renders the page
headless; the screenshot (kept under tests/output/fleet-report/, not in
git) must show every GPU instance's box, with areas in proportion to the
memory slices each occupies.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import typing as t
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.plugins.filter.fleet_report import fleet_report
from ansible_collections.gpufleet.nvidia.plugins.filter.verify import verify_check, verify_report
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _report, _verify
from ansible_collections.gpufleet.nvidia.tests.unit.plugins import pngread
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_runner import run_module
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.nvml_sim import ROOT

OUTPUT = ROOT / "tests" / "output" / "fleet-report"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def host_report(
    sim_node: t.Callable[..., t.Any], host: str, fixture: str, driver_version: str, mig_label: str = "", nvml: dict[str, t.Any] | None = None
) -> dict[str, t.Any]:
    if nvml is None:
        facts = sim_node(fixture).run("nvml_info", gather_mig_profiles=True)
        assert facts["kind"] == "exit", facts
        nvml = facts["result"]["nvml"]
    driver = {"managed": True, "reason": "declared by host variables (driver_version)", "vars": {"driver_version": driver_version}}
    mig = {"managed": bool(mig_label), "reason": "mig_label is empty: MIG is not managed", "vars": {"mig_label": mig_label}}
    matrix = run_module(
        "version_matrix", {"target": "installed", "installed": {"nvml": nvml}, "cuda_versions": ["12.4"], "fail_on": "never", "today": "2026-11-22"}
    )
    checks = [
        verify_check({"nvml": nvml}, "driver", driver),
        verify_check(
            {"nvml": nvml, "spec": None, "path": "/etc/cdi/nvidia.yaml"},
            "cdi",
            {"managed": False, "reason": "no cdi_* variables and no gpufleet.nvidia.cdi role"},
        ),
        verify_check({"available": False}, "mig", mig),
        verify_check(matrix["result"], "matrix"),
    ]
    versions = {"driver": nvml["driver_version"], "cuda": nvml["cuda_driver_version"]}
    return json.loads(json.dumps(verify_report(checks, host, nvml, versions)))


@pytest.fixture
def reports(sim_node: t.Callable[..., t.Any]) -> list[dict[str, t.Any]]:
    return [
        host_report(sim_node, "dgx-a100-01", "dgx-a100-mig-mixed", "550.127.05", mig_label="mixed"),
        host_report(sim_node, "hgx-h100-07", "hgx-h100-8x80gb", "580.95.05"),
        {"host": "gpu-node-13", "status": "missing", "reason": "no verify report: the host failed before verify ran"},
    ]


def test_reports_carry_the_mig_placements(reports: list[dict[str, t.Any]]):
    gpu0 = reports[0]["gpus"][0]
    assert gpu0["mig"]["units"] == 8  # from the GPU's own placements (gather_mig_profiles)
    assert sorted((gi["start"], gi["size"], gi["profile"]) for gi in gpu0["mig"]["gpu_instances"]) == [
        (0, 1, "1g.5gb"),
        (1, 1, "1g.5gb"),
        (2, 2, "2g.10gb"),
        (4, 4, "3g.20gb"),
    ]
    assert reports[0]["status"] == "warn"  # MIG not asserted yet: never a pass
    assert reports[1]["status"] == "fail"


def test_html_is_self_contained_and_highlights_findings(reports: list[dict[str, t.Any]]):
    page = fleet_report(reports)
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page and not re.search(r"(src|href)=\"(https?:)?//", page)
    assert 'class="st fail"' in page and 'class="st warn"' in page and 'class="st missing"' in page
    assert "differs from the pinned driver_version 580.95.05" in page
    assert page.count('class="gi"') == 4 + 7 + 1  # GPU 0, 1 and 2 of the A100 host
    assert "8 x NVIDIA H100 80GB HBM3" in page
    # Identical consecutive pictures are drawn once.
    assert "GPUs 5-7 &middot; NVIDIA A100-SXM4-40GB &middot; MIG off" in page
    assert "GPUs 0-7 &middot; NVIDIA H100 80GB HBM3 &middot; MIG off" in page


def test_markdown_twin(reports: list[dict[str, t.Any]]):
    text = fleet_report(reports, "markdown")
    assert "| hgx-h100-07 | **FAIL** |" in text
    assert "GPU 0  [1g.5gb][1g.5gb][   2g.10gb    ][           3g.20gb            ]" in text
    assert "GPU 4  [                          whole GPU                           ]  MIG turns on after" in text


def test_bad_input_is_named():
    from ansible.errors import AnsibleFilterError

    with pytest.raises(AnsibleFilterError, match="^fleet_report: "):
        fleet_report([{"no": "host"}])
    with pytest.raises(AnsibleFilterError, match="^fleet_report: format"):
        fleet_report([], "pdf")


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("Debian's chromium is not installed: run `make host` (tests/harness/bootstrap-host.sh installs it)")


def publish(work: Path) -> None:
    """Copy the report's files to OUTPUT, each replaced whole.

    Both unit-test lanes (make units units-oldest) render the report at the
    same time: each renders into its own directory and only the finished
    files meet here, so neither reads a screenshot the other is writing.
    """
    OUTPUT.mkdir(parents=True, exist_ok=True)
    for path in work.iterdir():
        if path.is_file():
            partial = OUTPUT / ".{0}.{1}".format(path.name, os.getpid())
            shutil.copyfile(path, partial)
            os.replace(partial, OUTPUT / path.name)


def screenshot(page: Path, shot: Path, profile: Path, window: str) -> subprocess.CompletedProcess:
    """Headless Chromium's screenshot of `page` at `window` ("width,height") into `shot`; its output in stdout."""
    return subprocess.run(
        [chromium(), *CHROMIUM_FLAGS, "--user-data-dir={0}".format(profile), "--window-size=" + window, "--screenshot={0}".format(shot), page.as_uri()],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=120,
        check=False,
    )


def test_report_renders_in_headless_chromium_and_shows_the_mig_picture(reports: list[dict[str, t.Any]], tmp_path: Path):
    work = tmp_path / "fleet-report"
    work.mkdir()
    for report in reports:
        (work / "{0}.json".format(report["host"])).write_text(json.dumps(report, indent=2, sort_keys=True))
    page = work / "fleet-report.html"
    page.write_text(fleet_report(reports))
    (work / "fleet-report.md").write_text(fleet_report(reports, "markdown"))
    shot = work / "fleet-report.png"
    proc = screenshot(page, shot, tmp_path / "profile", "1280,1700")
    assert proc.returncode == 0 and shot.is_file(), proc.stdout.decode(errors="replace")
    publish(work)

    image = pngread.read(shot)
    # Memory slices per GPU-instance size on the A100 host: GPU 0 has 1g x2,
    # 2g, 3g; GPU 1 has 1g x7; GPU 2 has one 3g (4 slices).
    slices = {1: 2 + 7, 2: 2, 3: 4 + 4}
    area = {size: image.count(_hex(_report.SLICE_COLOURS[size])) for size in slices}
    per_slice = {size: area[size] / slices[size] for size in slices}
    mean = sum(per_slice.values()) / len(per_slice)
    assert mean > 1500, area  # a slice is drawn 80 x 40 px
    for size, value in per_slice.items():
        # Drawn to scale: every size covers the same area per memory slice.
        assert abs(value - mean) / mean < 0.2, (size, per_slice)
    # No 4g/7g instance exists: only their legend swatches carry the colour.
    assert image.count(_hex(_report.SLICE_COLOURS[7])) < 400


def _hex(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


# The CUDA image matrix: real NVML facts of simulated nodes, judged by the
# cuda_image_judgement filter as the verify role does (checks/matrix.yml).
CUDA_IMAGES = [
    {"name": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04@sha256:" + "a1" * 32, "cuda": "12.4"},
    {"name": "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04@sha256:" + "b2" * 32, "cuda": "12.8"},
    {"name": "nvcr.io/nvidia/cuda:13.0.2-base-ubuntu24.04@sha256:" + "c3" * 32, "cuda": "13.0"},
]


def cuda_report(sim_node: t.Callable[..., t.Any], host: str, fixture: str, packages: dict[str, t.Any] | None = None) -> dict[str, t.Any]:
    from ansible_collections.gpufleet.nvidia.plugins.filter.matrix import cuda_image_judgement

    facts = sim_node(fixture).run("nvml_info")
    assert facts["kind"] == "exit", facts
    nvml = facts["result"]["nvml"]
    report = verify_report([], host, nvml, {"driver": nvml["driver_version"], "cuda": nvml["cuda_driver_version"]})
    report["cuda_images"] = cuda_image_judgement(CUDA_IMAGES, nvml["driver_version"], nvml, packages=packages)
    return json.loads(json.dumps(report))


@pytest.fixture
def cuda_reports(sim_node: t.Callable[..., t.Any]) -> list[dict[str, t.Any]]:
    return [
        cuda_report(sim_node, "a100-01", "dgx-a100-mig-mixed"),  # 550.127.05, A100
        cuda_report(sim_node, "h100-01", "hgx-h100-8x80gb"),  # 550.127.05, H100
        cuda_report(sim_node, "h100-03", "hgx-h100-8x80gb"),  # the same
        cuda_report(sim_node, "h100-02", "hgx-h100-8x80gb", {"cuda-compat-12-8": [{"version": "570.195.03-1"}]}),  # ... with cuda-compat-12-8
        cuda_report(sim_node, "v100-01", "v100-8x"),  # 535.230.02, V100
        {"host": "gpu-node-13", "status": "missing", "reason": "no verify report"},
    ]


def test_cuda_images_are_judged_from_the_nodes_facts(cuda_reports: list[dict[str, t.Any]]):
    verdicts = {r["host"]: [(i["cuda"], i["verdict"], i["run"]) for i in r["cuda_images"]] for r in cuda_reports if "cuda_images" in r}
    assert verdicts["a100-01"] == [("12.4", "native", True), ("12.8", "compat", False), ("13.0", "compat", False)]
    assert verdicts["h100-02"] == [("12.4", "native", True), ("12.8", "compat", True), ("13.0", "compat", False)]
    # V100 on R535: 12.4 needs 550.54.14; R535 is an LTSB of another branch, so compat runs 12.x;
    # CUDA 13 no longer targets Volta at all.
    assert verdicts["v100-01"] == [("12.4", "compat", False), ("12.8", "compat", False), ("13.0", "unsupported", False)]


def test_html_and_markdown_show_the_cuda_image_matrix(cuda_reports: list[dict[str, t.Any]]):
    page = fleet_report(cuda_reports)
    section = page[page.index("<h2>CUDA images</h2>") : page.index("<h2>Findings</h2>")]
    assert section.count("<th title=") == 3 and "cuda:12.8.1-base-ubuntu24.04@b2b2b2b2b2b2<br>CUDA 12.8" in section
    # The two hosts with the same driver, GPUs and verdicts share a row; the host with the package has its own.
    assert section.count("<tr><td") == 4
    assert ">a100-01</td>" in section and ">h100-01, h100-03</td>" in section and ">h100-02</td>" in section
    assert '<td class="st pass" title="driver 550.127.05 meets CUDA 12.4' in section
    assert ">needs compat</td>" in section and ">runs (compat)</td>" in section
    assert (
        '<td class="st fail" title="CUDA 13.0 does not target Volta GPUs (Tesla V100-SXM2-16GB): the last CUDA for Volta is 12.x">unsupported</td>'
    ) in section
    text = fleet_report(cuda_reports, "markdown")
    assert "## CUDA images" in text
    assert "| v100-01 | 535.230.02 | 8 x Tesla V100-SXM2-16GB | needs compat | needs compat | unsupported |" in text
    assert "- `cuda:13.0.2-base-ubuntu24.04@c3c3c3c3c3c3` (CUDA 13.0): `{0}`".format(CUDA_IMAGES[2]["name"]) in text
    lines = fleet_report(cuda_reports, "text")
    assert "CUDA image cuda:12.8.1-base-ubuntu24.04@b2b2b2b2b2b2 (CUDA 12.8): 4 needs compat, 1 runs (compat)" in lines


def test_cuda_cells_take_the_workload_layers_run_outcome(cuda_reports: list[dict[str, t.Any]]):
    report = cuda_reports[0]
    report["checks"] = [
        {
            "layer": "workload",
            "status": "fail",
            "summary": "",
            "observed": {"images": {CUDA_IMAGES[0]["name"]: {"status": "pass"}, CUDA_IMAGES[1]["name"]: {"status": "fail"}}},
        }
    ]
    assert _report.cuda_cell(report, CUDA_IMAGES[0]["name"], "12.4")[:2] == ("runs; ran: pass", "pass")
    assert _report.cuda_cell(report, CUDA_IMAGES[1]["name"], "12.8")[:2] == ("needs compat; ran: fail", "fail")
    assert _report.cuda_cell(report, CUDA_IMAGES[2]["name"], "13.0")[:2] == ("needs compat", "warn")
    # Absent today: a report without cuda_images gets no row and no cell.
    assert _report.cuda_cell(cuda_reports[-1], CUDA_IMAGES[0]["name"], "12.4")[0] == "-"
    assert "CUDA images" not in fleet_report([cuda_reports[-1]])


def test_html_and_markdown_show_what_the_schedulers_see(sim_node: t.Callable[..., t.Any]):
    """The node_labels and slurm_gres roles' own plans over the simulator's facts, in a report as verify writes it."""
    from ansible_collections.gpufleet.nvidia.plugins.filter.node_labels import node_labels_plan
    from ansible_collections.gpufleet.nvidia.plugins.filter.slurm_gres import slurm_gres_plan

    report = host_report(sim_node, "dgx-a100-02", "dgx-a100-8x40gb", "550.127.05")
    nvml = sim_node("dgx-a100-8x40gb").run("nvml_info", gather_mig_profiles=True)["result"]["nvml"]
    labels = node_labels_plan({"nvml": nvml, "settings": {}, "reads": {}, "expiry_time": "", "header": "test"})["summary"]
    report["schedulers"] = {"labels": labels, "slurm_gres": slurm_gres_plan(nvml)["node_gres"]}
    bare = host_report(sim_node, "hgx-h100-07", "hgx-h100-8x80gb", "580.95.05")
    bare["schedulers"] = {"labels": None, "slurm_gres": None}
    page, text = fleet_report([report, bare]), fleet_report([report, bare], "markdown")
    assert "<h2>What the schedulers see</h2>" in page and "Gres=gpu:nvidia_a100-sxm4-40gb:8" in page
    row = "| dgx-a100-02 | NVIDIA-A100-SXM4-40GB | 40960 MiB | 8 | none | Gres=gpu:nvidia_a100-sxm4-40gb:8 |"
    assert row in text
    # A host that declares neither layer has no row.
    assert "| hgx-h100-07 | NVIDIA" not in text and text.count("| hgx-h100-07 |") == 1
    # Reports without the key (written before these layers existed) render as before.
    assert "What the schedulers see" not in fleet_report([bare | {"schedulers": {}}])


# -- the page's layout in a real browser ------------------------------------------------------

# The window the version table must fit: a laptop screen or a half of a desktop one.
WINDOW_WIDTH = 1400
# Appended to a copy of the page (the report itself carries no script): after layout it writes what the
# browser measured into the DOM, which --dump-dom prints.
LAYOUT_PROBE = """<script>
window.addEventListener("load", () => {
  const root = document.documentElement;
  const tables = [...document.querySelectorAll("table")].map((table) => ({
    heading: table.previousElementSibling ? table.previousElementSibling.textContent.slice(0, 40) : "",
    right: Math.ceil(table.getBoundingClientRect().right),
  }));
  document.body.setAttribute("data-layout", JSON.stringify({inner: window.innerWidth, scroll: root.scrollWidth, tables}));
});
</script>"""


def realistic_fleet(sim_node: t.Callable[..., t.Any]) -> list[dict[str, t.Any]]:
    """Eight hosts as a site.yml run leaves them: long FQDNs, every layer judged, sick GPUs, matrix findings,
    an engine whose version was not read and a host whose NVML did not answer."""
    from ansible_collections.gpufleet.nvidia.plugins.filter.verify import verify_engine_version

    services = {"rc": 0, "stdout": "Id=nvidia-persistenced.service\nLoadState=loaded\nActiveState=active\nUnitFileState=enabled\n", "stderr": ""}
    health_settings = {"enabled": True, "policy": {}, "gpu_count": None, "kernel_log": "/dev/kmsg", "persistenced": True, "fabricmanager": False}
    unread_engine = verify_engine_version({"command": ["containerd", "--version"], "version": {"rc": 127, "stdout": "", "stderr": ""}}, "containerd", {})
    fleet = []
    hosts = (
        ("gpu-trn-h100-r12-n07.dc-west.example.internal", "hgx-h100-8x80gb", "580.95.05", "", ("remap-failure", "--gpu", "1")),
        ("gpu-trn-h200-r14-n01.dc-west.example.internal", "hgx-h200-8x141gb", "580.178.04", "", ("link-degrade", "--gpu", "2")),
        ("gpu-inf-a100-r03-n11.dc-east.example.internal", "dgx-a100-mig-mixed", "550.127.05", "mixed", None),
        ("gpu-inf-a100-r03-n12.dc-east.example.internal", "dgx-a100-8x40gb", "550.127.05", "", None),
        ("gpu-dev-l40s-r01-n02.dc-east.example.internal", "l40s-4x", "570.133.20", "", None),
        ("gpu-legacy-v100-r09-n04.dc-east.example.internal", "v100-8x", "535.230.02", "", ("gpu-lost", "--gpu", "4")),
    )
    for index, (host, fixture, pinned, mig_label, fault) in enumerate(hosts):
        node = sim_node(fixture)
        if fault:
            node.simctl("inject", *fault)
        facts = node.run("nvml_info", gather_mig_profiles=True, gather_health=True)
        assert facts["kind"] == "exit", facts
        nvml = facts["result"]["nvml"]
        report = host_report(sim_node, host, fixture, pinned, mig_label=mig_label, nvml=nvml)
        # Every other node's kernel log unreadable (an unprivileged container's /dev/kmsg).
        report["checks"].append(verify_check({"nvml": nvml, "kernel_log": None if index % 2 else "", "services": services}, "health", health_settings))
        # The other layers as a converged node has them (their own checks have tests of their own).
        report["checks"] += [
            _verify.check("container_toolkit", "pass", "Container Toolkit 1.20.1-1 (full set)"),
            _verify.check("container_runtime", "pass", "containerd: `nvidia` runtime present, CDI on"),
            verify_check({"version": "crictl version v1.33.0"}, "crictl", {"managed": True, "vars": {"crictl_version": "v1.33.0"}}),
            _verify.not_managed("workload", {"reason": "verify_workload is false"}),
        ]
        versions = dict(
            report["versions"],
            container_toolkit="1.20.1-1" if index != 5 else "1.17.8-1",
            engine=None if index == 4 else ("docker 28.3.0" if index == 3 else "containerd 2.3.7"),
            crictl="v1.33.0",
            kubernetes="1.33",
        )
        not_checked = {"engine": "containerd: " + unread_engine["not_checked"]} if index == 4 else None
        fleet.append(json.loads(json.dumps(verify_report(report["checks"], host, nvml, versions, not_checked))))
    host = "gpu-trn-h100-r12-n08.dc-west.example.internal"
    driver = {"managed": True, "reason": "declared by host variables (driver_version)", "vars": {"driver_version": "580.178.04"}}
    down = verify_report(
        [verify_check({"nvml": {"status": "driver_not_loaded"}}, "driver", driver)], host, {"status": "driver_not_loaded"}, {"driver": None, "cuda": None}
    )
    fleet.append(json.loads(json.dumps(down)))
    fleet.append({"host": "gpu-trn-h100-r12-n09.dc-west.example.internal", "status": "missing", "reason": "no verify report: the host was unreachable"})
    return fleet


def browser_layout(page: Path, tmp_path: Path) -> dict[str, t.Any]:
    """How Debian's chromium lays the page out in a window WINDOW_WIDTH pixels wide."""
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("</body>", LAYOUT_PROBE + "</body>"))
    proc = subprocess.run(
        [
            chromium(),
            *CHROMIUM_FLAGS,
            "--user-data-dir={0}".format(tmp_path / "layout"),
            "--window-size={0},900".format(WINDOW_WIDTH),
            "--dump-dom",
            probe.as_uri(),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        timeout=120,
        check=False,
    )
    found = re.search(r'data-layout="([^"]*)"', proc.stdout.decode(errors="replace"))
    assert proc.returncode == 0 and found, proc.stderr.decode(errors="replace")[-2000:]
    return json.loads(html.unescape(found.group(1)))


def test_the_version_table_of_a_realistic_fleet_fits_a_1400_pixel_window(sim_node: t.Callable[..., t.Any], tmp_path: Path):
    fleet = realistic_fleet(sim_node)
    page_text = fleet_report(fleet)
    # What makes the table wide is really there: long host names, the health column's reasons, findings,
    # a version not read and a host without NVML.
    assert "gpu-legacy-v100-r09-n04.dc-east.example.internal" in page_text and "FAIL: gpu_lost" in page_text
    assert page_text.count('<td class="nc">not checked') >= 4 and "Xid events not checked" in page_text
    assert "<h2>Findings</h2>" in page_text and page_text.count('class="sev sev-error"') >= 3
    OUTPUT.mkdir(parents=True, exist_ok=True)
    page = OUTPUT / "fleet-report-realistic.html"
    page.write_text(page_text)
    layout = browser_layout(page, tmp_path)
    assert layout["inner"] == WINDOW_WIDTH, layout
    versions = layout["tables"][0]
    assert versions["heading"] == "Hosts and versions", layout
    assert versions["right"] <= WINDOW_WIDTH, layout
    assert layout["scroll"] <= WINDOW_WIDTH, layout  # nothing on the page scrolls sideways
    # For a person: the page as that window shows it.
    shot = OUTPUT / "fleet-report-realistic.png"
    proc = screenshot(page, shot, tmp_path / "shot", "{0},1400".format(WINDOW_WIDTH))
    assert proc.returncode == 0 and shot.is_file(), proc.stdout.decode(errors="replace")


def test_the_layout_check_catches_a_table_that_overflows(sim_node: t.Callable[..., t.Any], tmp_path: Path):
    """The check above can fail: the same fleet with every cell kept on one line overflows the window."""
    page = tmp_path / "nowrap.html"
    page.write_text(
        fleet_report(realistic_fleet(sim_node)).replace(
            "</style>", "td, th, td.st, td.nc, td.models { white-space: nowrap !important; max-width: none !important; }</style>"
        )
    )
    layout = browser_layout(page, tmp_path)
    assert layout["tables"][0]["right"] > WINDOW_WIDTH and layout["scroll"] > WINDOW_WIDTH, layout


def test_the_gpus_column_says_how_far_the_nvlink_fabric_registered(sim_node: t.Callable[..., t.Any]):
    """A GB300 tray read with its health: one GPU still in progress, one whose probe failed, and every GPU
    completed again afterwards; a node without a fabric (L40S) and one read without health say nothing of it."""
    node = sim_node("gb300-nvl72-tray")
    node.simctl("health", "--gpu", "1", "fabric_state=in_progress")
    node.simctl("health", "--gpu", "3", "fabric_status=NVML_ERROR_UNKNOWN")
    sick = node.run("nvml_info", gather_health=True)["result"]["nvml"]
    report = json.loads(json.dumps(_verify.build_report("gb300-tray-01", [], sick, {"driver": sick["driver_version"]})))
    assert [gpu["fabric"]["state"] for gpu in report["gpus"]] == ["completed", "in_progress", "completed", "completed"]
    assert _report.fabric_summary(report) == "NVLink fabric: GPU 1 in progress; GPU 3 failed (NVML_ERROR_UNKNOWN)"
    assert "NVLink fabric: GPU 1 in progress" in fleet_report([report]) and "NVLink fabric: GPU 1 in progress" in fleet_report([report], "markdown")
    assert _report.gpus_cell(report) == "4 x NVIDIA GB300; NVLink fabric: GPU 1 in progress; GPU 3 failed (NVML_ERROR_UNKNOWN)"

    node.simctl("health", "--gpu", "1", "fabric_state=completed")
    node.simctl("health", "--gpu", "3", "fabric_status=NVML_SUCCESS")
    well = node.run("nvml_info", gather_health=True)["result"]["nvml"]
    assert _report.fabric_summary(_verify.build_report("gb300-tray-01", [], well)) == "NVLink fabric completed"

    for fixture, health in (("l40s-4x", True), ("gb300-nvl72-tray", False)):
        nvml = sim_node(fixture).run("nvml_info", gather_health=health)["result"]["nvml"]
        plain = _verify.build_report("other", [], nvml)
        assert {gpu["fabric"] for gpu in plain["gpus"]} == {None} and _report.fabric_summary(plain) == ""
        assert _report.gpus_cell(plain) == _report.gpu_models(plain)


def test_the_imex_column_appears_only_where_a_host_runs_the_layer(reports: list[dict[str, t.Any]]):
    plain = next(line for line in fleet_report(reports, "markdown").splitlines() if line.startswith("| Host |"))
    assert plain.endswith("| matrix |"), plain
    imex = verify_check(
        {
            "unit": "LoadState=loaded\nActiveState=inactive\nSubState=dead\nUnitFileState=enabled\n",
            "config": None,
            "nodes": None,
            "declared_nodes": ["10.0.0.1"],
        },
        "imex",
        {"managed": True, "reason": "imex_enabled is on", "vars": {"imex_cmd_socket": "/etc/nvidia-imex/imex_ctrl.sock"}},
    )
    with_imex = [dict(reports[1], checks=reports[1]["checks"] + [imex])] + reports[:1]
    text = fleet_report(with_imex, "markdown")
    header = next(line for line in text.splitlines() if line.startswith("| Host |"))
    assert header.endswith("| matrix | IMEX |")
    row = next(line for line in text.splitlines() if line.startswith("| hgx-h100-07 |"))
    assert row.endswith("| FAIL |"), row
    assert "nvidia-imex.service is inactive (dead)" in text
    assert "<th>IMEX</th>" in fleet_report(with_imex, "html")
