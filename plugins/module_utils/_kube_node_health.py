# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""A node's GPU health as the Kubernetes scheduler sees it: a Node condition and a NoSchedule taint, both ours by
name, set while a GPU is critical and cleared when none is. Standard library only: the boot-time check on the node
imports it, with a credential scoped to its own Node, as does verify.

The condition follows NVSentinel's conventions for its GPU conditions (status True while a fault is active, reason
<type>IsNotHealthy / <type>IsHealthy, message entries "ErrorCode:<code> GPU:<id> <text> Recommended
Action=<ACTION>;", "No Health Failures" when clear: its platform-connectors' Kubernetes connector) under a type of
its own, so that neither clears the other's. NVSentinel sets no taint by default; the taint key is ours.
Everything else on the Node - other conditions, other taints - is left as it is."""

from __future__ import annotations

import base64
import datetime
import http.client
import json
import ssl
import typing as t
import urllib.parse

CONDITION_TYPE = "GpufleetGpuHealth"
TAINT = {"key": "gpufleet.nvidia/gpu-health", "value": "critical", "effect": "NoSchedule"}
HEALTHY_MESSAGE = "No Health Failures"
# The API server stores a condition's message whole; NVSentinel caps its own at 1024 characters.
MESSAGE_MAX = 1024


def _entry(finding: dict[str, t.Any]) -> str:
    gpu = finding.get("gpu") or {}
    where = "GPU:{0}".format(gpu.get("bus_id") or gpu.get("uuid") or gpu.get("index")) if gpu else "Node:-"
    return "ErrorCode:{0} {1} {2} Recommended Action={3};".format(finding["check"], where, finding["seen"], str(finding["action"]).upper())


def condition(findings: t.Iterable[dict[str, t.Any]], now: str, current: dict[str, t.Any] | None = None) -> dict[str, t.Any]:
    """The condition for the critical findings of a health judgement, at `now` (RFC 3339). Its transition time is
    kept from `current` (the Node's condition of this type, if any) while the status stays."""
    critical = [finding for finding in findings if finding.get("severity") == "critical"]
    status = "True" if critical else "False"
    message = " ".join(_entry(finding) for finding in critical) or HEALTHY_MESSAGE
    if len(message) > MESSAGE_MAX:
        message = message[: MESSAGE_MAX - 3] + "..."
    current = current or {}
    return {
        "type": CONDITION_TYPE,
        "status": status,
        "reason": CONDITION_TYPE + ("IsNotHealthy" if critical else "IsHealthy"),
        "message": message,
        "lastHeartbeatTime": now,
        "lastTransitionTime": current.get("lastTransitionTime") if current.get("status") == status and current.get("lastTransitionTime") else now,
    }


def current_condition(node: dict[str, t.Any]) -> dict[str, t.Any] | None:
    for found in (node.get("status") or {}).get("conditions") or []:
        if found.get("type") == CONDITION_TYPE:
            return found
    return None


def condition_changed(node: dict[str, t.Any], wanted: dict[str, t.Any]) -> bool:
    """Whether the Node's condition differs from `wanted` in what a reader acts on (not the heartbeat)."""
    found = current_condition(node) or {}
    return any(found.get(key) != wanted[key] for key in ("status", "reason", "message"))


def taints_after(node: dict[str, t.Any], critical: bool, now: str) -> list[dict[str, t.Any]] | None:
    """The Node's taints once ours is set (`critical`) or gone, others' kept in their order; None where nothing
    changes."""
    taints = _taints(node)
    ours = [taint for taint in taints if taint.get("key") == TAINT["key"]]
    others = [taint for taint in taints if taint.get("key") != TAINT["key"]]
    if critical:
        if len(ours) == 1 and all(ours[0].get(key) == value for key, value in TAINT.items()):
            return None
        return others + [dict(TAINT, timeAdded=now)]
    return others if ours else None


# --------------------------------------------------------------------------
# The Node, through the API server
# --------------------------------------------------------------------------

# A taint write is a read, then a JSON patch that first tests the read's resourceVersion: another writer in between
# (the node lifecycle controller, a person) makes it fail, and it is read and computed again.
TAINT_TRIES = 5


class NodeHealthError(Exception):
    """The API server could not be asked, or refused (`code`: its HTTP status, where it answered)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class NodeApi:
    """One Node, with a credential scoped to it (RBAC: get and patch on that node, patch on its status): the JSON
    file the verify role writes on the node - server, the CA's PEM (base64, as a kubeconfig's
    certificate-authority-data), a bearer token, and the node's name."""

    def __init__(self, credential: dict[str, t.Any], timeout: float = 10.0) -> None:
        missing = [key for key in ("server", "certificate_authority_data", "token", "node") if not credential.get(key)]
        if missing:
            raise NodeHealthError("the credential lacks {0}".format(", ".join(missing)))
        self.server = str(credential["server"]).rstrip("/")
        if not self.server.startswith("https://"):
            raise NodeHealthError("the credential's server {0} is not an https:// URL: the token goes only over TLS".format(self.server))
        self.node = str(credential["node"])
        self.token = str(credential["token"])
        self.timeout = timeout
        # The API server is trusted by the credential's CA alone.
        try:
            self.context = ssl.create_default_context(cadata=base64.b64decode(credential["certificate_authority_data"]).decode("ascii"))
        except (ValueError, ssl.SSLError) as exc:
            raise NodeHealthError("the credential's certificate_authority_data is not a base64 PEM certificate: {0}".format(exc)) from exc

    def _request(self, method: str, path: str, body: t.Any = None, content_type: str = "application/json") -> dict[str, t.Any]:
        # http.client rather than ansible's open_url: the boot-time check imports this on nodes without ansible-core.
        # The API server is reached directly (a kubelet's proxy settings are not ours to guess).
        address = urllib.parse.urlsplit(self.server)
        headers = {"Authorization": "Bearer " + self.token, "Accept": "application/json"}
        data = None if body is None else json.dumps(body).encode()
        if data is not None:
            headers["Content-Type"] = content_type
        connection = http.client.HTTPSConnection(address.hostname or "", address.port or 443, timeout=self.timeout, context=self.context)
        try:
            connection.request(method, address.path.rstrip("/") + path, body=data, headers=headers)
            answer = connection.getresponse()
            text = answer.read()
        except (OSError, http.client.HTTPException) as error:
            raise NodeHealthError("{0} {1}: {2}".format(method, path, error)) from error
        finally:
            connection.close()
        if answer.status >= 300:
            detail = text.decode("utf-8", "replace")
            try:
                detail = json.loads(detail).get("message", detail)
            except (ValueError, AttributeError):
                pass
            raise NodeHealthError("{0} {1}: HTTP {2}: {3}".format(method, path, answer.status, detail), answer.status)
        try:
            return json.loads(text or b"{}")
        except ValueError as error:
            raise NodeHealthError("{0} {1}: the answer is not JSON: {2}".format(method, path, error)) from error

    def _path(self, suffix: str = "") -> str:
        return "/api/v1/nodes/" + urllib.parse.quote(self.node, safe="") + suffix

    def read(self) -> dict[str, t.Any]:
        return self._request("GET", self._path())

    def publish(self, findings: t.Iterable[dict[str, t.Any]], now: str | None = None, check_mode: bool = False) -> dict[str, t.Any]:
        """Bring the Node's condition and taint in line with the findings, at `now` (RFC 3339; default: this
        second). Returns what changed - `condition`, `taint` (bools), `status` (the condition's) - and `before` /
        `after` (the condition's status, reason and message, and the Node's taints) for a diff. In check mode the
        Node is read and nothing is written."""
        now = now or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        findings = list(findings)
        critical = any(finding.get("severity") == "critical" for finding in findings)
        node = self.read()
        found = current_condition(node)
        wanted = condition(findings, now, found)
        taints = taints_after(node, critical, now)
        result = {
            "condition": condition_changed(node, wanted),
            "taint": taints is not None,
            "status": wanted["status"],
            "before": _seen(found, _taints(node)),
            "after": _seen(wanted, _taints(node) if taints is None else taints),
        }
        if check_mode:
            return result
        # Strategic merge on the status: conditions merge by type, so others' conditions stay. Written on every
        # call (the heartbeat says when the node last judged), but reported as a change only when it is one.
        self._request("PATCH", self._path("/status"), {"status": {"conditions": [wanted]}}, "application/strategic-merge-patch+json")
        for _try in range(TAINT_TRIES):
            if taints is None:
                return result
            patch = [
                {"op": "test", "path": "/metadata/resourceVersion", "value": node["metadata"]["resourceVersion"]},
                {"op": "add", "path": "/spec/taints", "value": taints},
            ]
            try:
                self._request("PATCH", self._path(), patch, "application/json-patch+json")
                return result
            except NodeHealthError:
                node = self.read()
                taints = taints_after(node, critical, now)
                result["after"]["taints"] = _taint_names(_taints(node) if taints is None else taints)
        raise NodeHealthError("the taint of node {0} kept changing under us ({1} tries)".format(self.node, TAINT_TRIES))


