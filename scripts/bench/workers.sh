# Shared by the benchmarks that start `pushfan worker` processes.

# Waits until the workers' logs (the files given) show every group assigned (four per
# worker: planner, sender, control, events) and no assignment for 3 s, or 60 s have passed.
wait_for_groups() {
  local want=$(( $# * 4 )) last=-1 still=0 count
  for _ in $(seq 600); do
    count=$(cat "$@" 2>/dev/null | grep -c 'event=kafka.assigned' || true)
    if [ "$count" = "$last" ]; then still=$((still + 1)); else still=0; last=$count; fi
    [ "$count" -ge "$want" ] && [ "$still" -ge 30 ] && return 0
    sleep 0.1
  done
}

