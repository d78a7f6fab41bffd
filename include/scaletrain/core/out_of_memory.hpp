// Running out of device memory: an Error of its own type, so that the training loop can catch
// exactly it and say which of its settings asked for the memory (the batch size), while every
// other error passes through unchanged. The messages are pure functions, testable without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "scaletrain/core/error.hpp"

namespace scaletrain {

class OutOfDeviceMemory : public Error {
 public:
  explicit OutOfDeviceMemory(const std::string& what) : Error(what) {}
};

// "out of GPU memory on GPU 0: asked for 512.0 MiB; 100.0 MiB free of 81004.0 MiB, 80712.5 MiB in
// use by this rank's tensors".
std::string out_of_device_memory_message(int gpu_index, std::size_t asked_bytes, std::size_t free_bytes,
                                         std::size_t total_bytes, std::size_t in_use_bytes);

// What training adds to an allocator's message, before its closing "(at FILE:LINE)": "... in use
// by this rank's tensors; at --batch-size 256 per rank: lower --batch-size (...) (at ...)".
std::string out_of_memory_at_batch_size(const std::string& message, int64_t batch_size);

namespace detail {
// Throws OutOfDeviceMemory with this rank's prefix and " (at FILE:LINE)", like ST_THROW.
[[noreturn]] void throw_out_of_device_memory(const char* file, int line, const std::string& message);
}  // namespace detail

}  // namespace scaletrain
