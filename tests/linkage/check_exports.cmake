# ctest gpuxfer.exports: the dynamic symbols a library defines are its own and nothing else.
#
#   cmake -DNM=nm -DLIBRARY=libgpuxfer.so -DALLOWED=<regex> -P check_exports.cmake
#
# A shared library that exports copies of the C++ runtime's symbols (instances of std templates, or
# parts of libstdc++ that some toolchains link statically) binds other libraries in the process to them:
# on the GPU runner, torch's std::locale destructor ran gpuxfer's copy and freed what it never owned.
# Fails listing every defined dynamic symbol whose demangled name does not match ALLOWED.
foreach(var NM LIBRARY ALLOWED)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_exports.cmake needs -D${var}=...")
  endif()
endforeach()
execute_process(COMMAND "${NM}" -D --defined-only -C "${LIBRARY}"
  OUTPUT_VARIABLE symbols RESULT_VARIABLE rc ERROR_VARIABLE errors)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D ${LIBRARY} failed (${rc}): ${errors}")
endif()
string(REPLACE "\n" ";" lines "${symbols}")
set(foreign "")
set(count 0)
foreach(line IN LISTS lines)
  # "0000000000023ca0 W name": the name is what follows the address and the type letter.
  if(NOT line MATCHES "^[0-9a-fA-F]* *[A-Za-z] (.*)$")
    continue()
  endif()
  math(EXPR count "${count} + 1")
  set(name "${CMAKE_MATCH_1}")  # the next MATCHES resets CMAKE_MATCH_1
  if(NOT name MATCHES "${ALLOWED}")
    string(APPEND foreign "\n  ${name}")
  endif()
endforeach()
if(foreign)
  message(FATAL_ERROR "${LIBRARY} exports symbols that are not its own:${foreign}")
endif()
message(STATUS "${LIBRARY}: ${count} exported symbols, every one matching ${ALLOWED}")
