// A directory of the fuzz target's own under the system temp dir, removed at exit, where each
// input is written as the file its reader reads.
#pragma once

#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace trainctl::fuzz {

class PrivateDirectory {
 public:
  explicit PrivateDirectory(const std::string& prefix) {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (mkdtemp(pattern.data()) == nullptr) fail("mkdtemp", pattern);
    path_ = pattern;
  }
  ~PrivateDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  PrivateDirectory(const PrivateDirectory&) = delete;
  PrivateDirectory& operator=(const PrivateDirectory&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Writes `bytes` as the file `name`; returns its path.
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
  std::filesystem::path path_;
};

}  // namespace trainctl::fuzz
