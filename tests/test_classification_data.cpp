// Tests for the classification dataset file (data/classification_file.cpp over
// storage/hdf5_file.cpp): a write/read round trip, integer labels of any width, and the exact
// errors for x that is not float32, y that is not an integer type, a label beyond int32, a
// non-finite value in x (naming its row), an empty dataset, and a small file that declares a
// 2 TB dataset, contiguous or compressed (refused before anything is allocated).
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "batch.h"
#include "classification_file.h"
#include "error_message.h"
#include "hdf5_file.h"

namespace {

namespace fs = std::filesystem;

using trainctl::H5Handle;

// One file path in a directory of this test process, removed at exit.
std::string temp_file(const std::string& name) {
  static const struct Dir {
    fs::path path = fs::temp_directory_path() / ("trainctl-test-classification-" + std::to_string(getpid()));
    Dir() { fs::create_directories(path); }
    ~Dir() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  } dir;
  return (dir.path / name).string();
}

// A dataset of any stored type; `values` (in `memory_type`) may be null to declare it without
// writing, and `compressed` chunks it through deflate.
void write_raw(hid_t file, const std::string& name, const std::vector<hsize_t>& dims, hid_t file_type,
               hid_t memory_type, const void* values, bool compressed = false) {
  H5Handle space(H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)), H5Sclose);
  H5Handle properties(H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)), H5Pclose);
  if (compressed) {
    std::vector<hsize_t> chunk(dims.size(), 1);
    H5_CHECK(H5Pset_chunk(properties.get(), static_cast<int>(chunk.size()), chunk.data()));
    H5_CHECK(H5Pset_deflate(properties.get(), 6));
  } else {
    H5_CHECK(H5Pset_alloc_time(properties.get(), H5D_ALLOC_TIME_LATE));
  }
  H5Handle dataset(H5_CHECK(H5Dcreate2(file, name.c_str(), file_type, space.get(), H5P_DEFAULT, properties.get(),
                                       H5P_DEFAULT)),
                   H5Dclose);
  if (values != nullptr) H5_CHECK(H5Dwrite(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values));
}

// Three rows of two features, with x and y stored as the caller says.
template <typename X, typename Y>
std::string write_file(const std::string& name, hid_t x_file_type, hid_t x_memory_type, const std::vector<X>& x,
                       hid_t y_file_type, hid_t y_memory_type, const std::vector<Y>& y) {
  const std::string path = temp_file(name);
  H5Handle file = trainctl::create_file(path);
  write_raw(file.get(), "x", {y.size(), x.size() / std::max<size_t>(y.size(), 1)}, x_file_type, x_memory_type,
            x.data());
  write_raw(file.get(), "y", {y.size()}, y_file_type, y_memory_type, y.data());
  return path;
}

const std::vector<float> kX{1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};

std::string write_with_x(const std::string& name, const std::vector<float>& x) {
  return write_file(name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, x, H5T_STD_I32LE, H5T_NATIVE_INT32,
                    std::vector<int32_t>{0, 1, 2});
}

std::string read_error(const std::string& path) {
  return error_message<std::runtime_error>([&] { (void)trainctl::read_classification_file(path); });
}

}  // namespace

TEST_CASE("a written classification file reads back") {
  const std::string path = temp_file("round_trip.h5");
  trainctl::write_classification_file(path, {3, 2, kX, {2, 0, 1}});
  const trainctl::ClassificationData data = trainctl::read_classification_file(path);
  CHECK(data.samples == 3);
  CHECK(data.features == 2);
  CHECK(data.x == kX);
  CHECK(data.y == std::vector<int32_t>{2, 0, 1});
}

TEST_CASE("labels of any integer type read as int32") {
  const std::string int64_labels = write_file("int64_y.h5", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, kX, H5T_STD_I64LE,
                                              H5T_NATIVE_INT64, std::vector<int64_t>{3, 0, 1});
  CHECK(trainctl::read_classification_file(int64_labels).y == std::vector<int32_t>{3, 0, 1});
  const std::string uint8_labels = write_file("uint8_y.h5", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, kX, H5T_STD_U8LE,
                                              H5T_NATIVE_UINT8, std::vector<uint8_t>{255, 0, 1});
  CHECK(trainctl::read_classification_file(uint8_labels).y == std::vector<int32_t>{255, 0, 1});
}

