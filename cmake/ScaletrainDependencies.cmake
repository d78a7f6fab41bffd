# Finds the real dependencies: MPI, parallel HDF5, Boost, oneDNN 2.x, OpenMP, libturbojpeg, xxHash.
# The CUDA backend's (toolkit, cuDNN, NCCL) are found in ScaletrainCuda.cmake.

# scaletrain_forget_when_changed(<root var> <value> <cached result>...): find_path/find_library
# keep their results in the cache, so a build folder configured once would ignore a new
# DNNL_ROOT/CUDNN_ROOT/... given later. When the root's value differs from the one the results
# were found with, they are dropped and searched again.
function(scaletrain_forget_when_changed root_var value)
  if(DEFINED _ST_FOUND_WITH_${root_var} AND NOT "${_ST_FOUND_WITH_${root_var}}" STREQUAL "${value}")
    foreach(result ${ARGN})
      unset(${result} CACHE)
    endforeach()
  endif()
  set(_ST_FOUND_WITH_${root_var} "${value}" CACHE INTERNAL "")
endfunction()

# scaletrain_root_value(<root var> <out>): the prefix a user gave as -D<root var>=... or as an
# environment variable of that name (module files export them), or "".
function(scaletrain_root_value root_var out)
  set(value "${${root_var}}")
  if(value STREQUAL "" AND DEFINED ENV{${root_var}})
    set(value "$ENV{${root_var}}")
  endif()
  set(${out} "${value}" PARENT_SCOPE)
endfunction()

# scaletrain_header_version(<out> <header> <macro>...): the numbers of "#define <macro> N" in the
# header joined by dots (MAJOR MINOR PATCH -> "2.6.3"), or "" when one of them is missing.
function(scaletrain_header_version out header)
  set(parts)
  foreach(macro ${ARGN})
    file(STRINGS "${header}" line REGEX "^#[ \t]*define[ \t]+${macro}[ \t]+[0-9]+")
    if(NOT line MATCHES "define[ \t]+${macro}[ \t]+([0-9]+)")
      set(${out} "" PARENT_SCOPE)
      return()
    endif()
    list(APPEND parts ${CMAKE_MATCH_1})
  endforeach()
  string(JOIN "." version ${parts})
  set(${out} "${version}" PARENT_SCOPE)
endfunction()

find_package(MPI REQUIRED COMPONENTS C CXX)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(Threads REQUIRED)  # st_core (progress, memory) uses threads and mutexes
find_package(ZLIB REQUIRED)  # gzip-compressed idx files (Fashion-MNIST)

# Parallel HDF5 (Debian: libhdf5-openmpi-dev). Prefer the MPI build.
set(HDF5_PREFER_PARALLEL TRUE)
find_package(HDF5 REQUIRED COMPONENTS C)
if(NOT HDF5_IS_PARALLEL)
  message(WARNING "HDF5 found at ${HDF5_INCLUDE_DIRS} is not the parallel build; install libhdf5-openmpi-dev")
