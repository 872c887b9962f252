# ctest driver of `gpuxfer check`: passes when check exits 0; on a machine without a GPU, requires exit
# code 2 with exactly one line on stderr ("gpuxfer check: no CUDA device: <reason>") and reports a skip.
# Usage: cmake -DGPUXFER=<path> [-DSIZE=16MiB] -P run_check.cmake
if(NOT DEFINED SIZE)
  set(SIZE 16MiB)
endif()
execute_process(COMMAND "${GPUXFER}" check --size ${SIZE}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(rc EQUAL 0)
  return()
endif()
if(rc EQUAL 2 AND out STREQUAL "" AND err MATCHES "^gpuxfer check: no CUDA device: [^\n]+\n$")
  message("gpuxfer check skipped: no CUDA device (exit code 2 and the expected single line)")
  return()
endif()
message(FATAL_ERROR "gpuxfer check failed: exit code ${rc}")
