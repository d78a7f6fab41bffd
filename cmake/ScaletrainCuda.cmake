# The CUDA backend's build: SCALETRAIN_CUDA=AUTO|ON|OFF (CMakeLists.txt declares it).
#   AUTO (the default): built where the CUDA toolkit (12.0 or newer, with cuBLAS) and cuDNN (8 or
#        newer) are found; otherwise left out, with a line saying what was missing.
#   ON:  required; what is missing is a configure error naming the variable to set.
#   OFF: left out.
# NCCL is found where it is installed and is no condition: without it the GPU's gradients go
# through the host-staged MPI all-reduce (--intra mpi), and --intra nccl says NCCL is not built.
# Sites install cuDNN and NCCL inside the toolkit or beside it (modules, EasyBuild, pip wheels), so
# CUDNN_ROOT / NCCL_ROOT (CMake or environment variables) name their prefix; without them the
# toolkit's folders and the system's are searched. CUDAToolkit_ROOT names the toolkit, else nvcc
# is taken from PATH or /usr/local/cuda.
#
# Included at file scope because enable_language() may not run inside a function. Sets
#   SCALETRAIN_HAVE_CUDA, SCALETRAIN_HAVE_NCCL                        TRUE/FALSE
#   SCALETRAIN_CUDA_VERSION, SCALETRAIN_CUDNN_VERSION, SCALETRAIN_NCCL_VERSION   "" when absent
#   SCALETRAIN_CUDA_ARCHITECTURES                                     what the CUDA code is built for
#   SCALETRAIN_CUDA_NOTES                                             the configure summary's lines
# and the imported targets scaletrain::cudnn and (where found) scaletrain::nccl.

# Default GPU architectures: the data-centre GPUs the project targets.
set(SCALETRAIN_DEFAULT_CUDA_ARCHITECTURES 70 80 90)
set(_st_gpu_of_70 "V100")
set(_st_gpu_of_80 "A100")
set(_st_gpu_of_90 "H100")

# The mode, from any spelling of a CMake boolean or AUTO; a typo is an error, not a silent "on".
function(_st_cuda_mode out)
  string(TOUPPER "${SCALETRAIN_CUDA}" value)
  if(value STREQUAL "AUTO")
    set(${out} AUTO PARENT_SCOPE)
  elseif(value MATCHES "^(ON|YES|TRUE|Y|1)$")
    set(${out} ON PARENT_SCOPE)
  elseif(value MATCHES "^(OFF|NO|FALSE|N|0)$")
    set(${out} OFF PARENT_SCOPE)
  else()
    message(FATAL_ERROR "SCALETRAIN_CUDA=${SCALETRAIN_CUDA}: use AUTO, ON or OFF")
  endif()
endfunction()

# _st_find_gpu_library(<NAME> <header> <library names>...): finds NAME's header folder and library
# as the cache entries <NAME>_INCLUDE_DIR and <NAME>_LIBRARY. With <NAME>_ROOT given (CMake or
# environment variable) only that prefix is searched, so a wrong root is reported rather than
# replaced by another installation; without it the toolkit's folders, <NAME>_HOME, EBROOT<NAME>
# (EasyBuild) and the system's. Sets <NAME>_PROBLEM to what is missing and where it was looked
# for, or "". The names include the versioned file (libcudnn.so.9) because pip wheels ship no
# unversioned link.
function(_st_find_gpu_library name header)
  set(library_names ${ARGN})
  scaletrain_root_value(${name}_ROOT root)
  scaletrain_forget_when_changed(${name}_ROOT "${root}|${CUDAToolkit_LIBRARY_DIR}" ${name}_INCLUDE_DIR ${name}_LIBRARY)
  set(lib_suffixes lib lib64 lib/x86_64-linux-gnu lib/aarch64-linux-gnu)
  if(root)
    find_path(${name}_INCLUDE_DIR ${header} PATHS ${root} PATH_SUFFIXES include NO_DEFAULT_PATH)
    find_library(${name}_LIBRARY NAMES ${library_names} PATHS ${root} PATH_SUFFIXES ${lib_suffixes} NO_DEFAULT_PATH)
    set(where "in ${name}_ROOT=${root}")
  else()
    find_path(${name}_INCLUDE_DIR ${header}
              HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV ${name}_HOME ENV EBROOT${name} PATH_SUFFIXES include)
    find_library(${name}_LIBRARY NAMES ${library_names}
                 HINTS ${CUDAToolkit_LIBRARY_DIR} ENV ${name}_HOME ENV EBROOT${name} PATH_SUFFIXES ${lib_suffixes})
    set(where "in the CUDA toolkit's folders or the system's (set ${name}_ROOT to its prefix)")
  endif()
  set(problem "")
  if(NOT ${name}_INCLUDE_DIR)
    set(problem "no ${header} ${where}")
  elseif(NOT ${name}_LIBRARY)
    list(GET library_names 0 first)
    set(problem "${header} in ${${name}_INCLUDE_DIR} but no lib${first}.so ${where}")
  endif()
  set(${name}_PROBLEM "${problem}" PARENT_SCOPE)
