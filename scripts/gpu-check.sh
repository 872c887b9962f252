#!/usr/bin/env bash
# What the GPU runner runs, from the repository root: topology, a Release build, every test (in parallel
# across GPUs through a ctest resource spec when there are 2+), `gpuxfer check`, the README example and
# the bench's short mode when it exists. Logs go to $OUT when set (else build-gpu/logs); the summary is
# printed last. Exits non-zero when anything failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
export NCCL_NVLS_ENABLE=0  # never NVLink SHARP/multicast on the runner

build="build-gpu"
logs=${OUT:-$build/logs}
mkdir -p "$logs" "$build"
jobs=$(nproc)
failures=()
summary=()

section() { printf '\n=== %s\n' "$*"; }

section "GPUs"
{
  nvidia-smi -L
  echo
  nvidia-smi topo -m
} 2>&1 | tee "$logs/topo.txt"

section "configure and build ($jobs jobs)"
if cmake -G Ninja -B "$build" -DCMAKE_BUILD_TYPE=Release >"$logs/build.log" 2>&1 &&
  cmake --build "$build" -j "$jobs" >>"$logs/build.log" 2>&1; then
  tail -n 3 "$logs/build.log"
  summary+=("build: OK")
else
  tail -n 40 "$logs/build.log"
  summary+=("build: FAILED (build.log)")
  printf '\n=== summary\n%s\nRESULT: FAILED: build\n' "${summary[@]}" | tee "$logs/summary.txt"
  exit 1
fi
gpuxfer=$build/apps/gpuxfer

section "gpuxfer topo"
{
  echo
  "$gpuxfer" topo
} 2>&1 | tee -a "$logs/topo.txt"

section "tests"
spec=$PWD/$build/spec.json  # absolute: ctest reads it relative to the test directory
"$gpuxfer" resource-spec -o "$spec" || failures+=("resource-spec")
ngpus=$(grep -c '"id"' "$spec" 2>/dev/null)
ngpus=${ngpus:-0}
junit=$(realpath -m "$logs/junit.xml")
if ((ngpus >= 2)); then
  ctest_args=(--resource-spec-file "$spec" -j $((ngpus * 6)))  # 6 slots per GPU in the spec
else
  ctest_args=(-j6)  # one GPU: every test sees it; 2-GPU tests skip with their reason
fi
echo "$ngpus GPUs visible: ctest ${ctest_args[*]}"
ctest --test-dir "$build" "${ctest_args[@]}" --timeout 300 --output-on-failure --output-junit "$junit" \
  >"$logs/ctest.log" 2>&1
ctest_rc=$?
grep -E '\*\*\*|tests passed|tests failed' "$logs/ctest.log" | tail -n 40
# Count the per-test result lines ("3/7 Test #6: name ....   Passed  0.01 sec"): their format is the
# same in every cmake version, unlike the closing line.
results=$(grep -E '^ *[0-9]+/[0-9]+ +Test +#[0-9]+: ' "$logs/ctest.log")
total=$(grep -c . <<<"$results")
passed=$(grep -cE ' Passed +[0-9.]+ sec' <<<"$results")
skipped=$(grep -c '\*\*\*Skipped' <<<"$results")
failed=$((total - passed - skipped))
if ((total > 0)); then
  summary+=("ctest: $passed passed, $skipped skipped, $failed failed of $total ($ngpus GPUs)")
else
  summary+=("ctest: no test ran (exit code $ctest_rc; ctest.log)")
  failures+=("ctest ran nothing")
fi
while IFS= read -r name; do summary+=("  skipped: $name"); done < <(
  sed -nE 's/^ *[0-9]+\/[0-9]+ +Test +#[0-9]+: ([^ ]+) .*\*\*\*Skipped.*/\1/p' "$logs/ctest.log" | head -n 20)
((ctest_rc == 0)) || failures+=("ctest")

section "gpuxfer check"
"$gpuxfer" check >"$logs/check.log" 2>&1
check_rc=$?
"$build/apps/seed_example" >>"$logs/check.log" 2>&1
example_rc=$?
cat "$logs/check.log"
summary+=("check: $(grep -c '^PASS' "$logs/check.log") PASS, $(grep -c '^FAIL' "$logs/check.log") FAIL, $(grep -c '^SKIP' "$logs/check.log") SKIP (exit code $check_rc)")
summary+=("seed_example: $( ((example_rc == 0)) && echo OK || echo "FAILED (exit code $example_rc)")")
((check_rc == 0)) || failures+=("gpuxfer check")
((example_rc == 0)) || failures+=("seed_example")

bench=$build/benchmarks/gpuxfer-bench
if [[ -x $bench ]]; then
  section "bench (short)"
  "$bench" --short --json "$logs/bench.json" >"$logs/bench.log" 2>&1
  bench_rc=$?
  tail -n 30 "$logs/bench.log"
  summary+=("bench: exit code $bench_rc; last lines of bench.log:")
  while IFS= read -r line; do summary+=("  $line"); done < <(grep -v '^\s*$' "$logs/bench.log" | tail -n 6)
  ((bench_rc == 0)) || failures+=("bench")
else
  summary+=("bench: no $bench, not run")
fi

if ((${#failures[@]})); then
  summary+=("RESULT: FAILED: ${failures[*]}")
else
  summary+=("RESULT: OK")
fi
{
  printf '\n=== summary\n'
  printf '%s\n' "${summary[@]}"
} | tee "$logs/summary.txt"
((${#failures[@]} == 0))
