// The out-of-device-memory error's messages (out_of_memory.hpp).
#include "scaletrain/core/out_of_memory.hpp"

#include <cstdio>

namespace scaletrain {
namespace {
std::string size_text(std::size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}
}  // namespace

std::string out_of_device_memory_message(int gpu_index, std::size_t asked_bytes, std::size_t free_bytes,
                                         std::size_t total_bytes, std::size_t in_use_bytes) {
  return "out of GPU memory on GPU " + std::to_string(gpu_index) + ": asked for " + size_text(asked_bytes) + "; " +
         size_text(free_bytes) + " free of " + size_text(total_bytes) + ", " + size_text(in_use_bytes) +
         " in use by this rank's tensors";
}

std::string out_of_memory_at_batch_size(const std::string& message, int64_t batch_size) {
  const std::string told = "; at --batch-size " + std::to_string(batch_size) +
                           " per rank: lower --batch-size (a step's activations grow with it)";
  // Before the "(at FILE:LINE)" that ends a thrown message, which stays last for the developer.
  const std::size_t at = message.rfind(" (at ");
  if (at == std::string::npos || message.back() != ')') return message + told;
  return message.substr(0, at) + told + message.substr(at);
}

namespace detail {
void throw_out_of_device_memory(const char* file, int line, const std::string& message) {
  const std::string path(file);
  const std::size_t slash = path.rfind('/');
  const std::string identity = error_identity();
  throw OutOfDeviceMemory((identity.empty() ? "" : "[" + identity + "] ") + message + " (at " +
                          (slash == std::string::npos ? path : path.substr(slash + 1)) + ":" + std::to_string(line) +
                          ")");
}
}  // namespace detail

}  // namespace scaletrain
