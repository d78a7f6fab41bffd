// Read-only whole-file mappings for the --io mmap reader.
#include "scaletrain/io/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "scaletrain/core/error.hpp"

namespace scaletrain::io {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ST_CHECK(fd >= 0, path << ": cannot open for reading: " << std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    ST_THROW(path << ": cannot stat: " << std::strerror(err));
  }
  size_ = static_cast<int64_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, static_cast<std::size_t>(size_), PROT_READ, MAP_SHARED, fd, 0);
    const int err = errno;
    ::close(fd);  // the mapping keeps the file open
    ST_CHECK(p != MAP_FAILED, path << ": cannot map " << size_ << " bytes: " << std::strerror(err));
    data_ = static_cast<const uint8_t*>(p);
  } else {
    ::close(fd);
  }
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::release() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), static_cast<std::size_t>(size_));
  data_ = nullptr;
  size_ = 0;
}

}  // namespace scaletrain::io
