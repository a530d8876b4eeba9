// The attention micro-benchmark (scripts/gpu_check.sh attention, beside PyTorch's
// scaled_dot_product_attention in scripts/bench_attention_torch.py): causal attention forward and
// backward through the device seam on the CUDA backend (TRAINCTL_CUDA_BACKEND), in bf16, at each
// shape given as B,T,H,D (multi-head) or B,T,H,KV,D (H query heads sharing KV key/value heads);
// default GPT-2 124M's 8,1024,12,64, 4,2048,16,128, and Llama 3.2 1B's 4,2048,32,8,64. For each:
// the median wall time of a forward and of a backward over REPS runs after warm-up, each run
// waited for, and TFLOP/s counting the causal FLOPs (forward 4 B H T^2 D / 2: two products over
// half the T x T scores; backward 2.5 times that: five products; the same for grouped-query
// attention, whose query heads each do their own products); and whether a second run gives
// bitwise the same out, lse and grad_qkv. One line of JSON per shape on stdout. Exit 77 without a
// usable GPU (the backend says why), 1 if a rerun differs, 2 for a bad argument.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "device.h"

namespace {

using trainctl::AttentionShape;
using trainctl::Bf16;
using trainctl::Device;
using trainctl::Stream;

// Device memory of `count` values of T, freed at scope exit.
template <typename T>
class Buffer {
 public:
  Buffer(const Device& device, int64_t count)
      : device_(device), count_(count), data_(static_cast<T*>(device.memory.alloc(bytes()))) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { device_.memory.release(data_); }
  T* get() const { return data_; }
  size_t bytes() const { return static_cast<size_t>(count_) * sizeof(T); }
  std::vector<T> read() const {
    std::vector<T> host(static_cast<size_t>(count_));
    device_.memory.download(Stream{}, host.data(), data_, bytes());
    return host;
  }
  void write(const std::vector<T>& host) { device_.memory.upload(Stream{}, data_, host.data(), bytes()); }

 private:
  const Device& device_;
  int64_t count_;
  T* data_;
};

std::vector<Bf16> random_bf16(size_t count, uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<Bf16> values(count);
  for (Bf16& value : values) value = trainctl::to_bf16(uniform(engine));
  return values;
}

// The median seconds of `reps` runs of `run`, each waited for by a one-element download of
// `waited` (the op's last output).
template <typename Run, typename T>
double median_seconds(int reps, const Run& run, const Buffer<T>& waited, const Device& device) {
  std::vector<double> seconds;
  T last{};
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    device.memory.download(Stream{}, &last, waited.get(), sizeof(T));
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

bool bench(const Device& device, const AttentionShape& shape, int reps) {
  const int64_t rows = shape.batch * shape.seq;
  const int64_t qkv_size = rows * shape.qkv_width(), out_size = rows * shape.out_width();
  Buffer<Bf16> qkv(device, qkv_size), out(device, out_size), grad_out(device, out_size), grad_qkv(device, qkv_size);
  Buffer<float> lse(device, shape.batch * shape.heads * shape.seq);
  qkv.write(random_bf16(static_cast<size_t>(qkv_size), 1));
  grad_out.write(random_bf16(static_cast<size_t>(out_size), 2));
  const trainctl::AttentionOps& attention = *device.attention;
  const auto forward = [&] { attention.attention_forward(Stream{}, out.get(), lse.get(), qkv.get(), shape); };
  const auto backward = [&] {
    attention.attention_backward(Stream{}, grad_qkv.get(), grad_out.get(), qkv.get(), out.get(), lse.get(), shape);
  };
  forward();
  backward();
  const std::vector<Bf16> first_out = out.read(), first_grad = grad_qkv.read();
  const std::vector<float> first_lse = lse.read();
  const double forward_seconds = median_seconds(reps, forward, out, device);
  const double backward_seconds = median_seconds(reps, backward, grad_qkv, device);
  const bool deterministic =
      same_bits(first_out, out.read()) && same_bits(first_lse, lse.read()) && same_bits(first_grad, grad_qkv.read());
  const double forward_flops = 4.0 * static_cast<double>(shape.batch * shape.heads) *
                               static_cast<double>(shape.seq) * static_cast<double>(shape.seq) *
                               static_cast<double>(shape.head_size) / 2.0;
  const double backward_flops = 2.5 * forward_flops;
  fmt::print("{{\"implementation\":\"trainctl\",\"batch\":{},\"seq\":{},\"heads\":{},\"kv_heads\":{},"
             "\"head_size\":{},\"forward_ms\":{:.4f},\"backward_ms\":{:.4f},\"forward_tflops\":{:.2f},\"backward_tflops\":{:.2f},"
             "\"total_tflops\":{:.2f},\"bitwise_rerun\":{}}}\n",
             shape.batch, shape.seq, shape.heads, shape.kv_heads, shape.head_size, forward_seconds * 1e3, backward_seconds * 1e3,
             forward_flops / forward_seconds / 1e12, backward_flops / backward_seconds / 1e12,
             (forward_flops + backward_flops) / (forward_seconds + backward_seconds) / 1e12,
             deterministic ? "true" : "false");
  std::fflush(stdout);
  return deterministic;
}

// B,T,H,D (kv_heads = heads) or B,T,H,KV,D.
AttentionShape parse_shape(const std::string& text) {
  std::vector<int64_t> sizes;
  std::istringstream fields(text);
  for (std::string field; std::getline(fields, field, ',');) sizes.push_back(std::stoll(field));
  if (sizes.size() != 4 && sizes.size() != 5) throw std::invalid_argument("a shape is B,T,H,D or B,T,H,KV,D: " + text);
  const AttentionShape shape{sizes[0], sizes[1], sizes[2], sizes.size() == 5 ? sizes[3] : sizes[2], sizes.back()};
  trainctl::require_valid_attention(shape);
  return shape;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 20;
  std::vector<AttentionShape> shapes;
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    try {
      if (argument == "--reps" && i + 1 < argc)
        reps = std::stoi(argv[++i]);
      else
        shapes.push_back(parse_shape(argument));
    } catch (const std::logic_error& error) {  // std::stoll's and parse_shape's
      std::fprintf(stderr, "usage: %s [--reps N] [B,T,H,D | B,T,H,KV,D]...: %s\n", argv[0], error.what());
      return 2;
    }
  }
  if (shapes.empty()) shapes = {{8, 1024, 12, 12, 64}, {4, 2048, 16, 16, 128}, {4, 2048, 32, 8, 64}};
  const Device* device = nullptr;
  try {
    device = trainctl::find_device("cuda");
    std::fprintf(stderr, "bench_attention: %s\n", device->info.bind_local(0, 1).c_str());
  } catch (const trainctl::DeviceUnavailable& error) {
    std::fprintf(stderr, "SKIP: %s\n", error.what());
    return 77;
  }
  bool deterministic = true;
  for (const AttentionShape& shape : shapes) deterministic = bench(*device, shape, reps) && deterministic;
  device->info.unbind();
  return deterministic ? 0 : 1;
}
