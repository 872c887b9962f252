#!/usr/bin/env bash
# What the GPU runner runs, from the repository root. Modes (any combination, run in this order, one
# summary at the end; no mode given means --default):
#
#   --default   --tests, --bench, --ranks and --python, in that order
#   --tests     every test (in parallel across GPUs through a ctest resource spec when there are 2+),
#               `gpuxfer check` and the README example
#   --bench     the bench's short mode and the probes, with the perf floors; GPUXFER_BENCH_RUNS=3 runs
#               the bench three times and checks that the runs agree (perf_report.py --agree)
#   --ranks     the bench's cross-process short mode (`gpuxfer launch -n <GPUs> gpuxfer-bench --ranks
#               --short`; a world of one, informational, on one GPU) and, with 2+ GPUs, the same over
#               NCCL's network path and torch.distributed's baseline beside it (with torchrun)
#   --python    the Python tests (tests/python, pytest), the Python bench and the Python blocks bench
#               against the module built in build-gpu/python when python3 has nanobind (skipped with the
#               reason otherwise)
#   --one-gpu   the GPU tests again with CUDA_VISIBLE_DEVICES=0 (no resource spec, -j8): only the tests
#               that need separate GPUs (a second GPU, another GPU's memory, NCCL between GPUs) may skip
#   --sanitize  compute-sanitizer memcheck (with a leak report), racecheck, synccheck and initcheck over
#               `gpuxfer check --size 1MiB` (every path) and over the GPU tests with small sizes and a
#               short stress (not the fault tests, which fault on purpose); the GPU and CPU tests built with
#               AddressSanitizer + UBSan (build-asan/). Fails on any sanitizer report
#   --all       all of them
#
# Every mode starts with the topology and a Release build in build-gpu/ (incremental after the first; of
# the gpuxfer tool, the bench and the probes alone where no mode needs the tests or the Python module).
# The runner stops a call at 600 s: every step after the build is held to what is left of
# GPUXFER_CHECK_BUDGET_S (570 s from the start unless set), so that the summary is always written. A step
# stopped there, or not started for want of 20 s, fails the run (an informational one only says so).
# Where --default does not fit one call (two GPUs), --tests, --bench and --ranks --python make three.
#
# Logs go to $OUT when set (else build-gpu/logs), at most 8 files: summary.txt (the GPUs, then the summary),
# build.log, ctest.log (every ctest run, then pytest's output), junit.xml, check.log, bench.json, bench.log
# and sanitize.log (every sanitizer run). Exits non-zero when anything failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
export NCCL_NVLS_ENABLE=0  # never NVLink SHARP/multicast on the runner

run_tests=0 run_bench=0 run_ranks=0 run_one_gpu=0 run_sanitize=0 run_python=0
for arg in "$@"; do
  case $arg in
    --default) run_tests=1 run_bench=1 run_ranks=1 run_python=1 ;;
    --tests) run_tests=1 ;;
    --bench) run_bench=1 ;;
    --ranks) run_ranks=1 ;;
    --one-gpu) run_one_gpu=1 ;;
    --sanitize) run_sanitize=1 ;;
    --python) run_python=1 ;;
    --all) run_tests=1 run_bench=1 run_ranks=1 run_one_gpu=1 run_sanitize=1 run_python=1 ;;
    -h | --help)
      awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"
      exit 0
      ;;
    *)
      echo "gpu-check.sh: unknown argument '$arg' (see --help)" >&2
      exit 2
      ;;
  esac
done
((run_tests + run_bench + run_ranks + run_one_gpu + run_sanitize + run_python > 0)) ||
  run_tests=1 run_bench=1 run_ranks=1 run_python=1

build="build-gpu"
asan_build="build-asan"
logs=${OUT:-$build/logs}
work="$build/gpu-check"  # intermediate logs, merged into the files under $logs
mkdir -p "$logs" "$build" "$work"
jobs=$(nproc)
failures=()
summary=()
budget_s=${GPUXFER_CHECK_BUDGET_S:-570}
min_step_s=20

# Sets `limit` to the seconds step <what> may run: <want> (0: no limit of its own) but no more than what
# is left of the budget. With less than min_step_s left it sets none, records the step as not run (a
# failure unless <informational> is 1) and returns 1.
step_limit() {
  local want=$1 what=$2 informational=${3:-0} left=$((budget_s - SECONDS))
  if ((left < min_step_s)); then
    summary+=("$what: not run: $SECONDS s of the $budget_s s budget gone, a step needs $min_step_s s (GPUXFER_CHECK_BUDGET_S)")
    ((informational)) || failures+=("$what (time budget)")
    return 1
  fi
  limit=$left
  if ((want > 0 && want < left)); then limit=$want; fi
  return 0
}

