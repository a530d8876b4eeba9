// The classification dataset file: see data_source.h.
#include "classification_file.h"

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "atomic_file.h"
#include "hdf5_file.h"

namespace trainctl {

ClassificationData read_classification_file(const std::string& path) {
  try {
    H5Handle file = open_file(path);
    ClassificationData data;
    std::vector<int64_t> x_shape = dataset_shape(file.get(), "x");
    std::vector<int64_t> y_shape = dataset_shape(file.get(), "y");
    if (x_shape.size() != 2) throw std::runtime_error("dataset x must have 2 dimensions [N, D]");
    if (y_shape.size() != 1 || y_shape[0] != x_shape[0])
      throw std::runtime_error(fmt::format("dataset y must have shape [{}] to match x", x_shape[0]));
    data.samples = x_shape[0];
    data.features = x_shape[1];
    data.x = read_floats(file.get(), "x");
    data.y = read_ints(file.get(), "y");
    return data;
  } catch (const std::exception& error) {
    throw std::runtime_error(fmt::format("cannot read dataset {}: {}", path, error.what()));
  }
}

void write_classification_file(const std::string& path, const ClassificationData& data) {
  const std::string temporary = temporary_path_for(path);
  {
    H5Handle file = create_file(temporary);
    write_floats(file.get(), "x", {data.samples, data.features}, data.x.data());
    write_ints(file.get(), "y", {data.samples}, data.y.data());
  }
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
