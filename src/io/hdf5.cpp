// RAII wrappers over the HDF5 C API used by the dataset and checkpoint formats.
// Decisions: every call is checked and reported as "<file>: <what we were doing>: <HDF5's own
// message>"; all calls hold one process-wide lock because the parallel HDF5 build is not
// thread-safe; written types are explicit little-endian standard types so that files are the
// same on every machine; readers convert whatever integer/float widths h5py produced.
#include "scaletrain/io/hdf5.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>

#include "scaletrain/core/error.hpp"

namespace scaletrain::io {
namespace {

using Lock = std::lock_guard<std::recursive_mutex>;

[[noreturn]] void h5_fail(const std::string& what) { ST_THROW(what << ": " << h5_error_text()); }

}  // namespace

namespace {
herr_t collect_error(unsigned n, const H5E_error2_t* err, void* client) {
  auto* msgs = static_cast<std::vector<std::string>*>(client);
  if (err->desc && *err->desc) msgs->push_back(err->desc);
  return 0;
}
}  // namespace

std::string h5_error_text() {
  std::vector<std::string> msgs;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_error, &msgs);
  H5Eclear2(H5E_DEFAULT);
  if (msgs.empty()) return "HDF5 gave no detail";
  if (msgs.size() == 1 || msgs.front() == msgs.back()) return msgs.front();
  return msgs.front() + " (" + msgs.back() + ")";
}

}  // namespace scaletrain::io

// H5_OK(expr, message stream): evaluates an HDF5 call once; a negative result throws
// scaletrain::Error with the message and HDF5's own explanation.
#define H5_OK(expr, msg_stream)                \
  ([&]() {                                     \
    auto h5_rc_ = (expr);                      \
    if (h5_rc_ < 0) {                          \
      std::ostringstream h5_os_;               \
      h5_os_ << msg_stream;                    \
      ::scaletrain::io::h5_fail(h5_os_.str()); \
    }                                          \
    return h5_rc_;                             \
  }())

namespace scaletrain::io {
namespace {

hid_t native_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return H5T_NATIVE_FLOAT;
    case DType::i32:
      return H5T_NATIVE_INT32;
    case DType::i64:
      return H5T_NATIVE_INT64;
    case DType::u8:
      return H5T_NATIVE_UINT8;
    default:
      ST_THROW("HDF5 I/O of " << dtype_name(dtype) << " tensors is not supported");
  }
}

hid_t file_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return H5T_IEEE_F32LE;
    case DType::i32:
      return H5T_STD_I32LE;
    case DType::i64:
      return H5T_STD_I64LE;
    case DType::u8:
      return H5T_STD_U8LE;
    default:
      ST_THROW("HDF5 I/O of " << dtype_name(dtype) << " tensors is not supported");
  }
}

H5T_class_t dtype_class(DType dtype) { return dtype == DType::f32 ? H5T_FLOAT : H5T_INTEGER; }

std::string type_name(hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  const std::size_t bits = 8 * H5Tget_size(type);
  switch (cls) {
    case H5T_INTEGER:
      return std::string(H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int") + std::to_string(bits);
    case H5T_FLOAT:
      return "float" + std::to_string(bits);
    case H5T_STRING:
      return "string";
    case H5T_VLEN: {
      H5Handle super(H5Tget_super(type), H5Handle::Kind::datatype);
      if (super.valid() && H5Tget_class(super.id()) == H5T_INTEGER && H5Tget_size(super.id()) == 1 &&
          H5Tget_sign(super.id()) == H5T_SGN_NONE)
        return "vlen_uint8";
      return "other";
    }
    default:
      return "other";
  }
}

std::vector<hsize_t> to_dims(const Shape& shape) { return std::vector<hsize_t>(shape.begin(), shape.end()); }

// More elements than any dataset of a shard, checkpoint or manifest holds (2^48: 256 TiB of bytes),
// so that a damaged dataspace (a dimension of 2^62, say) is refused before its size is multiplied
// by an element size or allocated.
constexpr uint64_t kMaxElements = uint64_t(1) << 48;

Shape space_shape(hid_t space, const std::string& what) {
  const int rank = H5_OK(H5Sget_simple_extent_ndims(space), what << ": cannot get the rank");
  std::vector<hsize_t> dims(rank);
  if (rank > 0) H5_OK(H5Sget_simple_extent_dims(space, dims.data(), nullptr), what << ": cannot get the shape");
  uint64_t elements = 1;
  bool too_many = false;
  for (hsize_t d : dims) {
    too_many = too_many || d > kMaxElements || (d != 0 && elements > kMaxElements / d);
    if (!too_many) elements *= d;
  }
  if (too_many) {
    std::ostringstream shape;
    for (std::size_t i = 0; i < dims.size(); ++i) shape << (i ? ", " : "[") << dims[i];
    ST_THROW(what << " has shape " << shape.str() << "], more than " << kMaxElements
                  << " elements in all: the file is damaged");
  }
  return Shape(dims.begin(), dims.end());
}

// a x b, or UINT64_MAX where that overflows (a size no file holds).
uint64_t saturating_product(uint64_t a, uint64_t b) {
  uint64_t p = 0;
  return __builtin_mul_overflow(a, b, &p) ? UINT64_MAX : p;
}

// How a dataset's stored bytes relate to what a read yields: stored as they are, compressed by
// filters we know the largest ratio of (deflate, about 1032:1, with shuffle and fletcher32), or
// by a filter we do not know (a plugin such as zstd or blosc: no bound).
enum class Storage { plain, deflated, unknown };

Storage dataset_storage(hid_t dcpl, const std::string& what) {
  const int filters = H5_OK(H5Pget_nfilters(dcpl), what);
  Storage storage = Storage::plain;
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0, config = 0;
    std::size_t nelmts = 0;
    const H5Z_filter_t id =
        H5Pget_filter2(dcpl, static_cast<unsigned>(i), &flags, &nelmts, nullptr, 0, nullptr, &config);
    if (id == H5Z_FILTER_DEFLATE)
      storage = Storage::deflated;
    else if (id != H5Z_FILTER_SHUFFLE && id != H5Z_FILTER_FLETCHER32)
      return Storage::unknown;
  }
  return storage;
}

