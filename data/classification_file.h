// The classification dataset file (HDF5): x float32 [N, D] and y int [N], labels in
// [0, classes). Every rank reads it whole into memory and the sampler picks its shard.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainctl {

struct ClassificationData {
  int64_t samples = 0;
  int64_t features = 0;
  std::vector<float> x;    // row-major [samples, features]
  std::vector<int32_t> y;  // [samples]
};

// Throws std::runtime_error naming the file and what is wrong with it.
ClassificationData read_classification_file(const std::string& path);
void write_classification_file(const std::string& path, const ClassificationData& data);

// Copies the rows named by `indices` into x_out [count, features] and y_out [count].
void gather_rows(const ClassificationData& data, const std::vector<int32_t>& indices, float* x_out, int32_t* y_out);

}  // namespace trainctl
