// Thin RAII layer over HDF5 for the dataset and checkpoint formats: files, datasets and
// attributes, with every call checked (ST_CHECK_H5) and every error naming the file and the
// object. hid_t stays behind an int64_t so that public headers do not include hdf5.h.
// HDF5 is not thread-safe: call this from one thread at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::io {

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

 private:
  int64_t id_ = -1;
  Kind kind_ = Kind::file;
};

class H5File {
 public:
  enum class Mode { read, create_truncate };
  H5File(const std::string& path, Mode mode);
  const std::string& path() const { return path_; }
  int64_t id() const { return file_.id(); }

  bool has(const std::string& name) const;  // object (dataset or group) exists, e.g. "model/fc.weight"
  void create_group(const std::string& name);
  // Dataset shape and HDF5 class, for checks.
  Shape dataset_shape(const std::string& name) const;
  // "uint8", "int32", "float32", "float64", "int64", "vlen_uint8", or "other".
  std::string dataset_type(const std::string& name) const;

  // Whole-dataset write/read. Writing f32 / i32 / u8 tensors; chunk_rows > 0 makes a chunked
  // dataset with chunks of chunk_rows along the first dimension.
  void write(const std::string& name, const Tensor& t, int64_t chunk_rows = 0);
  // Reads into a new tensor of the dataset's shape; the dataset's type must match dtype.
  Tensor read(const std::string& name, DType dtype) const;
  // Reads rows [start, start + count) along the first dimension into `out` (same dtype,
  // out.numel() == count * row size).
  void read_rows(const std::string& name, int64_t start, int64_t count, Tensor& out) const;

  // Attributes on the root group ("/") or on an object.
  bool has_attribute(const std::string& name, const std::string& object = "/") const;
  void set_attribute(const std::string& name, int64_t value, const std::string& object = "/");
  void set_attribute(const std::string& name, const std::string& value, const std::string& object = "/");
  void set_attribute(const std::string& name, const std::vector<double>& value, const std::string& object = "/");
  int64_t get_int_attribute(const std::string& name, const std::string& object = "/") const;
  std::string get_string_attribute(const std::string& name, const std::string& object = "/") const;
  std::vector<double> get_double_array_attribute(const std::string& name, const std::string& object = "/") const;

  void flush();

 private:
  std::string path_;
  H5Handle file_;
};

// Quiets HDF5's automatic error printing (we report errors ourselves). Call once at start-up.
void h5_silence_errors();

}  // namespace scaletrain::io