// The bytes a whole read of a dataset or attribute yields must be stored in the file: at most its
// size, or, deflated, its size times 1100. Checked before the buffer is allocated, so that damaged
// metadata that claims a huge dataset is an error naming the file, not an allocation of
// petabytes. Only for files opened read-only (a file being written may hold data in HDF5's caches
// that is not on disk yet) and storage with a known bound.
void require_stored_in_file(hid_t file, const std::string& path, uint64_t bytes, Storage storage,
                            const std::string& what) {
  unsigned intent = 0;
  if (storage == Storage::unknown || H5Fget_intent(file, &intent) < 0 || intent != H5F_ACC_RDONLY) return;
  std::error_code ec;
  const uint64_t file_bytes = std::filesystem::file_size(path, ec);
  if (ec) return;  // not a plain file (a driver's own storage): nothing to compare with
  const bool deflated = storage == Storage::deflated;
  const uint64_t most = saturating_product(file_bytes, deflated ? 1100 : 1);
  ST_CHECK(bytes <= most, what << " would hold " << bytes << " bytes, more than the " << file_bytes
                               << "-byte file can store" << (deflated ? " compressed" : "") << ": the file is damaged");
}

// Link-creation property list that creates missing parent groups.
H5Handle intermediate_groups_lcpl() {
  H5Handle lcpl(H5_OK(H5Pcreate(H5P_LINK_CREATE), "cannot create a property list"), H5Handle::Kind::plist);
  H5_OK(H5Pset_create_intermediate_group(lcpl.id(), 1), "cannot set a property list");
  return lcpl;
}

std::string object_label(const std::string& object) { return object == "/" ? "the root group" : "'" + object + "'"; }

}  // namespace

std::recursive_mutex& h5_mutex() {
  static std::recursive_mutex mutex;
  return mutex;
}

void h5_silence_errors() {
  Lock lock(h5_mutex());
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

// ---------------------------------------------------------------------------------------------
// H5Handle

H5Handle::~H5Handle() { reset(); }

H5Handle::H5Handle(H5Handle&& o) noexcept : id_(o.id_), kind_(o.kind_) { o.id_ = -1; }

H5Handle& H5Handle::operator=(H5Handle&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    kind_ = o.kind_;
    o.id_ = -1;
  }
  return *this;
}

void H5Handle::reset() {
  if (id_ < 0) return;
  Lock lock(h5_mutex());
  switch (kind_) {
    case Kind::file:
      H5Fclose(id_);
      break;
    case Kind::group:
      H5Gclose(id_);
      break;
    case Kind::dataset:
      H5Dclose(id_);
      break;
    case Kind::dataspace:
      H5Sclose(id_);
      break;
    case Kind::attribute:
      H5Aclose(id_);
      break;
    case Kind::plist:
      H5Pclose(id_);
      break;
    case Kind::datatype:
      H5Tclose(id_);
      break;
  }
  id_ = -1;
}

// ---------------------------------------------------------------------------------------------
// H5File

H5File::H5File(const std::string& path, Mode mode, int64_t userblock_bytes) : path_(path) {
  Lock lock(h5_mutex());
  namespace fs = std::filesystem;
  H5Handle fapl(H5_OK(H5Pcreate(H5P_FILE_ACCESS), "cannot create a property list"), H5Handle::Kind::plist);
  // Lock files where the file system supports it; ignore where it is disabled (some Lustre mounts).
  H5_OK(H5Pset_file_locking(fapl.id(), true, true), "cannot set file locking");
  if (mode == Mode::create_truncate) {
    // The 1.10 file format: superblock, object headers and indexes carry checksums, so the library
    // refuses damaged metadata in the files we write instead of decoding it (h5py and HDF5 1.10+
    // read it; 1.8 cannot).
    H5_OK(H5Pset_libver_bounds(fapl.id(), H5F_LIBVER_V110, H5F_LIBVER_V110), "cannot set the HDF5 format bounds");
    H5Handle fcpl(H5_OK(H5Pcreate(H5P_FILE_CREATE), "cannot create a property list"), H5Handle::Kind::plist);
    if (userblock_bytes > 0)
      H5_OK(H5Pset_userblock(fcpl.id(), static_cast<hsize_t>(userblock_bytes)),
            path << ": cannot reserve a user block of " << userblock_bytes << " bytes");
    file_ = H5Handle(H5_OK(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.id(), fapl.id()), path << ": cannot create"),
                     H5Handle::Kind::file);
    return;
  }
  std::error_code ec;
  ST_CHECK(fs::exists(path, ec), path << ": no such file");
  ST_CHECK(fs::is_regular_file(path, ec), path << ": not a regular file");
  const htri_t is_h5 = H5Fis_hdf5(path.c_str());
  if (is_h5 < 0) h5_fail(path + ": cannot read the file");
  ST_CHECK(is_h5 > 0, path << ": not an HDF5 file");
  const unsigned flags = mode == Mode::read ? H5F_ACC_RDONLY : H5F_ACC_RDWR;
  file_ = H5Handle(
      H5_OK(H5Fopen(path.c_str(), flags, fapl.id()), path << ": cannot open the HDF5 file (truncated or corrupt?)"),
      H5Handle::Kind::file);
}

