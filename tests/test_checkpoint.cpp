// Tests for checkpoints (storage/checkpoint_file.cpp and storage/checkpoint_directory.cpp over
// storage/hdf5_file.cpp and common/atomic_file.cpp): a save/load round trip that keeps every
// stored field and tensor bit for bit, in state_dict order, with its step-N.json sidecar and the file's checksum in it;
// listing newest first without temporaries or strangers; pruning to the newest k with their
// sidecars; the errors for a flipped data byte (located with H5Dget_offset), a rewritten step or
// config attribute, a flipped byte in the superblock or an object header, a truncated file, a
// missing sidecar or one without the file's checksum (as versions 1 and 2 wrote), a name that
// disagrees with the stored step and a format_version other than 4 or 5 (4 read without a tokenizer); resuming past each; atomic
// writes leaving no temporary; and writes that fail (a file size limit standing in for a full
// disk) leaving nothing behind, with the path and the OS's reason in the error.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <zlib.h>

#include "atomic_file.h"
#include "checkpoint_directory.h"
#include "checkpoint_file.h"
#include "error_message.h"
#include "hdf5_file.h"
#include "json.h"

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
  meta.best_val_loss = 0.75;
  meta.best_step = step - 2;
  meta.evals_since_best = 2;
  meta.config_text = "[train]\nsteps = 600  # \"quoted\" and ünïcode\n";
  meta.hostnames = "node1,node2";
  meta.tokenizer_path = "/data/gpt2-tokenizer";
  meta.tokenizer_hash = "crc32:0123abcd";
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

std::string sidecar_of(const std::string& path) { return fs::path(path).replace_extension(".json").string(); }

uint64_t crc32_of_file(const std::string& path) {
  const std::string bytes = read_text(path);
  return crc32_z(0L, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size());
}

uint64_t recorded_crc32(const std::string& path) {
  return trainctl::Json::parse(read_text(sidecar_of(path)))["file_crc32"].get<uint64_t>();
}

// What load_checkpoint says of a file whose bytes changed after it was saved with `recorded`.
std::string checksum_mismatch(const std::string& path, uint64_t recorded) {
  return path + ": file checksum mismatch: crc32 " + std::to_string(crc32_of_file(path)) + ", its sidecar " +
         fs::path(sidecar_of(path)).filename().string() + " records " + std::to_string(recorded);
}

// Records the file's current size and checksum in its sidecar, as a bug or an adversary that
// changed both would: what the checks after the whole-file checksum are for.
void reseal(const std::string& path) {
  trainctl::Json sidecar = trainctl::Json::parse(read_text(sidecar_of(path)));
  sidecar["file_bytes"] = fs::file_size(path);
  sidecar["file_crc32"] = crc32_of_file(path);
  std::ofstream(sidecar_of(path), std::ios::binary | std::ios::trunc) << trainctl::json_text(sidecar);
}

// Opens the file for writing with HDF5 itself, as a tool that edits it in place would.
trainctl::H5Handle open_for_writing(const std::string& path) {
  return {H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)), H5Fclose};
}

void set_format_version(const std::string& path, int64_t version) {
  {
    trainctl::H5Handle file = open_for_writing(path);
    H5_CHECK(H5Adelete(file.get(), "format_version"));
    trainctl::write_attribute(file.get(), "format_version", version);
  }
  reseal(path);
}

// Overwrites the value of the root attribute `step` in place, keeping the file's size.
void overwrite_step(const std::string& path, int64_t step) {
  trainctl::H5Handle file = open_for_writing(path);
  trainctl::H5Handle attribute(H5_CHECK(H5Aopen(file.get(), "step", H5P_DEFAULT)), H5Aclose);
  H5_CHECK(H5Awrite(attribute.get(), H5T_NATIVE_INT64, &step));
}

