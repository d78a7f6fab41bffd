// Whole-file XXH3-64 digests and the seal of checkpoint files (file_checksum.hpp).
// Decisions: plain pread in 8 MiB pieces with sequential read-ahead advice (the page cache and
// the parallel file system's client do the rest); the seal is text, so `head -c 512 FILE` shows
// it and `tail -c +513 FILE | xxhsum -H3` checks it without scaletrain.
#include "scaletrain/io/file_checksum.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <vector>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/progress.hpp"

namespace scaletrain::io {
namespace {

constexpr std::size_t kReadPiece = std::size_t{8} << 20;
constexpr const char* kSealMagic = "scaletrain-seal 1\n";
const char kHdf5Signature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};

// A file descriptor closed on scope exit.
class Fd {
 public:
  Fd(const std::string& path, int flags) : fd_(::open(path.c_str(), flags | O_CLOEXEC)) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

int64_t file_size(const Fd& fd, const std::string& path) {
  struct stat st {};
  ST_CHECK(::fstat(fd.get(), &st) == 0, path << ": cannot stat: " << std::strerror(errno));
  return static_cast<int64_t>(st.st_size);
}

// Reads exactly `size` bytes at `offset` (fewer only at the end of the file); returns the count.
int64_t read_at(const Fd& fd, const std::string& path, void* buf, int64_t size, int64_t offset) {
  int64_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd.get(), static_cast<char*>(buf) + done, static_cast<std::size_t>(size - done),
                              static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    ST_CHECK(n >= 0, path << ": read failed at byte " << offset + done << ": " << std::strerror(errno));
    if (n == 0) break;
    done += n;
  }
  return done;
}

struct SealText {
  int64_t bytes = -1;
  uint64_t xxh3 = 0;
};

std::string format_seal(const SealText& s) {
  std::ostringstream os;
  os << kSealMagic << "bytes " << s.bytes << "\nxxh3 " << xxh3_hex(s.xxh3) << "\n";
  return os.str();
}

// Parses a seal written by format_seal; false when the block is not one (a damaged seal).
bool parse_seal(const std::vector<char>& block, SealText* out) {
  const std::string text(block.data(), strnlen(block.data(), block.size()));
  if (text.rfind(kSealMagic, 0) != 0) return false;
  std::istringstream is(text.substr(std::strlen(kSealMagic)));
  std::string bytes_key, hash_key, hash;
  long long bytes = -1;
  if (!(is >> bytes_key >> bytes >> hash_key >> hash) || bytes_key != "bytes" || hash_key != "xxh3" || bytes < 0)
    return false;
  out->bytes = bytes;
  return parse_xxh3_hex(hash, &out->xxh3) && format_seal(*out) == text;
}

}  // namespace

FileDigest digest_file(const std::string& path, int64_t offset) {
  Fd fd(path, O_RDONLY);
  ST_CHECK(fd.get() >= 0, path << ": cannot open: " << std::strerror(errno));
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(), XXH3_freeState);
  ST_CHECK(state != nullptr && XXH3_64bits_reset(state.get()) == XXH_OK, path << ": cannot start the checksum");
  std::vector<char> buf(kReadPiece);
  FileDigest d;
  for (;;) {
    const int64_t n = read_at(fd, path, buf.data(), static_cast<int64_t>(buf.size()), offset + d.bytes);
    if (n == 0) break;
    XXH3_64bits_update(state.get(), buf.data(), static_cast<std::size_t>(n));
    d.bytes += n;
    progress::tick();  // hashing a large file is progress, not a stall
  }
  d.xxh3 = XXH3_64bits_digest(state.get());
  return d;
}

std::string xxh3_hex(uint64_t hash) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

bool parse_xxh3_hex(const std::string& text, uint64_t* hash) {
  if (text.size() != 16) return false;
  uint64_t v = 0;
  for (char c : text) {
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (digit < 0) return false;
    v = v << 4 | static_cast<uint64_t>(digit);
  }
  *hash = v;
  return true;
}

void seal_file(const std::string& path) {
  SealText seal;
  seal.xxh3 = digest_file(path, kSealBytes).xxh3;
  Fd fd(path, O_RDWR);
  ST_CHECK(fd.get() >= 0, path << ": cannot open to seal it: " << std::strerror(errno));
  seal.bytes = file_size(fd, path);
  ST_CHECK(seal.bytes > kSealBytes, path << ": too short to seal (" << seal.bytes << " bytes)");
  std::vector<char> block(kSealBytes, '\0');
  const std::string text = format_seal(seal);
  std::memcpy(block.data(), text.data(), text.size());
  ST_CHECK(::pwrite(fd.get(), block.data(), block.size(), 0) == kSealBytes,
           path << ": cannot write its seal: " << std::strerror(errno));
  ST_CHECK(::fsync(fd.get()) == 0, path << ": cannot sync it to disk: " << std::strerror(errno));
}

Seal check_seal(const std::string& path, const std::string& what) {
  Fd fd(path, O_RDONLY);
  ST_CHECK(fd.get() >= 0, what << " " << path << ": cannot open: " << std::strerror(errno));
  const int64_t size = file_size(fd, path);
  std::vector<char> block(kSealBytes + sizeof kHdf5Signature, '\0');
  const int64_t got = read_at(fd, path, block.data(), static_cast<int64_t>(block.size()), 0);
  // A file that starts with HDF5's signature has no user block, hence no seal (another tool's, or
  // an older version's); one with the signature after kSealBytes must have a readable seal.
  const auto signature_at = [&](int64_t at) {
    return got >= at + 8 && std::memcmp(block.data() + at, kHdf5Signature, 8) == 0;
  };
  if (signature_at(0)) return Seal::absent;
  ST_CHECK(signature_at(kSealBytes), what << " " << path << ": not an HDF5 file (no HDF5 signature at byte 0 or "
                                          << kSealBytes << "; " << size << " bytes)");
  block.resize(kSealBytes);
  SealText seal;
  ST_CHECK(parse_seal(block, &seal), what << " " << path << " is damaged: its seal (the first " << kSealBytes
                                          << " bytes) is unreadable (" << size << " bytes in all)");
  ST_CHECK(size == seal.bytes, what << " " << path << " is damaged: " << size << " bytes on disk, " << seal.bytes
                                    << " when it was written (" << (size < seal.bytes ? "cut short" : "grown")
                                    << ": quota, full disk or an interrupted copy?)");
  const FileDigest d = digest_file(path, kSealBytes);
  ST_CHECK(d.xxh3 == seal.xxh3, what << " " << path << " is damaged: its bytes have XXH3-64 " << xxh3_hex(d.xxh3)
                                     << ", its seal records " << xxh3_hex(seal.xxh3) << " (overwritten or bit rot)");
  return Seal::intact;
}

// HDF5's "base address" search: the signature at 0, then at every power of two from 512.
int hdf5_superblock_version(const std::string& path) {
  Fd fd(path, O_RDONLY);
  ST_CHECK(fd.get() >= 0, path << ": cannot open: " << std::strerror(errno));
  const int64_t size = file_size(fd, path);
  char head[sizeof kHdf5Signature + 1];
  for (int64_t at = 0; at + static_cast<int64_t>(sizeof head) <= size; at = at == 0 ? 512 : at * 2) {
    if (read_at(fd, path, head, sizeof head, at) < static_cast<int64_t>(sizeof head)) break;
    if (std::memcmp(head, kHdf5Signature, sizeof kHdf5Signature) == 0)
      return static_cast<unsigned char>(head[sizeof kHdf5Signature]);
  }
  return -1;
}

}  // namespace scaletrain::io
