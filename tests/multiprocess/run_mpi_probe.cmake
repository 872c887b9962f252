# ctest gpuxfer.mpi_bootstrap.*: runs mpi_probe under mpirun with 3 ranks on this machine and checks
# what every rank printed.
#
#   cmake -DMPIEXEC=<mpirun> -DPROBE=<mpi_probe> -DMODE=exchange|refuse|absent [-DENVIRONMENT=VAR=VALUE;...]
#         -P run_mpi_probe.cmake
#
# Prints "SKIPPED: ..." (the test's SKIP_REGULAR_EXPRESSION) when there is no MPI or no mpirun.
set(ranks 3)
if(NOT PROBE)
  message("SKIPPED: gpuxfer was built without MPI (GPUXFER_WITH_MPI=OFF, or CMake found no MPI: install "
          "libopenmpi-dev openmpi-bin and reconfigure); the MPI bootstrap was not tested")
  return()
endif()
if(NOT MPIEXEC OR NOT EXISTS "${MPIEXEC}")
  message("SKIPPED: mpirun not found (MPIEXEC='${MPIEXEC}'; install openmpi-bin, or configure with "
          "-DMPIEXEC_EXECUTABLE=<path>); the MPI bootstrap was not tested")
  return()
endif()

# Open MPI refuses more ranks than cores without --oversubscribe, and root without --allow-run-as-root.
set(launcher "${MPIEXEC}" -n ${ranks})
execute_process(COMMAND "${MPIEXEC}" --version OUTPUT_VARIABLE version ERROR_VARIABLE version)
if(version MATCHES "Open MPI|OpenRTE")
  list(APPEND launcher --oversubscribe)
  execute_process(COMMAND id -u OUTPUT_VARIABLE uid OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(uid STREQUAL "0")
    list(APPEND launcher --allow-run-as-root)
  endif()
endif()

# Local ranks inherit mpirun's environment, whichever MPI it is.
foreach(assignment IN LISTS ENVIRONMENT)
  string(REGEX MATCH "^([^=]+)=(.*)$" _ "${assignment}")
  set(ENV{${CMAKE_MATCH_1}} "${CMAKE_MATCH_2}")
endforeach()

set(arguments ${MODE})
if(MODE STREQUAL "absent")
  list(APPEND arguments 2)
endif()
string(REPLACE ";" " " shown "${launcher} ${PROBE} ${arguments}")
message("running: ${shown}")
execute_process(COMMAND ${launcher} "${PROBE}" ${arguments}
  OUTPUT_VARIABLE output ERROR_VARIABLE errors RESULT_VARIABLE rc TIMEOUT 60)
message("${output}")

function(fail why)
  message(FATAL_ERROR "${why}\nmpirun exit: ${rc}\nstdout:\n${output}\nstderr:\n${errors}")
endfunction()

# Lines of the form "<prefix> <rest>" for each rank, as a list of "rank|rest".
function(rank_lines pattern out)
  string(REPLACE "\n" ";" lines "${output}")
  set(found "")
  foreach(line IN LISTS lines)
    if(line MATCHES "${pattern}")
      list(APPEND found "${CMAKE_MATCH_1}|${CMAKE_MATCH_2}")
    endif()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

if(MODE STREQUAL "exchange")
  if(NOT rc EQUAL 0)
    fail("mpirun failed")
  endif()
  if(NOT output MATCHES "rank 0 sent ([^\n]+)")
    fail("rank 0 did not say what it sent")
  endif()
  set(sent "${CMAKE_MATCH_1}")
  rank_lines("^rank ([0-9]+) of ${ranks} local [0-9]+ got (.+)$" got)
  set(seen "")
  foreach(entry IN LISTS got)
    string(REPLACE "|" ";" pair "${entry}")
    list(GET pair 0 rank)
    list(GET pair 1 digest)
    if(NOT digest STREQUAL sent)
      fail("rank ${rank} got '${digest}', rank 0 sent '${sent}'")
    endif()
    list(APPEND seen ${rank})
  endforeach()
  list(REMOVE_DUPLICATES seen)
  list(LENGTH seen count)
  if(NOT count EQUAL ranks)
    fail("${count} of ${ranks} ranks reported rank 0's blob (ranks: ${seen})")
  endif()
  message("every one of the ${ranks} ranks got rank 0's blob: ${sent}")
else()
  # Every rank that calls in must report comm_error with EXPECT in its message.
  rank_lines("^rank ([0-9]+): comm_error: (.+)$" got)
  set(matching 0)
  foreach(entry IN LISTS got)
    if(entry MATCHES "${EXPECT}")
      math(EXPR matching "${matching} + 1")
    endif()
  endforeach()
  if(NOT matching EQUAL EXPECT_RANKS)
    fail("${matching} ranks (expected ${EXPECT_RANKS}) reported comm_error matching '${EXPECT}'")
  endif()
  message("${matching} ranks reported comm_error matching '${EXPECT}'")
endif()
