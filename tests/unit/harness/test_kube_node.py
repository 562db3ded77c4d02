"""tests/harness/kube_node.py: the stand-in kubelet does for a node what a drain and the scheduler need.

The scenarios run it against the real API server (tests/harness/kube.sh); here
its rounds are checked against an API that keeps objects in memory, so that
each duty can fail: the Node made and reported Ready, a bound pod run, a
deleted pod removed only once its grace period has passed, and other nodes'
pods left alone.
"""

from __future__ import annotations

import datetime as dt
import types

import pytest

pytest.importorskip("kubernetes")  # the newest lane's venv has it, as the scenarios' controller does

from kubernetes.client.exceptions import ApiException


@pytest.fixture(name="kube_node", scope="module")
def fixture_kube_node(harness_script):
    return harness_script("kube_node.py")


def pod(name: str, node: str, phase: str = "Pending", deleted_ago: float | None = None, grace: int | None = None):
    deletion = None if deleted_ago is None else dt.datetime.now(dt.UTC) - dt.timedelta(seconds=deleted_ago)
    meta = types.SimpleNamespace(name=name, namespace="ml", deletion_timestamp=deletion, deletion_grace_period_seconds=grace)
    return types.SimpleNamespace(metadata=meta, spec=types.SimpleNamespace(node_name=node), status=types.SimpleNamespace(phase=phase))


class MemoryApi:
    """The few CoreV1Api calls the stand-in makes, over dicts."""

    def __init__(self, pods=()):
        self.nodes: dict[str, dict] = {}
        self.pods = {p.metadata.name: p for p in pods}
        self.deleted: list[str] = []

    def read_node(self, name):
        if name not in self.nodes:
            raise ApiException(status=404, reason="Not Found")
        return self.nodes[name]

    def create_node(self, body):
        self.nodes[body["metadata"]["name"]] = {"metadata": body["metadata"]}

    def patch_node_status(self, name, body):
        self.nodes[name].update(body)

    def list_pod_for_all_namespaces(self, field_selector):
        node = field_selector.removeprefix("spec.nodeName=")
        return types.SimpleNamespace(items=[p for p in self.pods.values() if p.spec.node_name == node])

    def patch_namespaced_pod_status(self, name, namespace, body):
        self.pods[name].status.phase = body["status"]["phase"]

    def delete_namespaced_pod(self, name, namespace, grace_period_seconds):
        assert grace_period_seconds == 0
        self.deleted.append(name)
        self.pods.pop(name)


def test_each_node_is_made_and_reported_ready(kube_node):
    api = MemoryApi()
    kubelet = kube_node.StandInKubelet(api, ["n1", "n2"])
    kubelet.ensure_nodes()
    kubelet.ensure_nodes()  # a heartbeat: the node exists already
    assert sorted(api.nodes) == ["n1", "n2"]
    status = api.nodes["n1"]["status"]
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [("Ready", "True")]
    assert status["allocatable"]["pods"] == "110"
    assert api.nodes["n1"]["metadata"]["labels"] == {"kubernetes.io/hostname": "n1"}


def test_bound_pods_run_and_deleted_pods_go_after_their_grace_period(kube_node):
    api = MemoryApi(
        [
            pod("new", "n1"),
            pod("running", "n1", phase="Running"),
            pod("graceful", "n1", phase="Running", deleted_ago=1, grace=30),
            pod("done", "n1", phase="Running", deleted_ago=31, grace=30),
            pod("forced", "n1", phase="Running", deleted_ago=0, grace=0),
            pod("elsewhere", "n9"),
        ]
    )
    kube_node.StandInKubelet(api, ["n1"]).tend_pods()
    assert api.pods["new"].status.phase == "Running"
    assert sorted(api.deleted) == ["done", "forced"]
    assert "graceful" in api.pods  # its containers have 29 s left to stop
    assert api.pods["elsewhere"].status.phase == "Pending"  # not a node this kubelet plays
