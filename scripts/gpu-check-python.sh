# The Python step of scripts/gpu-check.sh (--python), sourced by it: pytest over tests/python, the Python
# bench and the Python blocks bench against the module built in build-gpu/python. Uses the script's
# variables (build, work, logs, python_skip) and functions (step_limit, stopped_note: the time budget) and
# adds to its summary and failures.
run_python_tests() {
  section "python tests"
  if [[ -n $python_skip ]]; then
    echo "not run: $python_skip"
    summary+=("python: not run: $python_skip")
  elif step_limit 0 "python"; then
    started=$SECONDS
    PYTHONPATH="$PWD/$build/python${PYTHONPATH:+:$PYTHONPATH}" \
      timeout "$limit" python3 -m pytest tests/python -q -rs -p no:cacheprovider >"$work/pytest.log" 2>&1
    pytest_rc=$?
    {
      printf '\n=== python tests (pytest tests/python, PYTHONPATH=%s/python)\n' "$build"
      cat "$work/pytest.log"
    } >>"$logs/ctest.log"
    tail -n 30 "$work/pytest.log"
    # pytest's closing line: "12 passed, 3 skipped, 1 failed in 4.2s" (any order, any subset).
    closing=$(grep -E '[0-9]+ (passed|failed|skipped|errors?)|no tests ran' "$work/pytest.log" | tail -n 1)
    py_count() { grep -oE "[0-9]+ $1" <<<"$closing" | grep -oE '[0-9]+' || echo 0; }
    py_failed=$(($(py_count failed) + $(py_count 'errors?')))
    summary+=("python: $(py_count passed) passed, $(py_count skipped) skipped, $py_failed failed (pytest exit code $pytest_rc, $((SECONDS - started)) s)$(stopped_note "$pytest_rc")")
    while IFS= read -r reason; do summary+=("  $reason"); done < <(
      grep -E '^SKIPPED \[' "$work/pytest.log" | sed -E 's/^SKIPPED \[([0-9]+)\] (tests\/python\/)?([^:]+:[0-9]+): /skipped \1 (\3): /' | head -n 15)
    ((pytest_rc == 0)) || failures+=("python tests")

    # Python against C++ (the bench's JSON above) for the same operations; informational for now.
    step_limit 0 "python bench" 1 || return 0
    section "python bench (short)"
    cpp_json=()
    [[ -s $logs/bench.json ]] && cpp_json=(--cpp "$logs/bench.json")
    PYTHONPATH="$PWD/$build/python${PYTHONPATH:+:$PYTHONPATH}" timeout "$limit" \
      python3 benchmarks/python/gpuxfer_python.py --short "${cpp_json[@]}" >"$work/python-bench.log" 2>&1
    pybench_rc=$?
    {
      printf '\n=== python bench (benchmarks/python/gpuxfer_python.py --short)\n'
      cat "$work/python-bench.log"
    } >>"$logs/bench.log"
    sed -n '/^# Python against C++/,$p' "$work/python-bench.log"
    summary+=("python bench: exit code $pybench_rc$(stopped_note "$pybench_rc") (informational; bench.log): $(tail -n 1 "$work/python-bench.log")")
    while IFS= read -r line; do summary+=("  $line"); done < <(grep -E '^  py_gather +(4096|268435456) ' "$work/python-bench.log")

    # copy_blocks from Python against torch's indexing copy and a per-block copy_ loop: its numbers are
    # informational, a failure (wrong bytes, or an error) is not.
    if ! python3 -c "import torch" >/dev/null 2>&1; then
      summary+=("python blocks bench: not run: python3 cannot import torch")
      return 0
    fi
    step_limit 300 "python blocks bench" 1 || return 0
    section "python blocks bench"
    PYTHONPATH="$PWD/$build/python${PYTHONPATH:+:$PYTHONPATH}" timeout "$limit" \
      python3 benchmarks/python/blocks_bench.py >"$work/python-blocks.log" 2>&1
    pyblocks_rc=$?
    {
      printf '\n=== python blocks bench (benchmarks/python/blocks_bench.py)\n'
      cat "$work/python-blocks.log"
    } >>"$logs/bench.log"
    cat "$work/python-blocks.log"
    summary+=("python blocks bench: exit code $pyblocks_rc$(stopped_note "$pyblocks_rc") (bench.log); copy_blocks:")
    while IFS= read -r line; do summary+=("  $line"); done < <(grep -E ' copy_blocks ' "$work/python-blocks.log")
    ((pyblocks_rc == 0)) || failures+=("python blocks bench")
  fi
}