bool H5File::has(const std::string& name) const {
  Lock lock(h5_mutex());
  // H5Lexists needs every parent to exist, so walk the path one component at a time.
  std::string prefix = !name.empty() && name[0] == '/' ? "/" : "";
  std::stringstream ss(name);
  std::string part;
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    prefix += (prefix.empty() || prefix == "/" ? "" : "/") + part;
    const htri_t exists =
        H5_OK(H5Lexists(file_.id(), prefix.c_str(), H5P_DEFAULT), path_ << ": cannot look up '" << prefix << "'");
    if (exists <= 0) return false;
  }
  return true;
}

bool H5File::is_dataset(const std::string& name) const {
  Lock lock(h5_mutex());
  if (!has(name)) return false;
  // H5Oopen + H5Iget_type rather than H5Oget_info*, whose signature differs between 1.10 and 1.12.
  const hid_t obj = H5_OK(H5Oopen(file_.id(), name.c_str(), H5P_DEFAULT), path_ << ": cannot open '" << name << "'");
  const bool dataset = H5Iget_type(obj) == H5I_DATASET;
  H5Oclose(obj);
  return dataset;
}

void H5File::create_group(const std::string& name) {
  Lock lock(h5_mutex());
  if (has(name)) return;
  H5Handle lcpl = intermediate_groups_lcpl();
  H5Handle group(H5_OK(H5Gcreate2(file_.id(), name.c_str(), lcpl.id(), H5P_DEFAULT, H5P_DEFAULT),
                       path_ << ": cannot create group '" << name << "'"),
                 H5Handle::Kind::group);
}

std::vector<std::string> H5File::list(const std::string& group) const {
  Lock lock(h5_mutex());
  H5Handle g(H5_OK(H5Gopen2(file_.id(), group.c_str(), H5P_DEFAULT), path_ << ": cannot open group '" << group << "'"),
             H5Handle::Kind::group);
  H5G_info_t info;
  H5_OK(H5Gget_info(g.id(), &info), path_ << ": cannot list group '" << group << "'");
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t len = H5_OK(H5Lget_name_by_idx(g.id(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT),
                              path_ << ": cannot list group '" << group << "'");
    std::string name(len + 1, '\0');
    H5_OK(H5Lget_name_by_idx(g.id(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), len + 1, H5P_DEFAULT),
          path_ << ": cannot list group '" << group << "'");
    name.resize(len);
    names.push_back(name);
  }
  return names;
}

Shape H5File::dataset_shape(const std::string& name) const {
  Lock lock(h5_mutex());
  H5Handle ds(H5_OK(H5Dopen2(file_.id(), name.c_str(), H5P_DEFAULT), path_ << ": cannot open dataset '" << name << "'"),
              H5Handle::Kind::dataset);
  H5Handle space(H5_OK(H5Dget_space(ds.id()), path_ << ": dataset '" << name << "'"), H5Handle::Kind::dataspace);
  return space_shape(space.id(), path_ + ": dataset '" + name + "'");
}

std::string H5File::dataset_type(const std::string& name) const {
  Lock lock(h5_mutex());
  H5Handle ds(H5_OK(H5Dopen2(file_.id(), name.c_str(), H5P_DEFAULT), path_ << ": cannot open dataset '" << name << "'"),
              H5Handle::Kind::dataset);
  H5Handle type(H5_OK(H5Dget_type(ds.id()), path_ << ": dataset '" << name << "'"), H5Handle::Kind::datatype);
  return type_name(type.id());
}

Shape H5File::dataset_chunk(const std::string& name) const {
  Lock lock(h5_mutex());
  const std::string what = path_ + ": dataset '" + name + "'";
  H5Handle ds(H5_OK(H5Dopen2(file_.id(), name.c_str(), H5P_DEFAULT), path_ << ": cannot open dataset '" << name << "'"),
              H5Handle::Kind::dataset);
  H5Handle dcpl(H5_OK(H5Dget_create_plist(ds.id()), what), H5Handle::Kind::plist);
  if (H5Pget_layout(dcpl.id()) != H5D_CHUNKED) return {};
  hsize_t chunk[H5S_MAX_RANK];
  const int rank = H5_OK(H5Pget_chunk(dcpl.id(), H5S_MAX_RANK, chunk), what << ": chunk shape");
  return Shape(chunk, chunk + rank);
}

