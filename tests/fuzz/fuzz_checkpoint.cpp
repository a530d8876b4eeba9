// libFuzzer target for the checkpoint reader: each input is a checkpoint's sidecar and .h5 file
// (the format is checkpoint_input.h), written to a private directory as step-00000010.json and
// step-00000010.h5 and read with load_checkpoint, the path that resume and `trainctl ckpt
// verify` take. A CheckpointError is the expected answer to a corrupt checkpoint; any other
// exception, a crash or a sanitizer report is a finding. A mutated file reaches HDF5 only with
// a sidecar that records its exact size and CRC-32, so this mainly proves that gate.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "checkpoint_directory.h"
#include "checkpoint_input.h"

namespace {

namespace fs = std::filesystem;

// A directory of this process's own, removed at exit.
class PrivateDirectory {
 public:
  PrivateDirectory() {
    std::string pattern = (fs::temp_directory_path() / "trainctl-fuzz-checkpoint-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) fail("mkdtemp", pattern);
    path_ = pattern;
  }
  ~PrivateDirectory() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  PrivateDirectory(const PrivateDirectory&) = delete;
  PrivateDirectory& operator=(const PrivateDirectory&) = delete;

  std::string write(const std::string& name, std::string_view bytes) const {
    const std::string path = (path_ / name).string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) fail("write", path);
    return path;
  }

 private:
  [[noreturn]] static void fail(const char* what, const std::string& path) {
    std::perror((std::string(what) + " " + path).c_str());
    std::abort();
  }
  fs::path path_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const PrivateDirectory directory;
  const trainctl::fuzz::CheckpointFiles files = trainctl::fuzz::split_checkpoint_input(data, size);
  directory.write("step-00000010.json", files.sidecar);
  const std::string path = directory.write("step-00000010.h5", files.hdf5);
  try {
    trainctl::load_checkpoint(path);
  } catch (const trainctl::CheckpointError&) {
    // The reader's answer to a corrupt checkpoint.
  } catch (const std::exception& error) {
    std::fprintf(stderr, "fuzz_checkpoint: escaped the checkpoint reader: %s\n", error.what());
    std::abort();
  }
  return 0;
}
