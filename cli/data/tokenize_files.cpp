// Text files through a tokenizer into token files, streamed: see tokenize_files.h.
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
#include <functional>
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
  bool ends_file = false;
};

// A chunk's tokens, and where in them each document starts.
struct EncodedChunk {
  std::vector<uint32_t> tokens;
  std::vector<size_t> document_starts;
};

EncodedChunk encode_chunk(const Tokenizer& tokenizer, const Chunk& chunk, const TokenizeFilesOptions& options) {
  EncodedChunk encoded;
  std::vector<uint32_t>& tokens = encoded.tokens;
  const DocumentTokens none;
  const DocumentTokens& around = options.document_tokens ? tokenizer.document_tokens() : none;
  auto append = [&](std::string_view text, bool starts_document) {
    const std::vector<uint32_t> text_tokens = tokenizer.encode(text, {starts_document, options.match_added_tokens});
    tokens.insert(tokens.end(), text_tokens.begin(), text_tokens.end());
  };
  auto open_document = [&] {
    encoded.document_starts.push_back(tokens.size());
    tokens.insert(tokens.end(), around.before.begin(), around.before.end());
  };
  auto close_document = [&] { tokens.insert(tokens.end(), around.after.begin(), around.after.end()); };
  if (options.documents == DocumentUnit::kFile) {
    if (chunk.begins_file) open_document();
    append(chunk.text, chunk.begins_file);
    if (chunk.ends_file) close_document();
    return encoded;
  }
  // A chunk of lines holds whole lines: it is cut after a newline.
  std::string_view rest = chunk.text;
  while (!rest.empty()) {
    const size_t newline = rest.find('\n');
    std::string_view line = rest.substr(0, newline);
    rest.remove_prefix(newline == std::string_view::npos ? rest.size() : newline + 1);
    if (newline != std::string_view::npos && line.ends_with('\r')) line.remove_suffix(1);
    if (line.empty()) continue;
    open_document();
    append(line, true);
    close_document();
  }
  return encoded;
}

// Where a chunk may end in the text given: the position after it, or npos.
using CutFinder = std::function<size_t(std::string_view)>;

// One input file as chunks of at least `chunk_bytes` (the last excepted), each cut at the first
// place past that size that `find_cut` allows, checking as it reads that the text is UTF-8.
class ChunkReader {
 public:
  ChunkReader(const std::string& path, CutFinder find_cut, size_t chunk_bytes)
      : path_(path), cut_finder_(std::move(find_cut)), chunk_bytes_(chunk_bytes),
        read_bytes_(std::min(chunk_bytes, kReadBytes)), in_(open_input_file(path)) {}

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
    Chunk last = take(pending_.size());
    last.ends_file = true;
    return last;
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

