// Dataset manifests (manifest.hpp). Decisions: JSON, so that operators read it and scripts check
// it (`xxhsum -H3` prints the same hashes); shard i is hashed by rank i mod P, as the writers
// assign shards, so a writer hashes the files it has just written (still in its page cache);
// results travel as 64-bit words in one OR all-reduce (each word is set by exactly one rank).
#include "scaletrain/data/manifest.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/json.hpp"
#include "scaletrain/core/log.hpp"
#include "scaletrain/core/timer.hpp"
#include "scaletrain/io/file_checksum.hpp"
#include "scaletrain/io/hdf5.hpp"

namespace scaletrain::data {
namespace fs = std::filesystem;

namespace {

constexpr const char* kManifestFormat = "scaletrain-manifest";
constexpr int64_t kManifestVersion = 1;

std::string file_name(const std::string& path) { return fs::path(path).filename().string(); }

std::vector<std::string> shard_files(const std::string& split_dir) {
  std::vector<std::string> paths;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(split_dir, ec))
    if (e.path().extension() == ".h5" && !e.is_directory()) paths.push_back(e.path().string());
  ST_CHECK(!ec, split_dir << ": cannot list: " << ec.message());
  std::sort(paths.begin(), paths.end());
  return paths;
}

Manifest parse_manifest(const std::string& path, const std::string& text) {
  Manifest m;
  m.path = path;
  try {
    const Json j = Json::parse(text);
    ST_CHECK(j.contains("format") && j.at("format").as_string() == kManifestFormat,
             "'format' is not \"" << kManifestFormat << "\"");
    ST_CHECK(j.at("version").as_int() == kManifestVersion,
             "version " << j.at("version").as_int() << ", this build reads " << kManifestVersion);
    ST_CHECK(j.at("checksum").as_string() == "xxh3-64",
             "checksum '" << j.at("checksum").as_string() << "' is not supported (xxh3-64)");
    const Json& shards = j.at("shards");
    for (std::size_t i = 0; i < shards.size(); ++i) {
      const Json& s = shards.at(i);
      ManifestEntry e;
      e.file = s.at("file").as_string();
      e.bytes = s.at("bytes").as_int();
      ST_CHECK(e.file.find('/') == std::string::npos && !e.file.empty(), "shard name '" << e.file << "'");
      ST_CHECK(e.bytes >= 0, "shard " << e.file << " has " << e.bytes << " bytes");
      ST_CHECK(io::parse_xxh3_hex(s.at("xxh3").as_string(), &e.xxh3),
               "shard " << e.file << ": xxh3 '" << s.at("xxh3").as_string() << "' is not 16 hex digits");
      m.shards.push_back(e);
    }
    m.index();
  } catch (const Error& e) {
    ST_THROW("dataset manifest " << path << " is damaged or not a manifest: " << error_text(e)
                                 << "; write it again with `scaletrain-data manifest DIR`");
  }
  return m;
}

Json manifest_json(const std::vector<std::string>& paths, const std::vector<io::FileDigest>& digests) {
  Json shards = Json::array();
  for (std::size_t i = 0; i < paths.size(); ++i) {
    Json s = Json::object();
    s.set("file", file_name(paths[i]));
    s.set("bytes", digests[i].bytes);
    s.set("xxh3", io::xxh3_hex(digests[i].xxh3));
    shards.push_back(s);
  }
  Json j = Json::object();
  j.set("format", kManifestFormat);
  j.set("version", kManifestVersion);
  j.set("checksum", "xxh3-64");
  j.set("shards", shards);
  return j;
}

void write_text_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    ST_CHECK(out.good(), "cannot write " << tmp << " (disk full or no permission?)");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  ST_CHECK(!ec, "cannot rename " << tmp << " to " << path << ": " << ec.message());
}

// The lowest failing rank's message becomes the error on every rank (no rank is left waiting).
void agree_or_throw(const comm::Communicator& comm, std::string problem) {
  if (comm.allreduce_and(problem.empty())) return;
  const double me = problem.empty() ? std::numeric_limits<double>::infinity() : comm.rank();
  const int first = static_cast<int>(comm.allreduce_min(me));
  comm.broadcast(problem, first);
  ST_THROW(problem << (comm.size() > 1 ? " (on rank " + std::to_string(first) + ")" : std::string()));
}

}  // namespace

void Manifest::index() {
  index_.clear();
  for (std::size_t i = 0; i < shards.size(); ++i) index_.emplace(shards[i].file, i);
}

const ManifestEntry* Manifest::find(const std::string& file) const {
  const auto it = index_.find(file);
  if (it != index_.end() && it->second < shards.size() && shards[it->second].file == file) return &shards[it->second];
  for (const ManifestEntry& e : shards)  // not indexed (shards changed since index())
    if (e.file == file) return &e;
  return nullptr;
}

