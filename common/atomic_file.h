// Durable replacement of files: a reader sees the old file or the whole new one, never a part,
// even across a crash or power loss (write to a temporary, fsync it, rename, fsync the directory).
// Failures throw std::system_error (errno kept), what() "cannot write PATH: No space left on device".
#pragma once

#include <string>

namespace trainctl {

// A temporary path next to `final_path`, which no reader of the directory mistakes for it.
std::string temporary_path_for(const std::string& final_path);

void fsync_path(const std::string& path);
// Renames `temporary` over `final_path` and fsyncs the directory, so the rename itself is durable.
void publish_file(const std::string& temporary, const std::string& final_path);

// On failure the temporary is removed and the old file, if any, stays.
void write_file_atomically(const std::string& path, const std::string& text);

// Flushes everything written to the filesystem that holds `path` (syncfs): one call after
// writing many files, instead of an fsync each.
void sync_filesystem(const std::string& path);

}  // namespace trainctl
