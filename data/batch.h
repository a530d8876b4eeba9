// The data seam: a batch is named host tensors with dtypes, which a model reads by name
// ("x"/"y" for classification, "tokens"/"targets" for a language model). A BatchSource turns
// example indices, which the sampler picks as a pure function of (seed, step), into a batch;
// the classification HDF5 file and llm.c token shards are two sources behind it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bad_input.h"

namespace trainctl {

// A data file that cannot be used (missing, malformed, or not fitting the model): exit code 2,
// with a message naming the file and the problem.
class DataError : public BadInput {
 public:
  using BadInput::BadInput;
};

// Throws DataError unless `path` is a regular file: checked before any reader opens a data file,
// since a FIFO would block the reader and a directory has no data.
void require_regular_file(const std::string& path);

enum class DType { kFloat32, kInt32 };

struct HostTensor {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<float> floats;  // dtype kFloat32
  std::vector<int32_t> ints;  // dtype kInt32
};

class Batch {
 public:
  int64_t examples = 0;  // rows of the batch: samples, or sequences of a language model

  // The tensor `name` resized to `shape` (allocated once, reused between batches).
  float* floats(const std::string& name, const std::vector<int64_t>& shape);
  int32_t* ints(const std::string& name, const std::vector<int64_t>& shape);
  // The tensor `name` for reading; throws std::logic_error when absent or of another dtype.
  const float* floats(const std::string& name) const;
  const int32_t* ints(const std::string& name) const;
  const HostTensor& tensor(const std::string& name) const;

 private:
  std::map<std::string, HostTensor> tensors_;
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // The examples the sampler draws from (samples, or token windows of block_size + 1).
  virtual int64_t examples() const = 0;
  // Fills `batch` with the examples `indices`, in that order.
  virtual void gather(const std::vector<int32_t>& indices, Batch& batch) const = 0;
  // What the source reads, for messages ("data.train: FILE").
  virtual std::string describe() const = 0;
};

}  // namespace trainctl
