# SCALETRAIN_SANITIZE: a comma-separated list of -fsanitize= groups (e.g. "address,undefined"),
# applied to every C and C++ target of the project (libraries, tools, tests, fuzz targets).
# "undefined" adds float-cast-overflow, which GCC's undefined group leaves out and which a
# damaged file can reach (a huge float stored where a size is read). -fno-sanitize-recover=all
# makes the first UBSan report end the process, so a test fails instead of printing and passing.
# CUDA is not sanitized: the sanitize build is CPU-only (make test-sanitize passes
# -DSCALETRAIN_CUDA=OFF) and configuring both is refused, since nvcc's host objects would link
# against the ASan runtime without its instrumentation and the CUDA driver's allocations show up
# as leaks.
set(SCALETRAIN_SANITIZE "" CACHE STRING
    "Sanitizers for every target, comma-separated -fsanitize= groups (e.g. address,undefined); empty: none")

function(scaletrain_apply_sanitizers)
  if(NOT SCALETRAIN_SANITIZE)
    set(SCALETRAIN_SANITIZE_TEXT "off" PARENT_SCOPE)
    return()
  endif()
  if(SCALETRAIN_HAVE_CUDA)
    message(FATAL_ERROR "SCALETRAIN_SANITIZE=${SCALETRAIN_SANITIZE} with the CUDA backend: the sanitize "
                        "build is CPU-only; configure it with -DSCALETRAIN_CUDA=OFF (make test-sanitize does)")
  endif()
  string(REPLACE "," ";" groups "${SCALETRAIN_SANITIZE}")
  set(flags "-fsanitize=${SCALETRAIN_SANITIZE}")
  if("undefined" IN_LIST groups)
    list(APPEND flags -fsanitize=float-cast-overflow)
  endif()
  list(APPEND flags -fno-sanitize-recover=all -fno-omit-frame-pointer -g)
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${flags}>")
  add_link_options("$<$<LINK_LANGUAGE:C,CXX>:${flags}>")
  # Every executable defined after this keeps its plugins loaded (see the file's comment).
  add_library(st_keep_plugins_loaded OBJECT ${CMAKE_SOURCE_DIR}/tests/sanitize/keep_plugins_loaded.c)
  link_libraries(st_keep_plugins_loaded)
  string(REPLACE ";" " " text "${flags}")
  set(SCALETRAIN_SANITIZE_TEXT "${text}" PARENT_SCOPE)
endfunction()