namespace {

// The listed shards whose files are not among `names`, as "DIR/FILE" paths.
std::vector<std::string> missing_shards(const Manifest& manifest, const std::set<std::string>& names) {
  std::vector<std::string> missing;
  for (const ManifestEntry& e : manifest.shards)
    if (!names.count(e.file)) missing.push_back((fs::path(manifest.path).parent_path() / e.file).string());
  return missing;
}

}  // namespace

std::optional<Manifest> read_manifest(const std::string& split_dir) {
  const std::string path = (fs::path(split_dir) / kManifestFile).string();
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  ST_CHECK(in, "cannot read dataset manifest " << path);
  std::ostringstream text;
  text << in.rdbuf();
  return parse_manifest(path, text.str());
}

void check_manifest_sizes(const Manifest& manifest, const std::vector<std::string>& shard_paths) {
  const std::string fix =
      "; if the dataset was changed on purpose, write its manifest again with "
      "`scaletrain-data manifest DIR`";
  std::set<std::string> names;
  for (const std::string& path : shard_paths) {
    names.insert(file_name(path));
    const ManifestEntry* e = manifest.find(file_name(path));
    ST_CHECK(e != nullptr,
             path << " is not listed in " << manifest.path << " (a shard from another conversion?)" << fix);
    std::error_code ec;
    const auto bytes = static_cast<int64_t>(fs::file_size(path, ec));
    ST_CHECK(!ec, path << ": cannot stat: " << ec.message());
    ST_CHECK(bytes == e->bytes, path << " is damaged: " << bytes << " bytes, " << manifest.path << " records "
                                     << e->bytes << " ("
                                     << (bytes < e->bytes ? "cut short or still being copied" : "grown") << ")" << fix);
  }
  for (const std::string& path : missing_shards(manifest, names))
    ST_THROW(manifest.path << " lists shard " << fs::path(path).filename().string() << ", which is missing from "
                           << fs::path(manifest.path).parent_path().string() << fix);
}

std::vector<io::FileDigest> digest_files(const std::vector<std::string>& paths, const comm::Communicator& comm) {
  std::vector<uint64_t> words(2 * paths.size(), 0);  // per file: bytes, hash
  std::string problem;
  try {
    for (std::size_t i = static_cast<std::size_t>(comm.rank()); i < paths.size(); i += comm.size()) {
      const io::FileDigest d = io::digest_file(paths[i]);
      words[2 * i] = static_cast<uint64_t>(d.bytes);
      words[2 * i + 1] = d.xxh3;
    }
  } catch (const std::exception& e) {
    problem = error_text(e);
  }
  agree_or_throw(comm, problem);
  comm.allreduce_or(words);
  std::vector<io::FileDigest> digests(paths.size());
  for (std::size_t i = 0; i < paths.size(); ++i) digests[i] = {static_cast<int64_t>(words[2 * i]), words[2 * i + 1]};
  return digests;
}

void write_manifest(const std::string& split_dir, const comm::Communicator& comm) {
  const std::vector<std::string> paths = shard_files(split_dir);
  const std::vector<io::FileDigest> digests = digest_files(paths, comm);
  std::string problem;
  if (comm.rank() == 0) {
    try {
      write_text_atomically((fs::path(split_dir) / kManifestFile).string(),
                            manifest_json(paths, digests).dump(2) + "\n");
    } catch (const std::exception& e) {
      problem = error_text(e);
    }
  }
  agree_or_throw(comm, problem);
}

ChecksumReport verify_checksums(const std::string& split_dir, const comm::Communicator& comm) {
  const std::optional<Manifest> manifest = read_manifest(split_dir);
  ST_CHECK(manifest.has_value(), split_dir << " has no " << kManifestFile
                                           << ": nothing to verify against; write one with `scaletrain-data manifest "
                                              "DIR` (from files you trust)");
  Stopwatch clock;
  ChecksumReport report;
  report.manifest = manifest->path;
  std::vector<std::string> present;
  std::set<std::string> names;
  for (const std::string& path : shard_files(split_dir)) {
    names.insert(file_name(path));
    if (manifest->find(file_name(path)) != nullptr)
      present.push_back(path);
    else
      report.damaged.push_back(path + ": not listed in " + manifest->path);
  }
  for (const std::string& path : missing_shards(*manifest, names))
    report.damaged.push_back(path + ": missing (listed in " + manifest->path + ")");
  const std::vector<io::FileDigest> digests = digest_files(present, comm);
  report.shards = static_cast<int64_t>(present.size());
  for (std::size_t i = 0; i < present.size(); ++i) {
    report.bytes += digests[i].bytes;
    const ManifestEntry& e = *manifest->find(file_name(present[i]));
    if (digests[i].bytes != e.bytes || digests[i].xxh3 != e.xxh3)
      report.damaged.push_back(present[i] + ": " + std::to_string(digests[i].bytes) + " bytes with XXH3-64 " +
                               io::xxh3_hex(digests[i].xxh3) + ", the manifest records " + std::to_string(e.bytes) +
                               " bytes with " + io::xxh3_hex(e.xxh3));
  }
  std::sort(report.damaged.begin(), report.damaged.end());
  report.seconds = comm.allreduce_max(clock.elapsed());
  return report;
}

