// Thin RAII and typed helpers over the HDF5 C API, shared by the checkpoint and the dataset
// files: handles that close themselves, float32 datasets, scalar and string attributes.
// Every call goes through H5_CHECK, whose report carries HDF5's own innermost error message and,
// for a failed read or write, the errno that HDF5's file driver saw.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "check.h"

namespace trainctl {

// A failed HDF5 call. os_error() is the errno of the failed read or write behind it, as HDF5's
// file driver recorded it (ENOSPC for a full disk), or 0: callers name the OS's reason exactly.
class Hdf5Failure : public CheckFailure {
 public:
  Hdf5Failure(const std::string& message, int os_error) : CheckFailure(message), os_error_(os_error) {}
  int os_error() const { return os_error_; }

 private:
  int os_error_;
};

// Throws Hdf5Failure for `statement`, with the innermost message on HDF5's error stack ("truncated
// file: eof = ..."). Called at once on failure: the next HDF5 call clears the stack.
[[noreturn]] void report_hdf5_failure(const char* statement, const char* file, int line);

}  // namespace trainctl

#define H5_CHECK(statement)                                                                         \
  ([&]() {                                                                                          \
    auto h5_check_result_ = (statement);                                                            \
    if (h5_check_result_ < 0) ::trainctl::report_hdf5_failure(#statement, __FILE__, __LINE__);      \
    return h5_check_result_;                                                                        \
  }())

namespace trainctl {

class H5Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  H5Handle() = default;
  H5Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  H5Handle(H5Handle&& other) noexcept : id_(other.id_), closer_(other.closer_) { other.id_ = H5I_INVALID_HID; }
  H5Handle& operator=(H5Handle&& other) noexcept;
  ~H5Handle() { reset(); }
  hid_t get() const { return id_; }
  // Closes without checking, as a destructor must; close() where a failure matters, e.g. a file
  // whose buffered writes its closing flushes.
  void reset();
  void close();

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

// Files: create truncates; open is read-only. Both silence HDF5's automatic stack printing,
// because failures are reported once, through H5_CHECK.
H5Handle create_file(const std::string& path);
H5Handle open_file(const std::string& path);
H5Handle create_group(hid_t parent, const std::string& name);
H5Handle open_group(hid_t parent, const std::string& name);
bool has_link(hid_t parent, const std::string& name);
// In creation order where tracked, else by name. Where both indexes exist, they must list the same
// names (a CheckFailure otherwise), so that a broken index is found by a reader of either.
std::vector<std::string> child_names(hid_t group);

void write_floats(hid_t parent, const std::string& name, const std::vector<int64_t>& shape, const float* data);
void write_ints(hid_t parent, const std::string& name, const std::vector<int64_t>& shape, const int32_t* data);
std::vector<int64_t> dataset_shape(hid_t parent, const std::string& name);

// What a dataset's header declares, read without touching its data, for checks made before
// anything is allocated from it.
struct DatasetHeader {
  std::vector<int64_t> shape;
  std::string type;             // "float32", "float64", "int64", "uint8", "string", "enum", ...
  bool is_integer = false;
  uint64_t declared_bytes = 0;  // elements x element size, saturating at UINT64_MAX
  bool compressed = false;      // any filter in its pipeline
};
DatasetHeader dataset_header(hid_t parent, const std::string& name);

std::vector<float> read_floats(hid_t parent, const std::string& name);
std::vector<int32_t> read_ints(hid_t parent, const std::string& name);
std::vector<int64_t> read_int64s(hid_t parent, const std::string& name);

void write_attribute(hid_t object, const std::string& name, int64_t value);
void write_attribute(hid_t object, const std::string& name, uint64_t value);
void write_attribute(hid_t object, const std::string& name, double value);
void write_attribute(hid_t object, const std::string& name, const std::string& value);
void read_attribute(hid_t object, const std::string& name, int64_t& value);
void read_attribute(hid_t object, const std::string& name, uint64_t& value);
void read_attribute(hid_t object, const std::string& name, double& value);
void read_attribute(hid_t object, const std::string& name, std::string& value);

}  // namespace trainctl