def _taints(node: dict[str, t.Any]) -> list[dict[str, t.Any]]:
    return list((node.get("spec") or {}).get("taints") or [])


def _taint_names(taints: list[dict[str, t.Any]]) -> list[str]:
    return ["{0}={1}:{2}".format(taint.get("key"), taint.get("value") or "", taint.get("effect")) for taint in taints]


def _seen(found: dict[str, t.Any] | None, taints: list[dict[str, t.Any]]) -> dict[str, t.Any]:
    """What a diff shows of the Node: our condition (without its times, which move on every call) and every taint."""
    kept = {key: (found or {}).get(key) for key in ("status", "reason", "message")} if found else None
    return {"condition": kept, "taints": _taint_names(taints)}


def nvml_unusable(reason: str) -> dict[str, t.Any]:
    """The finding of a node whose NVML does not start - no driver after a kernel update, a module that did not
    load: no GPU on it can be used, so it is as critical as a GPU fallen off the bus."""
    return {"check": "nvml", "severity": "critical", "gpu": None, "seen": "NVML is not usable: {0}".format(reason), "action": "drain_and_repair"}


def read_credential(path: str) -> dict[str, t.Any]:
    """The credential file the verify role writes on the node (JSON: server, certificate_authority_data, token,
    node); NodeHealthError naming the path when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as handle:
            found = json.load(handle)
    except (OSError, ValueError) as exc:
        raise NodeHealthError("cannot read the credential {0}: {1}".format(path, exc)) from exc
    if not isinstance(found, dict):
        raise NodeHealthError("the credential {0} is not a JSON object".format(path))
    return found
