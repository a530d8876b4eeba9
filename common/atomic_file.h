// Durable replacement of files: a reader sees the old file or the whole new one, never a part,
// even across a crash or power loss (write to a temporary, fsync it, rename, fsync the directory).
// Failures throw std::system_error (errno kept), what() "cannot write PATH: No space left on device".
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace trainctl {

// A temporary path next to `final_path`, which no reader of the directory mistakes for it.
std::string temporary_path_for(const std::string& final_path);

void fsync_path(const std::string& path);
// Renames `temporary` over `final_path` and fsyncs the directory, so the rename itself is durable.
void publish_file(const std::string& temporary, const std::string& final_path);

// Files are created with these permission bits, less the umask's.
inline constexpr mode_t kSharedFile = 0666;
// For a file that holds a secret (a config with a webhook's URL): its owner's alone from the start.
inline constexpr mode_t kOwnerOnlyFile = 0600;

// On failure the temporary is removed and the old file, if any, stays.
void write_file_atomically(const std::string& path, const std::string& text, mode_t permissions = kSharedFile);

// A file written in parts and published whole, for contents too large to hold in memory: the
// parts go to temporary_path_for(path), publish() renames it over `path`, and a writer destroyed
// unpublished (an exception on the way) removes the temporary and leaves the old file, if any.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::string path, mode_t permissions = kSharedFile);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void append(std::string_view bytes);
  // Overwrites bytes written before: a header whose fields are known only at the end.
  void write_at(int64_t offset, std::string_view bytes);
  void read_at(int64_t offset, std::span<char> bytes) const;
  // Drops everything from `size` on; appends continue from there.
  void truncate(int64_t size);
  void publish();
  const std::string& path() const { return path_; }

 private:
  std::string path_, temporary_;
  int fd_ = -1;
  int64_t size_ = 0;
};

// A directory written file by file and published whole, so that no reader takes a part of it for
// all of it: the files go into temporary() (a sibling of `path`, made empty), and publish() puts
// it in the place of `path` with one rename, or, where a directory is there already, with one
// exchange of the two (renameat2's RENAME_EXCHANGE; on a filesystem without it, the old one is
// first renamed aside, leaving a moment without either), and removes the old one. A writer
// destroyed unpublished removes its temporary and leaves the old directory, if any.
class AtomicDirectoryWriter {
 public:
  explicit AtomicDirectoryWriter(std::string path);
  ~AtomicDirectoryWriter();
  AtomicDirectoryWriter(const AtomicDirectoryWriter&) = delete;
  AtomicDirectoryWriter& operator=(const AtomicDirectoryWriter&) = delete;

  const std::string& temporary() const { return temporary_; }
  // Syncs what was written in temporary(), then publishes it.
  void publish();

 private:
  std::string path_, temporary_;
};

// Flushes everything written to the filesystem that holds `path` (syncfs): one call after
// writing many files, instead of an fsync each.
void sync_filesystem(const std::string& path);

}  // namespace trainctl
