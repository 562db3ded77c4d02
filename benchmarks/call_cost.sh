#!/usr/bin/env bash
# What one task costs on a node, by kind: decided on the controller, a stock
# module, and the collection's own read and write modules, over the
# transport fresh_converge.sh and site_noop.sh use (by default SSH with
# pipelining and ControlPersist).
#
#   benchmarks/call_cost.sh                 # needs `make images-all mirror`
#   TASKS=40 RUNS=3 BENCH_PREFIX=me- benchmarks/call_cost.sh
#
# One fresh simulated node (_sim_stack.sh). A play of TASKS separate tasks of
# one kind (separate tasks, not a loop: every task pays the strategy's and
# the worker's cost as the roles' tasks do) is run with each kind's tag, RUNS
# times, alternating kinds; an empty run (no task) is subtracted, which
# leaves ansible-playbook's start and the connection out. Prints each kind's
# median cost per task in milliseconds and the load average. The fresh
# converge's overhead over apt is mostly its calls to the node and its tasks
# decided on the controller (docs/benchmarks.md): these are their unit costs.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/harness/env.sh
. tests/harness/env.sh
# shellcheck source=benchmarks/_sim_stack.sh
. benchmarks/_sim_stack.sh
TASKS=${TASKS:-20} RUNS=${RUNS:-3}
[[ "$TASKS" =~ ^[1-9][0-9]*$ ]] || die "TASKS='$TASKS': expected a whole number of tasks"
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "RUNS='$RUNS': expected a whole number of runs"
node=${BENCH_PREFIX}callcost
work=$(mktemp -d)
cleanup() { podman rm -f "$node" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
sim_stack_inventory "$work" "$node"
sim_stack_node "$node" "$work"

# kind|the task's keys besides name and tags (inside a YAML flow mapping)
kinds=(
  'controller|ansible.builtin.set_fact: {call_cost_value: 1}'
  'ping|ansible.builtin.ping: {}'
  'command|ansible.builtin.command: /bin/true, changed_when: false'
  'node_reads_info|gpufleet.nvidia.node_reads_info: {files: {os: /etc/os-release}}'
  'node_files|gpufleet.nvidia.node_files: {files: [{path: /tmp/call-cost, content: "call cost\n", mode: "0644"}]}'
)
{
  printf -- '---\n- name: Tasks of one kind\n  hosts: gpu_nodes\n  gather_facts: false\n  tasks:\n'
  printf '    - {name: Nothing, ansible.builtin.meta: noop, tags: [empty]}\n'
  for entry in "${kinds[@]}"; do
    kind=${entry%%|*} body=${entry#*|}
    for i in $(seq "$TASKS"); do
      printf '    - {name: %s %s, %s, tags: [%s]}\n' "$kind" "$i" "$body" "$kind"
    done
  done
} >"$work/play.yml"

timed() {
  local start
  start=$(date +%s.%N)
  ansible-playbook -i "$work/hosts.yml" "$work/play.yml" --tags "$1" >"$work/$1.log" 2>&1 || { tail -20 "$work/$1.log" >&2; die "the $1 run failed"; }
  since "$start"
}
# Once untimed, so that the master connection and the controller's module
# cache are warm for every timed run alike.
for entry in "${kinds[@]}"; do timed "${entry%%|*}" >/dev/null; done
declare -A runs
for _ in $(seq "$RUNS"); do
  runs[empty]+="$(timed empty) "
  for entry in "${kinds[@]}"; do
    kind=${entry%%|*}
    runs[$kind]+="$(timed "$kind") "
  done
done
# shellcheck disable=SC2086 # one word per run
empty=$(printf '%s\n' ${runs[empty]} | median)
printf 'empty run: %s s (runs: %s)\n' "$empty" "${runs[empty]% }"
for entry in "${kinds[@]}"; do
  kind=${entry%%|*}
  # shellcheck disable=SC2086 # one word per run
  m=$(printf '%s\n' ${runs[$kind]} | median)
  printf '%-16s %5.0f ms a task (%d tasks; runs: %s s)\n' "$kind" "$(awk -v m="$m" -v e="$empty" -v n="$TASKS" 'BEGIN { print (m - e) * 1000 / n }')" "$TASKS" "${runs[$kind]% }"
done
printf 'transport %s; load average %s; nproc %s\n' "$BENCH_TRANSPORT_NAME" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(nproc)"
