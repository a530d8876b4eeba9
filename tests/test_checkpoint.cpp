// Tests for checkpoints (runtime/checkpoint.cpp over runtime/hdf5_file.cpp and
// runtime/atomic_file.cpp): a save/load round trip that keeps every stored field and tensor
// bit for bit, in state_dict order, with its step-N.json sidecar; listing newest first without
// temporaries or strangers; pruning to the newest k with their sidecars; the errors for a
// flipped data byte (located with H5Dget_offset), a truncated file and an unknown
// format_version; resuming past a corrupt newest file; and atomic writes leaving no temporary.
#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "atomic_file.h"
#include "checkpoint_file.h"
#include "hdf5_file.h"

using trainctl::Checkpoint;
using trainctl::CheckpointError;
using trainctl::Tensor;

namespace {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir for one test, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("trainctl-test-checkpoint-" + std::to_string(getpid()) + "-" + std::to_string(++counter));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string str() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

std::set<std::string> file_names(const TempDir& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir.str())) names.insert(entry.path().filename().string());
  return names;
}

void touch(const std::string& path) { std::ofstream(path, std::ios::binary) << "x"; }

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

Tensor tensor(const std::string& name, std::vector<int64_t> shape, float first) {
  int64_t count = 1;
  for (int64_t extent : shape) count *= extent;
  Tensor result{name, std::move(shape), {}};
  for (int64_t i = 0; i < count; ++i) result.values.push_back(first + 0.125f * static_cast<float>(i));
  return result;
}

// A checkpoint of a 4 -> 3 -> 2 MLP trained with AdamW. Names are chosen so that state_dict
// order ("0.weight" before "0.bias", "2.*" before "10.*") differs from name order.
Checkpoint make_checkpoint(int64_t step) {
  Checkpoint checkpoint;
  trainctl::CheckpointMeta& meta = checkpoint.meta;
  meta.model_kind = "gpt2";
  meta.step = step;
  meta.epoch = step / 10;
  meta.sample_position = step * 64;
  meta.rng_seed = 0xFEDCBA9876543210ULL;  // above INT64_MAX: must survive as unsigned
  meta.world_size = 2;
  meta.global_batch = 64;
  meta.optimizer = "adamw";
  meta.optimizer_step = step;
  meta.loss = 0.1234567890123456789;
  meta.config_text = "[train]\nsteps = 600  # \"quoted\" and ünïcode\n";
  meta.hostnames = "node1,node2";
  meta.trainctl_version = "9.9.9-test";
  meta.created_utc = "2024-05-06T07:08:09Z";
  meta.hardware = "Test CPU; device cpu; 2 ranks";
  meta.metrics = {{"val_loss", 0.5}};

  checkpoint.model = {tensor("0.weight", {3, 4}, 1.0f), tensor("0.bias", {3}, -1.0f), tensor("2.weight", {2, 3}, 0.5f),
                      tensor("2.bias", {2}, 2.0f), tensor("10.weight", {1, 2}, 3.0f), tensor("10.bias", {1}, 4.0f)};
  // Values whose bits a lossy path would change.
  checkpoint.model[1].values = {std::numeric_limits<float>::quiet_NaN(), -0.0f,
                                std::numeric_limits<float>::denorm_min()};
  for (const Tensor& parameter : checkpoint.model)
    for (const char* state : {"exp_avg", "exp_avg_sq"})
      checkpoint.optimizer_state.push_back(
          tensor(parameter.name + "/" + state, parameter.shape, static_cast<float>(step) * 0.01f));
  return checkpoint;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void check_same_tensors(const std::vector<Tensor>& loaded, const std::vector<Tensor>& saved) {
  REQUIRE(loaded.size() == saved.size());
  for (size_t i = 0; i < saved.size(); ++i) {
    CAPTURE(saved[i].name);
    CHECK(loaded[i].name == saved[i].name);
    CHECK(loaded[i].shape == saved[i].shape);
    CHECK(same_bits(loaded[i].values, saved[i].values));
  }
}

std::string save(const TempDir& dir, int64_t step) { return trainctl::save_checkpoint(dir.str(), make_checkpoint(step)); }

// The file offset of the raw data of /<group>/<dataset>, from HDF5 itself.
haddr_t data_offset(const std::string& path, const std::string& group, const std::string& dataset) {
  trainctl::H5Handle file = trainctl::open_file(path);
  trainctl::H5Handle parent = trainctl::open_group(file.get(), group);
  trainctl::H5Handle data(H5_CHECK(H5Dopen2(parent.get(), dataset.c_str(), H5P_DEFAULT)), H5Dclose);
  const haddr_t offset = H5Dget_offset(data.get());
  REQUIRE(offset != HADDR_UNDEF);
  return offset;
}

void flip_byte(const std::string& path, haddr_t offset) {
  std::fstream file(path, std::ios::binary | std::ios::in | std::ios::out);
  file.seekg(static_cast<std::streamoff>(offset));
  const char byte = static_cast<char>(file.get());
  file.seekp(static_cast<std::streamoff>(offset));
  file.put(static_cast<char>(byte ^ 0x5A));
  REQUIRE(file.good());
}

// Flips one byte in the middle of /model/0.weight's data.
void corrupt_first_weight(const std::string& path) { flip_byte(path, data_offset(path, "model", "0.weight") + 6); }

void set_format_version(const std::string& path, int64_t version) {
  trainctl::H5Handle file(H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)), H5Fclose);
  H5_CHECK(H5Adelete(file.get(), "format_version"));
  trainctl::write_attribute(file.get(), "format_version", version);
}

