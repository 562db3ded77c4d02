#!/usr/bin/env bash
# A no-op re-run of site.yml vs a ping + fact-gathering play on the same node.
#
#   benchmarks/site_noop.sh                  # needs `make images-all mirror`
#   RUNS=7 PROFILE=1 KEEP=1 BENCH_PREFIX=me- benchmarks/site_noop.sh
#   BENCH_TRANSPORT=podman BENCH_SSH_PORT_BASE=2322 ...   (see _sim_stack.sh)
#
# Starts a simulated Debian 13 node declared with every layer (see
# _sim_stack.sh), converges it once with playbooks/site.yml (which records
# the node's fingerprint), then times RUNS more site.yml runs, each of which
# must report changed=0 and take the fast path (roles/fast_path), against RUNS runs
# of a play that gathers facts and runs ansible.builtin.ping on the same node
# through the same connection: by default SSH with pipelining, as fleets run
# Ansible (BENCH_TRANSPORT=podman: the Podman connection, which costs far more
# per task). Every run is a new ansible-playbook; one within 60 s of the last
# finds its ControlPersist master, on both sides alike, as back-to-back runs
# on a fleet do. The two alternate (site, ping, ping, site, ...) so that load
# from other work hits both alike. Prints each run, the medians, their ratio,
# the transport and the load average. Then FULL_RUNS (default 2) runs with
# --skip-tags fast_path, every layer run, and their ratio, for comparison.
# PROFILE=1 adds one site.yml run with ansible.posix.profile_tasks and prints
# its costliest tasks. KEEP=1 keeps the node and reuses it next time.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/harness/env.sh
. tests/harness/env.sh
# shellcheck source=benchmarks/_sim_stack.sh
. benchmarks/_sim_stack.sh
RUNS=${RUNS:-5}
FULL_RUNS=${FULL_RUNS:-2}
node=${BENCH_PREFIX}noop
work=$(mktemp -d)
cleanup() { [ -n "${KEEP:-}" ] || podman rm -f "$node" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
sim_stack_inventory "$work" "$node"
ping_play=benchmarks/plays/ping-facts.yml

if [ -n "${KEEP:-}" ] && [ "$(podman inspect --format '{{.State.Running}}' "$node" 2>/dev/null)" = true ]; then
  log "reusing $node"
  # This run's key is new.
  [ "$BENCH_TRANSPORT" != ssh ] || sim_stack_access "$node" "$work"
else
  sim_stack_node "$node" "$work"
fi
log "converging $node over $BENCH_TRANSPORT_NAME"
ansible-playbook playbooks/site.yml -i "$work/hosts.yml" >"$work/converge.log" 2>&1 \
  || { tail -40 "$work/converge.log"; die "the converge failed"; }

site_times=()
full_times=()
ping_times=()
# site RUN [--skip-tags fast_path]: one timed no-op run; it must change
# nothing, and with the fast path it must have skipped the layers.
site() {
  local run=$1 start log
  shift
  log="$work/site$run${1:+-full}.log"
  start=$(date +%s.%N)
  ansible-playbook playbooks/site.yml -i "$work/hosts.yml" "$@" >"$log" 2>&1 \
    || { tail -40 "$log"; die "site.yml run $run failed"; }
  grep -q "changed=0 " "$log" || { grep -B3 "^changed:" "$log" | head -30; die "site.yml run $run changed something"; }
  if [ $# -eq 0 ]; then
    site_times+=("$(since "$start")")
    grep -q "every layer is skipped" "$log" || { grep -A3 "Say whether the layers run" "$log"; die "site.yml run $run did not take the fast path"; }
    log "site.yml no-op $run: ${site_times[-1]} s (changed=0, fast path)"
  else
    full_times+=("$(since "$start")")
    log "site.yml no-op $run, every layer (--skip-tags fast_path): ${full_times[-1]} s (changed=0)"
  fi
}
ping() {
  local run=$1 start
  start=$(date +%s.%N)
  ansible-playbook "$ping_play" -i "$work/hosts.yml" >"$work/ping$run.log" 2>&1 \
    || { tail -20 "$work/ping$run.log"; die "ping run $run failed"; }
  ping_times+=("$(since "$start")")
  log "ping + facts $run: ${ping_times[-1]} s"
}
for run in $(seq "$RUNS"); do
  if [ $((run % 2)) -eq 1 ]; then site "$run"; ping "$run"; else ping "$run"; site "$run"; fi
done
for run in $(seq "$FULL_RUNS"); do site "$run" --skip-tags fast_path; done
s=$(printf '%s\n' "${site_times[@]}" | median)
p=$(printf '%s\n' "${ping_times[@]}" | median)
printf 'site.yml no-op:  median %s s (runs: %s), %s tasks ok\n' "$s" "${site_times[*]}" \
  "$(sed -n 's/.* ok=\([0-9]*\).*/\1/p' "$work/site1.log" | tail -1)"
printf 'ping + facts:    median %s s (runs: %s)\n' "$p" "${ping_times[*]}"
printf 'ratio %s (target <= 3); transport %s; load average %s; nproc %s\n' \
  "$(awk -v s="$s" -v p="$p" 'BEGIN { printf "%.2f", s / p }')" "$BENCH_TRANSPORT_NAME" \
  "$(cut -d' ' -f1-3 /proc/loadavg)" "$(nproc)"
if [ "$FULL_RUNS" -gt 0 ]; then
  f=$(printf '%s\n' "${full_times[@]}" | median)
  printf 'every layer (--skip-tags fast_path): median %s s (runs: %s), ratio %s to ping + facts\n' "$f" \
    "${full_times[*]}" "$(awk -v s="$f" -v p="$p" 'BEGIN { printf "%.2f", s / p }')"
fi

if [ -n "${PROFILE:-}" ]; then
  ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks PROFILE_TASKS_TASK_OUTPUT_LIMIT=40 \
    ansible-playbook playbooks/site.yml -i "$work/hosts.yml" >"$work/profile.log" 2>&1
  sed -n '/^=====/,$p' "$work/profile.log"
fi
