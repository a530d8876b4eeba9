// The classification dataset file (HDF5): x float32 [N, D] and y int [N], labels in
// [0, classes). Every rank reads it whole into memory and the sampler picks its shard; as a
// BatchSource, a sample is an example and batches hold "x" [n, D] and "y" [n].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "batch.h"

namespace trainctl {

struct ClassificationData {
  int64_t samples = 0;
  int64_t features = 0;
  std::vector<float> x;    // row-major [samples, features]
  std::vector<int32_t> y;  // [samples]
};

struct ClassificationShape {
  int64_t samples = 0;
  int64_t features = 0;
};

// The headers of x and y alone, checked as read_classification_file checks them (dtypes,
// shapes, sizes the file can hold), no data read. Throws as read_classification_file does.
ClassificationShape read_classification_shape(const std::string& path);

// Throws std::runtime_error naming the file and what is wrong with it.
ClassificationData read_classification_file(const std::string& path);
void write_classification_file(const std::string& path, const ClassificationData& data);

class ClassificationSource : public BatchSource {
 public:
  // Reads `path`; throws DataError naming the file.
  explicit ClassificationSource(const std::string& path);
  const ClassificationData& data() const { return data_; }
  int64_t examples() const override { return data_.samples; }
  void gather(const std::vector<int32_t>& indices, Batch& batch) const override;
  std::string describe() const override { return path_; }

 private:
  std::string path_;
  ClassificationData data_;
};

}  // namespace trainctl