endfunction()

# _st_imported_library(<target> <NAME>): an imported target for a library found above.
function(_st_imported_library target name)
  add_library(${target} UNKNOWN IMPORTED)
  set_target_properties(${target} PROPERTIES IMPORTED_LOCATION "${${name}_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${${name}_INCLUDE_DIR}")
endfunction()

# _st_nvcc_architectures(<nvcc> <version> <out>): the compute capabilities this nvcc can build,
# e.g. "75;80;86;...;120" for CUDA 13 (which dropped Maxwell, Pascal and Volta).
function(_st_nvcc_architectures nvcc version out)
  execute_process(COMMAND ${nvcc} --list-gpu-arch OUTPUT_VARIABLE listed RESULT_VARIABLE rc ERROR_QUIET)
  set(numbers)
  if(rc EQUAL 0)
    string(REGEX MATCHALL "compute_[0-9]+" archs "${listed}")
    foreach(arch ${archs})
      string(REPLACE "compute_" "" n ${arch})
      list(APPEND numbers ${n})
    endforeach()
  endif()
  if(NOT numbers)  # an nvcc without --list-gpu-arch: CUDA 13 starts at sm_75, CUDA 12 at sm_50
    if(version VERSION_GREATER_EQUAL 13)
      set(numbers 75 80 86 87 89 90 100 120)
    else()
      set(numbers 50 52 53 60 61 62 70 72 75 80 86 87 89 90)
    endif()
  endif()
  set(${out} ${numbers} PARENT_SCOPE)
endfunction()

