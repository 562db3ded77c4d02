#!/usr/bin/env bash
# The test ground's Kubernetes control plane (issue 39): the real
# kube-apiserver, kube-controller-manager (its disruption, DaemonSet,
# ReplicaSet, service account and node lifecycle controllers: a
# PodDisruptionBudget's status as a cluster computes it) and kube-scheduler
# (it binds pods), over kine's in-memory etcd API, on loopback, with the
# stand-in kubelet (kube_node.py) playing the named nodes.
#
#   kube.sh build                          # print the directory of the binaries (cached)
#   kube.sh start DIR [--node NAME ...]    # CA, certificates, kine, apiserver, controllers, stand-in kubelet
#   kube.sh stop DIR
#
# start writes three kubeconfigs, one identity each (all in system:masters):
#   DIR/kubeconfig           gpufleet-admin: what the collection's playbooks are given
#   DIR/operator.kubeconfig  site-operator: someone else (a scenario's set-up, its checks)
#   DIR/kubelet.kubeconfig   gpufleet-standin-kubelet
# and the API server's audit log, DIR/audit.log (JSON lines): every request
# of gpufleet-admin (verb, object, answer, time; a write with its body), the
# record a scenario reads to tell what the collection did to the cluster, and
# when.
# Ports are free ones on loopback (DIR/port: the API's), so scenarios can run
# side by side. Every process ends by itself after GPUFLEET_KUBE_LIFETIME
# seconds (default 3600), should `stop` never come.
#
# Built once from the wrapper module in kube/ (k8s.io/kubernetes at the pin of
# kube/go.mod) and from kine's own module, cached under
# $GPUFLEET_CACHE/go-tools/kube-<version>-<key>, the key covering the module
# files, the kine pin, the Go version and the build steps.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"
here=$(cd "$(dirname "$0")" && pwd)
KINE_VERSION=v0.17.5
# The controllers a drain and a PodDisruptionBudget need, the namespaces'
# default service accounts a pod must have, the node lifecycle (it takes the
# not-ready taint that admission puts on a new Node off once the node is
# Ready; DaemonSet pods do not tolerate it), and the token controller that
# fills a ServiceAccount's token Secret (the verify role's node credential).
# The rest (the namespaces' deletion, garbage collection) are not exercised.
CONTROLLERS=disruption,daemonset,replicaset,serviceaccount,serviceaccount-token,node-lifecycle-controller
LIFETIME=${GPUFLEET_KUBE_LIFETIME:-3600}

build() {
  go_tool_lock kube
  local go key out tmp start cpu0 version
  go=$("$here/ensure-go.sh")
  version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3 }' "$here/kube/go.mod")
  # The steps of the build, not the whole script: changing how the control
  # plane starts does not rebuild it.
  key=$( (cat "$here/kube/go.mod" "$here/kube/go.sum" "$here/kube/tools.go"; echo "$KINE_VERSION"; "$go" env GOVERSION; declare -f build go_env) | sha256sum | cut -c1-12)
  out="$GPUFLEET_CACHE/go-tools/kube-$version-$key"
  if [ -x "$out/bin/kube-apiserver" ] && [ -x "$out/bin/kine" ]; then
    echo "$out/bin"
    return
  fi
  # Static, as upstream builds them (no cgo: kine's SQLite is pure Go since v0.16.1).
  go_env 0 "-trimpath -modcacherw -mod=readonly"
  tmp=$(mktemp -d "$GPUFLEET_CACHE/go-tools.XXXXXX")
  # shellcheck disable=SC2064 # expanded now: the directory of this build
  trap "rm -rf '$tmp'" EXIT
  start=$(date +%s)
  child_cpu cpu0
  log "building kube-apiserver, kube-controller-manager and kube-scheduler $version, and kine $KINE_VERSION (cached afterwards)"
  (cd "$here/kube" && "$go" build -o "$tmp/bin/" -gcflags="all=-N -l" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler) >&2
  local src
  src=$("$go" mod download -json "github.com/k3s-io/kine@$KINE_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  (cd "$src" && "$go" build -o "$tmp/bin/kine" -gcflags="all=-N -l" .) >&2
  mkdir -p "$(dirname "$out")"
  rm -rf "$out"
  mv "$tmp" "$out"
  trap - EXIT
  go_tool_built kube "$version" "$out" "$start" "$cpu0"
  echo "$out/bin"
}

# certificates DIR: a CA (Python's ssl wants its basicConstraints and keyUsage),
# the server's certificate for loopback, a client certificate for each
# identity (group system:masters) and the service accounts' signing key.
certificates() {
  local pki=$1/pki user
  mkdir -p "$pki"
  (
    cd "$pki"
    umask 077
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 7 -subj "/CN=gpufleet test ground CA" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' >server.ext
    printf 'keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' >client.ext
    openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=kube-apiserver" 2>/dev/null
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 7 -extfile server.ext 2>/dev/null
    for user in gpufleet-admin site-operator gpufleet-standin-kubelet; do
      openssl req -newkey rsa:2048 -nodes -keyout "$user.key" -out "$user.csr" -subj "/O=system:masters/CN=$user" 2>/dev/null
      openssl x509 -req -in "$user.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$user.crt" -days 7 -extfile client.ext 2>/dev/null
    done
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  )
}

