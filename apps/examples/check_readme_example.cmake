# Fails unless README.md contains the example file verbatim, as the one ```cpp block that follows the
# line "<!-- example: apps/examples/seed_example.cpp -->".
# Usage: cmake -DREADME=<README.md> -DEXAMPLE=<seed_example.cpp> -P check_readme_example.cmake
file(READ "${README}" readme)
file(READ "${EXAMPLE}" example)
set(marker "<!-- example: apps/examples/seed_example.cpp -->\n```cpp\n")
string(FIND "${readme}" "${marker}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "README.md has no block after the marker: ${marker}")
endif()
string(LENGTH "${marker}" marker_length)
math(EXPR start "${at} + ${marker_length}")
string(SUBSTRING "${readme}" ${start} -1 rest)
string(FIND "${rest}" "```\n" end)
string(SUBSTRING "${rest}" 0 ${end} block)
if(NOT block STREQUAL example)
  message(FATAL_ERROR "README.md's example differs from ${EXAMPLE}: copy the file into the README")
endif()
message(STATUS "README.md's example is ${EXAMPLE}, verbatim")
