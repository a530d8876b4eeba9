// What the plain CUDA test programs share (test_cuda_on_cpu, test_tensor_cores): check lines and
// their count, device arrays, launches through cudaLaunchKernelEx, a body run in a child process,
// and a main's loop over the program's groups, all of them or the one `--only GROUP` names. Plain
// programs, without a test framework: a program linked with cuda_on_cpu must have no thread-local
// storage besides the kernels' shared memory (cuda_on_cpu/kernel_api.h), which a framework's
// would break. It builds with nvcc as well as with the host compiler.
#pragma once

#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace cuda_tests {

inline int checks = 0, failures = 0;

inline void check(bool passed, const std::string& what) {
  ++checks;
  if (!passed) ++failures;
  std::printf("[%s] %s\n", passed ? " OK " : "FAIL", what.c_str());
}

// Device memory holding a copy of `host`, freed at scope exit.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) : size_(host.size()) {
    cudaMalloc(reinterpret_cast<void**>(&data_), bytes());
    cudaMemcpyAsync(data_, host.data(), bytes(), cudaMemcpyHostToDevice, nullptr);
  }
  explicit DeviceArray(size_t size) : DeviceArray(std::vector<T>(size)) {}
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return data_; }
  size_t bytes() const { return size_ * sizeof(T); }
  // A copy on the legacy default stream, into pageable memory: done when it returns.
  std::vector<T> read() const {
    std::vector<T> host(size_);
    cudaMemcpyAsync(host.data(), data_, bytes(), cudaMemcpyDeviceToHost, nullptr);
    return host;
  }

 private:
  size_t size_;
  T* data_ = nullptr;
};

template <typename... Params, typename... Args>
cudaError_t launch_with_shared_memory(dim3 grid, dim3 block, size_t dynamic_shared_bytes, cudaStream_t stream,
                                      void (*kernel)(Params...), Args... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = dynamic_shared_bytes;
  config.stream = stream;
  return cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
}

template <typename... Params, typename... Args>
cudaError_t launch(dim3 grid, dim3 block, cudaStream_t stream, void (*kernel)(Params...), Args... args) {
  return launch_with_shared_memory(grid, block, 0, stream, kernel, args...);
}

// How a child process ended, and what it wrote to stderr.
struct ChildEnd {
  int signal = 0;  // 0 when it exited
  int exit_code = 0;
  std::string error_output;
};

// Runs `body` in a child process, for what ends a process (deadlocks) or poisons its CUDA
// context for good (sticky errors).
inline ChildEnd in_child(const std::function<void()>& body) {
  std::fflush(stdout);
  int pipe_ends[2];
  if (pipe(pipe_ends) != 0) std::abort();
  const pid_t child = fork();
  if (child == 0) {
    dup2(pipe_ends[1], STDERR_FILENO);
    close(pipe_ends[0]);
    body();
    _exit(0);
  }
  close(pipe_ends[1]);
  ChildEnd end;
  char buffer[4096];
  for (ssize_t got; (got = read(pipe_ends[0], buffer, sizeof(buffer))) > 0;)
    end.error_output.append(buffer, static_cast<size_t>(got));
  close(pipe_ends[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (WIFSIGNALED(status)) end.signal = WTERMSIG(status);
  if (WIFEXITED(status)) end.exit_code = WEXITSTATUS(status);
  return end;
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A program's groups of checks, each runnable alone (--only NAME).
struct Group {
  const char* name;
  void (*run)();
};

// The main of a program of `groups`: runs them all, or the one `--only GROUP` names. Returns 0
// when every check passed (and there was one), 1 otherwise, 2 for bad arguments.
inline int run_groups(int argc, char** argv, std::span<const Group> groups) {
  const std::string only = argc == 3 && std::string(argv[1]) == "--only" ? argv[2] : "";
  if (argc != 1 && only.empty()) {
    std::fprintf(stderr, "usage: %s [--only GROUP]\n", argv[0]);
    return 2;
  }
  bool found = only.empty();
  for (const Group& group : groups) {
    if (!only.empty() && only != group.name) continue;
    found = true;
    group.run();
  }
  if (!found) check(false, "--only " + only + ": no such group");
  std::printf("%d checks, %d failed\n", checks, failures);
  return failures == 0 && checks > 0 ? 0 : 1;
}

}  // namespace cuda_tests
