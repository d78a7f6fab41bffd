// Shard checksums and node-local staging (--stage-to).
//
// Checksum: CRC-32 (zlib) of the shard's dataset contents as read through HDF5, so it does not
// depend on the file layout: the labels as int32 little-endian, then either every image byte
// (dataset `images`, row-major) or, for JPEG shards, each sample's length (uint64 little-endian)
// followed by its bytes (sample i: bytes [jpeg_offsets[i], jpeg_offsets[i + 1]) of `jpeg`). The
// value is that of format 1's variable-length samples, so `scaletrain-data upgrade` keeps it.
// Stored as the root attribute `checksum`, "crc32:%08x".
//
// Staging: the first rank of every node (local rank 0) copies all shards of the split (global
// shuffling gives every rank samples of every shard, so a node needs them all) into
// <dir>/<split name>/ with 8 MiB sequential reads and writes to a temporary name, fsyncs it,
// verifies the copy and renames it into place. The copy is verified against the split's manifest
// (size and XXH3-64 of the file's bytes, manifest.hpp: no HDF5 involved, so a damaged copy cannot
// crash the library), or, for a split without one, against the source's `checksum` attribute.
// A staged file that already matches is kept (re-runs on the same node are cheap); one that does
// not match is copied again, with a warning. A shard with neither is always copied (nothing to
// verify against), with a warning. Ranks sharing one file system
// (emulated nodes) may copy the same shard at once: temporary names are unique per process and
// rename is atomic. Success is agreed over the world with one allreduce, so a failure on one node
// (disk full, a mismatch) becomes the same error, naming the file, on every rank.
#include "scaletrain/data/staging.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>
#include <vector>

#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/comm/topology.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/log.hpp"
#include "scaletrain/core/timer.hpp"
#include "scaletrain/io/file_checksum.hpp"
#include "scaletrain/io/hdf5.hpp"

