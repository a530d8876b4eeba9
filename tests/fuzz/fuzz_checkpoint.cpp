// libFuzzer target for the checkpoint reader: each input is a checkpoint's sidecar and .h5 file
// (the format is checkpoint_input.h), written to a private directory as step-00000010.json and
// step-00000010.h5 and read with load_checkpoint, the path that resume and `trainctl ckpt
// verify` take. A CheckpointError is the expected answer to a corrupt checkpoint; any other
// exception, a crash or a sanitizer report is a finding. A mutated file reaches HDF5 only with
// a sidecar that records its exact size and CRC-32, so this mainly proves that gate.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "checkpoint_directory.h"
#include "checkpoint_input.h"
#include "private_directory.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const trainctl::fuzz::PrivateDirectory directory("trainctl-fuzz-checkpoint");
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
