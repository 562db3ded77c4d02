# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The fleet report: one self-contained HTML page (and its Markdown twin)
from the verify role's per-host reports.

A hosts x versions table with each layer's status, the CUDA image matrix
(hosts with the same verdicts share a row; one column per image), the
findings with their fixes, and a picture of every GPU's MIG layout: the memory-slice grid drawn
to scale, one box per GPU instance at its placement (start, size), its
compute instances as a strip under it. No scripts, no external resources:
the page opens from a mail attachment or an AWX artifact as it is.
"""

from __future__ import annotations

import html
import re
import typing as t

LAYER_COLUMNS = (
    ("driver", "driver"),
    ("health", "health"),
    ("container_toolkit", "toolkit"),
    ("container_runtime", "runtime"),
    ("cdi", "CDI"),
    ("crictl", "crictl"),
    ("mig", "MIG"),
    ("workload", "workload"),
    ("matrix", "matrix"),
)
# Layers a fleet turns on where it needs them: a column only where a host's report has the check, so that a
# fleet without host-managed IMEX gets no column of dashes.
OPTIONAL_LAYER_COLUMNS = (("imex", "IMEX"),)
VERSION_COLUMNS = (
    ("driver", "Driver"),
    ("cuda", "CUDA"),
    ("container_toolkit", "Toolkit"),
    ("engine", "Engine"),
    ("crictl", "crictl (Kubernetes)"),
)
STATUS_TEXT = {
    "pass": "pass",
    "warn": "warn",
    "fail": "FAIL",
    "not_managed": "not managed",
    "not_available": "not available",
    "deferred": "deferred",
    "missing": "no report",
}
# GPU-instance fill by compute slices (the N of "Ng"); distinct enough to be
# told apart on screen and counted in a screenshot.
SLICE_COLOURS = {
    1: "#4e79a7",
    2: "#f28e2b",
    3: "#59a14f",
    4: "#b07aa1",
    6: "#9c755f",
    7: "#e15759",
    8: "#e15759",
}
UNKNOWN_COLOUR = "#bab0ac"
BAR_WIDTH = 560
BAR_HEIGHT = 40
CI_HEIGHT = 8

CSS = """
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 20px; color: #1f2328; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid #d0d7de; }
h3 { font-size: 15px; margin: 16px 0 6px; }
.totals span { margin-right: 12px; }
table { border-collapse: collapse; font-size: 12px; }
th, td { border: 1px solid #d0d7de; padding: 3px 4px; text-align: left; white-space: nowrap; }
th { white-space: normal; vertical-align: bottom; }
td.models { white-space: normal; min-width: 120px; max-width: 200px; }
td.host { white-space: normal; min-width: 110px; max-width: 230px; }
td.ver { white-space: normal; } td.ver span { white-space: nowrap; }
td.st { white-space: normal; }
td.reason { min-width: 140px; overflow-wrap: anywhere; }
td.nc { white-space: normal; min-width: 80px; max-width: 220px; color: #7d4e00; font-style: italic; }
td.nc .why { display: block; font-size: 11px; font-style: normal; color: #57606a; overflow-wrap: anywhere; }
th { background: #f6f8fa; }
.st { font-weight: 600; text-align: center; }
.pass { background: #dafbe1; color: #116329; } .warn { background: #fff8c5; color: #7d4e00; }
.fail { background: #ffebe9; color: #a40e26; } .not_managed { background: #f6f8fa; color: #6e7781; }
.not_available { background: #fbefff; color: #6639ba; } .deferred { background: #ddf4ff; color: #0550ae; }
.missing { background: #ffebe9; color: #a40e26; }
ul.findings { margin: 4px 0 8px; padding-left: 20px; } ul.findings li { margin: 2px 0; }
.sev { display: inline-block; min-width: 56px; font-weight: 600; }
.sev-error { color: #a40e26; } .sev-warning { color: #7d4e00; } .sev-info { color: #0550ae; }
.fix { color: #57606a; }
.gpus { display: flex; flex-wrap: wrap; gap: 4px 28px; }
.gpu { margin: 4px 0 6px; } .gpu-label { font-size: 13px; margin-bottom: 2px; }
.legend span { display: inline-block; margin-right: 14px; font-size: 12px; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -1px; }
"""


# CUDA image cells: (text, status class) by verdict. A host's report carries
# `cuda_images` (the cuda_image_judgement filter); a run outcome, once the
# workload layer ran an image, comes from the `workload` check's
# observed.images (or the report's workload.images), keyed by image name:
# {status: pass|fail}.
CUDA_CELLS = {
    "native": ("runs", "pass"),
    "compat": ("needs compat", "warn"),
    "unsupported": ("unsupported", "fail"),
    "unknown": ("unknown", "not_managed"),
}


def _e(value: t.Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def compute_slices(profile: str) -> int | None:
    match = re.match(r"^(\d+)g\.", str(profile))
    return int(match.group(1)) if match else None


def colour(profile: str) -> str:
    return SLICE_COLOURS.get(compute_slices(profile) or 0, UNKNOWN_COLOUR)


def _totals(reports: list[dict[str, t.Any]]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for report in reports:
        totals[report.get("status", "missing")] = totals.get(report.get("status", "missing"), 0) + 1
    return totals


def version_cell(versions: dict[str, t.Any], key: str) -> str:
    value = str(versions.get(key) or "")
    if key == "crictl" and versions.get("kubernetes"):
        value = "{0} ({1})".format(value or "-", versions["kubernetes"])
    return value


# What a cell says for a value verify could not read (the report's
# not_checked gives why): never a guess, never a blank that reads as "none".
NOT_CHECKED = "not checked"


def unread(report: dict[str, t.Any], key: str) -> str | None:
    """Why the report's `key` (a version, or `gpus`) was not read; None when it was, or was not asked for."""
    why = (report.get("not_checked") or {}).get(key)
    return str(why) if why else None


def _version_html(report: dict[str, t.Any], key: str) -> str:
    """A version cell that breaks only between words ("containerd" / "2.3.7"), never inside a version."""
    value = version_cell(report.get("versions") or {}, key)
    why = unread(report, key)
    if why and not (report.get("versions") or {}).get(key):
        return '<td class="nc">{0}<span class="why">{1}</span></td>'.format(NOT_CHECKED, _e(why))
    if not value:
        return "<td>&ndash;</td>"
    return '<td class="ver">{0}</td>'.format(" ".join("<span>{0}</span>".format(_e(word)) for word in value.split()))


def _host_html(host: t.Any) -> str:
    """A host name that may break after its dots (a long FQDN must not widen the table)."""
    return _e(host).replace(".", ".<wbr>")


def _version_text(report: dict[str, t.Any], key: str) -> str:
    why = unread(report, key)
    if why and not (report.get("versions") or {}).get(key):
        return "{0} ({1})".format(NOT_CHECKED, why)
    return version_cell(report.get("versions") or {}, key) or "-"


def _checks(report: dict[str, t.Any]) -> dict[str, dict[str, t.Any]]:
    return {c["layer"]: c for c in report.get("checks") or []}


# Layers whose cell also says why it is not a pass: the health column names
# the sick GPU and what to do, where the others point at the findings.
REASON_COLUMNS = frozenset({"health"})


def layer_columns(reports: list[dict[str, t.Any]]) -> tuple[tuple[str, str], ...]:
    """The fleet's layer columns: every always-on layer, and an optional one where a report has its check."""
    present = {item.get("layer") for report in reports for item in report.get("checks") or []}
    return LAYER_COLUMNS + tuple(column for column in OPTIONAL_LAYER_COLUMNS if column[0] in present)


def layer_cell(layer: str, item: dict[str, t.Any]) -> str:
    text = STATUS_TEXT.get(item["status"], item["status"])
    if layer in REASON_COLUMNS and item["status"] in ("warn", "fail") and item.get("summary"):
        text += ": " + str(item["summary"])
    return text


def gpu_models(report: dict[str, t.Any]) -> str:
    """'8 x NVIDIA A100-SXM4-40GB' (one entry per model, in index order); "not checked" when NVML was not read."""
    if not report.get("gpus") and unread(report, "gpus"):
        return NOT_CHECKED
    if report.get("status") == "missing":
        return "-"  # no report: nothing was read, not "no GPUs"
    counts: dict[str, int] = {}
    for gpu in report.get("gpus") or []:
        # A lost GPU has no name NVML could read: say so, not "None".
        name = str(gpu.get("name") or "GPU (name not read)")
        counts[name] = counts.get(name, 0) + 1
    return ", ".join("{0} x {1}".format(n, name) for name, n in counts.items()) or "none"


def fabric_summary(report: dict[str, t.Any]) -> str:
    """The GPUs' NVLink fabric registration in a few words: 'NVLink fabric completed', or the GPUs that have
    not completed it by state ('NVLink fabric: GPU 3 in progress'); '' where no GPU reported a fabric."""
    registered = [gpu for gpu in report.get("gpus") or [] if isinstance(gpu.get("fabric"), dict)]
    if not registered:
        return ""
    unfinished: dict[str, list[str]] = {}
    for gpu in registered:
        fabric = gpu["fabric"]
        if fabric.get("state") != "completed":
            state = str(fabric.get("state")).replace("_", " ")
        elif fabric.get("status") not in (None, "NVML_SUCCESS"):
            state = "failed ({0})".format(fabric.get("status"))
        else:
            continue
        unfinished.setdefault(state, []).append(str(gpu.get("index")))
    if not unfinished:
        return "NVLink fabric completed"
    return "NVLink fabric: " + "; ".join("GPU {0} {1}".format(", ".join(indices), state) for state, indices in unfinished.items())


def gpus_cell(report: dict[str, t.Any]) -> str:
    """The GPUs column: the models, and their fabric registration where they have one."""
    return "; ".join(part for part in (gpu_models(report), fabric_summary(report)) if part)


def cuda_images(reports: list[dict[str, t.Any]]) -> list[tuple[str, str]]:
    """(name, cuda) of every image any host judged, in first-seen order."""
    seen: list[tuple[str, str]] = []
    for report in reports:
        for image in report.get("cuda_images") or []:
            key = (str(image.get("name")), str(image.get("cuda")))
            if key not in seen:
                seen.append(key)
    return seen


def image_label(name: str) -> str:
    """'nvcr.io/nvidia/cuda:12.4.1-base@sha256:0123456789ab...' -> 'cuda:12.4.1-base@0123456789ab'."""
    ref, _sep, digest = name.partition("@")
    short = ref.rsplit("/", 1)[-1]
    return "{0}@{1}".format(short, digest.split(":", 1)[-1][:12]) if digest else short


def run_outcome(report: dict[str, t.Any], name: str) -> str | None:
    """pass | fail once the workload layer ran the image on the host; None before."""
    sources = [(report.get("workload") or {}).get("images")]
    sources += [(item.get("observed") or {}).get("images") for item in report.get("checks") or [] if item.get("layer") == "workload"]
    for images in sources:
        if isinstance(images, list):
            images = {str(item.get("name")): item for item in images if isinstance(item, dict)}
        if isinstance(images, dict) and isinstance(images.get(name), dict) and images[name].get("status"):
            return str(images[name]["status"])
    return None


def cuda_cell(report: dict[str, t.Any], name: str, cuda: str) -> tuple[str, str, str]:
    """(text, status class, reason) of one host x image cell."""
    judged = [i for i in report.get("cuda_images") or [] if str(i.get("name")) == name and str(i.get("cuda")) == cuda]
    if not judged:
        return "-", "", "not judged on this host"
    image = judged[0]
    text, css = CUDA_CELLS.get(str(image.get("verdict")), (str(image.get("verdict")), ""))
    if image.get("verdict") == "compat" and image.get("compat_installed"):
        text, css = "runs (compat)", "pass"
    elif image.get("verdict") == "unsupported" and image.get("needs_driver"):
        text = "needs driver >= {0}".format(image["needs_driver"])
    outcome = run_outcome(report, name)
    if outcome:
        text = "{0}; ran: {1}".format(text, outcome)
        css = "pass" if outcome == "pass" else "fail"
    return text, css, str(image.get("reason") or "")


def cuda_rows(reports: list[dict[str, t.Any]], images: list[tuple[str, str]]) -> list[tuple[list[str], dict[str, t.Any], list[tuple[str, str, str]]]]:
    """(hosts, first report, cells): hosts with the same driver, GPUs and cells share a row."""
    rows: dict[t.Any, tuple[list[str], dict[str, t.Any], list[tuple[str, str, str]]]] = {}
    for report in reports:
        if not report.get("cuda_images"):
            continue
        cells = [cuda_cell(report, name, cuda) for name, cuda in images]
        key = ((report.get("versions") or {}).get("driver"), gpu_models(report), tuple(c[:2] for c in cells))
        if key in rows:
            rows[key][0].append(str(report.get("host")))
        else:
            rows[key] = ([str(report.get("host"))], report, cells)
    return list(rows.values())


def _findings(report: dict[str, t.Any]) -> list[tuple[str, dict[str, t.Any]]]:
    """(where, finding) pairs; a matrix finding says which layer it concerns."""
    pairs = []
    for item in report.get("checks") or []:
        for found in item.get("findings") or []:
            where = item["layer"]
            if found.get("layer") and found["layer"] != where:
                where = "{0} ({1})".format(where, found["layer"])
            pairs.append((where, found))
    return pairs


def _layout_key(gpu: dict[str, t.Any]) -> str:
    """What the picture shows: identical keys draw identical pictures."""
    mig = dict(gpu.get("mig") or {})
    mig["gpu_instances"] = sorted(
        (
            (gi.get("profile"), gi.get("start"), gi.get("size"), tuple(sorted((ci.get("start"), ci.get("size")) for ci in gi.get("compute_instances") or [])))
            for gi in mig.get("gpu_instances") or []
        ),
        key=str,
    )
    return repr((gpu.get("name"), sorted(mig.items(), key=lambda kv: kv[0])))


def gpu_groups(gpus: list[dict[str, t.Any]]) -> list[tuple[list[int], dict[str, t.Any]]]:
    """Consecutive GPUs with the same picture, drawn once ("GPU 4-7"): a fleet
    of whole GPUs stays a short page."""
    groups: list[tuple[list[int], dict[str, t.Any]]] = []
    for gpu in gpus:
        if groups and _layout_key(groups[-1][1]) == _layout_key(gpu):
            groups[-1][0].append(gpu.get("index"))
        else:
            groups.append(([gpu.get("index")], gpu))
    return groups


def _indices(indices: list[t.Any]) -> str:
    return "GPU {0}".format(indices[0]) if len(indices) == 1 else "GPUs {0}-{1}".format(indices[0], indices[-1])


def _gpu_caption(gpu: dict[str, t.Any], indices: list[t.Any] | None = None) -> str:
    mig = gpu.get("mig") or {}
    if not mig.get("capable"):
        state = "no MIG"
    elif mig.get("enabled") != mig.get("pending_enabled"):
        state = "MIG {0} (turns {1} after a reset/reboot)".format("on" if mig.get("enabled") else "off", "on" if mig.get("pending_enabled") else "off")
    else:
        state = "MIG on" if mig.get("enabled") else "MIG off"
    return "{0} &middot; {1} &middot; {2}".format(_e(_indices(indices or [gpu.get("index")])), _e(gpu.get("name")), _e(state))


def mig_svg(gpu: dict[str, t.Any]) -> str:
    """The GPU's memory-slice grid to scale, one box per GPU instance at its placement."""
    mig = gpu.get("mig") or {}
    units = mig.get("units") or 8
    unit = BAR_WIDTH / units
    top = 14
    height = top + BAR_HEIGHT + CI_HEIGHT + 4
    parts = [
        '<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}" role="img" aria-label="MIG layout of GPU {2}">'.format(
            BAR_WIDTH + 2, height, _e(gpu.get("index"))
        )
    ]
    # The grid first: free memory slices stay visible as empty boxes.
    parts.append('<rect x="1" y="{0}" width="{1}" height="{2}" fill="#f6f8fa"/>'.format(top, BAR_WIDTH, BAR_HEIGHT))
    for i in range(units + 1):
        x = 1 + i * unit
        parts.append('<line x1="{0:.1f}" y1="{1}" x2="{0:.1f}" y2="{2}" stroke="#8c959f" stroke-width="1"/>'.format(x, top - 3, top + BAR_HEIGHT))
        if i < units:
            parts.append('<text x="{0:.1f}" y="10" font-size="9" text-anchor="middle" fill="#57606a">{1}</text>'.format(x + unit / 2, i))
    if not mig.get("enabled"):
        fill = "#d0d7de" if mig.get("capable") else "#eaeef2"
        parts.append('<rect x="1" y="{0}" width="{1}" height="{2}" fill="{3}"/>'.format(top, BAR_WIDTH, BAR_HEIGHT, fill))
        parts.append(
            '<text x="{0}" y="{1}" font-size="12" text-anchor="middle" fill="#24292f">{2}</text>'.format(
                BAR_WIDTH / 2, top + BAR_HEIGHT / 2 + 4, "whole GPU (MIG off)" if mig.get("capable") else "whole GPU"
            )
        )
    elif not mig.get("gpu_instances"):
        parts.append('<rect x="1" y="{0}" width="{1}" height="{2}" fill="none" stroke="#8c959f" stroke-dasharray="4 3"/>'.format(top, BAR_WIDTH, BAR_HEIGHT))
        parts.append(
            '<text x="{0}" y="{1}" font-size="12" text-anchor="middle" fill="#57606a">MIG on, no GPU instances: no CUDA work can run here</text>'.format(
                BAR_WIDTH / 2, top + BAR_HEIGHT / 2 + 4
            )
        )
    for gi in sorted(mig.get("gpu_instances") or [], key=lambda g: g.get("start") or 0):
        start, size = gi.get("start") or 0, gi.get("size") or 1
        x, width = 1 + start * unit, size * unit
        parts.append(
            '<rect class="gi" x="{0:.1f}" y="{1}" width="{2:.1f}" height="{3}" fill="{4}" stroke="#ffffff" '
            'stroke-width="2"><title>GPU instance {5}: {6} at slices {7}-{8}</title></rect>'.format(
                x, top, width, BAR_HEIGHT, colour(gi.get("profile")), _e(gi.get("id")), _e(gi.get("profile")), start, start + size - 1
            )
        )
        parts.append(
            '<text x="{0:.1f}" y="{1}" font-size="11" text-anchor="middle" fill="#ffffff" font-weight="600">{2}</text>'.format(
                x + width / 2, top + BAR_HEIGHT / 2 + 4, _e(gi.get("profile"))
            )
        )
        slices = compute_slices(gi.get("profile")) or 1
        for ci in gi.get("compute_instances") or []:
            ci_x = x + 2 + (ci.get("start") or 0) / slices * (width - 4)
            ci_w = max((ci.get("size") or 1) / slices * (width - 4) - 2, 1)
            parts.append(
                '<rect x="{0:.1f}" y="{1}" width="{2:.1f}" height="{3}" fill="#24292f" opacity="0.55"><title>compute instance {4}</title></rect>'.format(
                    ci_x, top + BAR_HEIGHT + 2, ci_w, CI_HEIGHT - 2, _e(ci.get("id"))
                )
            )
    parts.append("</svg>")
    return "".join(parts)


def _cuda_html(reports: list[dict[str, t.Any]]) -> list[str]:
    images = cuda_images(reports)
    if not images:
        return []
    out = [
        "<h2>CUDA images</h2><p>Each image against each host's loaded driver and GPUs: <b>runs</b> natively, "
        "<b>needs compat</b> (NVIDIA's cuda-compat package), <b>needs driver &gt;= X</b>; hover for why.</p>",
        "<table><thead><tr><th>Hosts</th><th>Driver</th><th>GPUs</th>",
    ]
    out.extend('<th title="{0}">{1}<br>CUDA {2}</th>'.format(_e(name), _e(image_label(name)), _e(cuda)) for name, cuda in images)
    out.append("</tr></thead><tbody>")
    for hosts, report, cells in cuda_rows(reports, images):
        out.append(
            '<tr><td class="models">{0}</td><td>{1}</td><td class="models">{2}</td>'.format(
                _e(", ".join(hosts)), _e((report.get("versions") or {}).get("driver") or "-"), _e(gpu_models(report))
            )
        )
        out.extend('<td class="st {0}" title="{1}">{2}</td>'.format(_e(css), _e(reason), _e(text)) for text, css, reason in cells)
        out.append("</tr>")
    out.append("</tbody></table>")
    return out


def scheduler_rows(reports: list[dict[str, t.Any]]) -> list[list[str]]:
    """What Kubernetes and Slurm are told about each node, as verify recorded it: GPU Feature Discovery's key labels
    (the node_labels role's summary) and the slurm.conf Gres= value (slurm_gres). Hosts with neither are left out."""
    rows = []
    for report in reports:
        schedulers = report.get("schedulers") or {}
        labels, gres = schedulers.get("labels") or {}, schedulers.get("slurm_gres")
        if not labels and not gres:
            continue
        memory = labels.get("memory_mib")
        rows.append(
            [
                str(report.get("host")),
                str(labels.get("product") or "-"),
                "{0} MiB".format(memory) if memory else "-",
                str(labels["count"]) if labels.get("count") is not None else "-",
                str(labels.get("mig_strategy") or "-"),
                "Gres={0}".format(gres) if gres else "-",
            ]
        )
    return rows


SCHEDULER_HEADER = ("Host", "nvidia.com/gpu.product", "gpu.memory", "gpu.count", "mig.strategy", "Slurm")


def _schedulers_html(rows: list[list[str]]) -> list[str]:
    """The scheduler_rows as an HTML section; none when no host has labels or Gres."""
    if not rows:
        return []
    out = [
        "<h2>What the schedulers see</h2><p>GPU Feature Discovery's labels in the node's NFD feature file and the "
        "node's <code>Gres=</code> value for slurm.conf, as verify recorded them.</p><table><thead><tr>",
    ]
    out.extend("<th>{0}</th>".format(_e(label)) for label in SCHEDULER_HEADER)
    out.append("</tr></thead><tbody>")
    out.extend("<tr>" + "".join('<td class="models">{0}</td>'.format(_e(cell)) for cell in row) + "</tr>" for row in rows)
    out.append("</tbody></table>")
    return out


def _schedulers_markdown(rows: list[list[str]]) -> list[str]:
    """The scheduler_rows as a Markdown section; none when no host has labels or Gres."""
    if not rows:
        return []
    lines = ["", "## What the schedulers see", "", "| " + " | ".join(SCHEDULER_HEADER) + " |", "|" + "---|" * len(SCHEDULER_HEADER)]
    lines.extend("| " + " | ".join(_md(cell) for cell in row) + " |" for row in rows)
    return lines


def render_html(reports: list[dict[str, t.Any]], title: str = "gpufleet fleet report") -> str:
    reports = sorted(reports, key=lambda r: str(r.get("host")))
    totals = _totals(reports)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>{0}</title><style>{1}</style></head><body>".format(_e(title), CSS),
        "<h1>{0}</h1>".format(_e(title)),
        '<p class="totals"><span><b>{0}</b> host(s)</span>{1}</p>'.format(
            len(reports),
            "".join(
                '<span class="{0}">&nbsp;{1} {2}&nbsp;</span>'.format(_e(status), totals[status], _e(STATUS_TEXT.get(status, status)))
                for status in ("fail", "warn", "pass", "missing")
                if totals.get(status)
            ),
        ),
    ]

    out.append("<h2>Hosts and versions</h2><table><thead><tr><th>Host</th><th>Status</th>")
    out.extend("<th>{0}</th>".format(_e(label)) for _key, label in VERSION_COLUMNS)
    out.append("<th>GPUs</th>")
    columns = layer_columns(reports)
    out.extend("<th>{0}</th>".format(_e(label)) for _key, label in columns)
    out.append("</tr></thead><tbody>")
    for report in reports:
        status = report.get("status", "missing")
        checks = _checks(report)
        out.append(
            '<tr><td class="host">{0}</td><td class="st {1}">{2}</td>'.format(_host_html(report.get("host")), _e(status), _e(STATUS_TEXT.get(status, status)))
        )
        out.extend(_version_html(report, key) for key, _label in VERSION_COLUMNS)
        if unread(report, "gpus") and not report.get("gpus"):
            out.append('<td class="nc">{0}<span class="why">{1}</span></td>'.format(NOT_CHECKED, _e(unread(report, "gpus"))))
        else:
            out.append('<td class="models">{0}</td>'.format(_e(gpus_cell(report))))
        for layer, _label in columns:
            item = checks.get(layer)
            if item is None:
                out.append("<td>&ndash;</td>")
            else:
                text = layer_cell(layer, item)
                reason = " reason" if text != STATUS_TEXT.get(item["status"], item["status"]) else ""
                out.append('<td class="st {0}{1}" title="{2}">{3}</td>'.format(_e(item["status"]), reason, _e(item.get("summary")), _e(text)))
        out.append("</tr>")
    out.append("</tbody></table>")
    out.extend(_schedulers_html(scheduler_rows(reports)))
    out.extend(_cuda_html(reports))

    out.append("<h2>Findings</h2>")
    any_findings = False
    for report in reports:
        findings = _findings(report)
        if report.get("status") == "missing":
            findings = [
                ("verify", {"severity": "error", "message": report.get("reason") or "no verify report: the host failed or was unreachable before verify ran"})
            ]
        if not findings:
            continue
        any_findings = True
        out.append('<h3>{0}</h3><ul class="findings">'.format(_e(report.get("host"))))
        for where, item in findings:
            out.append(
                '<li><span class="sev sev-{0}">{0}</span> <b>{1}</b>: {2}{3}</li>'.format(
                    _e(item.get("severity")),
                    _e(where),
                    _e(item.get("message")),
                    ' <span class="fix">&mdash; fix: {0}</span>'.format(_e(item.get("fix"))) if item.get("fix") else "",
                )
            )
        out.append("</ul>")
    if not any_findings:
        out.append("<p>No findings.</p>")

    out.append('<h2>MIG layout</h2><p class="legend">')
    out.extend('<span><i style="background:{0}"></i>{1}g</span>'.format(SLICE_COLOURS[s], s) for s in (1, 2, 3, 4, 7))
    out.append("<span>Boxes: GPU instances at their placement on the memory-slice grid (to scale); dark strips: their compute instances.</span></p>")
    for report in reports:
        gpus = report.get("gpus") or []
        if not gpus:
            continue
        out.append('<h3>{0}</h3><div class="gpus">'.format(_e(report.get("host"))))
        for indices, gpu in gpu_groups(gpus):
            out.append('<div class="gpu"><div class="gpu-label">{0}</div>{1}</div>'.format(_gpu_caption(gpu, indices), mig_svg(gpu)))
        out.append("</div>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _md(value: t.Any) -> str:
    return str("" if value is None else value).replace("|", "\\|").replace("\n", " ")


def mig_text(gpu: dict[str, t.Any], cell: int = 8) -> str:
    """The MIG grid as text: `cell` characters per memory slice, `[name]` per GPU instance."""
    mig = gpu.get("mig") or {}
    units = mig.get("units") or 8
    if not mig.get("enabled"):
        return "[" + "whole GPU".center(units * cell - 2) + "]"
    starts = {gi.get("start") or 0: gi for gi in mig.get("gpu_instances") or []}
    out, i = [], 0
    while i < units:
        gi = starts.get(i)
        if gi is None:
            out.append(".".center(cell))
            i += 1
            continue
        size = gi.get("size") or 1
        inner = size * cell - 2
        out.append("[" + str(gi.get("profile"))[:inner].center(inner) + "]")
        i += size
    return "".join(out)


def _mig_note(gpu: dict[str, t.Any]) -> str:
    mig = gpu.get("mig") or {}
    if mig.get("capable") and mig.get("enabled") != mig.get("pending_enabled"):
        return "  MIG turns {0} after a reset/reboot".format("on" if mig.get("pending_enabled") else "off")
    if mig.get("enabled") and not mig.get("gpu_instances"):
        return "  no GPU instances"
    if not mig.get("capable"):
        return "  no MIG"
    return ""


def _cuda_markdown(reports: list[dict[str, t.Any]]) -> list[str]:
    images = cuda_images(reports)
    if not images:
        return []
    header = ["Hosts", "Driver", "GPUs"] + ["{0} (CUDA {1})".format(image_label(name), cuda) for name, cuda in images]
    lines = ["", "## CUDA images", "", "| " + " | ".join(_md(h) for h in header) + " |", "|" + "---|" * len(header)]
    for hosts, report, cells in cuda_rows(reports, images):
        lines.append(
            "| "
            + " | ".join(
                [_md(", ".join(hosts)), _md((report.get("versions") or {}).get("driver") or "-"), _md(gpu_models(report))]
                + [_md(text) for text, _css, _reason in cells]
            )
            + " |"
        )
    lines += [""] + ["- `{0}` (CUDA {1}): `{2}`".format(image_label(name), cuda, name) for name, cuda in images]
    return lines


def render_markdown(reports: list[dict[str, t.Any]], title: str = "gpufleet fleet report") -> str:
    reports = sorted(reports, key=lambda r: str(r.get("host")))
    totals = _totals(reports)
    lines = [
        "# {0}".format(title),
        "",
        "{0} host(s): {1}".format(
            len(reports), ", ".join("{0} {1}".format(totals[s], STATUS_TEXT.get(s, s)) for s in ("fail", "warn", "pass", "missing") if totals.get(s))
        ),
        "",
    ]
    columns = layer_columns(reports)
    header = ["Host", "Status"] + [label for _key, label in VERSION_COLUMNS] + ["GPUs"] + [label for _key, label in columns]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for report in reports:
        status = report.get("status", "missing")
        checks = _checks(report)
        cells = [_md(report.get("host")), "**{0}**".format(STATUS_TEXT.get(status, status))]
        cells += [_md(_version_text(report, key)) for key, _label in VERSION_COLUMNS]
        cells.append(_md(_version_text(report, "gpus") if unread(report, "gpus") and not report.get("gpus") else gpus_cell(report)))
        cells += [_md(layer_cell(layer, checks[layer])) if layer in checks else "-" for layer, _label in columns]
        lines.append("| " + " | ".join(cells) + " |")
    lines += _schedulers_markdown(scheduler_rows(reports))
    lines += _cuda_markdown(reports)
    lines += ["", "## Findings", ""]
    any_findings = False
    for report in reports:
        findings = _findings(report)
        if report.get("status") == "missing":
            findings = [("verify", {"severity": "error", "message": report.get("reason") or "no verify report"})]
        if not findings:
            continue
        any_findings = True
        lines.append("### {0}".format(report.get("host")))
        lines.append("")
        for where, item in findings:
            fix = " - fix: {0}".format(_md(item.get("fix"))) if item.get("fix") else ""
            lines.append("- **{0}** `{1}`: {2}{3}".format(item.get("severity"), where, _md(item.get("message")), fix))
        lines.append("")
    if not any_findings:
        lines += ["No findings.", ""]
    lines += ["## MIG layout", "", "One column per memory slice; `[name]` is a GPU instance at its placement.", ""]
    for report in reports:
        gpus = report.get("gpus") or []
        if not gpus:
            continue
        lines += ["### {0}".format(report.get("host")), "", "```text"]
        width = max(len("GPU {0}".format(g.get("index"))) for g in gpus)
        lines += ["{0}  {1}{2}".format("GPU {0}".format(g.get("index")).ljust(width), mig_text(g), _mig_note(g)) for g in gpus]
        lines += ["```", ""]
    return "\n".join(lines)


# Above this many hosts the text summary keeps to one line per host.
TEXT_DETAIL_HOSTS = 10


def render_text(reports: list[dict[str, t.Any]]) -> list[str]:
    """A one-screen summary: totals, a line per host, each layer's status for small fleets."""
    reports = sorted(reports, key=lambda r: str(r.get("host")))
    totals = _totals(reports)
    lines = [
        "{0} host(s): {1}".format(
            len(reports), ", ".join("{0} {1}".format(totals[s], STATUS_TEXT.get(s, s)) for s in ("fail", "warn", "pass", "missing") if totals.get(s))
        )
    ]
    for name, cuda in cuda_images(reports):
        counts_by_cell: dict[str, int] = {}
        for report in reports:
            text = cuda_cell(report, name, cuda)[0]
            if text != "-":
                counts_by_cell[text] = counts_by_cell.get(text, 0) + 1
        lines.append(
            "CUDA image {0} (CUDA {1}): {2}".format(image_label(name), cuda, ", ".join("{0} {1}".format(n, text) for text, n in sorted(counts_by_cell.items())))
        )
    for report in reports:
        status = report.get("status", "missing")
        counts = report.get("summary") or {}
        if status == "missing":
            lines.append("{0}: no report ({1})".format(report.get("host"), report.get("reason") or "verify did not run"))
            continue
        lines.append(
            "{0}: {1} - {2} error(s), {3} warning(s); driver {4}, CUDA {5}, {6}".format(
                report.get("host"),
                STATUS_TEXT.get(status, status),
                counts.get("error", 0),
                counts.get("warning", 0),
                _version_text(report, "driver"),
                _version_text(report, "cuda"),
                gpus_cell(report),
            )
        )
        if len(reports) <= TEXT_DETAIL_HOSTS:
            for item in report.get("checks") or []:
                status_text = STATUS_TEXT.get(item["status"], item["status"])
                lines.append("  {0:<18} {1:<13} {2}".format(item["layer"], status_text, item.get("summary", "")))
    return lines
