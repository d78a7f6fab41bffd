// `scaletrain-data upgrade SRC --output DST [--overwrite]`: rewrites a dataset of any encoding or
// task in the current format (version 2, docs/dataset-format.md) with checksummed HDF5 metadata.
// Every shard is read through HDF5 once (an offline step on files the user trusts) and written
// again by the writer of its kind, which creates HDF5's 1.10 file format (superblock 3, metadata
// checksummed): shards written by h5py with its default, oldest format (superblock 0, no
// checksums; data/manifest.hpp, "Unchecked shards") come out checksummed; shards already
// checksummed are rewritten the same way (one path for all, never a byte copy).
//   - JPEG shards of format 1 keep their samples as variable-length data in HDF5's global heap,
//     which a damaged byte can make libhdf5 crash or hang on, so training refuses them; they are
//     written flat (`jpeg` + `jpeg_offsets`) by the shard writer, as are JPEG shards already in
//     format 2 (a chunked `jpeg` becomes contiguous).
//   - Raw shards: `images` and `labels` are read whole and written by write_image_shard, chunked
//     along N as the source was when it was chunked along N only (else kDefaultChunkSamples).
//   - Recommendation shards: `user`, `item` (and `negatives`) by the recommendation writers.
// Same shard names, sample order, values and attributes; an image shard's checksum (which does not
// depend on the layout) is stamped again, a recommendation shard gets none (its manifest covers
// it). A shard is held in memory whole. Under mpirun the shards of all splits, in name order, are
// shared as convert shares them (shard i by rank i mod P); rank 0 then validates the result.
#include <hdf5.h>
#include <mpi.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <iomanip>
#include <iostream>
#include <mutex>

#include "cli/data_subcommands.hpp"
#include "scaletrain/cli/guard.hpp"
#include "scaletrain/comm/agreement.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/timer.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/data/manifest.hpp"
#include "scaletrain/data/recommendation.hpp"
#include "scaletrain/data/staging.hpp"
#include "scaletrain/io/hdf5.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace scaletrain::cli {
namespace {

const char* kUpgradeHelp =
    "Rewrites every split (sub-directory) of SRC into DST in dataset format 2 with checksummed HDF5\n"
    "metadata (HDF5's 1.10 file format, superblock 3), keeping the shard names, sample order, every\n"
    "sample's values bit for bit and the attributes the format defines (strings become fixed-length;\n"
    "attributes it does not define are not kept). It takes shards of any encoding and task: raw\n"
    "images, JPEG (format 1 or 2) and recommendation. Each shard is read through HDF5 once (run it on\n"
    "files you trust) and written again by scaletrain's writer, also when it is already checksummed\n"
    "(never copied byte for byte). Shards written by h5py with its default, oldest file format\n"
    "(superblock 0, metadata without checksums) come out checksummed. JPEG shards of format 1 store\n"
    "each sample as variable-length data in HDF5's global heap, where one damaged byte can make the\n"
    "HDF5 library crash or hang, and are no longer read by 'scaletrain train'; they are written flat:\n"
    "dataset 'jpeg' (all samples' bytes) and 'jpeg_offsets'. Raw 'images' keep their chunking along the\n"
    "sample dimension (else 256 samples per chunk), uncompressed. Image shards get their checksum\n"
    "attribute stamped (the value they had, where they had one); DST gets manifests. Each shard is held\n"
    "in memory whole while it is rewritten. Under mpirun the ranks share the shards. See\n"
    "docs/dataset-format.md.\n";

std::vector<std::string> shard_files(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".h5" && !e.is_directory()) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  ST_CHECK(!names.empty(), dir.string() << ": no *.h5 shard files");
  return names;
}

