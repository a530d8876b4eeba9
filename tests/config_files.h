// Test support for config tests: configs written to files in a temp directory and read back
// through load_config, errors compared as text with the file's path replaced by FILE.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "config_file.h"
#include "config_reader.h"

namespace config_files {

// The smallest config that validates. Line numbers matter: the tests derive expected error
// positions from this layout; [train] comes last so that tests can append keys to it.
//   1 [job]    4 [model]    8 [data]    11 [train]    12 steps    13 micro_batch
constexpr std::string_view kMinimalConfig = R"([job]
name = "unit-test"

[model]
inputs = 4
classes = 3

[data]
train = "train.h5"

[train]
steps = 100
micro_batch = 8
)";

// A directory under the system temp dir, unique to this process and instance, removed at exit.
class TempDir {
 public:
  TempDir() {
    static int instances = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("trainctl-test-" + std::to_string(getpid()) + "-" + std::to_string(++instances));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Writes `text` to a new file with a unique name in the temp dir and returns its path.
inline std::string write_temp_config(std::string_view text) {
  static TempDir dir;
  static int counter = 0;
  const std::filesystem::path path = dir.path() / ("config-" + std::to_string(++counter) + ".toml");
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

inline trainctl::Config load_text(std::string_view text) { return trainctl::load_config(write_temp_config(text)); }

// `error`'s text with the config file's path replaced by FILE.
inline std::string located(const trainctl::ConfigError& error, const std::string& path) {
  std::string what = error.what();
  if (what.starts_with(path)) what.replace(0, path.size(), "FILE");
  return what;
}

// The ConfigError text load_config gives for `text`, with the file's path replaced by FILE.
inline std::string load_error(std::string_view text) {
  const std::string path = write_temp_config(text);
  try {
    trainctl::load_config(path);
  } catch (const trainctl::ConfigError& error) {
    return located(error, path);
  }
  return "(no error)";
}

}  // namespace config_files