# " (stopped at its time limit of N s)" when exit code <rc> is timeout's.
stopped_note() {
  if (($1 == 124)); then printf ' (stopped at its time limit of %s s)' "$limit"; fi
}

section() { printf '\n=== %s\n' "$*"; }

# The lines of bench.log from the one "=== <marker>" on.
bench_log_section() { sed -n "/^=== $1\$/,\$p" "$logs/bench.log"; }

# Runs the probe $build/benchmarks/<$1> when built (5 minutes at most), appending its output to bench.log
# under "=== <$1>"; its lines matching the regex $2 go into the summary.
run_probe() {
  local name=$1 pattern=$2 probe=$build/benchmarks/$1 rc line
  [[ -x $probe ]] || return 0
  step_limit 300 "probe ${name#gpuxfer-probe-}" 1 || return 0
  section "probe: ${name#gpuxfer-probe-}"
  local started=$SECONDS
  { printf '\n=== %s\n' "$name"; timeout "$limit" "$probe"; } >>"$logs/bench.log" 2>&1
  rc=$?
  bench_log_section "$name"
  summary+=("probe ${name#gpuxfer-probe-}: exit code $rc$(stopped_note "$rc"), $((SECONDS - started)) s (informational; bench.log):")
  while IFS= read -r line; do summary+=("  $line"); done < <(bench_log_section "$name" | grep -E "$pattern")
}

# Runs the command after <marker> <limit> <tail> under that time limit (seconds; no more than the budget
# leaves), its output appended to bench.log after a line "=== <marker>"; prints the section's last <tail>
# lines and sets appended_rc (124 when stopped at the limit, 125 when not started for want of time).
append_to_bench_log() {
  local marker=$1 want=$2 tail=$3
  shift 3
  if ! step_limit "$want" "$marker" 1; then
    appended_rc=125
    return
  fi
  { printf '\n=== %s\n' "$marker"; timeout "$limit" "$@"; } >>"$logs/bench.log" 2>&1
  appended_rc=$?
  bench_log_section "$marker" | tail -n "$tail"
}

# Rank 0's headline in the cross-process bench's section of bench.log under "=== <marker>".
rank0_headline() {
  bench_log_section "$1" | sed -n 's/^\[0\] //p' | sed -n '/^# headline/,$p' | grep -v '^\s*$'
}

