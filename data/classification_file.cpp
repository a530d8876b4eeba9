// The classification dataset file: see classification_file.h.
#include "classification_file.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "atomic_file.h"
#include "hdf5_file.h"

namespace trainctl {

namespace {

// Deflate, the compression HDF5 always has, expands data at most about 1032-fold.
constexpr uint64_t kMaxCompressionRatio = 1032;

// Refuses what a small or hostile file declares before anything is allocated from it: a dataset
// larger than the file could hold, compressed or not.
void check_fits_file(const std::string& name, const DatasetHeader& header, uint64_t file_bytes) {
  const uint64_t limit = header.compressed ? file_bytes * kMaxCompressionRatio : file_bytes;
  if (header.declared_bytes > limit)
    throw std::runtime_error(fmt::format("dataset {} declares [{}] {} values, more than its {}-byte file can hold",
                                         name, fmt::join(header.shape, ", "), header.type, file_bytes));
}

void check_no_nonfinite(const ClassificationData& data) {
  for (size_t i = 0; i < data.x.size(); ++i)
    if (!std::isfinite(data.x[i])) {
      const auto features = static_cast<size_t>(data.features);
      throw std::runtime_error(
          fmt::format("dataset x has {} in row {}, column {}", data.x[i], i / features, i % features));
    }
}

std::vector<int32_t> labels_of(const std::vector<int64_t>& stored) {
  std::vector<int32_t> labels(stored.size());
  for (size_t i = 0; i < stored.size(); ++i) {
    if (stored[i] < std::numeric_limits<int32_t>::min() || stored[i] > std::numeric_limits<int32_t>::max())
      throw std::runtime_error(fmt::format("dataset y has {} in row {}, beyond any int32 label", stored[i], i));
    labels[i] = static_cast<int32_t>(stored[i]);
  }
  return labels;
}

ClassificationShape checked_shape(hid_t file, const std::string& path) {
  const uint64_t file_bytes = std::filesystem::file_size(path);
  const DatasetHeader x = dataset_header(file, "x");
  const DatasetHeader y = dataset_header(file, "y");
  if (x.type != "float32") throw std::runtime_error(fmt::format("dataset x is {}, expected float32", x.type));
  if (!y.is_integer) throw std::runtime_error(fmt::format("dataset y is {}, expected an integer type", y.type));
  if (x.shape.size() != 2) throw std::runtime_error("dataset x must have 2 dimensions [N, D]");
  if (y.shape.size() != 1 || y.shape[0] != x.shape[0])
    throw std::runtime_error(fmt::format("dataset y must have shape [{}] to match x", x.shape[0]));
  if (x.shape[0] == 0) throw std::runtime_error("dataset x has no rows");
  if (x.shape[1] == 0) throw std::runtime_error("dataset x has no columns");
  check_fits_file("x", x, file_bytes);
  check_fits_file("y", y, file_bytes);
  return {x.shape[0], x.shape[1]};
}

std::runtime_error dataset_error(const std::string& path, const std::exception& error) {
  return std::runtime_error(fmt::format("cannot read dataset {}: {}", path, error.what()));
}

}  // namespace

ClassificationShape read_classification_shape(const std::string& path) {
  try {
    H5Handle file = open_file(path);
    return checked_shape(file.get(), path);
  } catch (const std::exception& error) {
    throw dataset_error(path, error);
  }
}

ClassificationData read_classification_file(const std::string& path) {
  try {
    H5Handle file = open_file(path);
    const ClassificationShape shape = checked_shape(file.get(), path);
    ClassificationData data;
    data.samples = shape.samples;
    data.features = shape.features;
    data.x = read_floats(file.get(), "x");
    check_no_nonfinite(data);
    data.y = labels_of(read_int64s(file.get(), "y"));
    return data;
  } catch (const std::exception& error) {
    throw dataset_error(path, error);
  }
}

void write_classification_file(const std::string& path, const ClassificationData& data) {
  const std::string temporary = temporary_path_for(path);
  H5Handle file = create_file(temporary);
  write_floats(file.get(), "x", {data.samples, data.features}, data.x.data());
  write_ints(file.get(), "y", {data.samples}, data.y.data());
  // Checked: HDF5 writes most of the file as it closes, where a full disk shows.
  file.close();
  publish_file(temporary, path);
}

ClassificationSource::ClassificationSource(const std::string& path) : path_(path) {
  try {
    data_ = read_classification_file(path);
  } catch (const std::runtime_error& error) {
    throw DataError(error.what());
  }
}

void ClassificationSource::gather(const std::vector<int32_t>& indices, Batch& batch) const {
  const auto count = static_cast<int64_t>(indices.size());
  float* x_out = batch.floats("x", {count, data_.features});
  int32_t* y_out = batch.ints("y", {count});
  batch.examples = count;
  const size_t row_bytes = static_cast<size_t>(data_.features) * sizeof(float);
  for (size_t i = 0; i < indices.size(); ++i) {
    std::memcpy(x_out + i * static_cast<size_t>(data_.features),
                data_.x.data() + static_cast<size_t>(indices[i]) * static_cast<size_t>(data_.features), row_bytes);
    y_out[i] = data_.y[static_cast<size_t>(indices[i])];
  }
}

}  // namespace trainctl
