// Text files through GPT-2's tokenizer into a token file, streamed: see tokenize_files.h.
#include "data/tokenize_files.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <future>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "bad_input.h"
#include "errors.h"

namespace trainctl {

namespace {

// The most a read adds to a chunk being cut.
constexpr size_t kReadBytes = size_t{1} << 20;

bool continues_character(char byte) { return (static_cast<unsigned char>(byte) & 0xc0) == 0x80; }

struct Chunk {
  std::string text;
  bool begins_file = false;  // and so a document; a later chunk continues its file's last document
};

std::vector<uint16_t> encode_chunk(const Gpt2Tokenizer& tokenizer, const Chunk& chunk, DocumentUnit documents) {
  std::vector<uint16_t> tokens;
  auto append = [&](std::string_view text) {
    const std::vector<uint16_t> encoded = tokenizer.encode(text);
    tokens.insert(tokens.end(), encoded.begin(), encoded.end());
  };
  if (documents == DocumentUnit::kFile) {
    if (chunk.begins_file) tokens.push_back(tokenizer.end_of_text());
    append(chunk.text);
    return tokens;
  }
  // Chunks are cut before a whitespace character, so a chunk's first line continues the line
  // the chunk before ended in (the newline that ends it, at least), except at the file's start.
  std::string_view rest = chunk.text;
  bool line_begins_document = chunk.begins_file;
  while (!rest.empty()) {
    const size_t newline = rest.find('\n');
    std::string_view line = rest.substr(0, newline);
    rest.remove_prefix(newline == std::string_view::npos ? rest.size() : newline + 1);
    if (newline != std::string_view::npos && line.ends_with('\r')) line.remove_suffix(1);
    if (line_begins_document && !line.empty()) tokens.push_back(tokenizer.end_of_text());
    append(line);
    line_begins_document = true;
  }
  return tokens;
}

// One input file as chunks of at least `chunk_bytes` (the last excepted), each cut at the first
// split point past that size, checking as it reads that the text is UTF-8.
class ChunkReader {
 public:
  ChunkReader(const std::string& path, const Gpt2Tokenizer& tokenizer, size_t chunk_bytes)
      : path_(path), tokenizer_(tokenizer), chunk_bytes_(chunk_bytes), read_bytes_(std::min(chunk_bytes, kReadBytes)),
        in_(open_input_file(path)) {}

  // The next chunk; none after the last. An empty file is one empty chunk (an empty document).
  std::optional<Chunk> next() {
    if (done_) return std::nullopt;
    while (!end_of_file_ && pending_.size() <= chunk_bytes_) read_block();
    for (;;) {
      if (const size_t cut = find_cut(); cut != std::string::npos) return take(cut);
      if (end_of_file_) break;
      read_block();
    }
    done_ = true;
    return take(pending_.size());
  }

 private:
  void read_block() {
    const size_t old_size = pending_.size();
    pending_.resize(old_size + read_bytes_);
    in_.read(pending_.data() + old_size, static_cast<std::streamsize>(read_bytes_));
    if (in_.bad()) throw Failure(fmt::format("cannot read {}: {}", path_, std::strerror(errno)));
    pending_.resize(old_size + static_cast<size_t>(in_.gcount()));
    end_of_file_ = in_.eof();
    const size_t bad = first_invalid_utf8(std::string_view(pending_).substr(valid_));
    if (bad == std::string_view::npos) {
      valid_ = pending_.size();
      return;
    }
    const size_t at = valid_ + bad;
    // A character cut by the end of the read: the next read completes it, or proves it bad.
    if (!end_of_file_ && pending_.size() - at < 4) {
      valid_ = at;
      return;
    }
    throw BadInput(fmt::format("{}: not UTF-8 at byte offset {} (byte 0x{:02x})", path_, offset_ + static_cast<int64_t>(at),
                               static_cast<unsigned char>(pending_[at])));
  }

  // The first split point at or past chunk_bytes_ in the text checked so far, or npos.
  size_t find_cut() {
    size_t start = std::max(chunk_bytes_, searched_);
    while (start < valid_ && continues_character(pending_[start])) ++start;
    if (start >= valid_) return std::string::npos;
    const size_t found = tokenizer_.first_split_point(std::string_view(pending_).substr(start, valid_ - start));
    if (found != std::string_view::npos) return start + found;
    // The last character may be the non-whitespace one of a split point that the next read ends.
    size_t last = valid_ - 1;
    while (last > start && continues_character(pending_[last])) --last;
    searched_ = last;
    return std::string::npos;
  }

  Chunk take(size_t cut) {
    Chunk chunk{pending_.substr(0, cut), offset_ == 0};
    pending_.erase(0, cut);
    valid_ -= cut;
    offset_ += static_cast<int64_t>(cut);
    searched_ = 0;
    return chunk;
  }

