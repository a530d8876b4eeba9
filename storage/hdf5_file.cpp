// HDF5 helpers: see hdf5_file.h.
#include "hdf5_file.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace trainctl {

namespace {

// HDF5 closes at exit the files still open. A file whose closing flush failed (a full disk) it has
// already half freed, and closing it again at exit crashes the process (HDF5 1.10): a clear
// "cannot write checkpoint" would end in SIGSEGV. Every file here is closed by its handle before
// exit, so nothing is lost. This must run before HDF5 initializes, hence a static initializer.
const bool hdf5_skips_closing_at_exit = H5dont_atexit() >= 0;

struct ErrorStackSummary {
  std::string innermost = "HDF5 call failed";
  int os_error = 0;
};

// HDF5's POSIX drivers word a failed read or write as "file write failed: ..., errno = 28, ...".
int os_error_in(std::string_view description) {
  constexpr std::string_view marker = "errno = ";
  const size_t at = description.find(marker);
  if (at == std::string_view::npos) return 0;
  int os_error = 0;
  const char* digits = description.data() + at + marker.size();
  std::from_chars(digits, description.data() + description.size(), os_error);
  return os_error;
}

}  // namespace

void report_hdf5_failure(const char* statement, const char* file, int line) {
  ErrorStackSummary summary;
  auto summarize = [](unsigned depth, const H5E_error2_t* error, void* out) -> herr_t {
    auto& summary = *static_cast<ErrorStackSummary*>(out);
    if (error->desc == nullptr) return 0;
    if (depth == 0) summary.innermost = error->desc;
    if (summary.os_error == 0) summary.os_error = os_error_in(error->desc);
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, summarize, &summary);
  try {
    report_check_failure(statement, file, line, summary.innermost);
  } catch (const CheckFailure& failure) {
    throw Hdf5Failure(failure.what(), summary.os_error);
  }
}

H5Handle& H5Handle::operator=(H5Handle&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = other.id_;
    closer_ = other.closer_;
    other.id_ = H5I_INVALID_HID;
  }
  return *this;
}

void H5Handle::reset() {
  if (id_ >= 0 && closer_ != nullptr) closer_(id_);
  id_ = H5I_INVALID_HID;
}

void H5Handle::close() {
  // Released before the check: a failed close is not retried by the destructor.
  const hid_t id = std::exchange(id_, H5I_INVALID_HID);
  if (id >= 0 && closer_ != nullptr) H5_CHECK(closer_(id));
}

namespace {

void silence_automatic_error_printing() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

H5Handle simple_space(const std::vector<int64_t>& shape) {
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  return {H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)), H5Sclose};
}

void write_dataset(hid_t parent, const std::string& name, const std::vector<int64_t>& shape, hid_t file_type,
                   hid_t memory_type, const void* data) {
  H5Handle space = simple_space(shape);
  H5Handle dataset(H5_CHECK(H5Dcreate2(parent, name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT,
                                       H5P_DEFAULT)),
                   H5Dclose);
  H5_CHECK(H5Dwrite(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
}

template <typename T>
std::vector<T> read_dataset(hid_t parent, const std::string& name, hid_t memory_type) {
  H5Handle dataset(H5_CHECK(H5Dopen2(parent, name.c_str(), H5P_DEFAULT)), H5Dclose);
  H5Handle space(H5_CHECK(H5Dget_space(dataset.get())), H5Sclose);
  std::vector<T> values(static_cast<size_t>(H5_CHECK(H5Sget_simple_extent_npoints(space.get()))));
  H5_CHECK(H5Dread(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()));
  return values;
}

void write_scalar_attribute(hid_t object, const std::string& name, hid_t type, const void* value) {
  H5Handle space(H5_CHECK(H5Screate(H5S_SCALAR)), H5Sclose);
  H5Handle attribute(H5_CHECK(H5Acreate2(object, name.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT)),
                     H5Aclose);
  H5_CHECK(H5Awrite(attribute.get(), type, value));
}

template <typename T>
T read_scalar_attribute(hid_t object, const std::string& name, hid_t type) {
  H5Handle attribute(H5_CHECK(H5Aopen(object, name.c_str(), H5P_DEFAULT)), H5Aclose);
  T value{};
  H5_CHECK(H5Aread(attribute.get(), type, &value));
  return value;
}

H5Handle utf8_string_type() {
  H5Handle type(H5_CHECK(H5Tcopy(H5T_C_S1)), H5Tclose);
  H5_CHECK(H5Tset_size(type.get(), H5T_VARIABLE));
  H5_CHECK(H5Tset_cset(type.get(), H5T_CSET_UTF8));
  return type;
}

}  // namespace

H5Handle create_file(const std::string& path) {
  silence_automatic_error_printing();
  return {H5_CHECK(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)), H5Fclose};
}

