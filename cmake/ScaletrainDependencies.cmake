# Finds the real dependencies: MPI, parallel HDF5, Boost, oneDNN, OpenBLAS, OpenMP, libturbojpeg.
find_package(MPI REQUIRED COMPONENTS C CXX)
find_package(OpenMP REQUIRED COMPONENTS CXX)
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
find_path(DNNL_INCLUDE_DIR dnnl.hpp HINTS ${DNNL_ROOT} ENV DNNL_ROOT PATH_SUFFIXES include)
find_library(DNNL_LIBRARY NAMES dnnl HINTS ${DNNL_ROOT} ENV DNNL_ROOT PATH_SUFFIXES lib lib64)
if(NOT DNNL_INCLUDE_DIR OR NOT DNNL_LIBRARY)
  message(FATAL_ERROR "oneDNN not found: install libdnnl-dev (make deps) or set DNNL_ROOT")
endif()
file(STRINGS ${DNNL_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h _dnnl_ver REGEX "define DNNL_VERSION_(MAJOR|MINOR|PATCH)")
string(REGEX MATCHALL "[0-9]+" _dnnl_nums "${_dnnl_ver}")
string(REPLACE ";" "." dnnl_VERSION "${_dnnl_nums}")
add_library(DNNL::dnnl INTERFACE IMPORTED)
set_target_properties(DNNL::dnnl PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${DNNL_INCLUDE_DIR}
                      INTERFACE_LINK_LIBRARIES ${DNNL_LIBRARY})

find_package(PkgConfig REQUIRED)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
add_library(scaletrain_blas INTERFACE)
target_link_libraries(scaletrain_blas INTERFACE PkgConfig::OPENBLAS)
# libjpeg-turbo's TurboJPEG API (Debian: libturbojpeg0-dev): JPEG-encoded datasets.
pkg_check_modules(TURBOJPEG REQUIRED IMPORTED_TARGET libturbojpeg)

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
