// A file mapped read-only into memory (mmap, MAP_SHARED): the --io mmap reader takes samples
// straight from the page cache with no read() copy. Move-only; unmapped on destruction.
//
// Caveat of every mapping: a file truncated by someone else while mapped makes accesses beyond
// the new end fault (SIGBUS) instead of returning an error, so the sizes the reader relies on are
// checked against the file's size when it is mapped.
#pragma once

#include <cstdint>
#include <string>

namespace scaletrain::io {

class MappedFile {
 public:
  MappedFile() = default;
  // Maps the whole file; throws scaletrain::Error naming the path and the system's reason.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release();
  std::string path_;
  const uint8_t* data_ = nullptr;
  int64_t size_ = 0;
};

}  // namespace scaletrain::io