ChecksumReport require_intact(const std::string& split_dir, const comm::Communicator& comm) {
  const ChecksumReport r = verify_checksums(split_dir, comm);
  std::ostringstream lines;
  for (const std::string& line : r.damaged) lines << "\n  " << line;
  ST_CHECK(r.damaged.empty(), "--verify-data: " << r.damaged.size() << " damaged shard"
                                                << (r.damaged.size() == 1 ? "" : "s") << " in " << split_dir << ":"
                                                << lines.str()
                                                << "\ncopy them again from their source, or convert again");
  ST_LOG("verified " << split_dir << ": " << r.shards << " shards, " << read_rate(r, comm.size()) << " match "
                     << r.manifest);
  return r;
}

namespace {

constexpr std::size_t kNamedShards = 3;  // shards named in a message; the count says the rest

std::string first_shards(const std::vector<std::string>& paths) {
  std::string text;
  for (std::size_t i = 0; i < paths.size() && i < kNamedShards; ++i) text += "\n  " + paths[i];
  if (paths.size() > kNamedShards) text += "\n  and " + std::to_string(paths.size() - kNamedShards) + " more";
  return text;
}

// The root string attributes the readers read (`task`, and `encoding` of image shards).
constexpr const char* kStringAttributes[] = {"task", "encoding"};

constexpr const char* kLibverHint = "h5py.File(path, 'w', libver=('v110', 'latest'))";

}  // namespace

std::vector<std::string> unchecksummed_shards(const std::vector<std::string>& shard_paths) {
  std::vector<std::string> out;
  for (const std::string& path : shard_paths) {
    const int version = io::hdf5_superblock_version(path);
    if (version >= 0 && !io::hdf5_metadata_checksummed(version)) out.push_back(path);
  }
  return out;
}

std::vector<std::string> unchecked_shards(const std::vector<std::string>& shard_paths,
                                          const std::optional<Manifest>& manifest) {
  std::vector<std::string> out;
  for (const std::string& path : unchecksummed_shards(shard_paths))
    if (!manifest || !manifest->find(file_name(path))) out.push_back(path);
  return out;
}

std::vector<std::string> unchecked_shards_of_split(const std::string& split_dir) {
  std::error_code ec;
  if (!fs::is_directory(split_dir, ec)) return {};  // open_split's message
  return unchecked_shards(shard_files(split_dir), read_manifest(split_dir));
}

std::string unchecked_shards_warning(const std::string& split_dir, const std::vector<std::string>& unchecked) {
  if (unchecked.empty()) return {};
  const std::size_t n = unchecked.size();
  std::ostringstream os;
  os << split_dir << ": " << n << " shard" << (n == 1 ? " has" : "s have")
     << " HDF5 metadata without checksums (HDF5's default format, as h5py writes by default) and no manifest entry, "
        "so a damaged one reaches libhdf5 unchecked:"
     << first_shards(unchecked) << "\nway out: `scaletrain-data manifest " << fs::path(split_dir).parent_path().string()
     << "` where the data is known good, then train with --verify-data (checksums compared before libhdf5 parses a "
        "file); or give the shards checksummed metadata (`scaletrain-data upgrade "
     << fs::path(split_dir).parent_path().string() << " --output NEW_DIR`, or write them with " << kLibverHint
     << "); --require-checksums refuses such splits";
  return os.str();
}