H5Handle open_file(const std::string& path) {
  silence_automatic_error_printing();
  return {H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)), H5Fclose};
}

H5Handle create_group(hid_t parent, const std::string& name) {
  // Tracking creation order lets readers list tensors in the order PyTorch's state_dict has them.
  H5Handle properties(H5_CHECK(H5Pcreate(H5P_GROUP_CREATE)), H5Pclose);
  H5_CHECK(H5Pset_link_creation_order(properties.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED));
  return {H5_CHECK(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, properties.get(), H5P_DEFAULT)), H5Gclose};
}

H5Handle open_group(hid_t parent, const std::string& name) {
  return {H5_CHECK(H5Gopen2(parent, name.c_str(), H5P_DEFAULT)), H5Gclose};
}

bool has_link(hid_t parent, const std::string& name) { return H5_CHECK(H5Lexists(parent, name.c_str(), H5P_DEFAULT)) > 0; }

std::vector<std::string> child_names(hid_t group) {
  auto names_by = [group](H5_index_t index) {
    std::vector<std::string> names;
    auto collect = [](hid_t, const char* name, const H5L_info_t*, void* out) -> herr_t {
      static_cast<std::vector<std::string>*>(out)->emplace_back(name);
      return 0;
    };
    H5_CHECK(H5Literate(group, index, H5_ITER_INC, nullptr, collect, &names));
    return names;
  };
  H5Handle properties(H5_CHECK(H5Gget_create_plist(group)), H5Pclose);
  unsigned order_flags = 0;
  H5_CHECK(H5Pget_link_creation_order(properties.get(), &order_flags));
  std::vector<std::string> by_name = names_by(H5_INDEX_NAME);
  if (!(order_flags & H5P_CRT_ORDER_INDEXED)) return by_name;
  std::vector<std::string> by_creation = names_by(H5_INDEX_CRT_ORDER);
  std::vector<std::string> sorted = by_creation;
  std::sort(sorted.begin(), sorted.end());
  if (sorted != by_name)
    report_check_failure("child_names", __FILE__, __LINE__, "the group's name and creation-order indexes disagree");
  return by_creation;
}

void write_floats(hid_t parent, const std::string& name, const std::vector<int64_t>& shape, const float* data) {
  write_dataset(parent, name, shape, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, data);
}

void write_ints(hid_t parent, const std::string& name, const std::vector<int64_t>& shape, const int32_t* data) {
  write_dataset(parent, name, shape, H5T_STD_I32LE, H5T_NATIVE_INT32, data);
}

std::vector<int64_t> dataset_shape(hid_t parent, const std::string& name) { return dataset_header(parent, name).shape; }

