# scaletrain_subsystem(NAME DEPS ...): a static library st_NAME from src/NAME/*.cpp and
# src/NAME/cpu/*.cpp, with the public headers under include/scaletrain/NAME/.
# src/NAME/cuda/ is not globbed: its sources compile only where the CUDA backend is built
# (st_backend_cuda, cmake/ScaletrainCuda.cmake).
function(scaletrain_subsystem name)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS
       ${CMAKE_SOURCE_DIR}/src/${name}/*.cpp
       ${CMAKE_SOURCE_DIR}/src/${name}/cpu/*.cpp)
  if(sources)
    add_library(st_${name} STATIC ${sources})
    target_include_directories(st_${name}
      PUBLIC ${CMAKE_SOURCE_DIR}/include ${CMAKE_BINARY_DIR}/generated
      PRIVATE ${CMAKE_SOURCE_DIR}/src)
    target_link_libraries(st_${name} PUBLIC ${ARG_DEPS})
  else()
    add_library(st_${name} INTERFACE)
    target_include_directories(st_${name} INTERFACE ${CMAKE_SOURCE_DIR}/include ${CMAKE_BINARY_DIR}/generated)
    target_link_libraries(st_${name} INTERFACE ${ARG_DEPS})
  endif()
  set_property(GLOBAL APPEND PROPERTY SCALETRAIN_SUBSYSTEMS ${name})
endfunction()

function(scaletrain_summary)
  get_property(subsystems GLOBAL PROPERTY SCALETRAIN_SUBSYSTEMS)
  message(STATUS "")
  message(STATUS "scaletrain ${PROJECT_VERSION} configuration")
  message(STATUS "  build type        : ${CMAKE_BUILD_TYPE}")
  message(STATUS "  compiler          : ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}")
  message(STATUS "  MPI               : ${MPI_C_LIBRARY_VERSION_STRING} (MPI ${MPI_C_VERSION}, ${MPIEXEC_EXECUTABLE})")
  message(STATUS "  HDF5              : ${HDF5_VERSION} (parallel: ${HDF5_IS_PARALLEL})")
  message(STATUS "  Boost             : ${Boost_VERSION}")
  message(STATUS "  oneDNN            : ${dnnl_VERSION} (${DNNL_LIBRARY})")
  message(STATUS "  OpenMP            : ${OpenMP_CXX_VERSION}")
  message(STATUS "  -march=native     : ${SCALETRAIN_NATIVE} (SCALETRAIN_NATIVE)")
  message(STATUS "  sanitizers        : ${SCALETRAIN_SANITIZE_TEXT} (SCALETRAIN_SANITIZE)")
  foreach(line ${SCALETRAIN_CUDA_NOTES})
    message(STATUS "  ${line}")
  endforeach()
  message(STATUS "  PyTorch cross-checks: ${SCALETRAIN_TORCH} (${Python3_EXECUTABLE})")
  message(STATUS "  subsystems        : ${subsystems}")
  message(STATUS "")
endfunction()
