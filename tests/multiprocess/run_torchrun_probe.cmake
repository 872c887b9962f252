# ctest gpuxfer.torchrun.*: rank_probe's rendezvous under torchrun (python3 -m torch.distributed.run, two
# ranks on this machine), which sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT; its agent
# serves its own store at MASTER_PORT, so gpuxfer's rank 0 must listen elsewhere (MASTER_PORT + 1). Every
# rank must get rank 0's blob.
#
#   cmake -DPYTHON=<python3> -DPROBE=<rank_probe> -DMODE=static|standalone -P run_torchrun_probe.cmake
#
# static: --master-addr/--master-port given (the static rendezvous); standalone: torchrun's --standalone
# (a c10d rendezvous on a port it picks). Prints "SKIPPED: ..." (the test's SKIP_REGULAR_EXPRESSION) when
# python3 has no torch.
if(NOT PYTHON)
  message("SKIPPED: no python3 found at configure time; gpuxfer under torchrun was not tested")
  return()
endif()
execute_process(COMMAND "${PYTHON}" -c
  "import torch, torch.distributed.run; assert int(torch.__version__.split('.')[0]) >= 2"
  RESULT_VARIABLE no_torch OUTPUT_QUIET ERROR_QUIET)
if(NOT no_torch EQUAL 0)
  message("SKIPPED: ${PYTHON} has no torch 2 (torch.distributed.run, whose flags this uses); gpuxfer under "
          "torchrun was not tested")
  return()
endif()

set(launcher "${PYTHON}" -m torch.distributed.run --nnodes 1 --nproc-per-node 2)
if(MODE STREQUAL "static")
  # A port free now, for torchrun's store, whose next port (gpuxfer's) is free too.
  execute_process(COMMAND "${PYTHON}" -c [=[
import socket
for _ in range(50):
    a = socket.socket(); a.bind(("127.0.0.1", 0)); port = a.getsockname()[1]
    b = socket.socket()
    try:
        b.bind(("0.0.0.0", port + 1))
    except OSError:
        continue
    finally:
        b.close(); a.close()
    print(port)
    break
]=] OUTPUT_VARIABLE port OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT port MATCHES "^[0-9]+$")
    message(FATAL_ERROR "found no free pair of ports for torchrun's store and gpuxfer")
  endif()
  list(APPEND launcher --master-addr 127.0.0.1 --master-port ${port})
else()
  list(APPEND launcher --standalone)
endif()
foreach(variable GPUXFER_RANK GPUXFER_WORLD_SIZE GPUXFER_LOCAL_RANK GPUXFER_INIT)
  unset(ENV{${variable}})
endforeach()
set(ENV{GPUXFER_TIMEOUT} 30)
string(REPLACE ";" " " shown "${launcher} --no-python ${PROBE} rendezvous")
message("running: ${shown}")
execute_process(COMMAND ${launcher} --no-python "${PROBE}" rendezvous
  OUTPUT_VARIABLE output ERROR_VARIABLE errors RESULT_VARIABLE rc TIMEOUT 90)
message("${output}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "torchrun exit: ${rc}\nstdout:\n${output}\nstderr:\n${errors}")
endif()
foreach(rank 0 1)
  if(NOT output MATCHES "rank ${rank} of 2 got 'blob of rank 0, pid [0-9]+'")
    message(FATAL_ERROR "rank ${rank} did not get rank 0's blob\nstdout:\n${output}\nstderr:\n${errors}")
  endif()
endforeach()
