// Private to src/comm/nccl: the NCCL member of the check-macro family (../shared/design/STYLE.md,
// rule 4). Every NCCL call goes through it: on failure it throws naming the call, NCCL's name for
// the result (ncclGetErrorString) and what NCCL last said on that communicator (ncclGetLastError).
#pragma once

#include <nccl.h>

#include <string>

#include "scaletrain/core/error.hpp"

namespace scaletrain::comm::detail {
// " (NCCL: <its last error>)" where NCCL has more to say than the result's name.
inline std::string nccl_last_error(ncclComm_t comm) {
  const char* text = ncclGetLastError(comm);
  return text != nullptr && *text != '\0' ? std::string(" (NCCL: ") + text + ")" : std::string();
}
}  // namespace scaletrain::comm::detail

#define ST_CHECK_NCCL(call, handle)                                           \
  do {                                                                        \
    const ncclResult_t st_nccl_result = (call);                               \
    if (st_nccl_result != ncclSuccess)                                        \
      ST_THROW(#call << " failed: " << ncclGetErrorString(st_nccl_result)     \
                     << ::scaletrain::comm::detail::nccl_last_error(handle)); \
  } while (0)