namespace {

std::string type_name(hid_t type) {
  const size_t bits = 8 * H5Tget_size(type);
  switch (H5_CHECK(H5Tget_class(type))) {
    case H5T_FLOAT: return fmt::format("float{}", bits);
    case H5T_INTEGER: return fmt::format("{}int{}", H5_CHECK(H5Tget_sign(type)) == H5T_SGN_NONE ? "u" : "", bits);
    case H5T_STRING: return "string";
    case H5T_ENUM: return "enum";
    case H5T_COMPOUND: return "compound";
    case H5T_ARRAY: return "array";
    case H5T_VLEN: return "variable-length";
    case H5T_BITFIELD: return "bitfield";
    case H5T_OPAQUE: return "opaque";
    case H5T_REFERENCE: return "reference";
    case H5T_TIME: return "time";
    default: return "unknown";
  }
}

uint64_t saturating_product(uint64_t a, uint64_t b) {
  uint64_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? std::numeric_limits<uint64_t>::max() : product;
}

}  // namespace

DatasetHeader dataset_header(hid_t parent, const std::string& name) {
  H5Handle dataset(H5_CHECK(H5Dopen2(parent, name.c_str(), H5P_DEFAULT)), H5Dclose);
  H5Handle space(H5_CHECK(H5Dget_space(dataset.get())), H5Sclose);
  H5Handle type(H5_CHECK(H5Dget_type(dataset.get())), H5Tclose);
  H5Handle properties(H5_CHECK(H5Dget_create_plist(dataset.get())), H5Pclose);
  std::vector<hsize_t> dims(static_cast<size_t>(H5_CHECK(H5Sget_simple_extent_ndims(space.get()))));
  H5_CHECK(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr));
  DatasetHeader header;
  header.shape.assign(dims.begin(), dims.end());
  header.type = type_name(type.get());
  header.is_integer = H5_CHECK(H5Tget_class(type.get())) == H5T_INTEGER;
  header.declared_bytes = H5Tget_size(type.get());
  for (hsize_t extent : dims) header.declared_bytes = saturating_product(header.declared_bytes, extent);
  header.compressed = H5_CHECK(H5Pget_nfilters(properties.get())) > 0;
  return header;
}

std::vector<float> read_floats(hid_t parent, const std::string& name) {
  return read_dataset<float>(parent, name, H5T_NATIVE_FLOAT);
}

std::vector<int32_t> read_ints(hid_t parent, const std::string& name) {
  return read_dataset<int32_t>(parent, name, H5T_NATIVE_INT32);
}

std::vector<int64_t> read_int64s(hid_t parent, const std::string& name) {
  return read_dataset<int64_t>(parent, name, H5T_NATIVE_INT64);
}

void write_attribute(hid_t object, const std::string& name, int64_t value) {
  write_scalar_attribute(object, name, H5T_NATIVE_INT64, &value);
}

void write_attribute(hid_t object, const std::string& name, uint64_t value) {
  write_scalar_attribute(object, name, H5T_NATIVE_UINT64, &value);
}

void write_attribute(hid_t object, const std::string& name, double value) {
  write_scalar_attribute(object, name, H5T_NATIVE_DOUBLE, &value);
}

void write_attribute(hid_t object, const std::string& name, const std::string& value) {
  const char* text = value.c_str();
  write_scalar_attribute(object, name, utf8_string_type().get(), &text);
}

void read_attribute(hid_t object, const std::string& name, int64_t& value) {
  value = read_scalar_attribute<int64_t>(object, name, H5T_NATIVE_INT64);
}

void read_attribute(hid_t object, const std::string& name, uint64_t& value) {
  value = read_scalar_attribute<uint64_t>(object, name, H5T_NATIVE_UINT64);
}

void read_attribute(hid_t object, const std::string& name, double& value) {
  value = read_scalar_attribute<double>(object, name, H5T_NATIVE_DOUBLE);
}

void read_attribute(hid_t object, const std::string& name, std::string& value) {
  H5Handle type = utf8_string_type();
  char* text = read_scalar_attribute<char*>(object, name, type.get());
  value = text != nullptr ? text : "";
  H5free_memory(text);
}

}  // namespace trainctl