  // The first cut at or past chunk_bytes_ in the text checked so far, or npos.
  size_t find_cut() {
    size_t start = std::max(chunk_bytes_, searched_);
    while (start < valid_ && continues_character(pending_[start])) ++start;
    if (start >= valid_) return std::string::npos;
    const size_t found = cut_finder_(std::string_view(pending_).substr(start, valid_ - start));
    if (found != std::string_view::npos) return start + found;
    // The last character may be the first of a cut's pair that the next read ends.
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
  const CutFinder cut_finder_;
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
  using Task = std::packaged_task<EncodedChunk()>;

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

  std::future<EncodedChunk> submit(Task task) {
    std::future<EncodedChunk> result = task.get_future();
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

// "tokenized 12.0 / 45.3 MB, 8.1 MB/s, 0:00:04 left" on stderr when it is a terminal, redrawn
// at most once a second from the first second on, and once more at the end: a batch job's log
// gets nothing.
class Progress {
 public:
  explicit Progress(int64_t total_bytes) : total_bytes_(total_bytes), shown_(isatty(STDERR_FILENO) == 1) {}

  void advance(int64_t bytes) {
    done_bytes_ += bytes;
    if (!shown_ || Clock::now() - last_drawn_ < std::chrono::seconds(1)) return;
    draw();
  }
  void finish() {
    if (!shown_) return;
    draw();
    fmt::print(stderr, "\n");
  }

 private:
  using Clock = std::chrono::steady_clock;

  void draw() {
    last_drawn_ = Clock::now();
    const double seconds = std::chrono::duration<double>(last_drawn_ - start_).count();
    const double rate = static_cast<double>(done_bytes_) / std::max(seconds, 1e-9);
    const auto left = static_cast<int64_t>(static_cast<double>(std::max<int64_t>(total_bytes_ - done_bytes_, 0)) / rate);
    fmt::print(stderr, "\rtokenized {:.1f} / {:.1f} MB, {:.1f} MB/s, {}:{:02}:{:02} left", static_cast<double>(done_bytes_) / 1e6,
               static_cast<double>(total_bytes_) / 1e6, rate / 1e6, left / 3600, left / 60 % 60, left % 60);
  }

  const int64_t total_bytes_;
  const bool shown_;
  int64_t done_bytes_ = 0;
  const Clock::time_point start_ = Clock::now();
  Clock::time_point last_drawn_ = start_;
};

// Where shard names are: a shard of `path` is its stem, "_", kShardDigits digits, its extension.
constexpr int kShardDigits = 6;

// A shard of `path` in `directory`'s listing, from any run.
bool is_shard_of(const std::filesystem::path& path, const std::filesystem::path& candidate) {
  const std::string stem = path.stem().string() + "_", extension = path.extension().string();
  const std::string name = candidate.filename().string();
  if (name.size() != stem.size() + kShardDigits + extension.size() || !name.starts_with(stem) || !name.ends_with(extension))
    return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(stem.size()),
                     name.begin() + static_cast<std::ptrdiff_t>(stem.size() + kShardDigits),
                     [](char c) { return c >= '0' && c <= '9'; });
}

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

std::string shard_path(const std::string& path, int64_t index) {
  const std::filesystem::path file(path);
  return (file.parent_path() / fmt::format("{}_{:0{}}{}", file.stem().string(), index, kShardDigits,
                                          file.extension().string()))
      .string();
}

TokenOutput::TokenOutput(std::string path, TokenFormat format, int64_t shard_tokens)
    : path_(std::move(path)), format_(format), shard_tokens_(shard_tokens) {
  if (shard_tokens_ > 0) {
    const std::filesystem::path file(path_);
    const std::filesystem::path directory = file.parent_path().empty() ? "." : file.parent_path();
    std::error_code unreadable;  // a folder that cannot be listed fails at the first shard's write
    std::vector<std::string> earlier;
    for (const auto& entry : std::filesystem::directory_iterator(directory, unreadable))
      if (is_shard_of(file, entry.path())) earlier.push_back(entry.path().string());
    if (!earlier.empty())
      throw UsageError(fmt::format("{} is there, a shard of an earlier run: remove the shards of {} first (a glob "
                                   "of the new ones would take it too)", *std::min_element(earlier.begin(), earlier.end()),
                                   path_));
  }
  files_.push_back(std::make_unique<TokenFileWriter>(shard_tokens_ > 0 ? shard_path(path_, 0) : path_, format_));
}

void TokenOutput::start_document() {
  if (shard_tokens_ > 0 && current().count() >= shard_tokens_)
    files_.push_back(std::make_unique<TokenFileWriter>(shard_path(path_, static_cast<int64_t>(files_.size())), format_));
}

void TokenOutput::append(std::span<const uint32_t> tokens) { current().append(tokens); }

void TokenOutput::finish() {
  for (const auto& file : files_) file->finish();
}

void tokenize_files(const Tokenizer& tokenizer, const std::vector<std::string>& inputs,
                    const TokenizeFilesOptions& options, TokenOutput& out) {
  // Every input is checked before the first is read, so that a typo does not cost a long run.
  int64_t total_bytes = 0;
  for (const std::string& path : inputs) {
    open_input_file(path);
    std::error_code unknown_size;  // a pipe's: the progress line's total leaves it out
    const uintmax_t size = std::filesystem::file_size(path, unknown_size);
    if (!unknown_size) total_bytes += static_cast<int64_t>(size);
  }
  // A document may be cut where its tokens do not change; a line after its newline.
  const CutFinder find_cut = options.documents == DocumentUnit::kFile
                                 ? CutFinder([&tokenizer, match = options.match_added_tokens](std::string_view text) {
                                     return tokenizer.first_split_point(text, match);
                                   })
                                 : CutFinder([](std::string_view text) {
                                     const size_t newline = text.find('\n');
                                     return newline == std::string_view::npos ? newline : newline + 1;
                                   });
  Progress progress(total_bytes);
  EncoderPool pool(options.threads);
  struct Pending {
    std::future<EncodedChunk> encoded;
    int64_t text_bytes;
  };
  // Twice as many chunks as threads: each thread has its next chunk queued while this one waits
  // for the oldest.
  std::deque<Pending> in_flight;
  auto write_oldest = [&] {
    const EncodedChunk encoded = in_flight.front().encoded.get();
    const std::span<const uint32_t> tokens(encoded.tokens);
    size_t written = 0;
    for (const size_t start : encoded.document_starts) {
      out.append(tokens.subspan(written, start - written));
      out.start_document();
      written = start;
    }
    out.append(tokens.subspan(written));
    progress.advance(in_flight.front().text_bytes);
    in_flight.pop_front();
  };
  for (const std::string& path : inputs) {
    ChunkReader reader(path, find_cut, options.chunk_bytes);
    while (std::optional<Chunk> chunk = reader.next()) {
      if (in_flight.size() >= 2 * static_cast<size_t>(options.threads)) write_oldest();
      const auto text_bytes = static_cast<int64_t>(chunk->text.size());
      in_flight.push_back({pool.submit(EncoderPool::Task([&tokenizer, &options, chunk = std::move(*chunk)] {
                             return encode_chunk(tokenizer, chunk, options);
                           })),
                           text_bytes});
    }
  }
  while (!in_flight.empty()) write_oldest();
  progress.finish();
}

}  // namespace trainctl