namespace scaletrain::data {
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kCopyBlock = 8u << 20;         // bytes per read/write when copying
constexpr int64_t kChecksumBlockBytes = 32ll << 20;  // image bytes per HDF5 read when checksumming

uint32_t crc_update(uint32_t crc, const void* data, std::size_t size) {
  const auto* p = static_cast<const Bytef*>(data);
  while (size > 0) {  // zlib takes uInt lengths
    const uInt n = static_cast<uInt>(std::min<std::size_t>(size, 1u << 30));
    crc = static_cast<uint32_t>(crc32(crc, p, n));
    p += n;
    size -= n;
  }
  return crc;
}

void put_le64(uint8_t* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Format-2 JPEG bytes, read in blocks of whole samples of about kChecksumBlockBytes (the offsets
// are checked first, so a damaged offset cannot make a length negative).
uint32_t crc_jpeg(const io::H5File& file, int64_t samples, uint32_t crc) {
  const std::vector<int64_t> offsets = read_jpeg_offsets(file, samples);
  const io::H5Dataset jpeg(file, "jpeg");
  std::vector<uint8_t> buf;
  uint8_t len[8];
  for (int64_t first = 0; first < samples;) {
    int64_t last = first + 1;  // block: samples [first, last)
    while (last < samples && offsets[last + 1] - offsets[first] <= kChecksumBlockBytes) ++last;
    buf.resize(static_cast<std::size_t>(offsets[last] - offsets[first]));
    jpeg.read_rows(offsets[first], offsets[last] - offsets[first], DType::u8, buf.data());
    for (int64_t i = first; i < last; ++i) {
      put_le64(len, static_cast<uint64_t>(offsets[i + 1] - offsets[i]));
      crc = crc_update(crc, len, sizeof len);
      crc = crc_update(crc, buf.data() + (offsets[i] - offsets[first]), offsets[i + 1] - offsets[i]);
    }
    first = last;
  }
  return crc;
}

std::string errno_text(int err) {
  std::string s = std::strerror(err);
  if (err == ENOSPC || err == EDQUOT) s += " (is the staging file system full?)";
  return s;
}

// Large sequential copy to `to`, fsynced. Returns the bytes copied.
int64_t copy_file(const std::string& from, const std::string& to) {
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  ST_CHECK(in >= 0, "staging: cannot open " << from << ": " << errno_text(errno));
  const int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) {
    const int err = errno;
    ::close(in);
    ST_THROW("staging: cannot create " << to << ": " << errno_text(err));
  }
  std::vector<char> buf(kCopyBlock);
  int64_t total = 0;
  std::string problem;
  for (;;) {
    const ssize_t n = ::read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      problem = "staging: reading " + from + ": " + errno_text(errno);
      break;
    }
    if (n == 0) break;
    ssize_t done = 0;
    while (done < n) {
      const ssize_t w = ::write(out, buf.data() + done, static_cast<std::size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        problem = "staging: writing " + to + ": " + errno_text(errno);
        break;
      }
      done += w;
    }
    if (!problem.empty()) break;
    total += n;
  }
  if (problem.empty() && ::fsync(out) != 0) problem = "staging: fsync " + to + ": " + errno_text(errno);
  ::close(in);
  if (::close(out) != 0 && problem.empty()) problem = "staging: closing " + to + ": " + errno_text(errno);
  if (!problem.empty()) {
    std::error_code ec;
    fs::remove(to, ec);
    ST_THROW(problem);
  }
  return total;
}

std::string stored_checksum(const std::string& path) {
  io::H5File f(path, io::H5File::Mode::read);
  return f.has_attribute("checksum") ? f.get_string_attribute("checksum") : std::string();
}

// What a copy of a shard must match: its manifest entry, else its `checksum` attribute, else
// nothing (known() false).
struct Expected {
  const ManifestEntry* entry = nullptr;
  std::string attribute;
  bool known() const { return entry != nullptr || !attribute.empty(); }
  std::string text() const {
    return entry ? std::to_string(entry->bytes) + " bytes with XXH3-64 " + io::xxh3_hex(entry->xxh3) : attribute;
  }
};

Expected expected_of(const SplitInfo& split, const ShardInfo& shard) {
  Expected e;
  if (split.manifest) {
    e.entry = split.manifest->find(fs::path(shard.path).filename().string());
    ST_CHECK(e.entry != nullptr, "staging: " << shard.path << " is not in " << split.manifest->path);
  } else {
    e.attribute = stored_checksum(shard.path);
  }
  return e;
}

// What the file `copy` holds, in the terms of `e` (an unreadable copy says why).
std::string copy_checksum(const std::string& copy, const Expected& e) {
  try {
    if (e.entry) {
      const io::FileDigest d = io::digest_file(copy);
      return std::to_string(d.bytes) + " bytes with XXH3-64 " + io::xxh3_hex(d.xxh3);
    }
    return shard_checksum(copy);
  } catch (const Error& err) {
    return std::string("unreadable (") + err.what() + ")";
  }
}

// The staged copy is usable: same size as the source and its contents match.
bool staged_copy_valid(const std::string& staged, const std::string& source, const Expected& expected) {
  std::error_code ec;
  if (!expected.known() || !fs::is_regular_file(staged, ec)) return false;
  if (fs::file_size(staged, ec) != fs::file_size(source, ec) || ec) return false;
  return copy_checksum(staged, expected) == expected.text();
}

std::string split_name(const SplitInfo& split) {
  fs::path p = fs::path(split.dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

struct NodeCopy {
  int64_t bytes = 0;
  int copied = 0, kept = 0;
};

NodeCopy copy_shards(const SplitInfo& split, const fs::path& target) {
  std::error_code ec;
  fs::create_directories(target, ec);
  ST_CHECK(!ec, "staging: cannot create " << target.string() << ": " << ec.message());
  NodeCopy r;
  char host[256] = "host";
  ::gethostname(host, sizeof host - 1);
  const std::string tmp_suffix = ".tmp-" + std::string(host) + "-" + std::to_string(::getpid());
  for (const ShardInfo& shard : split.shards) {
    const std::string dst = (target / fs::path(shard.path).filename()).string();
    const Expected expected = expected_of(split, shard);
    if (fs::exists(dst, ec)) {
      if (staged_copy_valid(dst, shard.path, expected)) {
        ++r.kept;
        continue;
      }
      if (expected.known()) ST_WARN("staging: " << dst << " does not match " << shard.path << "; copying it again");
    }
    if (!expected.known())
      ST_WARN("staging: " << shard.path
                          << " has neither a manifest entry nor a 'checksum' attribute; copying it "
                             "unverified");
    const std::string tmp = dst + tmp_suffix;
    r.bytes += copy_file(shard.path, tmp);
    if (expected.known()) {
      const std::string got = copy_checksum(tmp, expected);
      if (got != expected.text()) {
        fs::remove(tmp, ec);
        ST_THROW("staging: the copy of " << shard.path << " to " << dst << " does not match its checksum: it has "
                                         << got << ", expected " << expected.text()
                                         << " (source damaged or changed, or the staging disk is failing)");
      }
    }
    fs::rename(tmp, dst, ec);
    if (ec) {
      fs::remove(tmp, ec);
      ST_THROW("staging: cannot rename " << tmp << " to " << dst << ": " << ec.message());
    }
    ++r.copied;
  }
  return r;
}

}  // namespace

std::string shard_checksum(const std::string& path) {
  const io::H5File f(path, io::H5File::Mode::read);
  ST_CHECK(f.has("labels"), path << ": no dataset 'labels' to checksum");
  const Tensor labels = f.read("labels", DType::i32);  // little-endian hosts only (x86, ARM, POWER LE)
  uint32_t crc = crc_update(static_cast<uint32_t>(crc32(0, Z_NULL, 0)), labels.data<int32_t>(),
                            static_cast<std::size_t>(labels.numel()) * sizeof(int32_t));
  if (f.has("images")) {
    const io::H5Dataset images(f, "images");
    const int64_t row_bytes = std::max<int64_t>(1, images.row_elements());
    const int64_t block_rows = std::max<int64_t>(1, kChecksumBlockBytes / row_bytes);
    std::vector<uint8_t> buf(
        static_cast<std::size_t>(std::min(block_rows, std::max<int64_t>(1, images.rows())) * row_bytes));
    for (int64_t start = 0; start < images.rows(); start += block_rows) {
      const int64_t count = std::min(block_rows, images.rows() - start);
      images.read_rows(start, count, DType::u8, buf.data());
      crc = crc_update(crc, buf.data(), static_cast<std::size_t>(count * row_bytes));
    }
  } else if (f.has("jpeg")) {
    crc = crc_jpeg(f, labels.numel(), crc);
  } else {
    ST_THROW(path << ": neither 'images' nor 'jpeg' to checksum");
  }
  char text[32];
  std::snprintf(text, sizeof text, "crc32:%08x", crc);
  return text;
}

void stamp_shard_checksum(const std::string& path) {
  const std::string sum = shard_checksum(path);
  io::H5File f(path, io::H5File::Mode::read_write);
  f.set_fixed_string_attribute("checksum", sum);
  f.flush();
}

Json StagingResult::to_json() const {
  Json j = Json::object();
  j.set("dir", split.dir);
  j.set("shards", static_cast<int64_t>(split.shards.size()));
  j.set("seconds", seconds);
  j.set("bytes", bytes);
  return j;
}

StagingResult stage_split(const SplitInfo& split, const std::string& stage_dir, const comm::Topology& topo) {
  ST_CHECK(!stage_dir.empty(), "--stage-to: empty directory name");
  const comm::Communicator& world = topo.world();
  Stopwatch clock;
  const std::string name = split_name(split);
  const fs::path target = fs::path(stage_dir) / name;

  std::string problem;
  NodeCopy copied;
  if (topo.local_rank() == 0) {
    try {
      copied = copy_shards(split, target);
    } catch (const std::exception& e) {
      problem = e.what();
      // Drop this rank's identity: every rank re-raises the message with its own and "(on rank N)".
      const std::string id = "[" + error_identity() + "] ";
      if (problem.compare(0, id.size(), id) == 0) problem.erase(0, id.size());
    }
  }
  // Everybody learns whether every node succeeded; on failure the lowest failing rank's message
  // is the error on every rank.
  if (!world.allreduce_and(problem.empty())) {
    const double me = problem.empty() ? std::numeric_limits<double>::infinity() : world.rank();
    const double first = world.allreduce_min(me);
    world.broadcast(problem, static_cast<int>(first));
    ST_THROW(problem << " (on rank " << static_cast<int>(first) << ", which stages for its node)");
  }

  StagingResult result;
  result.split = split;
  result.split.dir = target.string();
  for (auto& shard : result.split.shards) shard.path = (target / fs::path(shard.path).filename()).string();
  result.bytes = copied.bytes;
  result.seconds = clock.elapsed();
  const double slowest = world.allreduce_max(result.seconds);  // bounds the start of training
  const int64_t total_bytes = world.allreduce_sum(copied.bytes);
  const int64_t total_copied = world.allreduce_sum(static_cast<int64_t>(copied.copied));
  const int64_t total_kept = world.allreduce_sum(static_cast<int64_t>(copied.kept));
  char line[512];
  std::snprintf(line, sizeof line,
                "staged %s: %zu shards to %s on %d node%s in %.2f s: %lld copies (%.1f MB, %.1f MB/s), %lld already "
                "staged",
                name.c_str(), split.shards.size(), target.string().c_str(), topo.num_nodes(),
                topo.num_nodes() == 1 ? "" : "s", slowest, static_cast<long long>(total_copied), total_bytes / 1e6,
                total_bytes / 1e6 / std::max(slowest, 1e-9), static_cast<long long>(total_kept));
  ST_LOG(line);
  return result;
}

}  // namespace scaletrain::data