std::string load_error(const std::string& path) {
  try {
    trainctl::load_checkpoint(path);
  } catch (const CheckpointError& error) {
    return error.what();
  }
  return "(no error)";
}

std::vector<int64_t> listed_steps(const TempDir& dir) {
  std::vector<int64_t> steps;
  for (const auto& entry : trainctl::list_checkpoints(dir.str())) {
    CHECK(entry.path == dir.file(trainctl::checkpoint_file_name(entry.step)));
    steps.push_back(entry.step);
  }
  return steps;
}

}  // namespace

TEST_CASE("checkpoint file names carry the step in 8 digits") {
  CHECK(trainctl::checkpoint_file_name(100) == "step-00000100.h5");
  CHECK(trainctl::checkpoint_file_name(0) == "step-00000000.h5");
}

TEST_CASE("a saved checkpoint loads back with every field and tensor bit for bit") {
  TempDir dir;
  const Checkpoint saved = make_checkpoint(7);
  const std::string path = trainctl::save_checkpoint(dir.str(), saved);
  CHECK(path == dir.file("step-00000007.h5"));

  const Checkpoint loaded = trainctl::load_checkpoint(path);
  const trainctl::CheckpointMeta& meta = loaded.meta;
  CHECK(meta.model_kind == "gpt2");
  CHECK(meta.step == 7);
  CHECK(meta.epoch == 0);
  CHECK(meta.sample_position == 448);
  CHECK(meta.rng_seed == 0xFEDCBA9876543210ULL);
  CHECK(meta.world_size == 2);
  CHECK(meta.global_batch == 64);
  CHECK(meta.optimizer == "adamw");
  CHECK(meta.optimizer_step == 7);
  CHECK(meta.loss == saved.meta.loss);
  CHECK(meta.config_text == saved.meta.config_text);
  CHECK(meta.hostnames == "node1,node2");
  CHECK(meta.trainctl_version == "9.9.9-test");
  CHECK(meta.created_utc == "2024-05-06T07:08:09Z");
  // In state_dict order, not name order.
  check_same_tensors(loaded.model, saved.model);
  check_same_tensors(loaded.optimizer_state, saved.optimizer_state);
}

TEST_CASE("a save writes the file and its sidecar and leaves no temporary behind") {
  TempDir dir;
  save(dir, 7);
  CHECK(file_names(dir) == std::set<std::string>{"step-00000007.h5", "step-00000007.json"});
  CHECK(read_text(dir.file("step-00000007.json")) ==
        R"({"step":7,"epoch":0,"loss":0.12345678901234568,"val_loss":0.5,"hostname":"node1",)"
        R"("hostnames":"node1,node2","hardware":"Test CPU; device cpu; 2 ranks","world_size":2,)"
        R"("created_utc":"2024-05-06T07:08:09Z","trainctl_version":"9.9.9-test"})"
        "\n");
}

TEST_CASE("list_checkpoints lists step files newest first and nothing else") {
  TempDir dir;
  for (const char* name : {"step-00000005.h5", "step-00000100.h5", "step-00000020.h5", ".step-00000005.h5.tmp-123",
                           ".step-00000200.h5.tmp-9", "step-00000300.json", "step-00000400.h5.bak", "notes.txt",
                           "step-abc.h5"})
    touch(dir.file(name));
  CHECK(listed_steps(dir) == std::vector<int64_t>{100, 20, 5});
}

TEST_CASE("list_checkpoints of a missing directory is empty") {
  CHECK(trainctl::list_checkpoints("/nonexistent/trainctl/checkpoints").empty());
}

