// Logging: rank 0 prints progress to stdout; warnings from any rank go to stderr with the rank.
#pragma once

#include <sstream>
#include <string>

namespace scaletrain {

void set_log_rank(int rank);
int log_rank();
// Printed by rank 0 only.
void log_info(const std::string& line);
// Printed by every rank that calls it, prefixed with the rank.
void log_warning(const std::string& line);

}  // namespace scaletrain

#define ST_LOG(msg_stream)                \
  do {                                    \
    std::ostringstream st_os_;            \
    st_os_ << msg_stream;                 \
    ::scaletrain::log_info(st_os_.str()); \
  } while (0)

#define ST_WARN(msg_stream)                  \
  do {                                       \
    std::ostringstream st_os_;               \
    st_os_ << msg_stream;                    \
    ::scaletrain::log_warning(st_os_.str()); \
  } while (0)