# _st_choose_cuda_architectures(<nvcc> <version>): sets SCALETRAIN_CUDA_ARCHITECTURES and
# _st_arch_note. A user's CMAKE_CUDA_ARCHITECTURES (or CUDAARCHS) is kept, but an architecture
# this nvcc cannot build is a configure error here rather than an nvcc error halfway through the
# build. The default (70;80;90) drops what this nvcc cannot build and says so.
function(_st_choose_cuda_architectures nvcc version)
  _st_nvcc_architectures(${nvcc} ${version} buildable)
  set(dgx1_hint "DGX-1 (V100) users: build with CUDA 12.x (e.g. -DCUDAToolkit_ROOT=/usr/local/cuda-12.x)")
  if(DEFINED CMAKE_CUDA_ARCHITECTURES OR NOT "$ENV{CUDAARCHS}" STREQUAL "")
    set(requested "${CMAKE_CUDA_ARCHITECTURES}")
    set(source "CMAKE_CUDA_ARCHITECTURES")
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(requested "$ENV{CUDAARCHS}")
      set(source "CUDAARCHS (environment)")
    endif()
    string(REPLACE ";" " " buildable_text "${buildable}")
    foreach(arch ${requested})
      if(arch MATCHES "^([0-9]+)[a-z]?(-real|-virtual)?$")
        set(number ${CMAKE_MATCH_1})
        if(NOT number IN_LIST buildable)
          set(extra "")
          if(number LESS 75)
            set(extra " ${dgx1_hint}.")
          endif()
          message(FATAL_ERROR "${source}=${requested}: CUDA ${version}'s nvcc (${nvcc}) cannot build sm_${number}: "
                              "it builds ${buildable_text}.${extra}")
        endif()
      endif()
    endforeach()
    set(SCALETRAIN_CUDA_ARCHITECTURES "${requested}" PARENT_SCOPE)
    set(_st_arch_note "set by ${source}" PARENT_SCOPE)
    set(_st_arch_dropped_note "" PARENT_SCOPE)
    return()
  endif()
  set(chosen)
  set(dropped)
  foreach(arch ${SCALETRAIN_DEFAULT_CUDA_ARCHITECTURES})
    if(arch IN_LIST buildable)
      list(APPEND chosen ${arch})
    else()
      list(APPEND dropped ${arch})
    endif()
  endforeach()
  if(NOT chosen)
    string(REPLACE ";" " " buildable_text "${buildable}")
    message(FATAL_ERROR "CUDA ${version}'s nvcc (${nvcc}) builds none of the default architectures "
                        "${SCALETRAIN_DEFAULT_CUDA_ARCHITECTURES} (it builds ${buildable_text}): set CMAKE_CUDA_ARCHITECTURES")
  endif()
  set(names)
  foreach(arch ${chosen})
    list(APPEND names "sm_${arch} (${_st_gpu_of_${arch}})")
  endforeach()
  string(JOIN ", " note ${names})
  set(note "${note}, each with PTX for newer GPUs (the default, CMAKE_CUDA_ARCHITECTURES overrides it)")
  set(dropped_note "")
  foreach(arch ${dropped})
    set(dropped_note "${dropped_note}sm_${arch} (${_st_gpu_of_${arch}}): CUDA ${version} cannot build it. ")
  endforeach()
  if(dropped)
    set(dropped_note "${dropped_note}${dgx1_hint}")
  endif()
  set(SCALETRAIN_CUDA_ARCHITECTURES "${chosen}" PARENT_SCOPE)
  set(_st_arch_note "${note}" PARENT_SCOPE)
  set(_st_arch_dropped_note "${dropped_note}" PARENT_SCOPE)
endfunction()

# _st_check_host_compiler(<nvcc> <host compiler> <out problem>): whether nvcc accepts the host
# compiler, which CUDA releases restrict to a range of GCC versions. Checked by preprocessing a
# CUDA file (nvcc's host_config.h rejects an unsupported compiler there), once per pair.
function(_st_check_host_compiler nvcc host out)
  set(${out} "" PARENT_SCOPE)
  if("${_ST_NVCC_HOST_OK}" STREQUAL "${nvcc}|${host}")
    return()
  endif()
  set(probe ${CMAKE_BINARY_DIR}/CMakeFiles/scaletrain_nvcc_probe.cu)
  file(WRITE ${probe} "#include <cuda_runtime.h>\n__global__ void probe() {}\n")
  execute_process(COMMAND ${nvcc} -ccbin ${host} -std=c++17 -E -x cu ${probe} -o ${probe}.i
                  RESULT_VARIABLE rc OUTPUT_VARIABLE output ERROR_VARIABLE output)
  file(REMOVE ${probe}.i)
  if(rc EQUAL 0)
    set(_ST_NVCC_HOST_OK "${nvcc}|${host}" CACHE INTERNAL "")
  else()
    string(REGEX MATCH "[^\n]*(error|fatal)[^\n]*" first_error "${output}")
    string(STRIP "${first_error}" first_error)
    set(${out} "nvcc (${nvcc}) cannot compile with the host compiler ${host}: ${first_error} (load a compiler this CUDA supports, or set CMAKE_CUDA_HOST_COMPILER)" PARENT_SCOPE)
  endif()
endfunction()

