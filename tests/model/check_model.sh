#!/usr/bin/env bash
# Exhaustive check of the Hopper kernels' synchronization models with Spin. The
# forward (fwd_sm90_sync.pml): every shape of the tile table (two consumers with 2
# or 3 stages, three consumers with 3), one and two Q buffers, with and without the
# TMA-store epilogue, O in its own buffer or over V, static and dynamic schedules,
# a tile whose rows see no key. The backward (bwd_sm90_sync.pml): head dim 64's late
# dQ and head dim 128's own. Then each planted mistake (BUG_*) must be found, so the
# models are known to be able to fail.
#   check_model.sh [work dir]     exit 77 (skipped) when spin or cc is missing
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${1:-$(mktemp -d)}
mkdir -p "$work"
command -v spin >/dev/null || { echo "spin not found (Debian package spin): model check skipped"; exit 77; }
cc=$(command -v cc || command -v gcc || true)
[ -n "$cc" ] || { echo "no C compiler: model check skipped"; exit 77; }

passed=0
failed=0
# verify NAME EXPECT(ok|error) -Dflags...: builds and runs the verifier of $model in
# its own folder.
model=fwd_sm90_sync.pml
verify() {
  local name=$1 expect=$2
  shift 2
  local dir="$work/$name"
  rm -rf "$dir" && mkdir -p "$dir" && cp "$here/$model" "$dir/"
  local result
  result=$(cd "$dir" && spin -a "$@" "$model" >spin.log 2>&1 && "$cc" -O2 -DSAFETY -DCOLLAPSE -o pan pan.c 2>cc.log &&
    ./pan -m400000 >pan.log 2>&1 && grep -E "errors: [0-9]+" -o pan.log | head -1)
  local errors=${result#errors: }
  if [ -z "$result" ]; then
    echo "FAIL $name: the verifier did not run ($*); see $dir"
    failed=$((failed + 1))
  elif { [ "$expect" = ok ] && [ "$errors" = 0 ]; } || { [ "$expect" = error ] && [ "$errors" != 0 ]; }; then
    echo "ok   $name: $errors errors, $(grep -Eo '[0-9]+ states, stored' "$dir/pan.log") ($*)"
    passed=$((passed + 1))
  else
    echo "FAIL $name: $errors errors, expected $expect ($*)"
    grep -E "assertion violated|invalid end state" "$dir/pan.log" | head -3
    failed=$((failed + 1))
  fi
}

for q in 1 2; do
  for otma in 0 1; do
    for own in 0 1; do
      verify "nc2_st2_q${q}_otma${otma}_own${own}" ok -DNC=2 -DST=2 -DQBUF=$q -DOTMA=$otma -DOWN=$own
    done
  done
done
verify nc2_st2_long_first ok -DNC=2 -DST=2 -DQBUF=2 -DOTMA=1 -DOWN=0 -DNK0=4
verify nc2_st2_no_keys_tile ok -DNC=2 -DST=2 -DQBUF=2 -DOTMA=1 -DOWN=1 -DNK1=0
for own in 0 1; do
  verify "nc2_st2_dynamic_own${own}" ok -DNC=2 -DST=2 -DQBUF=2 -DOTMA=1 -DOWN=$own -DDYN=1 -DNK1=0
done
verify nc2_st2_dynamic_q1 ok -DNC=2 -DST=2 -DQBUF=1 -DOTMA=0 -DDYN=1
# The next tile's index taken under the last P V (the plain two-consumer kernels up to d 96).
verify nc2_st3_dynamic_early ok -DNC=2 -DST=3 -DQBUF=2 -DOTMA=0 -DDYN=1 -DEARLY=1 -DNK1=0
verify nc2_st2_dynamic_early_q1 ok -DNC=2 -DST=2 -DQBUF=1 -DOTMA=1 -DOWN=1 -DDYN=1 -DEARLY=1
verify nc2_st3_q2_own ok -DNC=2 -DST=3 -DQBUF=2 -DOTMA=1 -DOWN=1
verify nc3_st3_q2_own ok -DNC=3 -DST=3 -DQBUF=2 -DOTMA=1 -DOWN=1
verify nc3_st3_q1_plain ok -DNC=3 -DST=3 -DQBUF=1 -DOTMA=0

verify bug_q_parity error -DBUG_Q_PARITY -DQBUF=2
verify bug_early_q_release error -DBUG_EARLY_Q_RELEASE -DQBUF=1
verify bug_no_o_wait error -DBUG_NO_O_WAIT -DOTMA=1 -DOWN=0
verify bug_no_epilogue_barrier error -DBUG_NO_EPILOGUE_BARRIER -DOTMA=1 -DOWN=0
verify bug_no_store_wait error -DBUG_NO_STORE_WAIT -DOTMA=1 -DOWN=1
verify bug_no_last_turn error -DBUG_NO_LAST_TURN
verify bug_queue_no_wait error -DBUG_QUEUE_NO_WAIT -DDYN=1 -DNK1=0
verify bug_early_repop error -DBUG_EARLY_REPOP -DDYN=1 -DEARLY=1

model=bwd_sm90_sync.pml
verify bwd_d64_late_dq ok -DDQLATE=1
verify bwd_d128_own_dq ok -DDQLATE=0
verify bwd_bug_two_panels error -DDQLATE=1 -DP=2
verify bwd_bug_no_panel_wait error -DBUG_NO_PANEL_WAIT
verify bwd_bug_early_q_empty error -DBUG_EARLY_Q_EMPTY -DDQLATE=0

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
