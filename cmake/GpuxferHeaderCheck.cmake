# gpuxfer_check_public_headers(): compiles every public header under include/gpuxfer/ on its
# own, in a translation unit that includes nothing else and sees only the public include directory, so a
# header that leans on an earlier include, or reaches into src/, breaks the build.
function(gpuxfer_check_public_headers)
  file(GLOB_RECURSE headers RELATIVE "${PROJECT_SOURCE_DIR}/include" CONFIGURE_DEPENDS
       "${PROJECT_SOURCE_DIR}/include/gpuxfer/*.hpp")
  # mpi_bootstrap.hpp needs mpi.h: checked, with MPI's include directories, only where gpuxfer::mpi is built.
  list(REMOVE_ITEM headers gpuxfer/mpi_bootstrap.hpp)
  if(TARGET gpuxfer_mpi)
    list(APPEND headers gpuxfer/mpi_bootstrap.hpp)
  endif()
  set(sources)
  foreach(header IN LISTS headers)
    string(MAKE_C_IDENTIFIER "${header}" name)
    set(source "${CMAKE_CURRENT_BINARY_DIR}/header_check/${name}.cpp")
    set(content "#include <${header}>\n#include <${header}>  // and twice: include guards\n")
    if(EXISTS "${source}")
      file(READ "${source}" existing)
    endif()
    if(NOT existing STREQUAL content)
      file(WRITE "${source}" "${content}")
    endif()
    list(APPEND sources "${source}")
  endforeach()
  add_library(gpuxfer_header_check OBJECT ${sources})
  # The public include directory and cudart's, nothing of src/.
  target_include_directories(gpuxfer_header_check PRIVATE "${PROJECT_SOURCE_DIR}/include")
  target_link_libraries(gpuxfer_header_check PRIVATE CUDA::cudart $<$<TARGET_EXISTS:gpuxfer_mpi>:MPI::MPI_CXX>)
  target_compile_features(gpuxfer_header_check PRIVATE cxx_std_20)
  gpuxfer_set_warnings(gpuxfer_header_check)
endfunction()