  const std::string& path_;
  const Gpt2Tokenizer& tokenizer_;
  const size_t chunk_bytes_, read_bytes_;
  std::ifstream in_;
  std::string pending_;  // read, not yet taken
  size_t valid_ = 0;     // pending_[0, valid_) is UTF-8, whole characters
  size_t searched_ = 0;  // find_cut found no split point before this
  int64_t offset_ = 0;   // of pending_[0] in the file
  bool end_of_file_ = false, done_ = false;
};

// Runs tasks on a fixed set of threads; each task's result comes back through its future.
class EncoderPool {
 public:
  using Task = std::packaged_task<std::vector<uint16_t>()>;

  explicit EncoderPool(int threads) {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  // Tasks not started are dropped (their futures are left broken): only an exception on the
  // way out leaves any, and nobody waits for them then.
  ~EncoderPool() {
    {
      const std::lock_guard lock(mutex_);
      stopping_ = true;
      queue_.clear();
    }
    wake_.notify_all();
    for (std::thread& worker : workers_) worker.join();
  }
  EncoderPool(const EncoderPool&) = delete;
  EncoderPool& operator=(const EncoderPool&) = delete;

  std::future<std::vector<uint16_t>> submit(Task task) {
    std::future<std::vector<uint16_t>> result = task.get_future();
    {
      const std::lock_guard lock(mutex_);
      queue_.push_back(std::move(task));
    }
    wake_.notify_one();
    return result;
  }

 private:
  void work() {
    for (;;) {
      Task task;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Task> queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

// "tokenized 12.0 / 45.3 MB, 8.1 MB/s" on stderr, redrawn at most once a second from the first
// second on, when stderr is a terminal: a batch job's log gets nothing.
class Progress {
 public:
  explicit Progress(int64_t total_bytes) : total_bytes_(total_bytes), shown_(isatty(STDERR_FILENO) == 1) {}

  void advance(int64_t bytes) {
    done_bytes_ += bytes;
    if (!shown_ || Clock::now() - last_drawn_ < std::chrono::seconds(1)) return;
    draw();
  }
  void finish() {
    if (!drawn_) return;
    draw();
    fmt::print(stderr, "\n");
  }

 private:
  using Clock = std::chrono::steady_clock;

  void draw() {
    last_drawn_ = Clock::now();
    const double seconds = std::chrono::duration<double>(last_drawn_ - start_).count();
    fmt::print(stderr, "\rtokenized {:.1f} / {:.1f} MB, {:.1f} MB/s", static_cast<double>(done_bytes_) / 1e6,
               static_cast<double>(total_bytes_) / 1e6, static_cast<double>(done_bytes_) / 1e6 / seconds);
    drawn_ = true;
  }

  const int64_t total_bytes_;
  const bool shown_;
  int64_t done_bytes_ = 0;
  const Clock::time_point start_ = Clock::now();
  Clock::time_point last_drawn_ = start_;
  bool drawn_ = false;
};

}  // namespace

std::ifstream open_input_file(const std::string& path) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) throw UsageError(fmt::format("cannot read {}: it is a directory", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  return in;
}

int usable_cores() {
  cpu_set_t cores;
  if (sched_getaffinity(0, sizeof(cores), &cores) == 0) return CPU_COUNT(&cores);
  return static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
}

void tokenize_files(const Gpt2Tokenizer& tokenizer, const std::vector<std::string>& inputs,
                    const TokenizeFilesOptions& options, TokenFileWriter& out) {
  // Every input is checked before the first is read, so that a typo does not cost a long run.
  int64_t total_bytes = 0;
  for (const std::string& path : inputs) {
    open_input_file(path);
    std::error_code unknown_size;  // a pipe's: the progress line's total leaves it out
    const uintmax_t size = std::filesystem::file_size(path, unknown_size);
    if (!unknown_size) total_bytes += static_cast<int64_t>(size);
  }
  Progress progress(total_bytes);
  EncoderPool pool(options.threads);
  struct Pending {
    std::future<std::vector<uint16_t>> tokens;
    int64_t text_bytes;
  };
  // Twice as many chunks as threads: each thread has its next chunk queued while this one waits
  // for the oldest.
  std::deque<Pending> in_flight;
  auto write_oldest = [&] {
    out.append(in_flight.front().tokens.get());
    progress.advance(in_flight.front().text_bytes);
    in_flight.pop_front();
  };
  for (const std::string& path : inputs) {
    ChunkReader reader(path, tokenizer, options.chunk_bytes);
    while (std::optional<Chunk> chunk = reader.next()) {
      if (in_flight.size() >= 2 * static_cast<size_t>(options.threads)) write_oldest();
      const auto text_bytes = static_cast<int64_t>(chunk->text.size());
      in_flight.push_back({pool.submit(EncoderPool::Task([&tokenizer, documents = options.documents,
                                                          chunk = std::move(*chunk)] {
                             return encode_chunk(tokenizer, chunk, documents);
                           })),
                           text_bytes});
    }
  }
  while (!in_flight.empty()) write_oldest();
  progress.finish();
}

}  // namespace trainctl