// Format 1's variable-length `jpeg`, read whole through HDF5 (the reading that format 2 avoids).
std::vector<std::vector<uint8_t>> read_vlen_jpeg(const io::H5File& f, int64_t samples) {
  const std::string& path = f.path();
  ST_CHECK(f.dataset_type("jpeg") == "vlen_uint8", path << ": dataset 'jpeg' has dtype " << f.dataset_type("jpeg")
                                                        << ", expected variable-length uint8 (format 1)");
  const Shape shape = f.dataset_shape("jpeg");
  ST_CHECK(shape.size() == 1 && shape[0] == samples,
           path << ": 'jpeg' has shape " << shape_string(shape) << " but 'labels' has " << samples << " samples");
  std::vector<std::vector<uint8_t>> jpegs(samples);
  if (samples == 0) return jpegs;
  std::lock_guard<std::recursive_mutex> lock(io::h5_mutex());
  io::H5Handle dset(ST_CHECK_H5(H5Dopen2(f.id(), "jpeg", H5P_DEFAULT)), io::H5Handle::Kind::dataset);
  io::H5Handle type(ST_CHECK_H5(H5Tvlen_create(H5T_NATIVE_UINT8)), io::H5Handle::Kind::datatype);
  io::H5Handle space(ST_CHECK_H5(H5Dget_space(dset.id())), io::H5Handle::Kind::dataspace);
  std::vector<hvl_t> rows(samples, hvl_t{0, nullptr});
  ST_CHECK(H5Dread(dset.id(), type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()) >= 0,
           path << ": cannot read the variable-length 'jpeg' samples: " << io::h5_error_text());
  for (int64_t i = 0; i < samples; ++i) {
    const auto* p = static_cast<const uint8_t*>(rows[i].p);
    jpegs[i].assign(p, p + rows[i].len);
  }
  H5Dvlen_reclaim(type.id(), space.id(), H5P_DEFAULT, rows.data());
  return jpegs;
}

// Format 2's flat `jpeg`, cut at its (checked) offsets.
std::vector<std::vector<uint8_t>> read_flat_jpeg(const io::H5File& f, int64_t samples) {
  const std::vector<int64_t> offsets = data::read_jpeg_offsets(f, samples);
  std::vector<uint8_t> bytes(static_cast<std::size_t>(offsets.back()));
  if (!bytes.empty()) io::H5Dataset(f, "jpeg").read_rows(0, offsets.back(), DType::u8, bytes.data());
  std::vector<std::vector<uint8_t>> jpegs(samples);
  for (int64_t i = 0; i < samples; ++i) jpegs[i].assign(bytes.begin() + offsets[i], bytes.begin() + offsets[i + 1]);
  return jpegs;
}

void require_attributes(const io::H5File& f, std::initializer_list<const char*> names) {
  for (const char* name : names)
    ST_CHECK(f.has_attribute(name), f.path() << ": missing root attribute '" << name << "'");
}

// Checks that dataset `name` exists with the dtype its writer takes (a wider one would be
// narrowed by HDF5's conversion) and returns its shape.
Shape require_dataset(const io::H5File& f, const char* name, const char* dtype) {
  ST_CHECK(f.is_dataset(name), f.path() << ": missing dataset '" << name << "'");
  const std::string type = f.dataset_type(name);
  ST_CHECK(type == dtype,
           f.path() << ": dataset '" << name << "' has dtype " << type << ", expected " << dtype
                    << (type == "int64" && std::string(dtype) == "int32" ? " (convert with .astype('int32'))" : ""));
  return f.dataset_shape(name);
}

int num_classes(const io::H5File& f) {
  const int64_t k = f.get_int_attribute("num_classes");
  ST_CHECK(k > 0 && k <= INT32_MAX, f.path() << ": num_classes = " << k << " is not in [1, 2^31 - 1]");
  return static_cast<int>(k);
}

void rewrite_jpeg_shard(const io::H5File& f, int64_t version, const std::string& dst) {
  const std::string& path = f.path();
  require_attributes(f, {"num_classes", "mean", "std"});
  require_dataset(f, "labels", "int32");
  const Tensor labels = f.read("labels", DType::i32);
  ST_CHECK(labels.ndim() == 1,
           path << ": dataset 'labels' has shape " << shape_string(labels.shape()) << ", expected [N]");
  const int64_t n = labels.dim(0);
  const std::vector<std::vector<uint8_t>> jpegs = version == 1 ? read_vlen_jpeg(f, n) : read_flat_jpeg(f, n);
  for (int64_t i = 0; i < n; ++i)
    ST_CHECK(!jpegs[i].empty(), path << ": sample " << i << " has no JPEG bytes (format 2 needs at least one)");
  data::write_jpeg_shard(dst, jpegs, labels, num_classes(f), f.get_double_array_attribute("mean"),
                         f.get_double_array_attribute("std"));
}