TEST_CASE("prune_checkpoints keeps the newest k with their sidecars and removes leftover temporaries") {
  TempDir dir;
  for (int64_t step = 1; step <= 5; ++step) {
    touch(dir.file(trainctl::checkpoint_file_name(step)));
    touch(dir.file(fs::path(trainctl::checkpoint_file_name(step)).replace_extension(".json").string()));
  }
  for (const char* name : {".step-00000006.h5.tmp-123", ".step-00000006.json.tmp-123", "notes.txt"})
    touch(dir.file(name));

  trainctl::prune_checkpoints(dir.str(), 2);
  CHECK(file_names(dir) ==
        std::set<std::string>{"step-00000004.h5", "step-00000004.json", "step-00000005.h5", "step-00000005.json",
                              "notes.txt"});
  trainctl::prune_checkpoints(dir.str(), 2);  // nothing more to do
  CHECK(listed_steps(dir) == std::vector<int64_t>{5, 4});
}

TEST_CASE("a flipped byte in a dataset's data fails its checksum") {
  TempDir dir;
  const std::string path = save(dir, 3);
  corrupt_first_weight(path);
  CHECK(load_error(path) == path + ": checksum mismatch in dataset 0.weight");
}

TEST_CASE("a flipped byte in optimizer state names the state") {
  TempDir dir;
  const std::string path = save(dir, 3);
  flip_byte(path, data_offset(path, "optimizer/2.bias", "exp_avg_sq"));
  CHECK(load_error(path) == path + ": checksum mismatch in dataset 2.bias/exp_avg_sq");
}

TEST_CASE("a truncated checkpoint is not readable") {
  TempDir dir;
  const std::string path = save(dir, 3);
  fs::resize_file(path, fs::file_size(path) / 2);
  const std::string message = load_error(path);
  CHECK(message.starts_with(path + ": not a readable checkpoint ("));
}

TEST_CASE("an unknown format_version is rejected") {
  TempDir dir;
  const std::string path = save(dir, 3);
  set_format_version(path, 99);
  CHECK(load_error(path) == path + ": format_version 99 is not supported (this trainctl reads 1 to 2)");
}

TEST_CASE("a version 1 checkpoint, from before model kinds, reads as an mlp") {
  TempDir dir;
  const std::string path = save(dir, 3);
  CHECK(trainctl::load_checkpoint(path).meta.model_kind == "gpt2");
  set_format_version(path, 1);
  {
    trainctl::H5Handle file(H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)), H5Fclose);
    H5_CHECK(H5Adelete(file.get(), "model_kind"));
  }
  CHECK(trainctl::load_checkpoint(path).meta.model_kind == "mlp");
}

TEST_CASE("load_latest_valid falls back past corrupt newer checkpoints and lists them") {
  TempDir dir;
  save(dir, 10);
  const std::string middle = save(dir, 20);
  const std::string newest = save(dir, 30);
  corrupt_first_weight(newest);

  trainctl::ResumePoint resume = trainctl::load_latest_valid(dir.str());
  REQUIRE(resume.checkpoint.has_value());
  CHECK(resume.path == middle);
  CHECK(resume.checkpoint->meta.step == 20);
  CHECK(resume.skipped == std::vector<std::string>{newest + ": checksum mismatch in dataset 0.weight"});

  fs::resize_file(middle, fs::file_size(middle) / 2);
  resume = trainctl::load_latest_valid(dir.str());
  REQUIRE(resume.checkpoint.has_value());
  CHECK(resume.checkpoint->meta.step == 10);
  REQUIRE(resume.skipped.size() == 2);
  CHECK(resume.skipped[0] == newest + ": checksum mismatch in dataset 0.weight");
  CHECK(resume.skipped[1].starts_with(middle + ": not a readable checkpoint ("));
}

TEST_CASE("load_latest_valid of a directory without checkpoints starts from scratch") {
  TempDir dir;
  touch(dir.file("notes.txt"));
  const trainctl::ResumePoint resume = trainctl::load_latest_valid(dir.str());
  CHECK_FALSE(resume.checkpoint.has_value());
  CHECK(resume.path.empty());
  CHECK(resume.skipped.empty());
}

TEST_CASE("write_file_atomically replaces the file and leaves no temporary behind") {
  TempDir dir;
  const std::string path = dir.file("progress");
  trainctl::write_file_atomically(path, "first\n");
  trainctl::write_file_atomically(path, "12\n");
  CHECK(read_text(path) == "12\n");
  CHECK(file_names(dir) == std::set<std::string>{"progress"});
  CHECK(trainctl::temporary_path_for(path) == dir.file(".progress.tmp-" + std::to_string(getpid())));
}
