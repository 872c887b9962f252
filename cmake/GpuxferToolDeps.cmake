# CLI11 and nlohmann/json for the `gpuxfer` command and the benchmark. Both are header-only: their CMake
# packages are preferred, the bare headers accepted (some machines ship /usr/include/CLI/CLI.hpp and
# /usr/include/nlohmann/json.hpp without the packages). Imported targets are directory-scoped, so every
# directory that links them calls gpuxfer_find_tool_deps itself.

function(_gpuxfer_header_package target package header debian_package disable_option)
  find_package(${package} CONFIG QUIET)
  if(TARGET ${target})
    return()
  endif()
  find_path(GPUXFER_${package}_INCLUDE_DIR ${header})
  if(NOT GPUXFER_${package}_INCLUDE_DIR)
    message(FATAL_ERROR "${package} not found: install ${debian_package}, or set -D${disable_option}=OFF")
  endif()
  add_library(${target} INTERFACE IMPORTED)
  target_include_directories(${target} INTERFACE "${GPUXFER_${package}_INCLUDE_DIR}")
endfunction()

# Makes CLI11::CLI11 and nlohmann_json::nlohmann_json in the calling directory; @p disable_option names
# the option that builds without the caller (for the error message).
function(gpuxfer_find_tool_deps disable_option)
  _gpuxfer_header_package(CLI11::CLI11 CLI11 CLI/CLI.hpp libcli11-dev ${disable_option})
  _gpuxfer_header_package(nlohmann_json::nlohmann_json nlohmann_json nlohmann/json.hpp nlohmann-json3-dev
                          ${disable_option})
endfunction()