// Raw pixels: `images` and `labels` read whole (labels converted to native int32, their values
// unchanged) and written by write_image_shard, chunked along N as the source was when its chunks
// hold whole samples, else with the default chunk.
void rewrite_raw_shard(const io::H5File& f, const std::string& dst) {
  const std::string& path = f.path();
  require_attributes(f, {"num_classes", "mean", "std"});
  const Shape shape = require_dataset(f, "images", "uint8");
  ST_CHECK(shape.size() == 4,
           path << ": dataset 'images' has shape " << shape_string(shape) << ", expected [N, H, W, C]");
  const Shape label_shape = require_dataset(f, "labels", "int32");
  ST_CHECK(
      label_shape.size() == 1 && label_shape[0] == shape[0],
      path << ": 'labels' has shape " << shape_string(label_shape) << " but 'images' has " << shape[0] << " samples");
  const Shape chunk = f.dataset_chunk("images");
  const bool whole_samples =
      chunk.size() == 4 && chunk[0] > 0 && std::equal(chunk.begin() + 1, chunk.end(), shape.begin() + 1);
  const Tensor images = f.read("images", DType::u8);
  const Tensor labels = f.read("labels", DType::i32);
  data::write_image_shard(dst, images, labels, num_classes(f), f.get_double_array_attribute("mean"),
                          f.get_double_array_attribute("std"), whole_samples ? chunk[0] : data::kDefaultChunkSamples);
}

// The ids of dataset `name`, each checked against [0, limit) here so that a bad one is named with
// the source file (the writers check them again, naming the output).
std::vector<int32_t> read_ids(const io::H5File& f, const char* name, int64_t limit) {
  const Tensor t = f.read(name, DType::i32);
  if (t.numel() == 0) return {};
  const int32_t* p = t.data<int32_t>();
  for (int64_t i = 0; i < t.numel(); ++i)
    ST_CHECK(p[i] >= 0 && p[i] < limit,
             f.path() << ": " << name << "[" << i << "] = " << p[i] << " is out of range [0, " << limit << ")");
  return std::vector<int32_t>(p, p + t.numel());
}

// Recommendation: `user`, `item` (and `negatives` for evaluation) written by the task's writers,
// which check every id against num_users / num_items and name the file.
void rewrite_recommendation_shard(const io::H5File& f, const std::string& dst) {
  const std::string& path = f.path();
  require_attributes(f, {"num_users", "num_items"});
  const int64_t users = f.get_int_attribute("num_users"), items = f.get_int_attribute("num_items");
  const Shape user = require_dataset(f, "user", "int32");
  const Shape item = require_dataset(f, "item", "int32");
  ST_CHECK(user.size() == 1 && item == user, path << ": 'user' and 'item' have shapes " << shape_string(user) << " and "
                                                  << shape_string(item) << ", expected [N] each");
  if (!f.is_dataset("negatives")) {
    data::write_recommendation_train_shard(dst, users, items, read_ids(f, "user", users), read_ids(f, "item", items));
    return;
  }
  const Shape neg = require_dataset(f, "negatives", "int32");
  ST_CHECK(neg.size() == 2 && neg[0] == user[0] && neg[1] > 0,
           path << ": 'negatives' has shape " << shape_string(neg) << ", expected [" << user[0] << ", K] with K > 0");
  data::write_recommendation_eval_shard(dst, users, items, read_ids(f, "user", users), read_ids(f, "item", items),
                                        read_ids(f, "negatives", items), neg[1]);
}

