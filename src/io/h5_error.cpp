// ST_CHECK_H5's message (core/error.hpp): the innermost message of HDF5's error stack.
#include <hdf5.h>

#include "scaletrain/core/error.hpp"

namespace scaletrain::detail {
namespace {
herr_t innermost(unsigned n, const H5E_error2_t* err, void* client) {
  auto* out = static_cast<std::string*>(client);
  if (n == 0 && err->desc) *out = err->desc;
  return 0;
}
}  // namespace

void throw_h5_error(const char* file, int line, const char* expr) {
  std::string message = "unknown HDF5 error";
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, innermost, &message);
  H5Eclear2(H5E_DEFAULT);
  throw_library_error("HDF5", file, line, expr, message);
}

}  // namespace scaletrain::detail
