"""The stand-in kubelet of the test ground's control plane (tests/harness/kube.sh).

There is no kubelet here, so this plays one for each named node, as far as a
drain and the scheduler's view need it:
- the Node object exists and reports Ready, with a fresh heartbeat;
- a pod bound to the node (spec.nodeName) and not being deleted runs: its
  phase becomes Running and its Ready condition True (no container is started);
- a pod being deleted is gone once its grace period has passed, as a kubelet
  removes it after its containers stopped (deletionGracePeriodSeconds, from
  the time the deletion was asked).

    kube_node.py --kubeconfig DIR/kubeconfig --node upg-node1 --node upg-node2 [--once]
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
import typing as t

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

POLL = 0.5


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class StandInKubelet:
    def __init__(self, api: client.CoreV1Api, nodes: t.Sequence[str]) -> None:
        self.api = api
        self.nodes = list(nodes)

    def ensure_nodes(self) -> None:
        for name in self.nodes:
            try:
                self.api.read_node(name)
            except ApiException as error:
                if error.status != 404:
                    raise
                self.api.create_node({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}})
            stamp = now().isoformat()
            ready = {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "gpufleet stand-in kubelet",
                "lastHeartbeatTime": stamp,
                "lastTransitionTime": stamp,
            }
            # What the scheduler and the DaemonSet controller ask of a node before they place a pod on it.
            capacity = {"cpu": "8", "memory": "32Gi", "pods": "110"}
            self.api.patch_node_status(name, {"status": {"conditions": [ready], "capacity": capacity, "allocatable": capacity}})

    def tend_pods(self) -> None:
        for name in self.nodes:
            for pod in self.api.list_pod_for_all_namespaces(field_selector="spec.nodeName=" + name).items:
                meta = pod.metadata
                if meta.deletion_timestamp is not None:
                    grace = meta.deletion_grace_period_seconds or 0
                    if (now() - meta.deletion_timestamp).total_seconds() >= grace:
                        self._delete_now(meta.namespace, meta.name)
                elif pod.status.phase == "Pending":
                    stamp = now().isoformat()
                    self.api.patch_namespaced_pod_status(
                        meta.name,
                        meta.namespace,
                        {
                            "status": {
                                "phase": "Running",
                                "startTime": stamp,
                                "conditions": [
                                    {"type": "Ready", "status": "True", "lastTransitionTime": stamp},
                                    {"type": "ContainersReady", "status": "True", "lastTransitionTime": stamp},
                                ],
                            }
                        },
                    )

    def _delete_now(self, namespace: str, name: str) -> None:
        try:
            self.api.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        except ApiException as error:
            if error.status != 404:
                raise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--node", action="append", required=True)
    parser.add_argument("--once", action="store_true", help="one round, then exit")
    args = parser.parse_args()
    config.load_kube_config(args.kubeconfig)
    kubelet = StandInKubelet(client.CoreV1Api(), args.node)
    heartbeat = 0.0
    while True:
        if time.monotonic() - heartbeat >= 10:
            kubelet.ensure_nodes()
            heartbeat = time.monotonic()
        kubelet.tend_pods()
        if args.once:
            return
        time.sleep(POLL)


if __name__ == "__main__":
    main()