# _st_add(<list> <text>): appends one line to a list of messages; a ';' in it (from a tool's output)
# would split it into several entries, so it becomes ','.
macro(_st_add list_var text)
  string(REPLACE ";" "," _st_line "${text}")
  list(APPEND ${list_var} "${_st_line}")
endmacro()

_st_cuda_mode(_st_cuda_mode)
set(SCALETRAIN_HAVE_CUDA FALSE)
set(SCALETRAIN_HAVE_NCCL FALSE)
set(SCALETRAIN_CUDA_VERSION "")
set(SCALETRAIN_CUDNN_VERSION "")
set(SCALETRAIN_NCCL_VERSION "")
set(SCALETRAIN_CUDA_ARCHITECTURES "")
set(SCALETRAIN_CUDA_NOTES "")
set(_st_cuda_missing "")

if(_st_cuda_mode STREQUAL "OFF")
  _st_add(SCALETRAIN_CUDA_NOTES "CUDA backend      : off (SCALETRAIN_CUDA=OFF)")
else()
  # The toolkit. A CUDAToolkit_ROOT without nvcc is the user's mistake to report: FindCUDAToolkit
  # would quietly fall back on the nvcc in PATH, another toolkit than the one asked for.
  scaletrain_root_value(CUDAToolkit_ROOT _st_toolkit_root)
  if(_st_toolkit_root STREQUAL "" AND CMAKE_CUDA_COMPILER)
    # A build folder configured before (or a user's CMAKE_CUDA_COMPILER): its toolkit.
    get_filename_component(_st_nvcc_dir ${CMAKE_CUDA_COMPILER} DIRECTORY)
    get_filename_component(CUDAToolkit_ROOT ${_st_nvcc_dir} DIRECTORY)
  endif()
  scaletrain_forget_when_changed(CUDAToolkit_ROOT "${CUDAToolkit_ROOT}"
                                 CUDAToolkit_NVCC_EXECUTABLE CUDAToolkit_BIN_DIR CUDAToolkit_SENTINEL_FILE)
  if(NOT _st_toolkit_root STREQUAL "" AND NOT EXISTS "${_st_toolkit_root}/bin/nvcc")
    _st_add(_st_cuda_missing "CUDA toolkit: CUDAToolkit_ROOT=${_st_toolkit_root} has no bin/nvcc")
  else()
    find_package(CUDAToolkit QUIET)
    if(NOT CUDAToolkit_FOUND)
      _st_add(_st_cuda_missing "CUDA toolkit: no nvcc in PATH or /usr/local/cuda (load the site's cuda module or set CUDAToolkit_ROOT)")
    elseif(CUDAToolkit_VERSION VERSION_LESS 12.0)
      _st_add(_st_cuda_missing "CUDA toolkit: ${CUDAToolkit_VERSION} at ${CUDAToolkit_BIN_DIR} is older than 12.0 (set CUDAToolkit_ROOT to a CUDA 12 or 13 toolkit)")
    elseif(NOT TARGET CUDA::cudart_static OR NOT TARGET CUDA::cublas)
      _st_add(_st_cuda_missing "CUDA toolkit: ${CUDAToolkit_VERSION} at ${CUDAToolkit_BIN_DIR} has no libcudart_static.a or libcublas.so in ${CUDAToolkit_LIBRARY_DIR} (set CUDAToolkit_ROOT to a complete toolkit)")
    else()
      # nvcc compiles host code with the project's C++ compiler, so that both agree on the ABI.
      if(NOT DEFINED CMAKE_CUDA_HOST_COMPILER AND NOT DEFINED ENV{CUDAHOSTCXX})
        set(CMAKE_CUDA_HOST_COMPILER ${CMAKE_CXX_COMPILER} CACHE FILEPATH "Host compiler nvcc uses")
      endif()
      set(_st_host "${CMAKE_CUDA_HOST_COMPILER}")
      if(_st_host STREQUAL "")
        set(_st_host "$ENV{CUDAHOSTCXX}")
      endif()
      _st_check_host_compiler(${CUDAToolkit_NVCC_EXECUTABLE} "${_st_host}" _st_host_problem)
      if(_st_host_problem)
        _st_add(_st_cuda_missing "${_st_host_problem}")
      endif()
    endif()
  endif()

  if(NOT _st_cuda_missing)
    _st_find_gpu_library(CUDNN cudnn_version.h cudnn libcudnn.so.9 libcudnn.so.8)
    if(CUDNN_PROBLEM)
      _st_add(_st_cuda_missing "cuDNN: ${CUDNN_PROBLEM}")
    else()
      scaletrain_header_version(SCALETRAIN_CUDNN_VERSION ${CUDNN_INCLUDE_DIR}/cudnn_version.h
                                CUDNN_MAJOR CUDNN_MINOR CUDNN_PATCHLEVEL)
      if(SCALETRAIN_CUDNN_VERSION STREQUAL "")
        _st_add(_st_cuda_missing "cuDNN: ${CUDNN_INCLUDE_DIR}/cudnn_version.h has no CUDNN_MAJOR/MINOR/PATCHLEVEL (set CUDNN_ROOT to cuDNN 8 or 9)")
      elseif(SCALETRAIN_CUDNN_VERSION VERSION_LESS 8)
        _st_add(_st_cuda_missing "cuDNN: ${SCALETRAIN_CUDNN_VERSION} in ${CUDNN_INCLUDE_DIR} is older than 8 (set CUDNN_ROOT to cuDNN 8 or 9)")
      endif()
    endif()
    _st_find_gpu_library(NCCL nccl.h nccl libnccl.so.2)
    if(NOT NCCL_PROBLEM)
      scaletrain_header_version(SCALETRAIN_NCCL_VERSION ${NCCL_INCLUDE_DIR}/nccl.h NCCL_MAJOR NCCL_MINOR NCCL_PATCH)
      if(SCALETRAIN_NCCL_VERSION STREQUAL "")
        set(NCCL_PROBLEM "${NCCL_INCLUDE_DIR}/nccl.h has no NCCL_MAJOR/MINOR/PATCH")
      endif()
    endif()
  endif()

  if(_st_cuda_missing)
    string(JOIN "\n  " _st_cuda_missing_text ${_st_cuda_missing})
    if(_st_cuda_mode STREQUAL "ON")
      message(FATAL_ERROR "SCALETRAIN_CUDA=ON, but the CUDA backend cannot be built:\n  ${_st_cuda_missing_text}\n"
                          "Set the variable named above, or configure with -DSCALETRAIN_CUDA=AUTO (built where found) or OFF.")
    endif()
    string(JOIN " | " _st_cuda_missing_line ${_st_cuda_missing})
    message(STATUS "CUDA backend off (SCALETRAIN_CUDA=AUTO): ${_st_cuda_missing_line}")
    _st_add(SCALETRAIN_CUDA_NOTES "CUDA backend      : off (SCALETRAIN_CUDA=AUTO): ${_st_cuda_missing_line}")
    set(SCALETRAIN_CUDNN_VERSION "")
    set(SCALETRAIN_NCCL_VERSION "")
  else()
    set(SCALETRAIN_HAVE_CUDA TRUE)
    set(SCALETRAIN_CUDA_VERSION ${CUDAToolkit_VERSION})
    _st_choose_cuda_architectures(${CUDAToolkit_NVCC_EXECUTABLE} ${CUDAToolkit_VERSION_MAJOR}.${CUDAToolkit_VERSION_MINOR})
    if(NOT CMAKE_CUDA_COMPILER)
      set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE} CACHE FILEPATH "CUDA compiler")
    endif()
    get_filename_component(_st_nvcc_real ${CUDAToolkit_NVCC_EXECUTABLE} REALPATH)
    get_filename_component(_st_compiler_real ${CMAKE_CUDA_COMPILER} REALPATH)
    if(NOT _st_nvcc_real STREQUAL _st_compiler_real)
      message(FATAL_ERROR "CMAKE_CUDA_COMPILER=${CMAKE_CUDA_COMPILER} is not the toolkit's nvcc (${CUDAToolkit_NVCC_EXECUTABLE}): "
                          "set one of CMAKE_CUDA_COMPILER and CUDAToolkit_ROOT, in a fresh build folder")
    endif()
    # A plain variable, not a cache entry, so that a later configure still knows it chose the
    # default (and says so); a user's cache entry or CUDAARCHS is used as it is.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND "$ENV{CUDAARCHS}" STREQUAL "")
      set(CMAKE_CUDA_ARCHITECTURES ${SCALETRAIN_CUDA_ARCHITECTURES})
    endif()
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    enable_language(CUDA)
    _st_imported_library(scaletrain::cudnn CUDNN)
    set(_st_cublas_version "")
    foreach(_st_dir ${CUDAToolkit_INCLUDE_DIRS})
      if(EXISTS ${_st_dir}/cublas_api.h AND _st_cublas_version STREQUAL "")
        scaletrain_header_version(_st_cublas_version ${_st_dir}/cublas_api.h CUBLAS_VER_MAJOR CUBLAS_VER_MINOR CUBLAS_VER_PATCH)
      endif()
    endforeach()
    _st_add(SCALETRAIN_CUDA_NOTES "CUDA backend      : on (SCALETRAIN_CUDA=${_st_cuda_mode})")
    _st_add(SCALETRAIN_CUDA_NOTES "  CUDA toolkit    : ${CUDAToolkit_VERSION} (${CUDAToolkit_NVCC_EXECUTABLE}, host compiler ${_st_host})")
    _st_add(SCALETRAIN_CUDA_NOTES "  cuDNN           : ${SCALETRAIN_CUDNN_VERSION} (${CUDNN_LIBRARY})")
    _st_add(SCALETRAIN_CUDA_NOTES "  cuBLAS          : ${_st_cublas_version} (${CUDAToolkit_LIBRARY_DIR})")
    if(NCCL_PROBLEM)
      set(SCALETRAIN_NCCL_VERSION "")
      _st_add(SCALETRAIN_CUDA_NOTES "  NCCL            : not found (${NCCL_PROBLEM}), --intra nccl unavailable")
    else()
      set(SCALETRAIN_HAVE_NCCL TRUE)
      _st_imported_library(scaletrain::nccl NCCL)
      _st_add(SCALETRAIN_CUDA_NOTES "  NCCL            : ${SCALETRAIN_NCCL_VERSION} (${NCCL_LIBRARY})")
    endif()
    string(REPLACE ";" " " _st_arch_text "${SCALETRAIN_CUDA_ARCHITECTURES}")
    _st_add(SCALETRAIN_CUDA_NOTES "  GPU archs       : ${_st_arch_text}: ${_st_arch_note}")
    if(_st_arch_dropped_note)
      _st_add(SCALETRAIN_CUDA_NOTES "  left out        : ${_st_arch_dropped_note}")
    endif()
  endif()
