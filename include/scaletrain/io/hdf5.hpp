// Thin RAII layer over HDF5 for the dataset and checkpoint formats: files, datasets and
// attributes, with every call checked and every error naming the file and the object.
// hid_t stays behind an int64_t so that public headers do not include hdf5.h.
//
// HDF5 (the parallel build) is not thread-safe. Every HDF5 call made here holds one process-wide
// recursive lock (h5_mutex()), so the data loader's prefetch thread and the main thread (say, a
// checkpoint write) may both use this layer; code in src/ that calls the HDF5 C API directly
// must hold the same lock. (H5Dataset's pread fast path reads without HDF5 and without the lock.)
//
// Written files are plain HDF5 1.8-compatible files that h5py and h5dump read: strings are
// variable-length UTF-8 (h5py returns str), integers int64, float arrays float64.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::io {

// The lock that serialises all HDF5 calls in this process.
std::recursive_mutex& h5_mutex();

// Owns one hid_t and closes it with the right H5*close.
class H5Handle {
 public:
  enum class Kind { file, group, dataset, dataspace, attribute, plist, datatype };
  H5Handle() = default;
  H5Handle(int64_t id, Kind kind) : id_(id), kind_(kind) {}
  ~H5Handle();
  H5Handle(H5Handle&& o) noexcept;
  H5Handle& operator=(H5Handle&& o) noexcept;
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  int64_t id() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset();

 private:
  int64_t id_ = -1;
  Kind kind_ = Kind::file;
};

class H5File {
 public:
  enum class Mode { read, read_write, create_truncate };
  // Opening for reading fails with a clear message when the file is missing, is not an HDF5
  // file, or is truncated/corrupt. userblock_bytes (create_truncate only; 0 or a power of two
  // >= 512) reserves that many bytes at the start of the file that HDF5 skips (the seal of
  // file_checksum.hpp).
  H5File(const std::string& path, Mode mode, int64_t userblock_bytes = 0);
  const std::string& path() const { return path_; }
  int64_t id() const { return file_.id(); }

  bool has(const std::string& name) const;  // object (dataset or group) exists, e.g. "model/fc.weight"
  bool is_dataset(const std::string& name) const;
  // Creates the group and any missing parents.
  void create_group(const std::string& name);
  // Names of the direct members of a group, in name order.
  std::vector<std::string> list(const std::string& group = "/") const;
  // Dataset shape ({} for a scalar).
  Shape dataset_shape(const std::string& name) const;
  // "uint8", "int32", "float32", "float64", "int64" (any int<bits>/uint<bits>/float<bits>),
  // "string", "vlen_uint8", or "other".
  std::string dataset_type(const std::string& name) const;
  // A chunked dataset's chunk dimensions; {} for a contiguous or compact one.
  Shape dataset_chunk(const std::string& name) const;

  // Whole-dataset write of an f32 / i32 / i64 / u8 tensor (shape {} writes a scalar); missing
  // parent groups are created. chunk_rows > 0 makes a chunked dataset with chunks of chunk_rows
  // (capped at the first dimension) along the first dimension.
  void write(const std::string& name, const Tensor& t, int64_t chunk_rows = 0);
  // Reads into a new tensor of the dataset's shape. The dataset's class (integer or float) must
  // match dtype's; within a class HDF5 converts (e.g. a float64 dataset read as f32).
  Tensor read(const std::string& name, DType dtype) const;
  // Reads rows [start, start + count) along the first dimension into `out` (out.numel() ==
  // count * row size).
  void read_rows(const std::string& name, int64_t start, int64_t count, Tensor& out) const;