// The file offset of /<group>'s object header (its message count is 2 bytes in).
haddr_t object_header_offset(const std::string& path, const std::string& group) {
  trainctl::H5Handle file = trainctl::open_file(path);
  H5O_info_t info{};
  H5_CHECK(H5Oget_info_by_name(file.get(), group.c_str(), &info, H5P_DEFAULT));
  return info.addr;
}

// The offset of the first occurrence of `bytes` in the file.
size_t offset_of(const std::string& path, const std::string& bytes) {
  const size_t offset = read_text(path).find(bytes);
  REQUIRE(offset != std::string::npos);
  return offset;
}

std::string load_error(const std::string& path) {
  return error_message<CheckpointError>([&] { (void)trainctl::load_checkpoint(path); });
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
  CHECK(meta.best_val_loss == 0.75);
  CHECK(meta.best_step == 5);
  CHECK(meta.evals_since_best == 2);
  CHECK(meta.config_text == saved.meta.config_text);
  CHECK(meta.hostnames == "node1,node2");
  CHECK(meta.tokenizer_path == "/data/gpt2-tokenizer");
  CHECK(meta.tokenizer_hash == "crc32:0123abcd");
  CHECK(meta.trainctl_version == "9.9.9-test");
  CHECK(meta.created_utc == "2024-05-06T07:08:09Z");
  // In state_dict order, not name order.
  check_same_tensors(loaded.model, saved.model);
  check_same_tensors(loaded.optimizer_state, saved.optimizer_state);
}