endif()
add_library(scaletrain_hdf5 INTERFACE)
target_include_directories(scaletrain_hdf5 SYSTEM INTERFACE ${HDF5_C_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
target_link_libraries(scaletrain_hdf5 INTERFACE ${HDF5_C_LIBRARIES} ${HDF5_LIBRARIES} MPI::MPI_C)
target_compile_definitions(scaletrain_hdf5 INTERFACE ${HDF5_DEFINITIONS} ${HDF5_C_DEFINITIONS})

find_package(Boost 1.71 REQUIRED COMPONENTS program_options unit_test_framework)

# oneDNN: located directly (Debian's dnnl-config.cmake drags in OpenCL, which we do not use).
# On a cluster, point DNNL_ROOT at the module's prefix.
scaletrain_root_value(DNNL_ROOT _st_dnnl_root)
scaletrain_forget_when_changed(DNNL_ROOT "${_st_dnnl_root}" DNNL_INCLUDE_DIR DNNL_LIBRARY)
find_path(DNNL_INCLUDE_DIR dnnl.hpp HINTS ${_st_dnnl_root} PATH_SUFFIXES include)
find_library(DNNL_LIBRARY NAMES dnnl HINTS ${_st_dnnl_root} PATH_SUFFIXES lib lib64)
if(NOT DNNL_INCLUDE_DIR OR NOT DNNL_LIBRARY)
  message(FATAL_ERROR "oneDNN not found: install libdnnl-dev (make deps) or set DNNL_ROOT")
endif()
# The CPU kernels are written against oneDNN 2.x (operation descriptors such as
# convolution_forward::desc); 3.0 removed that API, and many sites' modules bring 3.x. Refuse it
# here rather than in a page of compile errors.
set(_st_dnnl_hint "Set DNNL_ROOT (a CMake or environment variable) to the prefix of a oneDNN 2.x installation, e.g. a site's onednn/2.x module (Debian 12's libdnnl-dev is 2.6).")
set(_st_dnnl_version_header ${DNNL_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h)
if(NOT EXISTS ${_st_dnnl_version_header})
  set(_st_dnnl_version_header ${DNNL_INCLUDE_DIR}/dnnl_version.h)
endif()
if(NOT EXISTS ${_st_dnnl_version_header})
  message(FATAL_ERROR "oneDNN at ${DNNL_INCLUDE_DIR} has no dnnl_version.h (looked in oneapi/dnnl/ and beside dnnl.hpp). ${_st_dnnl_hint}")
endif()
scaletrain_header_version(dnnl_VERSION ${_st_dnnl_version_header}
                          DNNL_VERSION_MAJOR DNNL_VERSION_MINOR DNNL_VERSION_PATCH)
if(dnnl_VERSION STREQUAL "")
  message(FATAL_ERROR "oneDNN at ${DNNL_INCLUDE_DIR}: ${_st_dnnl_version_header} has no DNNL_VERSION_MAJOR/MINOR/PATCH. ${_st_dnnl_hint}")
elseif(dnnl_VERSION VERSION_GREATER_EQUAL 3)
  message(FATAL_ERROR "oneDNN ${dnnl_VERSION} found at ${DNNL_INCLUDE_DIR} (${DNNL_LIBRARY}): scaletrain's CPU kernels use "
                      "the oneDNN 2.x API, which oneDNN 3.0 removed; 3.x is not supported yet. ${_st_dnnl_hint}")
elseif(dnnl_VERSION VERSION_LESS 2)
  message(FATAL_ERROR "oneDNN ${dnnl_VERSION} found at ${DNNL_INCLUDE_DIR} (${DNNL_LIBRARY}) is too old: scaletrain needs 2.x. ${_st_dnnl_hint}")
endif()
add_library(DNNL::dnnl INTERFACE IMPORTED)
set_target_properties(DNNL::dnnl PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${DNNL_INCLUDE_DIR}
                      INTERFACE_LINK_LIBRARIES ${DNNL_LIBRARY})

find_package(PkgConfig REQUIRED)
# libjpeg-turbo's TurboJPEG API (Debian: libturbojpeg0-dev): JPEG-encoded datasets.
pkg_check_modules(TURBOJPEG REQUIRED IMPORTED_TARGET libturbojpeg)
# xxHash (Debian: libxxhash-dev): whole-file checksums of shards and checkpoints, checked before
# HDF5 reads a file (io/file_checksum.hpp).
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)

# PyTorch cross-checks use the system interpreter, where Debian's python3-torch lives.
if(EXISTS /usr/bin/python3 AND NOT Python3_EXECUTABLE)
  set(Python3_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python3 COMPONENTS Interpreter)
set(SCALETRAIN_TORCH FALSE)
if(Python3_Interpreter_FOUND)
  execute_process(COMMAND ${Python3_EXECUTABLE} -c "import torch, h5py"
                  RESULT_VARIABLE _torch_rc OUTPUT_QUIET ERROR_QUIET)
  if(_torch_rc EQUAL 0)
    set(SCALETRAIN_TORCH TRUE)
  endif()
endif()
