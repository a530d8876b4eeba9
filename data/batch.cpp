// The data seam's batch: see batch.h.
#include "batch.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace trainctl {

void require_regular_file(const std::string& path) {
  struct stat status {};
  if (stat(path.c_str(), &status) != 0) throw DataError(fmt::format("{}: {}", path, std::strerror(errno)));
  if (S_ISDIR(status.st_mode)) throw DataError(fmt::format("{}: is a directory, not a data file", path));
  if (!S_ISREG(status.st_mode)) throw DataError(fmt::format("{}: is not a regular file", path));
}

namespace {
int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t extent : shape) count *= extent;
  return count;
}
}  // namespace

float* Batch::floats(const std::string& name, const std::vector<int64_t>& shape) {
  HostTensor& tensor = tensors_[name];
  tensor.dtype = DType::kFloat32;
  tensor.shape = shape;
  tensor.floats.resize(static_cast<size_t>(element_count(shape)));
  return tensor.floats.data();
}

int32_t* Batch::ints(const std::string& name, const std::vector<int64_t>& shape) {
  HostTensor& tensor = tensors_[name];
  tensor.dtype = DType::kInt32;
  tensor.shape = shape;
  tensor.ints.resize(static_cast<size_t>(element_count(shape)));
  return tensor.ints.data();
}

const HostTensor& Batch::tensor(const std::string& name) const {
  auto found = tensors_.find(name);
  if (found == tensors_.end()) throw std::logic_error(fmt::format("the batch has no tensor \"{}\"", name));
  return found->second;
}

const float* Batch::floats(const std::string& name) const {
  const HostTensor& found = tensor(name);
  if (found.dtype != DType::kFloat32) throw std::logic_error(fmt::format("batch tensor \"{}\" is not float32", name));
  return found.floats.data();
}

const int32_t* Batch::ints(const std::string& name) const {
  const HostTensor& found = tensor(name);
  if (found.dtype != DType::kInt32) throw std::logic_error(fmt::format("batch tensor \"{}\" is not int32", name));
  return found.ints.data();
}

}  // namespace trainctl
