// Finding, checking and publishing the shards of whole-in-memory splits (src/data/shard_files.hpp).
#include "data/shard_files.hpp"

#include <algorithm>
#include <filesystem>

#include "scaletrain/core/error.hpp"
#include "scaletrain/io/hdf5.hpp"

namespace scaletrain::data {
namespace fs = std::filesystem;

std::vector<std::string> shard_paths(const std::string& dataset_dir, const std::string& split) {
  std::error_code ec;
  ST_CHECK(fs::is_directory(dataset_dir, ec),
           "data directory " << dataset_dir << " does not exist or is not a directory");
  const std::string dir = (fs::path(dataset_dir) / split).string();
  ST_CHECK(fs::is_directory(dir, ec),
           dir << ": no such split directory (a dataset has one sub-directory per split holding *.h5 shards)");
  std::vector<std::string> paths;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".h5" && !e.is_directory()) paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  ST_CHECK(!paths.empty(), dir << ": no *.h5 shard files");
  return paths;
}

Shape typed_dataset(const io::H5File& f, const char* name, const char* dtype, int rank, const char* layout) {
  ST_CHECK(f.is_dataset(name), f.path() << ": missing dataset '" << name << "' (" << dtype << " " << layout << ")");
  const std::string type = f.dataset_type(name);
  ST_CHECK(type == dtype,
           f.path() << ": dataset '" << name << "' has dtype " << type << ", expected " << dtype << " " << layout
                    << (type == "int64" && std::string(dtype) == "int32" ? " (convert with .astype('int32'))" : ""));
  const Shape shape = f.dataset_shape(name);
  ST_CHECK(static_cast<int>(shape.size()) == rank,
           f.path() << ": dataset '" << name << "' has shape " << shape_string(shape) << ", expected " << layout);
  return shape;
}

void publish_shard(const std::string& path) {
  std::error_code ec;
  fs::rename(path + ".tmp", path, ec);
  ST_CHECK(!ec, path << ": cannot rename " << path << ".tmp into place: " << ec.message());
}

}  // namespace scaletrain::data