TEST_CASE("x must be float32, with no conversion") {
  const std::vector<int32_t> y{0, 1, 2};
  const std::string float64_x = write_file("float64_x.h5", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE,
                                           std::vector<double>{1, 2, 3, 4, 5, 6}, H5T_STD_I32LE, H5T_NATIVE_INT32, y);
  CHECK(read_error(float64_x) == "cannot read dataset " + float64_x + ": dataset x is float64, expected float32");
  const std::string int_x = write_file("int_x.h5", H5T_STD_I32LE, H5T_NATIVE_INT32,
                                       std::vector<int32_t>{1, 2, 3, 4, 5, 6}, H5T_STD_I32LE, H5T_NATIVE_INT32, y);
  CHECK(read_error(int_x) == "cannot read dataset " + int_x + ": dataset x is int32, expected float32");
}

TEST_CASE("y must be an integer type, with no conversion") {
  const std::string float_y = write_file("float_y.h5", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, kX, H5T_IEEE_F32LE,
                                         H5T_NATIVE_FLOAT, std::vector<float>{0.0f, 1.0f, 2.0f});
  CHECK(read_error(float_y) == "cannot read dataset " + float_y + ": dataset y is float32, expected an integer type");
}

TEST_CASE("a label beyond int32 is named with its row") {
  const std::string path = write_file("huge_label.h5", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, kX, H5T_STD_I64LE,
                                      H5T_NATIVE_INT64, std::vector<int64_t>{0, int64_t{1} << 40, 1});
  CHECK(read_error(path) ==
        "cannot read dataset " + path + ": dataset y has 1099511627776 in row 1, beyond any int32 label");
}

TEST_CASE("a non-finite value in x is named with its row and column") {
  std::vector<float> x = kX;
  x[5] = std::numeric_limits<float>::quiet_NaN();
  const std::string nan_x = write_with_x("nan_x.h5", x);
  CHECK(read_error(nan_x) == "cannot read dataset " + nan_x + ": dataset x has nan in row 2, column 1");
  x = kX;
  x[2] = -std::numeric_limits<float>::infinity();
  const std::string inf_x = write_with_x("inf_x.h5", x);
  CHECK(read_error(inf_x) == "cannot read dataset " + inf_x + ": dataset x has -inf in row 1, column 0");
}

TEST_CASE("an empty dataset is refused") {
  const std::string path = write_file("empty.h5", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, std::vector<float>{},
                                      H5T_STD_I32LE, H5T_NATIVE_INT32, std::vector<int32_t>{});
  CHECK(read_error(path) == "cannot read dataset " + path + ": dataset x has no rows");
}

TEST_CASE("a small file that declares a 2 TB dataset is refused before anything is allocated") {
  bool compressed = false;
  SUBCASE("contiguous") { compressed = false; }
  SUBCASE("compressed") { compressed = true; }
  const std::string path = temp_file(compressed ? "huge_compressed.h5" : "huge.h5");
  const hsize_t rows = hsize_t{1} << 30;
  {
    H5Handle file = trainctl::create_file(path);
    write_raw(file.get(), "x", {rows, 512}, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, nullptr, compressed);
    write_raw(file.get(), "y", {rows}, H5T_STD_I32LE, H5T_NATIVE_INT32, nullptr, compressed);
  }
  const std::string expected = "cannot read dataset " + path +
                               ": dataset x declares [1073741824, 512] float32 values, more than its " +
                               std::to_string(fs::file_size(path)) + "-byte file can hold";
  CHECK(read_error(path) == expected);
  // As a BatchSource, the same message as a DataError.
  CHECK_THROWS_WITH_AS(trainctl::ClassificationSource{path}, expected.c_str(), trainctl::DataError);
}