void H5File::write(const std::string& name, const Tensor& t, int64_t chunk_rows) {
  Lock lock(h5_mutex());
  const std::string what = path_ + ": cannot write dataset '" + name + "'";
  const auto dims = to_dims(t.shape());
  H5Handle space(t.ndim() == 0 ? H5_OK(H5Screate(H5S_SCALAR), what)
                               : H5_OK(H5Screate_simple(t.ndim(), dims.data(), nullptr), what),
                 H5Handle::Kind::dataspace);
  H5Handle dcpl(H5_OK(H5Pcreate(H5P_DATASET_CREATE), what), H5Handle::Kind::plist);
  const bool chunkable =
      chunk_rows > 0 && t.ndim() > 0 && std::all_of(dims.begin(), dims.end(), [](hsize_t d) { return d > 0; });
  if (chunkable) {
    auto chunk = dims;
    chunk[0] = std::min<hsize_t>(chunk_rows, dims[0]);
    H5_OK(H5Pset_chunk(dcpl.id(), t.ndim(), chunk.data()), what << ": chunk shape");
  }
  if (has(name)) H5_OK(H5Ldelete(file_.id(), name.c_str(), H5P_DEFAULT), what << ": cannot replace the old one");
  H5Handle lcpl = intermediate_groups_lcpl();
  H5Handle ds(
      H5_OK(H5Dcreate2(file_.id(), name.c_str(), file_type(t.dtype()), space.id(), lcpl.id(), dcpl.id(), H5P_DEFAULT),
            what),
      H5Handle::Kind::dataset);
  if (t.numel() > 0) H5_OK(H5Dwrite(ds.id(), native_type(t.dtype()), H5S_ALL, H5S_ALL, H5P_DEFAULT, t.raw()), what);
}

Tensor H5File::read(const std::string& name, DType dtype) const {
  Lock lock(h5_mutex());
  const std::string what = path_ + ": cannot read dataset '" + name + "'";
  H5Handle ds(H5_OK(H5Dopen2(file_.id(), name.c_str(), H5P_DEFAULT), what), H5Handle::Kind::dataset);
  H5Handle type(H5_OK(H5Dget_type(ds.id()), what), H5Handle::Kind::datatype);
  ST_CHECK(H5Tget_class(type.id()) == dtype_class(dtype), path_ << ": dataset '" << name << "' has type "
                                                                << type_name(type.id()) << ", expected "
                                                                << dtype_name(dtype));
  H5Handle space(H5_OK(H5Dget_space(ds.id()), what), H5Handle::Kind::dataspace);
  const Shape shape = space_shape(space.id(), what);
  H5Handle dcpl(H5_OK(H5Dget_create_plist(ds.id()), what), H5Handle::Kind::plist);
  require_stored_in_file(file_.id(), path_, saturating_product(shape_numel(shape), dtype_size(dtype)),
                         dataset_storage(dcpl.id(), what), path_ + ": dataset '" + name + "'");
  Tensor t = Tensor::empty(shape, dtype);
  if (t.numel() > 0) H5_OK(H5Dread(ds.id(), native_type(dtype), H5S_ALL, H5S_ALL, H5P_DEFAULT, t.raw()), what);
  return t;
}

void H5File::read_rows(const std::string& name, int64_t start, int64_t count, Tensor& out) const {
  Lock lock(h5_mutex());
  H5Dataset ds(*this, name);
  ST_CHECK(out.numel() == count * ds.row_elements(), path_ << ": reading " << count << " rows of '" << name
                                                           << "' into a tensor of " << out.numel() << " elements");
  ds.read_rows(start, count, out.dtype(), out.raw());
}

// ---------------------------------------------------------------------------------------------
// Attributes

bool H5File::has_attribute(const std::string& name, const std::string& object) const {
  Lock lock(h5_mutex());
  if (object != "/" && !has(object)) return false;
  return H5_OK(H5Aexists_by_name(file_.id(), object.c_str(), name.c_str(), H5P_DEFAULT),
               path_ << ": cannot look up attribute '" << name << "' on " << object_label(object)) > 0;
}