endif()

# st_backend_cuda: the CUDA backend's sources (src/backend/cuda/*.cu, *.cpp), linked into
# st_backend. Without CUDA it is the stand-in that answers "not built", so callers need no #if.
function(scaletrain_backend_cuda)
  if(SCALETRAIN_HAVE_CUDA)
    # st_cublas_on_demand: cuBLAS's functions, opening libcublas on the first call
    # (src/backend/cuda/cublas/cublas_on_demand.cpp says why); linked wherever CUDA code calls cuBLAS,
    # instead of libcublas itself. Only its headers come from the toolkit.
    add_library(st_cublas_on_demand STATIC ${CMAKE_SOURCE_DIR}/src/backend/cuda/cublas/cublas_on_demand.cpp)
    target_compile_definitions(st_cublas_on_demand PRIVATE ST_CUBLAS_LIBRARY_DIR="${CUDAToolkit_LIBRARY_DIR}")
    target_include_directories(st_cublas_on_demand PRIVATE ${CMAKE_SOURCE_DIR}/include ${CUDAToolkit_INCLUDE_DIRS})
    target_link_libraries(st_cublas_on_demand PRIVATE st_core ${CMAKE_DL_LIBS})
    file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backend/cuda/*.cu ${CMAKE_SOURCE_DIR}/src/backend/cuda/*.cpp)
    list(FILTER sources EXCLUDE REGEX "_absent\\.cpp$")
    add_library(st_backend_cuda STATIC ${sources})
    # cudart statically: a binary then needs only the driver (libcuda.so.1) at run time, and
    # loads it when a CUDA call is first made, not at start-up. PRIVATE keeps the CUDA headers
    # out of every other subsystem's include path; the libraries are still linked into executables.
    target_link_libraries(st_backend_cuda PRIVATE CUDA::cudart_static st_cublas_on_demand scaletrain::cudnn)
  else()
    file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backend/cuda/*_absent.cpp)
    add_library(st_backend_cuda STATIC ${sources})
  endif()
  # The Context's state (backend/cpu/dnnl_context.hpp) names oneDNN's engine beside the CUDA state.
  # dl: NVTX looks for a profiler's injection library with dlopen.
  target_link_libraries(st_backend_cuda PUBLIC st_tensor ${CMAKE_DL_LIBS} PRIVATE DNNL::dnnl)
  target_include_directories(st_backend_cuda
    PUBLIC ${CMAKE_SOURCE_DIR}/include ${CMAKE_BINARY_DIR}/generated
    PRIVATE ${CMAKE_SOURCE_DIR}/src)
endfunction()

# scaletrain_cuda_sources(NAME): adds src/NAME/cuda/*.cu (the subsystem's CUDA kernels) to st_NAME
# where the CUDA backend is built; they reach the Context's streams and handles through
# src/backend/cuda/cuda_context.hpp. Elsewhere nothing is added, and the dispatchers' CUDA cases
# are compiled out (SCALETRAIN_HAVE_CUDA in config.hpp).
function(scaletrain_cuda_sources name)
  if(NOT SCALETRAIN_HAVE_CUDA)
    return()
  endif()
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${name}/cuda/*.cu)
  if(sources)
    target_sources(st_${name} PRIVATE ${sources})
    target_link_libraries(st_${name} PRIVATE CUDA::cudart_static st_cublas_on_demand scaletrain::cudnn)
  endif()
endfunction()

# scaletrain_nccl_sources(): the NCCL transport (src/comm/nccl/) into st_comm where NCCL was found,
# compiled against NCCL's header; libnccl itself is opened on its first call
# (src/comm/nccl/nccl_on_demand.cpp says why), first from the library path, then from the folder
# found here. Elsewhere the stand-in src/comm/nccl/*_absent.cpp, which answers "not built".
function(scaletrain_nccl_sources)
  if(SCALETRAIN_HAVE_NCCL)
    file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/comm/nccl/*.cpp)
    list(FILTER sources EXCLUDE REGEX "_absent\\.cpp$")
    get_filename_component(nccl_dir "${NCCL_LIBRARY}" DIRECTORY)
    target_sources(st_comm PRIVATE ${sources})
    target_compile_definitions(st_comm PRIVATE ST_NCCL_LIBRARY_DIR="${nccl_dir}")
    target_include_directories(st_comm PRIVATE ${NCCL_INCLUDE_DIR} ${CUDAToolkit_INCLUDE_DIRS})
    # The reducer (nccl_reducer.cpp) drives its stream and events with the CUDA runtime, and its
    # kernels are the CUDA backend's (gradient_kernels.cu); cuDNN for the check macros' header.
    target_link_libraries(st_comm PRIVATE ${CMAKE_DL_LIBS} CUDA::cudart_static scaletrain::cudnn)
  else()
    file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/comm/nccl/*_absent.cpp)
    target_sources(st_comm PRIVATE ${sources})
  endif()
endfunction()
