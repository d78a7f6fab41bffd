// `scaletrain-data upgrade SRC --output DST [--overwrite]`: rewrites a dataset in the current
// format (version 2, docs/dataset-format.md). JPEG shards of format 1 keep their samples as
// variable-length data in HDF5's global heap, which a damaged byte can make libhdf5 crash or hang
// on, so training refuses them; here they are read through HDF5 once (an offline step on files
// the user trusts) and written flat (`jpeg` + `jpeg_offsets`) by the shard writer. JPEG shards
// already in format 2 are rewritten the same way (which also makes a chunked `jpeg` contiguous).
// Raw shards only change their version number: they are copied byte for byte, then stamped.
// Same shard names, sample order and attributes; the checksum (which does not depend on the
// layout) is stamped again. Under mpirun the shards of all splits, in name order, are shared
// as convert shares them (shard i by rank i mod P); rank 0 then validates the result.
#include <hdf5.h>
#include <mpi.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <mutex>

#include "cli/data_subcommands.hpp"
#include "scaletrain/cli/guard.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/timer.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/data/manifest.hpp"
#include "scaletrain/data/staging.hpp"
#include "scaletrain/io/hdf5.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace scaletrain::cli {
namespace {

const char* kUpgradeHelp =
    "Rewrites every split (sub-directory) of SRC into DST in dataset format 2, with the same shard\n"
    "names, sample order and attributes. JPEG shards of format 1 store each sample as variable-length\n"
    "data in HDF5's global heap, where one damaged byte can make the HDF5 library crash or hang, and\n"
    "are no longer read by 'scaletrain train'; upgrade reads them once (run it on files you trust) and\n"
    "writes them flat: dataset 'jpeg' (all samples' bytes) and 'jpeg_offsets'. Raw shards are copied\n"
    "with the new version number. Every shard gets its checksum stamped again (same value). Under\n"
    "mpirun the ranks share the shards. See docs/dataset-format.md.\n";

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

void rewrite_jpeg_shard(const io::H5File& f, int64_t version, const std::string& dst) {
  const std::string& path = f.path();
  const std::string task = f.has_attribute("task") ? f.get_string_attribute("task") : "";
  ST_CHECK(task == data::kTaskImageClassification,
           path << ": task '" << task << "' is not supported (supported: " << data::kTaskImageClassification << ")");
  for (const char* name : {"num_classes", "mean", "std"})
    ST_CHECK(f.has_attribute(name), path << ": missing root attribute '" << name << "'");
  ST_CHECK(f.is_dataset("labels"), path << ": missing dataset 'labels'");
  const Tensor labels = f.read("labels", DType::i32);
  ST_CHECK(labels.ndim() == 1,
           path << ": dataset 'labels' has shape " << shape_string(labels.shape()) << ", expected [N]");
  const int64_t n = labels.dim(0);
  const std::vector<std::vector<uint8_t>> jpegs = version == 1 ? read_vlen_jpeg(f, n) : read_flat_jpeg(f, n);
  for (int64_t i = 0; i < n; ++i)
    ST_CHECK(!jpegs[i].empty(), path << ": sample " << i << " has no JPEG bytes (format 2 needs at least one)");
  data::write_jpeg_shard(dst, jpegs, labels, static_cast<int>(f.get_int_attribute("num_classes")),
                         f.get_double_array_attribute("mean"), f.get_double_array_attribute("std"));
}

// Raw shards keep their bytes: copied, then the version and the checksum are stamped, then the
// copy is renamed into place (a reader never sees a half-written shard).
void copy_raw_shard(const std::string& src, const std::string& dst) {
  const std::string tmp = dst + ".tmp";
  std::error_code ec;
  fs::copy_file(src, tmp, fs::copy_options::overwrite_existing, ec);
  ST_CHECK(!ec, src << ": cannot copy to " << tmp << ": " << ec.message());
  {
    io::H5File f(tmp, io::H5File::Mode::read_write);
    f.set_attribute("scaletrain_format", int64_t(data::kFormatVersion));
    f.close();
  }
  data::stamp_shard_checksum(tmp);
  fs::rename(tmp, dst, ec);
  ST_CHECK(!ec, dst << ": cannot rename " << tmp << " into place: " << ec.message());
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
    if (f.is_dataset("jpeg")) {
      rewrite_jpeg_shard(f, f.dataset_type("jpeg") == "vlen_uint8" ? 1 : 2, dst);
      return;
    }
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.find(src) != std::string::npos) throw;
    ST_THROW(src << ": " << msg);
  }
  copy_raw_shard(src, dst);
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
  if (rank == 0) {
    for (const auto& split : splits) {
      const data::SplitInfo info = data::open_split(output, split);
      std::cout << "split " << split << ": " << info.samples << " samples in " << info.shards.size() << " shard"
                << (info.shards.size() == 1 ? "" : "s") << ", encoding " << info.encoding << "\n";
    }
    std::cout << "upgraded " << source << " to " << output << " (format " << data::kFormatVersion << ") in "
              << std::fixed << std::setprecision(1) << clock.elapsed() << " s with " << size << " rank"
              << (size == 1 ? "" : "s") << "\n";
  }
  return 0;
}

}  // namespace scaletrain::cli