# kubeconfig DIR PORT USER FILE
kubeconfig() {
  cat >"$4" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters: [{name: test-ground, cluster: {server: "https://127.0.0.1:$2", certificate-authority: "$1/pki/ca.crt"}}]
users: [{name: $3, user: {client-certificate: "$1/pki/$3.crt", client-key: "$1/pki/$3.key"}}]
contexts: [{name: test-ground, context: {cluster: test-ground, user: $3}}]
current-context: test-ground
KUBECONFIG
  chmod 0600 "$4"
}

# spawn DIR NAME COMMAND...: run a process of the control plane in the
# background, for LIFETIME seconds at most, its pid in DIR/NAME.pid.
spawn() {
  local dir=$1 name=$2
  shift 2
  timeout "$LIFETIME" "$@" >"$dir/$name.log" 2>&1 &
  echo $! >"$dir/$name.pid"
}

start() {
  local dir=${1:?usage: kube.sh start DIR [--node NAME ...]} bin port etcd_port nodes=()
  shift
  while [ $# -gt 0 ]; do
    case "$1" in
      --node) nodes+=(--node "${2:?--node takes a name}"); shift 2 ;;
      --node=*) nodes+=(--node "${1#--node=}"); shift ;;
      *) die "kube.sh start: unknown argument $1" ;;
    esac
  done
  bin=$(build)
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  stop "$dir"
  read -r port etcd_port < <(python3 -c 'import socket
ports = []
for _ in range(2):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); ports.append(s)
print(*(s.getsockname()[1] for s in ports))')
  certificates "$dir"
  # Every request of the collection's identity (a write with its body);
  # nothing of anyone else's.
  cat >"$dir/audit-policy.yaml" <<'POLICY'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Request
    users: [gpufleet-admin]
    verbs: [create, update, patch, delete, deletecollection]
  - level: Metadata
    users: [gpufleet-admin]
  - level: None
POLICY
  spawn "$dir" kine "$bin/kine" --endpoint memory:// --listen-address "127.0.0.1:$etcd_port" --metrics-bind-address 0
  spawn "$dir" apiserver "$bin/kube-apiserver" --etcd-servers="http://127.0.0.1:$etcd_port" --secure-port="$port" --bind-address=127.0.0.1 \
    --tls-cert-file="$dir/pki/server.crt" --tls-private-key-file="$dir/pki/server.key" --client-ca-file="$dir/pki/ca.crt" \
    --service-account-issuer="https://127.0.0.1:$port/" --service-account-key-file="$dir/pki/sa.pub" \
    --service-account-signing-key-file="$dir/pki/sa.key" --service-cluster-ip-range=10.0.0.0/24 \
    --authorization-mode=Node,RBAC --audit-policy-file="$dir/audit-policy.yaml" --audit-log-path="$dir/audit.log" \
    --audit-log-format=json --audit-log-mode=blocking
  kubeconfig "$dir" "$port" gpufleet-admin "$dir/kubeconfig"
  kubeconfig "$dir" "$port" site-operator "$dir/operator.kubeconfig"
  kubeconfig "$dir" "$port" gpufleet-standin-kubelet "$dir/kubelet.kubeconfig"
  echo "$port" >"$dir/port"
  local ready=""
  for _ in $(seq 1 240); do
    ready=$(curl -s --cacert "$dir/pki/ca.crt" --cert "$dir/pki/site-operator.crt" --key "$dir/pki/site-operator.key" "https://127.0.0.1:$port/readyz" || true)
    [ "$ready" = ok ] && break
    sleep 0.25
  done
  [ "$ready" = ok ] || { tail -n 20 "$dir/apiserver.log" >&2; die "kube-apiserver did not become ready (log: $dir/apiserver.log)"; }
  spawn "$dir" controller-manager "$bin/kube-controller-manager" --kubeconfig="$dir/operator.kubeconfig" --leader-elect=false \
    --secure-port=0 --controllers="$CONTROLLERS" --service-account-private-key-file="$dir/pki/sa.key" --root-ca-file="$dir/pki/ca.crt"
  spawn "$dir" scheduler "$bin/kube-scheduler" --kubeconfig="$dir/operator.kubeconfig" --leader-elect=false --secure-port=0
  if [ "${#nodes[@]}" -gt 0 ]; then
    spawn "$dir" kubelet "$GPUFLEET_VENV/bin/python" "$here/kube_node.py" --kubeconfig "$dir/kubelet.kubeconfig" "${nodes[@]}"
  fi
  log "Kubernetes API at https://127.0.0.1:$port (kubeconfig: $dir/kubeconfig)"
}

stop() {
  local dir=${1:?usage: kube.sh stop DIR} name pid
  for name in kubelet scheduler controller-manager apiserver kine; do
    [ -f "$dir/$name.pid" ] || continue
    pid=$(cat "$dir/$name.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$dir/$name.pid"
  done
  rm -f "$dir/port"
}

case "${1:-}" in
  build) build ;;
  start) shift; start "$@" ;;
  stop) shift; stop "$@" ;;
  *) die "usage: kube.sh build | start DIR [--node NAME ...] | stop DIR" ;;
esac