  // Attributes on the root group ("/") or on an object. Setting replaces an existing attribute.
  bool has_attribute(const std::string& name, const std::string& object = "/") const;
  void set_attribute(const std::string& name, int64_t value, const std::string& object = "/");
  void set_attribute(const std::string& name, const std::string& value, const std::string& object = "/");
  // A fixed-length UTF-8 string, stored inside the attribute (whose object header the 1.10 format
  // checksums) rather than in HDF5's global heap, which has no checksum: a damaged byte there
  // can crash libhdf5 (issue 16). h5py returns it as bytes.
  void set_fixed_string_attribute(const std::string& name, const std::string& value, const std::string& object = "/");
  void set_attribute(const std::string& name, const char* value, const std::string& object = "/") {
    set_attribute(name, std::string(value), object);
  }
  void set_attribute(const std::string& name, const std::vector<double>& value, const std::string& object = "/");
  void set_double_attribute(const std::string& name, double value, const std::string& object = "/");
  // Readers accept what h5py writes: integers of any width (scalar or one element), fixed- or
  // variable-length strings, float32 or float64 arrays (a scalar reads as one element).
  int64_t get_int_attribute(const std::string& name, const std::string& object = "/") const;
  std::string get_string_attribute(const std::string& name, const std::string& object = "/") const;
  std::vector<double> get_double_array_attribute(const std::string& name, const std::string& object = "/") const;
  double get_double_attribute(const std::string& name, const std::string& object = "/") const;
  // Same naming as dataset_type, for checks.
  std::string attribute_type(const std::string& name, const std::string& object = "/") const;
  // Whether a string attribute is variable-length (h5py's default for str): its value lives in
  // HDF5's global heap, which no file format version checksums. Reads the attribute's type only.
  bool is_variable_length_string(const std::string& name, const std::string& object = "/") const;

  void flush();
  void close();

 private:
  std::string path_;
  H5Handle file_;
};

// An open dataset for repeated partial reads (the data loader). Row = one index of the first
// dimension.
//
// Fast path: in a file opened read-only, for an uncompressed dataset stored contiguously or chunked along rows only
// (each chunk holds whole rows, as our writer and h5py's row chunking do), the file offset of every chunk is looked up
// once at open time and rows are then read with POSIX pread, one call per run of consecutive rows, without HDF5 (and
// without its lock), through the descriptor HDF5's POSIX driver already has open (no open() per read). HDF5's own
// partial reads of an irregular selection visit every element, which is far too slow for random samples. Other layouts
// (compressed, chunked across columns, a byte order or type that differs from the requested one) are read through HDF5,
// one hyperslab per run.
class H5Dataset {
 public:
  H5Dataset() = default;
  H5Dataset(const H5File& file, const std::string& name);
  const Shape& shape() const { return shape_; }
  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }
  int64_t rows() const { return shape_.empty() ? 0 : shape_[0]; }
  int64_t row_elements() const;
  // True when reads of `dtype` take the pread fast path.
  bool direct(DType dtype) const { return direct_ && dtype == direct_dtype_; }
  // Fast path only (direct()): the file offset of `row`'s bytes (row_bytes() of them; rows of
  // one chunk are consecutive), and the end of the last chunk (a file shorter than that is
  // truncated). For readers that map the file (the --io mmap reader).
  int64_t row_offset(int64_t row) const;
  int64_t row_bytes() const { return row_bytes_; }
  int64_t data_end() const;
  // Fast path only: the rows lie in row order in one range of the file (a contiguous dataset, or
  // chunks stored back to back in row order), so that any run of rows is one range of the file.
  bool file_contiguous() const;
  // Reads rows [start, start + count) into out (count * row_elements() values of dtype).
  void read_rows(int64_t start, int64_t count, DType dtype, void* out) const;
  // Reads the given rows, which must be strictly increasing, packed in that order into out.
  void read_row_list(const std::vector<int64_t>& rows, DType dtype, void* out) const;

 private:
  // Runs of consecutive rows: (first row, count), increasing and disjoint.
  using Runs = std::vector<std::pair<int64_t, int64_t>>;
  void read_runs(const Runs& runs, DType dtype, void* out) const;
  void read_runs_direct(const Runs& runs, void* out) const;

  std::string path_, name_;
  Shape shape_;
  H5Handle dataset_;
  bool direct_ = false;
  DType direct_dtype_ = DType::u8;
  int64_t row_bytes_ = 0;
  int64_t chunk_rows_ = 0;             // rows per chunk; the total for a contiguous dataset
  std::vector<int64_t> chunk_offset_;  // file offset of each chunk, in row order
  int fd_ = -1;                        // HDF5's own descriptor of the file (POSIX driver), not ours to close
};

// HDF5's explanation of its last failure (outermost and innermost message of the error stack,
// e.g. "unable to open file (truncated file: eof = 1000, ...)"); clears the stack. Call it with
// io::h5_mutex() held, right after the failing call.
std::string h5_error_text();

// Quiets HDF5's automatic error printing (we report errors ourselves). Call once at start-up.
void h5_silence_errors();

}  // namespace scaletrain::io