void require_checksums(const std::string& split_dir, bool verify_data, int rank, int ranks) {
  ST_CHECK(ranks >= 1 && rank >= 0 && rank < ranks, "internal: require_checksums for rank " << rank << " of " << ranks);
  std::error_code ec;
  if (!fs::is_directory(split_dir, ec)) return;  // open_split's message
  const std::vector<std::string> paths = shard_files(split_dir);
  if (paths.empty()) return;
  const std::string dataset_dir = fs::path(split_dir).parent_path().string();
  const std::vector<std::string> unchecksummed = unchecksummed_shards(paths);
  // The advice depends on the shards: checksummed ones pass with a manifest alone.
  const std::optional<Manifest> manifest = read_manifest(split_dir);
  if (!manifest)
    throw UsageError("--require-checksums: " + split_dir + " has no " + kManifestFile +
                     ", so nothing checks its shards' bytes before libhdf5 parses them; where the data is known "
                     "good, write one with `scaletrain-data manifest " +
                     dataset_dir + "`" +
                     (unchecksummed.empty()
                          ? std::string(" and run again")
                          : " and run with --verify-data (" + std::to_string(unchecksummed.size()) + " of its " +
                                std::to_string(paths.size()) +
                                " shards have HDF5 metadata without checksums), or rewrite the dataset with "
                                "`scaletrain-data upgrade " +
                                dataset_dir + " --output NEW_DIR`"));
  if (!unchecksummed.empty() && !verify_data)
    throw UsageError(
        "--require-checksums: " + std::to_string(unchecksummed.size()) + " shard" +
        (unchecksummed.size() == 1 ? "" : "s") + " of " + split_dir + (unchecksummed.size() == 1 ? " has" : " have") +
        " HDF5 metadata without checksums (superblock version 0 or 1, h5py's default):" + first_shards(unchecksummed) +
        "\nadd --verify-data (their bytes are compared with the manifest before libhdf5 opens them), "
        "or rewrite them with checksummed metadata: `scaletrain-data upgrade " +
        dataset_dir + " --output NEW_DIR` (which writes the manifests too), or " + kLibverHint +
        " and write the manifest again");
  if (verify_data) return;  // every byte is hashed before libhdf5 opens a shard
  // The metadata is checksummed, so libhdf5 may open the shards to look at attribute types; a
  // variable-length string's value is in the global heap, which nothing checksums. Sizes first,
  // so that a shard cut short gets the manifest's message, not libhdf5's. Rank r looks at shards
  // r, r + P, ... (the caller agrees the verdict).
  check_manifest_sizes(*manifest, paths);
  std::vector<std::string> mine;
  for (std::size_t i = static_cast<std::size_t>(rank); i < paths.size(); i += static_cast<std::size_t>(ranks))
    mine.push_back(paths[i]);
  const std::vector<std::string> heap_strings = shards_with_heap_strings(mine);
  if (!heap_strings.empty())
    throw UsageError(
        "--require-checksums: " + std::to_string(heap_strings.size()) + " shard" +
        (heap_strings.size() == 1 ? "" : "s") + " of " + split_dir + (heap_strings.size() == 1 ? " keeps" : " keep") +
        " a string attribute as a variable-length string (h5py's default for str), whose value HDF5 stores in its "
        "global heap without checksums:" +
        first_shards(heap_strings) + "\nadd --verify-data, or rewrite them: `scaletrain-data upgrade " + dataset_dir +
        " --output NEW_DIR`, or write the attribute as fixed-length bytes (np.bytes_(\"image_classification\")) "
        "and write the manifest again");
}

std::vector<std::string> shards_with_heap_strings(const std::vector<std::string>& shard_paths) {
  std::vector<std::string> out;
  for (const std::string& path : shard_paths) {
    const io::H5File f(path, io::H5File::Mode::read);
    for (const char* name : kStringAttributes)
      if (f.has_attribute(name) && f.is_variable_length_string(name)) {
        out.push_back(path + " ('" + name + "')");
        break;
      }
  }
  return out;
}

void require_checksums_agreed(const std::vector<std::string>& split_dirs, bool verify_data,
                              const comm::Communicator& comm) {
  std::string refusal;
  bool damaged = false;  // a damaged file (exit 1), not a refused option (exit 2)
  try {
    for (const std::string& dir : split_dirs) require_checksums(dir, verify_data, comm.rank(), comm.size());
  } catch (const UsageError& e) {
    refusal = error_text(e);
  } catch (const std::exception& e) {
    refusal = error_text(e);
    damaged = true;
  }
  if (comm.allreduce_and(refusal.empty())) return;
  // Only rank 0 prints a usage error: another rank that refused says why itself.
  if (!refusal.empty() && comm.rank() != 0) ST_WARN(refusal);
  if (damaged) ST_THROW(refusal);
  throw UsageError(refusal.empty() ? "--require-checksums: another rank refused the dataset (its message is above)"
                                   : refusal);
}

std::string read_rate(const ChecksumReport& r, int ranks) {
  char text[160];
  std::snprintf(text, sizeof text, "%.1f MB in %.2f s (%.0f MB/s over %d rank%s)", r.bytes / 1e6, r.seconds,
                r.bytes / 1e6 / std::max(r.seconds, 1e-9), ranks, ranks == 1 ? "" : "s");
  return text;
}

}  // namespace scaletrain::data
