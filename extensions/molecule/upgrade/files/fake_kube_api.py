"""A fake Kubernetes API server for the upgrade scenario, on loopback.

Just what kubernetes.core's k8s_info (kind Node) and k8s_drain need: API
discovery, get/patch a node, list the pods of a node, evictions, get a pod.
Its state (nodes, pods, and every request it answered) is a JSON file that
the scenario seeds and the tests read; it is written after each request.

    python3 fake_kube_api.py --state STATE.json --port-file PORT [--idle-exit 900]

Binds 127.0.0.1 on a free port (written to --port-file), so scenarios running
side by side never collide; exits after --idle-exit seconds without a request.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

RESOURCES = [
    {"name": "nodes", "singularName": "node", "namespaced": False, "kind": "Node", "verbs": ["get", "list", "patch", "update", "watch"]},
    {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod", "verbs": ["create", "delete", "get", "list", "patch", "watch"]},
    {"name": "pods/eviction", "singularName": "", "namespaced": True, "kind": "Eviction", "group": "policy", "version": "v1", "verbs": ["create"]},
]


class State:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.data = json.loads(path.read_text())
        self.data.setdefault("requests", [])
        self.last = time.monotonic()

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True))
        tmp.replace(self.path)


def node_object(name: str, node: dict) -> dict:
    spec = {"unschedulable": True} if node.get("unschedulable") else {}
    metadata = {"name": name, "uid": "uid-" + name, "resourceVersion": str(node.get("version", 1))}
    if node.get("annotations"):
        metadata["annotations"] = dict(node["annotations"])
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata,
        "spec": spec,
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def pod_object(pod: dict) -> dict:
    owner = pod.get("owner")
    metadata = {"name": pod["name"], "namespace": pod["namespace"], "uid": "uid-" + pod["name"]}
    if owner:
        metadata["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": owner, "name": pod["name"] + "-owner", "uid": "uid-owner-" + pod["name"], "controller": True}
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"nodeName": pod["node"], "containers": [{"name": "main", "image": "example"}]},
        "status": {"phase": "Running"},
    }


def status(code: int, reason: str, message: str) -> dict:
    return {"apiVersion": "v1", "kind": "Status", "status": "Failure", "message": message, "reason": reason, "code": code}


class Handler(BaseHTTPRequestHandler):
    state: State

    def log_message(self, *args) -> None:  # quiet: the state file records requests
        pass

    def _send(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict | None:
        length = int(self.headers.get("Content-Length") or 0)
        if not length:
            return None
        return json.loads(self.rfile.read(length) or b"null")

    def _handle(self, method: str) -> None:
        url = urlparse(self.path)
        parts = [unquote(p) for p in url.path.strip("/").split("/") if p]
        query = parse_qs(url.query)
        body = self._body() if method in ("POST", "PATCH", "PUT") else None
        with self.state.lock:
            self.state.last = time.monotonic()
            data = self.state.data
            data["requests"].append(
                {"method": method, "path": url.path, "query": url.query, "body": body, "content_type": self.headers.get("Content-Type"), "time": time.time()}
            )
            code, answer = self._route(method, parts, query, body, data)
            self.state.save()
        self._send(code, answer)

    def _route(self, method: str, parts: list[str], query: dict, body: dict | None, data: dict) -> tuple[int, dict]:
        nodes, pods = data["nodes"], data["pods"]
        if parts == ["version"]:
            return 200, {"major": "1", "minor": "34", "gitVersion": "v1.34.0", "platform": "linux/amd64"}
        if parts == ["api"]:
            return 200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
        if parts == ["apis"]:
            return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []}
        if parts == ["api", "v1"]:
            return 200, {"kind": "APIResourceList", "groupVersion": "v1", "resources": RESOURCES}
        if parts[:3] == ["api", "v1", "nodes"] and len(parts) == 4:
            name = parts[3]
            if name not in nodes:
                return 404, status(404, "NotFound", 'nodes "{0}" not found'.format(name))
            if method == "PATCH":
                # A dry run (check mode: ?dryRun=All) answers what the patch would give and keeps nothing.
                node = dict(nodes[name], annotations=dict(nodes[name].get("annotations") or {}))
                spec = (body or {}).get("spec") or {}
                if "unschedulable" in spec:
                    node["unschedulable"] = bool(spec["unschedulable"])
                # Merge patch semantics: a null value removes the annotation.
                for key, value in (((body or {}).get("metadata") or {}).get("annotations") or {}).items():
                    if value is None:
                        node["annotations"].pop(key, None)
                    else:
                        node["annotations"][key] = str(value)
                node["version"] = node.get("version", 1) + 1
                if "dryRun" in query:
                    return 200, node_object(name, node)
                nodes[name] = node
            return 200, node_object(name, nodes[name])
        if parts == ["api", "v1", "pods"] and method == "GET":
            selector = (query.get("fieldSelector") or [""])[0]
            wanted = selector.split("=", 1)[1] if selector.startswith("spec.nodeName=") else None
            items = [pod_object(p) for p in pods if wanted is None or p["node"] == wanted]
            return 200, {"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "1"}, "items": items}
        if parts[:3] == ["api", "v1", "namespaces"] and len(parts) >= 6 and parts[4] == "pods":
            namespace, name = parts[3], parts[5]
            found = [p for p in pods if p["namespace"] == namespace and p["name"] == name]
            if not found:
                return 404, status(404, "NotFound", 'pods "{0}" not found'.format(name))
            if parts[6:] == ["eviction"] and method == "POST":
                pods.remove(found[0])
                data.setdefault("evicted", []).append(found[0])
                return 201, {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
            if len(parts) == 6 and method == "GET":
                return 200, pod_object(found[0])
        return 404, status(404, "NotFound", "the fake API server does not serve {0} {1}".format(method, "/" + "/".join(parts)))

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--state", required=True, type=Path)
    parser.add_argument("--port-file", required=True, type=Path)
    parser.add_argument("--idle-exit", type=float, default=900.0)
    args = parser.parse_args()
    Handler.state = State(args.state)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    tmp = args.port_file.with_suffix(".tmp")
    tmp.write_text("{0}\n".format(server.server_address[1]))
    tmp.replace(args.port_file)
    while time.monotonic() - Handler.state.last < args.idle_exit:
        time.sleep(1)
    server.shutdown()


if __name__ == "__main__":
    main()