finish() {
  if ((${#failures[@]})); then
    summary+=("RESULT: FAILED: ${failures[*]} ($SECONDS s of the $budget_s s budget)")
  else
    summary+=("RESULT: OK ($SECONDS s of the $budget_s s budget)")
  fi
  {
    cat "$work/topo.txt" 2>/dev/null
    printf '\n=== summary\n'
    printf '%s\n' "${summary[@]}"
  } >"$logs/summary.txt"
  printf '\n=== summary\n'
  printf '%s\n' "${summary[@]}"
  ((${#failures[@]} == 0))
  exit $?
}

# Counts the per-test result lines of a ctest log ("3/7 Test #6: name ....   Passed  0.01 sec"): their
# format is the same in every cmake version, unlike the closing line. Sets total, passed, skipped,
# failed; tests disabled in the source (gtest's DISABLED_, "Not Run (Disabled)") count as none of them.
count_ctest() {
  local log=$1 results disabled
  results=$(grep -E '^ *[0-9]+/[0-9]+ +Test +#[0-9]+: ' "$log")
  disabled=$(grep -c 'Not Run (Disabled)' <<<"$results")
  total=$(($(grep -c . <<<"$results") - disabled))
  passed=$(grep -cE ' Passed +[0-9.]+ sec' <<<"$results")
  skipped=$(grep -c '\*\*\*Skipped' <<<"$results")
  failed=$((total - passed - skipped))
}

stress_totals() {
  grep -ohE '\[ stress   \] total:.*' "$@" 2>/dev/null | sort -u
}

# The skipped tests of a ctest junit file. skip_reasons <file>: "<count> x <reason>", one line per reason
# (GoogleTest's message after "Skipped", else ctest's own), most frequent first. skips_one_gpu_should_run
# <file>: the names of those whose reason is not one only separate GPUs answer (a second GPU, memory of
# another GPU, NCCL between GPUs): on one GPU with simulated devices, the skips that should not happen.
junit_skips() {
  python3 - "$1" "$2" <<'PY'
import collections, re, sys, xml.etree.ElementTree as ET
real_gpus = re.compile(r"needs 2 GPUs|needs separate GPUs|NCCL is off between simulated devices|needs NCCL")
reasons = collections.Counter()
try:
    cases = ET.parse(sys.argv[1]).getroot().iter("testcase")
except (OSError, ET.ParseError):
    cases = []
for case in cases:
    skipped = case.find("skipped")
    if case.get("status") != "skipped" and skipped is None:
        continue
    out = case.findtext("system-out") or ""
    if sys.argv[2] == "unexpected":
        if not real_gpus.search(out):
            print(case.get("name"))
        continue
    m = re.search(r"Skipped\n(.+)", out)
    why = m.group(1).strip() if m else ((skipped.get("message") if skipped is not None else "") or "no reason given")
    reasons[re.sub(r"\d{3,}", "N", why)[:160]] += 1
for why, n in reasons.most_common():
    print(f"{n} x {why}")
PY
}
skip_reasons() { junit_skips "$1" reasons; }
skips_one_gpu_should_run() { junit_skips "$1" unexpected; }

section "GPUs"
{
  nvidia-smi -L
  echo
  nvidia-smi topo -m
} 2>&1 | tee "$work/topo.txt"

# The Python module joins the build when python3 has nanobind and its headers (the runner's venv does).
python_skip=""
if ! python_why=$(python3 -c "import nanobind" 2>&1); then
  python_skip="python3 cannot import nanobind ($(tail -n 1 <<<"$python_why"))"
elif ! python3 -c "import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))"; then
  python_skip="python3 has no Python.h (install its development headers)"
fi
if [[ -z $python_skip ]]; then
  python_args=(-DGPUXFER_BUILD_PYTHON=ON "-DPython_EXECUTABLE=$(command -v python3)"
    "-Dnanobind_DIR=$(python3 -m nanobind --cmake_dir)")
else
  python_args=(-DGPUXFER_BUILD_PYTHON=OFF)
fi

# --bench and --ranks alone need only the gpuxfer tool, the bench and the probes: a fresh runner builds
# those in a fraction of the time that everything takes (the tests are most of it).
targets=()
if ((!run_tests && !run_one_gpu && !run_sanitize && !run_python)); then
  targets=(--target gpuxfer_cli gpuxfer_benchmarks)
fi

build_tree() {  # extra cmake arguments...
  cmake -G Ninja -B "$build" -DCMAKE_BUILD_TYPE=Release "$@" >>"$logs/build.log" 2>&1 &&
    cmake --build "$build" -j "$jobs" "${targets[@]}" >>"$logs/build.log" 2>&1
}

section "configure and build ($jobs jobs)"
started=$SECONDS
: >"$logs/build.log"
if build_tree "${python_args[@]}"; then
  tail -n 3 "$logs/build.log"
  summary+=("build: OK ($((SECONDS - started)) s)")
elif [[ -z $python_skip ]] && build_tree -DGPUXFER_BUILD_PYTHON=OFF; then
  # The Python module alone failed: the rest of the run still tells something.
  grep -E '^FAILED|error' "$logs/build.log" | head -n 20
  python_skip="the Python module did not build (build.log); the rest was built without it"
  summary+=("build: OK without the Python module (build.log)")
  failures+=("python build")
else
  tail -n 40 "$logs/build.log"
  summary+=("build: FAILED (build.log)")
  failures+=("build")
  finish
fi
gpuxfer=$build/apps/gpuxfer

# Sets ngpus from a ctest resource spec of the visible GPUs ($spec), written on the first call.
count_gpus() {
  [[ -n ${ngpus:-} ]] && return
  spec=$PWD/$build/spec.json  # absolute: ctest reads it relative to the test directory
  "$gpuxfer" resource-spec -o "$spec" || failures+=("resource-spec")
  ngpus=$(grep -c '"id"' "$spec" 2>/dev/null)
  ngpus=${ngpus:-0}
}

section "gpuxfer topo"
{
  echo
  "$gpuxfer" topo
} 2>&1 | tee -a "$work/topo.txt"

: >"$logs/ctest.log"
: >"$logs/bench.log"

# --- the tests ---------------------------------------------------------------------------------------
if ((run_tests)); then
  section "tests"
  count_gpus
  junit=$(realpath -m "$logs/junit.xml")
  if ((ngpus >= 2)); then
    ctest_args=(--resource-spec-file "$spec" -j $((ngpus * 2)))
  else
    # No spec (the multi-GPU tests run on simulated devices); four tests at a time, the GPU's tests sharing it
    # as the spec's six slots a GPU let them (one at a time took 384 s of a 600 s runner call).
    ctest_args=(-j4)
  fi
  echo "$ngpus GPUs visible: ctest ${ctest_args[*]}"
  started=$SECONDS
  : >"$work/ctest.log"
  if step_limit 0 "ctest"; then
    timeout "$limit" ctest --test-dir "$build" "${ctest_args[@]}" --timeout 300 --output-on-failure \
      --output-junit "$junit" >"$work/ctest.log" 2>&1
    ctest_rc=$?
    cat "$work/ctest.log" >>"$logs/ctest.log"
    grep -E '\*\*\*|tests passed|tests failed' "$work/ctest.log" | tail -n 40
    count_ctest "$work/ctest.log"
    if ((total > 0)); then
      summary+=("ctest: $passed passed, $skipped skipped, $failed failed of $total ($ngpus GPUs, $((SECONDS - started)) s)$(stopped_note "$ctest_rc")")
    else
      summary+=("ctest: no test ran (exit code $ctest_rc; ctest.log)")
      failures+=("ctest ran nothing")
    fi
    while IFS= read -r line; do summary+=("  skipped: $line"); done < <(skip_reasons "$junit" | head -n 20)
    ((ctest_rc == 0)) || failures+=("ctest")
    # The stress test's own report: operations, bytes, time, the pool at the end (in the junit file when it
    # passed: ctest prints the output of failed tests only).
    while IFS= read -r line; do summary+=("  $line"); done < <(stress_totals "$work/ctest.log" "$junit")
  fi

  section "gpuxfer check"
  : >"$logs/check.log"
  if step_limit 0 "gpuxfer check"; then
    timeout "$limit" "$gpuxfer" check >"$logs/check.log" 2>&1
    check_rc=$?
    summary+=("check: $(grep -c '^PASS' "$logs/check.log") PASS, $(grep -c '^FAIL' "$logs/check.log") FAIL, $(grep -c '^SKIP' "$logs/check.log") SKIP (exit code $check_rc$(stopped_note "$check_rc"))")
    ((check_rc == 0)) || failures+=("gpuxfer check")
  fi
  "$build/apps/seed_example" >>"$logs/check.log" 2>&1
  example_rc=$?
  cat "$logs/check.log"
  summary+=("seed_example: $( ((example_rc == 0)) && echo OK || echo "FAILED (exit code $example_rc)")")
  ((example_rc == 0)) || failures+=("seed_example")
fi

# --- the bench -------------------------------------------------------------------------------------
bench=$build/benchmarks/gpuxfer-bench
if ((run_bench)); then
  # GPUXFER_BENCH_RUNS=N runs the bench N times back to back (the first run's JSON is bench.json, the
  # others stay in $work), checks each against the floors and then the runs' agreement: every headline
  # row with a target within 5% (perf_report.py --agree).
  bench_runs=${GPUXFER_BENCH_RUNS:-1}
  bench_jsons=()
  : >"$logs/bench.log"
  for ((run = 1; run <= bench_runs; run++)); do
    [[ -x $bench ]] && step_limit 0 "bench run $run of $bench_runs" || break
    json=$logs/bench.json
    ((run == 1)) || json=$work/bench-$run.json
    section "bench (short), run $run of $bench_runs"
    started=$SECONDS
    timeout "$limit" "$bench" --short --json "$json" >"$work/bench-run.log" 2>&1
    bench_rc=$?
    cat "$work/bench-run.log" >>"$logs/bench.log"
    tail -n 30 "$work/bench-run.log"
    if ((run == 1)); then
      summary+=("bench: exit code $bench_rc$(stopped_note "$bench_rc"), $((SECONDS - started)) s; headline (ratio to the ceiling measured in the same run):")
      while IFS= read -r line; do summary+=("  $line"); done < <(
        sed -n '/^# headline/,$p' "$work/bench-run.log" | grep -v '^\s*$')
    else
      summary+=("bench run $run of $bench_runs: exit code $bench_rc$(stopped_note "$bench_rc"), $((SECONDS - started)) s")
    fi
    ((bench_rc == 0)) || failures+=("bench (run $run)")
    # A headline ratio clearly below its floor (benchmarks/data/floors.json) is a regression: fail at once.
    # A run that failed a target still counts in the agreement: whether the numbers repeat is its own
    # question.
    if [[ -s $json ]]; then
      bench_jsons+=("$json")
      floors=$(python3 benchmarks/python/perf_report.py "$json" --floors benchmarks/data/floors.json 2>&1)
      floors_rc=$?
      while IFS= read -r line; do summary+=("  $line"); done <<<"$floors"
      ((floors_rc == 0)) || failures+=("perf floors (run $run)")
    fi
  done
  if ((bench_runs > 1)); then
    if ((${#bench_jsons[@]} == bench_runs)); then
      agree=$(python3 benchmarks/python/perf_report.py "${bench_jsons[0]}" --agree "${bench_jsons[@]:1}" 2>&1)
      agree_rc=$?
      while IFS= read -r line; do summary+=("  $line"); done <<<"$agree"
      ((agree_rc == 0)) || failures+=("perf agreement")
    else
      summary+=("perf agreement: not checked: ${#bench_jsons[@]} of $bench_runs runs gave results")
      failures+=("perf agreement")
    fi
  fi
  if [[ ! -x $bench ]]; then
    summary+=("bench: no $bench, not run")
  fi
  # The probes (informational, appended to bench.log): the small calls alone, back to back and after
  # pauses; a pageable gather with part of its destination registered per call; a small copy replayed from
  # a graph as a memcpy node and as a kernel node; a batch of blocks on one stream and split over several.
  run_probe gpuxfer-probe-small-calls "median|timeline|probe-small-calls:"
  run_probe gpuxfer-probe-partial-registration "alone|registered per call|probe-partial-registration:"
  run_probe gpuxfer-probe-graph-nodes "round 2|wrong bytes:|probe-graph-nodes:"
  run_probe gpuxfer-probe-batch-streams "KiB x|probe-batch-streams:"
fi

# --- the cross-process bench ----------------------------------------------------------------------
if ((run_ranks)); then
  count_gpus
  # The cross-process bench, one rank per GPU under `gpuxfer launch`, appended to bench.log: with 2+ GPUs
  # the measurement (its failure fails the run); with one a world of one, a smoke run only (NCCL refuses
  # two ranks on one GPU). Its JSON stays in $work (8 files at most come back); with 2+ GPUs and torchrun,
  # torch.distributed's numbers beside it (informational).
  if [[ -x $bench ]] && ((ngpus >= 1)); then
    ranks_json=$work/bench-ranks.json
    rm -f "$ranks_json"
    section "bench --ranks (short, $ngpus ranks)"
    marker="gpuxfer launch -n $ngpus gpuxfer-bench --ranks --short"
    ranks_limit=$((ngpus >= 2 ? 300 : 120))  # a world of one takes well under a minute
    append_to_bench_log "$marker" "$ranks_limit" 30 "$gpuxfer" launch -n "$ngpus" "$bench" --ranks --short --json "$ranks_json"
    ranks_rc=$appended_rc
    if ((ranks_rc == 125)); then  # not started: the budget was spent (said above)
      if ((ngpus >= 2)); then failures+=("bench --ranks (time budget)"); fi
    elif ((ngpus >= 2)); then
      summary+=("bench --ranks: $ngpus ranks, exit code $ranks_rc$(stopped_note "$ranks_rc"); headline (ratio to the single-process reference, same run):")
      ((ranks_rc == 0)) || failures+=("bench --ranks")
    else
      summary+=("bench --ranks: a world of one (smoke, informational; 2+ GPUs measure), exit code $ranks_rc$(stopped_note "$ranks_rc"):")
    fi
    while IFS= read -r line; do summary+=("  $line"); done < <(rank0_headline "$marker")
    if ((ngpus >= 2)); then
      # The path between nodes on this host (issue 11's forced network path, informational): NCCL's socket
      # transport only, and each rank a node of its own, so that the host operations take NCCL too.
      section "bench --ranks over the network path (short, $ngpus ranks)"
      network=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo)
      marker="${network[*]} gpuxfer launch -n $ngpus --node-per-rank gpuxfer-bench --ranks --short"
      append_to_bench_log "$marker" 300 20 env "${network[@]}" "$gpuxfer" launch -n "$ngpus" --node-per-rank "$bench" --ranks --short
      ((appended_rc == 125)) || summary+=("bench --ranks, network path: exit code $appended_rc$(stopped_note "$appended_rc") (informational; bench.log):")
      while IFS= read -r line; do summary+=("  $line"); done < <(rank0_headline "$marker")
    fi
    if ((ngpus >= 2)) && command -v torchrun >/dev/null; then
      section "torch.distributed baseline (short, $ngpus ranks)"
      marker="torchrun --nproc-per-node $ngpus torch_distributed_baseline.py --short"
      compare=()
      [[ -s $ranks_json ]] && compare=(--gpuxfer "$ranks_json")
      append_to_bench_log "$marker" 300 20 torchrun --nproc-per-node "$ngpus" \
        benchmarks/python/torch_distributed_baseline.py --short "${compare[@]}"
      ((appended_rc == 125)) || summary+=("torch.distributed baseline: exit code $appended_rc$(stopped_note "$appended_rc") (informational; bench.log):")
      while IFS= read -r line; do summary+=("  $line"); done < <(
        bench_log_section "$marker" | grep -E '^# (rank_|torch_distributed_baseline)|skipped')
    fi
  elif [[ ! -x $bench ]]; then
    summary+=("bench --ranks: no $bench, not run")
  else
    summary+=("bench --ranks: not run: no GPU visible")
  fi
fi

# --- the Python package --------------------------------------------------------------------------------
if ((run_python)); then
  # shellcheck source=scripts/gpu-check-python.sh
  source "scripts/gpu-check-python.sh"
  run_python_tests
fi

# --- one GPU -------------------------------------------------------------------------------------------
if ((run_one_gpu)) && ! step_limit 0 "one-GPU ctest"; then run_one_gpu=0; fi
if ((run_one_gpu)); then
  section "GPU tests on one GPU (CUDA_VISIBLE_DEVICES=0, -j8)"
  started=$SECONDS
  # The stress test shares the GPU with 7 other tests here: its 150 s limit is for the GPUs alone.
  # GPUXFER_ONE_GPU_STRESS_OPS shortens the stress here (the full one runs in the default mode).
  CUDA_VISIBLE_DEVICES=0 GPUXFER_STRESS_TIMEOUT_S=280 GPUXFER_STRESS_OPS=${GPUXFER_ONE_GPU_STRESS_OPS:-500} \
    timeout "$limit" ctest --test-dir "$build" -L gpu -j8 --timeout 300 --output-on-failure \
    --output-junit "$(realpath -m "$work/junit-one-gpu.xml")" >"$work/ctest-one-gpu.log" 2>&1
  one_rc=$?
  {
    printf '\n=== GPU tests on one GPU (CUDA_VISIBLE_DEVICES=0)\n'
    cat "$work/ctest-one-gpu.log"
  } >>"$logs/ctest.log"
  grep -E 'tests passed|tests failed' "$work/ctest-one-gpu.log"
  count_ctest "$work/ctest-one-gpu.log"
  # Only the tests that need separate GPUs may skip (the others run on simulated devices).
  unexpected=$(skips_one_gpu_should_run "$work/junit-one-gpu.xml")
  summary+=("one GPU: $passed passed, $skipped skipped, $failed failed of $total ($((SECONDS - started)) s)$(stopped_note "$one_rc"); $(
    [[ -z $unexpected ]] && echo "every skip needs separate GPUs" || echo "$(grep -c . <<<"$unexpected") skips of 1-GPU tests")")
  while IFS= read -r name; do [[ -n $name ]] && summary+=("  unexpected skip: $name"); done < <(head -n 20 <<<"$unexpected")
  while IFS= read -r line; do summary+=("  skipped: $line"); done < <(skip_reasons "$work/junit-one-gpu.xml" | head -n 20)
  while IFS= read -r line; do summary+=("  $line"); done < <(stress_totals "$work/ctest-one-gpu.log" "$work/junit-one-gpu.xml")
  ((total > 0 && one_rc == 0)) || failures+=("one-GPU ctest")
  [[ -z $unexpected ]] || failures+=("one-GPU skips")
fi

# --- sanitizers ----------------------------------------------------------------------------------------
if ((run_sanitize)) && ! step_limit 0 "sanitizers"; then run_sanitize=0; fi
if ((run_sanitize)); then
  section "sanitizers"
  san_log=$logs/sanitize.log
  : >"$san_log"
  caps=(GPUXFER_TEST_MAX_BYTES=4MiB GPUXFER_STRESS_THREADS=2 GPUXFER_STRESS_OPS=20 GPUXFER_NCCL=0)
  asan_env=(ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1)
  # A distinct exit code for "the sanitizer reported something", apart from the program's own failures.
  cs=(compute-sanitizer --error-exitcode 86 --report-api-errors no)
  pids=()
  # Time limits and the tests under memcheck can be narrowed for a short lease of the runner.
  check_limit=${GPUXFER_SANITIZE_LIMIT_S:-240}
  tests_limit=${GPUXFER_SANITIZE_LIMIT_S:-300}
  # Within the budget: the runs below start now, the ASan build too (the ASan tests once it is built).
  check_limit=$((check_limit < limit ? check_limit : limit))
  tests_limit=$((tests_limit < limit ? tests_limit : limit))
  asan_limit=$limit
  tests_filter=${GPUXFER_SANITIZE_FILTER:--*DeathTest*:*nccl*}

  # Runs a command in the background under a time limit: its output in $work/NAME.log, "EXIT SECONDS"
  # in $work/NAME.rc. Everything runs at once: the sanitizers keep the GPUs busy, the ASan build the CPUs.
  background() {
    local name=$1 limit=$2
    shift 2
    rm -f "$work/$name.log" "$work/$name.rc"
    (
      started=$SECONDS
      timeout "$limit" "$@" >"$work/$name.log" 2>&1
      echo "$? $((SECONDS - started))" >"$work/$name.rc"
    ) &
    pids+=($!)
  }

  # The count a compute-sanitizer run reported ("ERROR SUMMARY: N errors", racecheck's "RACECHECK
  # SUMMARY: H hazards displayed (E errors, W warnings)"), or "none" when it printed no summary.
  errors_in() {
    local race
    race=$(grep -oE 'RACECHECK SUMMARY: [0-9]+ hazards displayed \([0-9]+ errors' "$1" | tail -n 1 |
      grep -oE '[0-9]+ errors' | grep -oE '[0-9]+')
    if [[ -n $race ]]; then
      echo "$race"
      return
    fi
    grep -oE 'ERROR SUMMARY: [0-9]+ error' "$1" | tail -n 1 | grep -oE '[0-9]+' || echo none
  }

  # Adds a run's log to sanitize.log under a header; sets rc and secs.
  collect() {
    local name=$1 what=$2
    read -r rc secs <"$work/$name.rc" 2>/dev/null || { rc=255 secs=0; }
    {
      printf '\n=== %s: %s (exit code %s, %s s)\n' "$name" "$what" "$rc" "$secs"
      cat "$work/$name.log"
    } >>"$san_log"
  }

  # The first reports of a run, counted by kind, for the summary.
  first_reports() {
    grep -E '^========= +(Invalid|Race|Barrier|Uninitialized|Program hit|Malloc|Leaked|Misaligned|Out-of-range|Warning|Error)' "$1" |
      sed -E 's/0x[0-9a-f]+/0x.../g' | sort | uniq -c | sort -rn | head -n 5
  }

  (cmake --preset asan && timeout "$asan_limit" cmake --build "$asan_build" -j "$jobs" --target gpuxfer_gpu_tests gpuxfer_cpu_tests) \
    >"$work/asan-build.log" 2>&1 &
  asan_pid=$!

  if command -v compute-sanitizer >/dev/null; then
    check=("$gpuxfer" check --size 1MiB)
    background memcheck-check "$check_limit" "${cs[@]}" --tool memcheck "${check[@]}"
    background racecheck-check "$check_limit" "${cs[@]}" --tool racecheck "${check[@]}"
    background synccheck-check "$check_limit" "${cs[@]}" --tool synccheck "${check[@]}"
    # NCCL off under initcheck: NCCL's LL-protocol broadcast kernel reads its own flag buffers before
    # writing them, thousands of reports inside libnccl (seen on the runner), none in gpuxfer's code.
    background initcheck-check "$check_limit" env GPUXFER_NCCL=0 "${cs[@]}" --tool initcheck "${check[@]}"
    # Leaks apart, for the record: the CUDA runtime and NCCL may keep allocations to the end.
    background leakcheck-check "$check_limit" "${cs[@]}" --tool memcheck --leak-check full "${check[@]}"
    # The GPU tests in one process per tool, small: every single- and two-GPU test but the fault tests
    # (which fault on purpose) and NCCL's own path (it runs under three tools in gpuxfer check above).
    # Racecheck loses track of the kernel launches of one test (4 threads copying peer to peer both ways,
    # checking on the legacy stream) and hangs: "Internal Sanitizer Error: Detected a failure to track a
    # kernel launch" (compute-sanitizer 2025.3.1, on the runner). It runs under the other three tools. So
    # does the race of device broadcasts and opposite copies from two threads: under racecheck on two
    # simulated devices its first round never ended (180 s watchdog); under the other tools it passes.
    racecheck_skip=MultiGpuThreads.CopiesBothWaysAtOnceOnSeparateEngines:MultiGpuNcclStreams.BroadcastsAndOppositeCopiesFromTwoThreadsNeitherHangNorCorrupt
    for tool in memcheck racecheck synccheck initcheck; do
      filter=$tests_filter
      [[ $tool == racecheck ]] && filter+="$([[ $filter == *-* ]] && echo : || echo -)$racecheck_skip"
      background "$tool-tests" "$tests_limit" env "${caps[@]}" "${cs[@]}" --tool "$tool" \
        "$build/tests/gpuxfer_gpu_tests" --gtest_brief=1 "--gtest_filter=$filter"
    done
  else
    summary+=("sanitize: compute-sanitizer is not on PATH")
    failures+=("compute-sanitizer missing")
  fi

  echo "compute-sanitizer runs started; building $asan_build meanwhile"
  if wait "$asan_pid"; then
    summary+=("asan build: OK")
    if step_limit "$tests_limit" "ASan tests"; then
      background asan-gpu-tests "$limit" env "${asan_env[@]}" "${caps[@]}" "$asan_build/tests/gpuxfer_gpu_tests" --gtest_brief=1
      background asan-cpu-tests "$limit" env "${asan_env[@]}" "$asan_build/tests/gpuxfer_cpu_tests" --gtest_brief=1
    fi
  else
    summary+=("asan build: FAILED (sanitize.log)")
    failures+=("asan build")
  fi
  {
    printf '\n=== ASan + UBSan build (%s)\n' "$asan_build"
    tail -n 40 "$work/asan-build.log"
  } >>"$san_log"
  echo "waiting for ${#pids[@]} runs"
  wait "${pids[@]}"

  gtest_counts() {
    grep -E '^\[  (PASSED  |FAILED  |SKIPPED )\] [0-9]+ tests?' "$1" | sed -E 's/(, listed below:|[,.])$//' | tr '\n' ' '
  }
  for name in {memcheck,racecheck,synccheck,initcheck,leakcheck}-check {memcheck,racecheck,synccheck,initcheck}-tests; do
    [[ -f $work/$name.rc ]] || continue
    collect "$name" "compute-sanitizer"
    errors=$(errors_in "$work/$name.log")
    line="sanitize $name: $errors errors (exit code $rc, $secs s)"
    [[ $name == *-tests ]] && line+="; $(gtest_counts "$work/$name.log")"
    ((rc == 124)) && line+=" TIMED OUT"
    if [[ $name == leakcheck-check ]]; then
      leaks=$(grep -cE '^========= +Leaked [0-9]+ bytes' "$work/$name.log")
      line="sanitize $name: $leaks leaked allocations at exit (informational; backtraces in sanitize.log), exit code $rc"
      summary+=("$line")
      echo "$line"
      continue
    fi
    summary+=("$line")
    echo "$line"
    if [[ $errors != 0 ]] || ((rc != 0)); then
      failures+=("$name")
      while IFS= read -r first; do summary+=("  $first"); done < <(first_reports "$work/$name.log")
    fi
  done
  for kind in gpu cpu; do
    name="asan-$kind-tests"
    [[ -f $work/$name.rc ]] || continue
    collect "$name" "ASan + UBSan, $asan_build/tests/gpuxfer_${kind}_tests"
    reports=$(grep -cE 'ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:' "$work/$name.log")
    line="sanitize $name: $reports reports (exit code $rc, $secs s); $(gtest_counts "$work/$name.log")"
    ((rc == 124)) && line+=" TIMED OUT"
    summary+=("$line")
    echo "$line"
    if ((reports != 0 || rc != 0)); then
      failures+=("$name")
      while IFS= read -r first; do summary+=("  $first"); done < <(
        grep -E 'ERROR: AddressSanitizer|runtime error:|^\[  FAILED  \]' "$work/$name.log" | head -n 5)
    fi
  done
fi

finish