namespace {
// Creates (replacing) attribute `name` on `object` and writes one value buffer.
void write_attribute(hid_t file, const std::string& path, const std::string& object, const std::string& name,
                     hid_t ftype, hid_t mtype, hid_t space, const void* buf) {
  const std::string what = path + ": cannot write attribute '" + name + "' on " + object_label(object);
  if (H5_OK(H5Aexists_by_name(file, object.c_str(), name.c_str(), H5P_DEFAULT), what) > 0)
    H5_OK(H5Adelete_by_name(file, object.c_str(), name.c_str(), H5P_DEFAULT), what);
  H5Handle attr(
      H5_OK(H5Acreate_by_name(file, object.c_str(), name.c_str(), ftype, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
            what),
      H5Handle::Kind::attribute);
  H5_OK(H5Awrite(attr.id(), mtype, buf), what);
}

struct OpenAttribute {
  H5Handle attr, type, space;
  hssize_t points = 0;
  std::string type_name;
};

OpenAttribute open_attribute(hid_t file, const std::string& path, const std::string& object, const std::string& name) {
  const std::string what = path + ": attribute '" + name + "' on " + object_label(object);
  const htri_t exists = H5_OK(H5Aexists_by_name(file, object.c_str(), name.c_str(), H5P_DEFAULT), what);
  ST_CHECK(exists > 0, path << ": missing attribute '" << name << "' on " << object_label(object));
  OpenAttribute a;
  a.attr = H5Handle(H5_OK(H5Aopen_by_name(file, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), what),
                    H5Handle::Kind::attribute);
  a.type = H5Handle(H5_OK(H5Aget_type(a.attr.id()), what), H5Handle::Kind::datatype);
  a.space = H5Handle(H5_OK(H5Aget_space(a.attr.id()), what), H5Handle::Kind::dataspace);
  (void)space_shape(a.space.id(), what);  // refuses absurd dimensions before they are multiplied
  a.points = H5_OK(H5Sget_simple_extent_npoints(a.space.id()), what);
  a.type_name = type_name(a.type.id());
  // Attributes are stored uncompressed: their values (and a fixed-length string's size) fit in the file.
  require_stored_in_file(
      file, path,
      saturating_product(static_cast<uint64_t>(a.points), std::max<std::size_t>(1, H5Tget_size(a.type.id()))),
      Storage::plain, what);
  return a;
}
}  // namespace

void H5File::set_attribute(const std::string& name, int64_t value, const std::string& object) {
  Lock lock(h5_mutex());
  H5Handle space(H5_OK(H5Screate(H5S_SCALAR), path_ << ": attribute '" << name << "'"), H5Handle::Kind::dataspace);
  write_attribute(file_.id(), path_, object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, space.id(), &value);
}

void H5File::set_double_attribute(const std::string& name, double value, const std::string& object) {
  Lock lock(h5_mutex());
  H5Handle space(H5_OK(H5Screate(H5S_SCALAR), path_ << ": attribute '" << name << "'"), H5Handle::Kind::dataspace);
  write_attribute(file_.id(), path_, object, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, space.id(), &value);
}

void H5File::set_attribute(const std::string& name, const std::string& value, const std::string& object) {
  Lock lock(h5_mutex());
  const std::string what = path_ + ": attribute '" + name + "'";
  H5Handle type(H5_OK(H5Tcopy(H5T_C_S1), what), H5Handle::Kind::datatype);
  H5_OK(H5Tset_size(type.id(), H5T_VARIABLE), what);
  H5_OK(H5Tset_cset(type.id(), H5T_CSET_UTF8), what);
  H5Handle space(H5_OK(H5Screate(H5S_SCALAR), what), H5Handle::Kind::dataspace);
  const char* c = value.c_str();
  write_attribute(file_.id(), path_, object, name, type.id(), type.id(), space.id(), &c);
}

void H5File::set_fixed_string_attribute(const std::string& name, const std::string& value, const std::string& object) {
  Lock lock(h5_mutex());
  const std::string what = path_ + ": attribute '" + name + "'";
  H5Handle type(H5_OK(H5Tcopy(H5T_C_S1), what), H5Handle::Kind::datatype);
  H5_OK(H5Tset_size(type.id(), std::max<std::size_t>(1, value.size())), what);  // HDF5 refuses size 0
  H5_OK(H5Tset_strpad(type.id(), H5T_STR_NULLPAD), what);
  H5_OK(H5Tset_cset(type.id(), H5T_CSET_UTF8), what);
  H5Handle space(H5_OK(H5Screate(H5S_SCALAR), what), H5Handle::Kind::dataspace);
  std::string padded = value;
  padded.resize(std::max<std::size_t>(1, value.size()), '\0');
  write_attribute(file_.id(), path_, object, name, type.id(), type.id(), space.id(), padded.data());
}

void H5File::set_attribute(const std::string& name, const std::vector<double>& value, const std::string& object) {
  Lock lock(h5_mutex());
  const hsize_t n = value.size();
  H5Handle space(H5_OK(H5Screate_simple(1, &n, nullptr), path_ << ": attribute '" << name << "'"),
                 H5Handle::Kind::dataspace);
  write_attribute(file_.id(), path_, object, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, space.id(), value.data());
}

std::string H5File::attribute_type(const std::string& name, const std::string& object) const {
  Lock lock(h5_mutex());
  return open_attribute(file_.id(), path_, object, name).type_name;
}

bool H5File::is_variable_length_string(const std::string& name, const std::string& object) const {
  Lock lock(h5_mutex());
  OpenAttribute a = open_attribute(file_.id(), path_, object, name);
  return H5Tget_class(a.type.id()) == H5T_STRING &&
         H5_OK(H5Tis_variable_str(a.type.id()), path_ << ": attribute '" << name << "'") > 0;
}

int64_t H5File::get_int_attribute(const std::string& name, const std::string& object) const {
  Lock lock(h5_mutex());
  OpenAttribute a = open_attribute(file_.id(), path_, object, name);
  ST_CHECK(H5Tget_class(a.type.id()) == H5T_INTEGER, path_ << ": attribute '" << name << "' on " << object_label(object)
                                                           << " is " << a.type_name << ", expected an integer");
  ST_CHECK(a.points == 1, path_ << ": attribute '" << name << "' on " << object_label(object) << " has " << a.points
                                << " values, expected one integer");
  int64_t value = 0;
  H5_OK(H5Aread(a.attr.id(), H5T_NATIVE_INT64, &value), path_ << ": cannot read attribute '" << name << "'");
  return value;
}

std::string H5File::get_string_attribute(const std::string& name, const std::string& object) const {
  Lock lock(h5_mutex());
  OpenAttribute a = open_attribute(file_.id(), path_, object, name);
  const std::string what = path_ + ": cannot read attribute '" + name + "'";
  ST_CHECK(H5Tget_class(a.type.id()) == H5T_STRING, path_ << ": attribute '" << name << "' on " << object_label(object)
                                                          << " is " << a.type_name << ", expected a string");
  ST_CHECK(a.points == 1, path_ << ": attribute '" << name << "' on " << object_label(object) << " has " << a.points
                                << " values, expected one string");
  H5Handle mtype(H5_OK(H5Tcopy(H5T_C_S1), what), H5Handle::Kind::datatype);
  H5_OK(H5Tset_cset(mtype.id(), H5Tget_cset(a.type.id())), what);
  if (H5_OK(H5Tis_variable_str(a.type.id()), what) > 0) {
    // h5py's default for str attributes.
    H5_OK(H5Tset_size(mtype.id(), H5T_VARIABLE), what);
    char* c = nullptr;
    H5_OK(H5Aread(a.attr.id(), mtype.id(), &c), what);
    std::string value = c ? c : "";
    if (c) H5free_memory(c);
    return value;
  }
  // Fixed length (numpy bytes, np.string_): null-terminated or null/space padded.
  const std::size_t size = H5Tget_size(a.type.id());
  H5_OK(H5Tset_size(mtype.id(), size + 1), what);
  H5_OK(H5Tset_strpad(mtype.id(), H5T_STR_NULLTERM), what);
  std::string buf(size + 1, '\0');
  H5_OK(H5Aread(a.attr.id(), mtype.id(), buf.data()), what);
  buf.resize(buf.find('\0') == std::string::npos ? buf.size() : buf.find('\0'));
  while (!buf.empty() && buf.back() == ' ') buf.pop_back();
  return buf;
}

std::vector<double> H5File::get_double_array_attribute(const std::string& name, const std::string& object) const {
  Lock lock(h5_mutex());
  OpenAttribute a = open_attribute(file_.id(), path_, object, name);
  const H5T_class_t cls = H5Tget_class(a.type.id());
  ST_CHECK(cls == H5T_FLOAT || cls == H5T_INTEGER, path_ << ": attribute '" << name << "' on " << object_label(object)
                                                         << " is " << a.type_name << ", expected a float array");
  std::vector<double> values(a.points);
  if (a.points > 0)
    H5_OK(H5Aread(a.attr.id(), H5T_NATIVE_DOUBLE, values.data()), path_ << ": cannot read attribute '" << name << "'");
  return values;
}

double H5File::get_double_attribute(const std::string& name, const std::string& object) const {
  Lock lock(h5_mutex());
  auto values = get_double_array_attribute(name, object);
  ST_CHECK(values.size() == 1, path_ << ": attribute '" << name << "' on " << object_label(object) << " has "
                                     << values.size() << " values, expected one number");
  return values[0];
}

void H5File::flush() {
  Lock lock(h5_mutex());
  H5_OK(H5Fflush(file_.id(), H5F_SCOPE_LOCAL), path_ << ": cannot flush");
}

void H5File::close() {
  Lock lock(h5_mutex());
  file_.reset();
}

// ---------------------------------------------------------------------------------------------
// H5Dataset

namespace {
// The DType whose native in-memory type equals the file type exactly, if any.
bool exact_dtype(hid_t ftype, DType* out) {
  for (DType d : {DType::u8, DType::i32, DType::i64, DType::f32})
    if (H5Tequal(ftype, native_type(d)) > 0) {
      *out = d;
      return true;
    }
  return false;
}

// `bytes` at `offset` of the open file `fd` into dst, retrying short reads.
void pread_all(int fd, const std::string& path, int64_t offset, int64_t bytes, void* dst) {
  auto* p = static_cast<char*>(dst);
  while (bytes > 0) {
    const ssize_t got = ::pread(fd, p, static_cast<std::size_t>(bytes), offset);
    if (got < 0 && errno == EINTR) continue;
    ST_CHECK(got > 0, path << ": read of " << bytes << " bytes at offset " << offset << " failed: "
                           << (got == 0 ? std::string("end of file (truncated?)") : std::strerror(errno)));
    p += got;
    offset += got;
    bytes -= got;
  }
}

// A file descriptor of our own, closed on scope exit.
class PosixFile {
 public:
  explicit PosixFile(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    ST_CHECK(fd_ >= 0, path << ": cannot open for reading: " << std::strerror(errno));
  }
  ~PosixFile() { ::close(fd_); }
  PosixFile(const PosixFile&) = delete;
  PosixFile& operator=(const PosixFile&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

// The descriptor HDF5's POSIX driver (sec2, the default) reads `file` through, or -1 for other
// drivers (MPI-IO hands out an MPI_File). Valid while HDF5 keeps the file open, which an open
// dataset of it ensures.
int sec2_descriptor(hid_t file) {
  H5Handle fapl(H5Fget_access_plist(file), H5Handle::Kind::plist);
  if (fapl.id() < 0 || H5Pget_driver(fapl.id()) != H5FD_SEC2) {
    H5Eclear2(H5E_DEFAULT);
    return -1;
  }
  void* handle = nullptr;
  if (H5Fget_vfd_handle(file, H5P_DEFAULT, &handle) < 0 || handle == nullptr) {
    H5Eclear2(H5E_DEFAULT);
    return -1;
  }
  return *static_cast<int*>(handle);
}
}  // namespace

H5Dataset::H5Dataset(const H5File& file, const std::string& name) : path_(file.path()), name_(name) {
  Lock lock(h5_mutex());
  const std::string what = path_ + ": cannot open dataset '" + name + "'";
  ST_CHECK(file.is_dataset(name), path_ << ": missing dataset '" << name << "'");
  H5Handle probe(H5_OK(H5Dopen2(file.id(), name.c_str(), H5P_DEFAULT), what), H5Handle::Kind::dataset);
  H5Handle dcpl(H5_OK(H5Dget_create_plist(probe.id()), what), H5Handle::Kind::plist);
  const int filters = H5_OK(H5Pget_nfilters(dcpl.id()), what);
  probe.reset();
  // Compressed chunks must be decoded whole: cache enough of them to serve a batch.
  H5Handle dapl(H5_OK(H5Pcreate(H5P_DATASET_ACCESS), what), H5Handle::Kind::plist);
  const std::size_t cache_bytes = filters > 0 ? std::size_t(64) << 20 : 0;
  H5_OK(H5Pset_chunk_cache(dapl.id(), 12421, cache_bytes, 1.0), what);
  dataset_ = H5Handle(H5_OK(H5Dopen2(file.id(), name.c_str(), dapl.id()), what), H5Handle::Kind::dataset);
  H5Handle space(H5_OK(H5Dget_space(dataset_.id()), what), H5Handle::Kind::dataspace);
  shape_ = space_shape(space.id(), what);
  ST_CHECK(!shape_.empty(), path_ << ": dataset '" << name << "' is a scalar, expected rows");

  // Can rows be read with pread? Find each chunk's file offset.
  // (Only in read-only files: a file being written may hold data in HDF5's caches.)
  H5Handle ftype(H5_OK(H5Dget_type(dataset_.id()), what), H5Handle::Kind::datatype);
  unsigned intent = 0;
  H5_OK(H5Fget_intent(file.id(), &intent), what);
  if (intent != H5F_ACC_RDONLY || filters > 0 || rows() == 0 || !exact_dtype(ftype.id(), &direct_dtype_)) return;
  row_bytes_ = row_elements() * static_cast<int64_t>(dtype_size(direct_dtype_));
  H5Handle fcpl(H5_OK(H5Fget_create_plist(file.id()), what), H5Handle::Kind::plist);
  hsize_t userblock = 0;
  H5_OK(H5Pget_userblock(fcpl.id(), &userblock), what);
  const H5D_layout_t layout = H5Pget_layout(dcpl.id());
  if (layout == H5D_CONTIGUOUS) {
    const haddr_t addr = H5Dget_offset(dataset_.id());
    if (addr == HADDR_UNDEF) {
      H5Eclear2(H5E_DEFAULT);
      return;
    }
    chunk_rows_ = rows();
    chunk_offset_ = {static_cast<int64_t>(addr + userblock)};
  } else if (layout == H5D_CHUNKED) {
    std::vector<hsize_t> chunk(shape_.size());
    H5_OK(H5Pget_chunk(dcpl.id(), static_cast<int>(chunk.size()), chunk.data()), what);
    for (std::size_t d = 1; d < shape_.size(); ++d)
      if (static_cast<int64_t>(chunk[d]) != shape_[d]) return;  // chunks split rows
    // A chunk may hold more rows than an extendible dataset has yet, but its bytes must be a size:
    // damaged metadata (0 rows, or 2^60) is left to HDF5's own reads rather than multiplied here.
    int64_t chunk_bytes = 0;
    if (chunk[0] == 0 || chunk[0] > kMaxElements ||
        __builtin_mul_overflow(static_cast<int64_t>(chunk[0]), row_bytes_, &chunk_bytes))
      return;
    chunk_rows_ = static_cast<int64_t>(chunk[0]);
    const int64_t nchunks = (rows() + chunk_rows_ - 1) / chunk_rows_;
    hsize_t stored = 0;
    H5_OK(H5Dget_num_chunks(dataset_.id(), space.id(), &stored), what);
    if (static_cast<int64_t>(stored) != nchunks) return;  // unwritten chunks read as fill values
    chunk_offset_.assign(nchunks, -1);
    std::vector<hsize_t> offset(shape_.size());
    for (hsize_t i = 0; i < stored; ++i) {
      unsigned mask = 0;
      haddr_t addr = 0;
      hsize_t size = 0;
      H5_OK(H5Dget_chunk_info(dataset_.id(), space.id(), i, offset.data(), &mask, &addr, &size), what);
      const int64_t index = static_cast<int64_t>(offset[0]) / chunk_rows_;
      if (index < 0 || index >= nchunks || static_cast<int64_t>(size) != chunk_bytes) return;
      chunk_offset_[index] = static_cast<int64_t>(addr + userblock);
    }
    for (int64_t o : chunk_offset_)
      if (o < 0) return;
  } else {
    return;  // compact: tiny, read through HDF5
  }
  direct_ = true;
  // HDF5 keeps the file open as long as the dataset is: read through its descriptor, so a read
  // costs no open() (a metadata request on Lustre or GPFS) and no extra descriptor per shard.
  fd_ = sec2_descriptor(file.id());
}

int64_t H5Dataset::row_elements() const {
  int64_t n = 1;
  for (std::size_t i = 1; i < shape_.size(); ++i) n *= shape_[i];
  return n;
}

void H5Dataset::read_rows(int64_t start, int64_t count, DType dtype, void* out) const {
  ST_CHECK(start >= 0 && count >= 0 && start + count <= rows(),
           path_ << ": rows [" << start << ", " << start + count << ") of '" << name_ << "' are out of range (it has "
                 << rows() << ")");
  if (count > 0) read_runs({{start, count}}, dtype, out);
}

void H5Dataset::read_row_list(const std::vector<int64_t>& rows, DType dtype, void* out) const {
  Runs runs;
  for (std::size_t i = 0; i < rows.size();) {
    std::size_t j = i + 1;
    while (j < rows.size() && rows[j] == rows[j - 1] + 1) ++j;
    ST_CHECK(rows[i] >= 0 && rows[j - 1] < this->rows() && (i == 0 || rows[i] > rows[i - 1]),
             path_ << ": row list for '" << name_ << "' is not increasing or out of range (row " << rows[i] << " of "
                   << this->rows() << ")");
    runs.emplace_back(rows[i], static_cast<int64_t>(j - i));
    i = j;
  }
  if (!runs.empty()) read_runs(runs, dtype, out);
}

void H5Dataset::read_runs(const Runs& runs, DType dtype, void* out) const {
  if (direct(dtype)) {
    read_runs_direct(runs, out);
    return;
  }
  Lock lock(h5_mutex());
  const std::string what = path_ + ": cannot read rows of '" + name_ + "'";
  H5Handle fspace(H5_OK(H5Dget_space(dataset_.id()), what), H5Handle::Kind::dataspace);
  std::vector<hsize_t> offset(shape_.size(), 0), counts = to_dims(shape_);
  const std::size_t row_out_bytes = row_elements() * dtype_size(dtype);
  char* dst = static_cast<char*>(out);
  // One regular hyperslab per run: HDF5 maps those to chunks quickly (a union of many runs it
  // walks element by element).
  for (const auto& [first, count] : runs) {
    offset[0] = first;
    counts[0] = count;
    H5_OK(H5Sselect_hyperslab(fspace.id(), H5S_SELECT_SET, offset.data(), nullptr, counts.data(), nullptr), what);
    H5Handle mspace(H5_OK(H5Screate_simple(static_cast<int>(counts.size()), counts.data(), nullptr), what),
                    H5Handle::Kind::dataspace);
    H5_OK(H5Dread(dataset_.id(), native_type(dtype), mspace.id(), fspace.id(), H5P_DEFAULT, dst), what);
    dst += count * row_out_bytes;
  }
}

int64_t H5Dataset::row_offset(int64_t row) const {
  ST_CHECK(direct_, path_ << ": dataset '" << name_ << "' cannot be read directly (compressed or irregular layout)");
  ST_CHECK(row >= 0 && row < rows(),
           path_ << ": row " << row << " of '" << name_ << "' is out of range (" << rows() << " rows)");
  return chunk_offset_[row / chunk_rows_] + (row % chunk_rows_) * row_bytes_;
}

int64_t H5Dataset::data_end() const {
  ST_CHECK(direct_, path_ << ": dataset '" << name_ << "' cannot be read directly (compressed or irregular layout)");
  int64_t end = 0;
  for (int64_t o : chunk_offset_) end = std::max(end, o + chunk_rows_ * row_bytes_);
  return end;
}

bool H5Dataset::file_contiguous() const {
  ST_CHECK(direct_, path_ << ": dataset '" << name_ << "' cannot be read directly (compressed or irregular layout)");
  for (std::size_t c = 0; c < chunk_offset_.size(); ++c)
    if (chunk_offset_[c] != chunk_offset_[0] + static_cast<int64_t>(c) * chunk_rows_ * row_bytes_) return false;
  return true;
}

void H5Dataset::read_runs_direct(const Runs& runs, void* out) const {
  std::unique_ptr<PosixFile> own;  // other HDF5 drivers: a descriptor for this read
  if (fd_ < 0) own = std::make_unique<PosixFile>(path_);
  const int fd = fd_ >= 0 ? fd_ : own->fd();
  char* dst = static_cast<char*>(out);
  for (auto [first, count] : runs) {
    // A run may cross chunk borders; each piece within one chunk is one pread.
    while (count > 0) {
      const int64_t chunk = first / chunk_rows_, within = first % chunk_rows_;
      const int64_t n = std::min(count, chunk_rows_ - within);
      pread_all(fd, path_, chunk_offset_[chunk] + within * row_bytes_, n * row_bytes_, dst);
      dst += n * row_bytes_;
      first += n;
      count -= n;
    }
  }
}

}  // namespace scaletrain::io