void upgrade_shard(const std::string& src, const std::string& dst) {
  try {
    const io::H5File f(src, io::H5File::Mode::read);
    ST_CHECK(f.has_attribute("scaletrain_format"),
             src << ": missing root attribute 'scaletrain_format' (not a scaletrain dataset shard?)");
    const int64_t version = f.get_int_attribute("scaletrain_format");
    ST_CHECK(version >= 1 && version <= data::kFormatVersion, src << ": dataset format version " << version
                                                                  << " is not supported (upgrade reads versions 1 to "
                                                                  << data::kFormatVersion << ")");
    ST_CHECK(f.has_attribute("task"), src << ": missing root attribute 'task' (a string)");
    const std::string task = f.get_string_attribute("task");
    if (task == data::kTaskRecommendation)
      rewrite_recommendation_shard(f, dst);
    else if (task != data::kTaskImageClassification)
      ST_THROW(src << ": task '" << task << "' is not supported (supported: " << data::kTaskImageClassification << ", "
                   << data::kTaskRecommendation << ")");
    else if (f.is_dataset("jpeg"))
      rewrite_jpeg_shard(f, f.dataset_type("jpeg") == "vlen_uint8" ? 1 : 2, dst);
    else
      rewrite_raw_shard(f, dst);
  } catch (const Error& e) {
    if (std::string(e.what()).find(src) != std::string::npos) throw;
    ST_THROW(src << ": " << error_text(e));
  }
}

}  // namespace

int upgrade_main(int argc, char** argv) {
  std::string source, output;
  bool overwrite = false;
  po::options_description desc("options");
  desc.add_options()("help,h", "print this help")("source", po::value(&source)->required(),
                                                  "dataset directory to read (also the first positional argument)")(
      "output", po::value(&output)->required(),
      "dataset directory to write: OUTPUT/<split>/ with the same shard names")(
      "overwrite", po::bool_switch(&overwrite), "replace shards already in OUTPUT's splits");
  po::positional_options_description positional;
  positional.add("source", 1);
  po::variables_map vm;
  const std::string synopsis = std::string("SRC --output DST [--overwrite]\n\n") + kUpgradeHelp;
  if (!parse_data_command("upgrade", argc, argv, desc, vm, synopsis.c_str(), &positional)) return 0;
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::error_code ec;
  if (fs::exists(output, ec) && fs::exists(source, ec) && fs::equivalent(source, output, ec))
    throw UsageError("upgrade: --output must differ from the source directory (" + source + ")");

  Stopwatch clock;
  const std::vector<std::string> splits = data::list_splits(source);
  struct Task {
    std::string split, name;
  };
  std::vector<Task> tasks;
  for (const auto& split : splits)
    for (const auto& name : shard_files(fs::path(source) / split)) tasks.push_back({split, name});
  // Shards that a manifest describes are checked whole before HDF5 reads them.
  const comm::Communicator world = comm::Communicator::world();
  for (const auto& split : splits)
    if (data::read_manifest((fs::path(source) / split).string()))
      data::require_intact((fs::path(source) / split).string(), world);
  prepare_output(rank, output, splits, overwrite);
  for (std::size_t t = rank; t < tasks.size(); t += size)
    upgrade_shard((fs::path(source) / tasks[t].split / tasks[t].name).string(),
                  (fs::path(output) / tasks[t].split / tasks[t].name).string());

  write_manifests(output, splits);
  // Rank 0 reads back what was written; the others wait for its verdict (no rank in MPI_Finalize
  // while another stops on an error).
  comm::on_rank0_agreed(comm::Communicator::world(), [&] {
    for (const auto& split : splits) {
      if (data::split_task(output, split) == data::kTaskRecommendation) {
        const data::RecommendationSplit rec = data::open_recommendation_split(output, split);
        std::cout << "split " << split << ": task " << data::kTaskRecommendation << ", " << rec.rows()
                  << (rec.is_evaluation() ? " evaluation rows" : " positives") << " in " << rec.shards.size()
                  << " shard" << (rec.shards.size() == 1 ? "" : "s") << "\n";
        continue;
      }
      const data::SplitInfo info = data::open_split(output, split);
      std::cout << "split " << split << ": " << info.samples << " samples in " << info.shards.size() << " shard"
                << (info.shards.size() == 1 ? "" : "s") << ", encoding " << info.encoding << "\n";
    }
    std::cout << "upgraded " << source << " to " << output << " (format " << data::kFormatVersion << ") in "
              << std::fixed << std::setprecision(1) << clock.elapsed() << " s with " << size << " rank"
              << (size == 1 ? "" : "s") << "\n";
  });
  return 0;
}

}  // namespace scaletrain::cli