TEST_CASE("a save writes the file and its sidecar, with the file's checksum, and leaves no temporary behind") {
  TempDir dir;
  const std::string path = save(dir, 7);
  CHECK(file_names(dir) == std::set<std::string>{"step-00000007.h5", "step-00000007.json"});
  CHECK(read_text(dir.file("step-00000007.json")) ==
        R"({"step":7,"epoch":0,"loss":0.12345678901234568,"val_loss":0.5,"hostname":"node1",)"
        R"("hostnames":"node1,node2","hardware":"Test CPU; device cpu; 2 ranks","world_size":2,)"
        R"("created_utc":"2024-05-06T07:08:09Z","trainctl_version":"9.9.9-test","file_bytes":)" +
            std::to_string(fs::file_size(path)) + R"(,"file_crc32":)" + std::to_string(crc32_of_file(path)) +
            "}\n");
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

TEST_CASE("list_checkpoints skips a step too long for int64") {
  TempDir dir;
  touch(dir.file("step-99999999999999999999999.h5"));
  touch(dir.file("step-00000001.h5"));
  CHECK(listed_steps(dir) == std::vector<int64_t>{1});
}

TEST_CASE("prune_checkpoints keeps the newest k with their sidecars and removes leftover temporaries") {
  TempDir dir;
  for (int64_t step = 1; step <= 5; ++step) {
    touch(dir.file(trainctl::checkpoint_file_name(step)));
    touch(dir.file(fs::path(trainctl::checkpoint_file_name(step)).replace_extension(".json").string()));
  }
  // step-00000006.json: a crash came between publishing the sidecar and publishing its file.
  for (const char* name :
       {".step-00000006.h5.tmp-123", ".step-00000006.json.tmp-123", "step-00000006.json", "notes.txt"})
    touch(dir.file(name));

  trainctl::prune_checkpoints(dir.str(), 2);
  CHECK(file_names(dir) ==
        std::set<std::string>{"step-00000004.h5", "step-00000004.json", "step-00000005.h5", "step-00000005.json",
                              "notes.txt"});
  trainctl::prune_checkpoints(dir.str(), 2);  // nothing more to do
  CHECK(listed_steps(dir) == std::vector<int64_t>{5, 4});
}

TEST_CASE("a flipped byte in a dataset's data fails the file checksum, and the dataset's own behind it") {
  TempDir dir;
  const std::string path = save(dir, 3);
  const uint64_t recorded = recorded_crc32(path);
  corrupt_first_weight(path);
  CHECK(load_error(path) == checksum_mismatch(path, recorded));
  reseal(path);
  CHECK(load_error(path) == path + ": checksum mismatch in dataset 0.weight");
}

TEST_CASE("a flipped byte in optimizer state names the state once the file checksum is resealed") {
  TempDir dir;
  const std::string path = save(dir, 3);
  flip_byte(path, data_offset(path, "optimizer/2.bias", "exp_avg_sq"));
  reseal(path);
  CHECK(load_error(path) == path + ": checksum mismatch in dataset 2.bias/exp_avg_sq");
}

TEST_CASE("a rewritten step attribute fails the file checksum") {
  TempDir dir;
  const std::string path = save(dir, 3);
  const uint64_t recorded = recorded_crc32(path);
  overwrite_step(path, 30);
  CHECK(load_error(path) == checksum_mismatch(path, recorded));
}

TEST_CASE("a flipped byte in the config attribute fails the file checksum") {
  TempDir dir;
  const std::string path = save(dir, 3);
  const uint64_t recorded = recorded_crc32(path);
  flip_byte(path, offset_of(path, "steps = 600"));
  CHECK(load_error(path) == checksum_mismatch(path, recorded));
}

// HDF5 never parses these: a corrupt metadata block can crash the library itself.
TEST_CASE("a flipped byte in the superblock or in an object header fails the file checksum") {
  TempDir dir;
  const std::string path = save(dir, 3);
  const uint64_t recorded = recorded_crc32(path);
  SUBCASE("superblock") { flip_byte(path, 9); }
  SUBCASE("object header") { flip_byte(path, object_header_offset(path, "model") + 2); }
  CHECK(load_error(path) == checksum_mismatch(path, recorded));
}

TEST_CASE("a truncated checkpoint fails its recorded size") {
  TempDir dir;
  const std::string path = save(dir, 3);
  const auto saved_bytes = fs::file_size(path);
  fs::resize_file(path, saved_bytes / 2);
  CHECK(load_error(path) == path + ": the file has " + std::to_string(saved_bytes / 2) +
                                " bytes, its sidecar step-00000003.json records " + std::to_string(saved_bytes));
}

TEST_CASE("a checkpoint without a sidecar that records its checksum is not verified") {
  TempDir dir;
  const std::string path = save(dir, 3);
  SUBCASE("missing") {
    fs::remove(sidecar_of(path));
    CHECK(load_error(path) == path + ": not verified: its sidecar step-00000003.json is missing");
  }
  SUBCASE("one without a checksum, beside a version 3 file") {
    std::ofstream(sidecar_of(path), std::ios::trunc) << R"({"step":3,"epoch":0})";
    CHECK(load_error(path) == path + ": not verified: its sidecar step-00000003.json records no file checksum");
  }
  SUBCASE("half a checksum") {
    std::ofstream(sidecar_of(path), std::ios::trunc) << R"({"step":3,"file_bytes":12})";
    CHECK(load_error(path) == path + ": not verified: its sidecar step-00000003.json records no valid file checksum");
  }
  SUBCASE("not JSON") {
    std::ofstream(sidecar_of(path), std::ios::trunc) << "{\"step\":3,";
    CHECK(load_error(path) == path + ": not verified: its sidecar step-00000003.json is not a JSON object");
  }
}

TEST_CASE("a step-N.h5 name must match the stored step") {
  TempDir dir;
  const std::string saved = save(dir, 3);
  const std::string renamed = dir.file("step-00000030.h5");
  fs::rename(saved, renamed);
  fs::rename(sidecar_of(saved), sidecar_of(renamed));
  CHECK(load_error(renamed) == renamed + ": its name says step 30 but it stores step 3");
  // Another name (a copy kept aside) carries no step to compare.
  fs::rename(renamed, dir.file("best.h5"));
  fs::rename(sidecar_of(renamed), dir.file("best.json"));
  CHECK(trainctl::load_checkpoint(dir.file("best.h5")).meta.step == 3);
}

TEST_CASE("a version 4 checkpoint, written before the tokenizer was recorded, reads with none") {
  TempDir dir;
  const std::string path = save(dir, 3);
  {
    trainctl::H5Handle file = open_for_writing(path);
    for (const char* name : {"tokenizer_path", "tokenizer_hash"}) H5_CHECK(H5Adelete(file.get(), name));
  }
  set_format_version(path, 4);
  const trainctl::Checkpoint loaded = trainctl::load_checkpoint(path);
  CHECK(loaded.meta.format_version == 4);
  CHECK(loaded.meta.tokenizer_path.empty());
  CHECK(loaded.meta.tokenizer_hash.empty());
  CHECK(loaded.meta.step == 3);
}

TEST_CASE("an unknown format_version is rejected") {
  TempDir dir;
  const std::string path = save(dir, 3);
  set_format_version(path, 99);
  CHECK(load_error(path) == path + ": format_version 99 is not supported (this trainctl reads 4 to 6)");
  set_format_version(path, 2);
  CHECK(load_error(path) == path + ": format_version 2 is not supported (this trainctl reads 4 to 6)");
  set_format_version(path, 0);
  CHECK(load_error(path) == path + ": format_version 0 is not supported (this trainctl reads 4 to 6)");
}

// Their sidecars record no file checksum, so HDF5 must not open them; trainctl was never released
// with them.
TEST_CASE("checkpoints of versions 1 and 2 are not verified, and resume falls back past them") {
  TempDir dir;
  const std::string oldest = save(dir, 10);
  const std::string path = save(dir, 20);
  set_format_version(path, 2);
  // What the sidecar of a version 1 or 2 save holds: no file_bytes, no file_crc32.
  std::ofstream(sidecar_of(path), std::ios::trunc) << R"({"step":20,"epoch":2})";
  const std::string not_verified = path + ": not verified: its sidecar step-00000020.json records no file checksum";
  CHECK(load_error(path) == not_verified);

  const trainctl::ResumePoint resume = trainctl::load_latest_valid(dir.str());
  REQUIRE(resume.checkpoint.has_value());
  CHECK(resume.path == oldest);
  CHECK(resume.skipped == std::vector<std::string>{not_verified});
}

TEST_CASE("load_latest_valid falls back past corrupt newer checkpoints and lists them") {
  TempDir dir;
  save(dir, 10);
  const std::string middle = save(dir, 20);
  const std::string newest = save(dir, 30);
  const uint64_t newest_crc = recorded_crc32(newest);
  corrupt_first_weight(newest);

  trainctl::ResumePoint resume = trainctl::load_latest_valid(dir.str());
  REQUIRE(resume.checkpoint.has_value());
  CHECK(resume.path == middle);
  CHECK(resume.checkpoint->meta.step == 20);
  CHECK(resume.skipped == std::vector<std::string>{checksum_mismatch(newest, newest_crc)});

  const auto middle_bytes = fs::file_size(middle);
  fs::resize_file(middle, middle_bytes / 2);
  resume = trainctl::load_latest_valid(dir.str());
  REQUIRE(resume.checkpoint.has_value());
  CHECK(resume.checkpoint->meta.step == 10);
  CHECK(resume.skipped == std::vector<std::string>{checksum_mismatch(newest, newest_crc),
                                                   middle + ": the file has " + std::to_string(middle_bytes / 2) +
                                                       " bytes, its sidecar step-00000020.json records " +
                                                       std::to_string(middle_bytes)});
}

TEST_CASE("load_latest_valid falls back past a rewritten step, a flipped config byte, a broken superblock, a "
          "missing sidecar and a misnamed file") {
  TempDir dir;
  const std::string oldest = save(dir, 10);
  std::vector<std::string> expected_skipped;
  for (int64_t step = 60; step >= 20; step -= 10) {
    const std::string path = save(dir, step);
    const uint64_t recorded = recorded_crc32(path);
    if (step == 60) overwrite_step(path, 10);
    if (step == 50) flip_byte(path, offset_of(path, "steps = 600"));
    if (step == 40) flip_byte(path, 9);
    expected_skipped.push_back(step >= 40 ? checksum_mismatch(path, recorded) : "");
  }
  fs::remove(sidecar_of(dir.file("step-00000030.h5")));
  expected_skipped[3] = dir.file("step-00000030.h5") + ": not verified: its sidecar step-00000030.json is missing";
  // step 20's file replaced by step 10's, sidecar and all.
  fs::copy_file(oldest, dir.file("step-00000020.h5"), fs::copy_options::overwrite_existing);
  fs::copy_file(sidecar_of(oldest), dir.file("step-00000020.json"), fs::copy_options::overwrite_existing);
  expected_skipped[4] = dir.file("step-00000020.h5") + ": its name says step 20 but it stores step 10";

  const trainctl::ResumePoint resume = trainctl::load_latest_valid(dir.str());
  REQUIRE(resume.checkpoint.has_value());
  CHECK(resume.path == oldest);
  CHECK(resume.checkpoint->meta.step == 10);
  CHECK(resume.skipped == expected_skipped);
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

namespace {

// Runs `write` in a child process whose files may grow to `max_bytes` at most, as on a full disk
// (write fails with EFBIG, "File too large", where a full disk gives ENOSPC), and returns what it
// reported: the text of the exception it threw, "(no error)", or "(died)". The child ends with
// exit(), so HDF5's exit handlers run after the failure as they would in trainctl.
template <typename Write>
std::string failure_of_write_beyond(rlim_t max_bytes, Write write) {
  int report[2];
  REQUIRE(pipe(report) == 0);
  std::fflush(nullptr);  // nothing buffered is written twice
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(report[0]);
    std::signal(SIGXFSZ, SIG_IGN);  // fail the write with EFBIG instead of killing the process
    const rlimit limit{max_bytes, max_bytes};
    std::string text = "(no error)";
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) text = "(setrlimit failed)";
    else try {
        write();
      } catch (const std::exception& error) {
        text = error.what();
      }
    (void)!::write(report[1], text.data(), text.size());
    std::exit(0);
  }
  close(report[1]);
  std::string text;
  char buffer[4096];
  ssize_t count = 0;
  while ((count = read(report[0], buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<size_t>(count));
  close(report[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? text : "(died)";
}

}  // namespace

TEST_CASE("a checkpoint write that fails names the path and the OS's reason, leaves no temporary, and the "
          "earlier checkpoint still loads") {
  TempDir dir;
  const std::string earlier = save(dir, 200);
  const auto earlier_bytes = fs::file_size(earlier);
  // Room for some of the file but not all of it: the failure comes in HDF5's writes or its closing flush.
  for (const rlim_t max_bytes : {rlim_t{0}, rlim_t{2048}, static_cast<rlim_t>(earlier_bytes - 512)}) {
    CAPTURE(max_bytes);
    CHECK(failure_of_write_beyond(max_bytes, [&] { save(dir, 300); }) ==
          "cannot write checkpoint " + dir.file("step-00000300.h5") + ": File too large");
    CHECK(file_names(dir) == std::set<std::string>{"step-00000200.h5", "step-00000200.json"});
    const trainctl::ResumePoint resume = trainctl::load_latest_valid(dir.str());
    REQUIRE(resume.checkpoint.has_value());
    CHECK(resume.path == earlier);
    CHECK(resume.skipped.empty());
  }
}

TEST_CASE("write_file_atomically that fails names the path and the OS's reason and keeps the old file") {
  TempDir dir;
  const std::string path = dir.file("progress");
  trainctl::write_file_atomically(path, "12\n");
  CHECK(failure_of_write_beyond(4, [&] { trainctl::write_file_atomically(path, "123456789\n"); }) ==
        "cannot write " + path + ": File too large");
  CHECK(read_text(path) == "12\n");
  CHECK(file_names(dir) == std::set<std::string>{"progress"});
}
