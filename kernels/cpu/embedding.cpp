// The CPU's embedding family: GPT-2's token plus position embedding, or a Llama's token embedding
// alone, forward and backward. The backward visits (batch, position) in order, so repeated tokens
// accumulate deterministically.
#include "cpu_ops.h"

namespace trainctl::cpu {

namespace {

void add_rows(float* __restrict out, const float* __restrict a, const float* __restrict b, int64_t channels) {
  for (int64_t c = 0; c < channels; ++c) out[c] = a[c] + b[c];
}

void accumulate_row(float* __restrict into, const float* __restrict row, int64_t channels) {
  for (int64_t c = 0; c < channels; ++c) into[c] += row[c];
}

}  // namespace

void embedding_forward(Stream, float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t batch,
                       int64_t seq, int64_t channels) {
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t) {
      const int64_t position = b * seq + t;
      const float* token_row = wte + tokens[position] * channels;
      if (wpe != nullptr)
        add_rows(out + position * channels, token_row, wpe + t * channels, channels);
      else
        std::copy_n(token_row, channels, out + position * channels);
    }
}

void embedding_backward(Stream, float* grad_wte, float* grad_wpe, const float* grad_out, const int32_t* tokens,
                        int64_t batch, int64_t seq, int64_t channels) {
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t) {
      const int64_t position = b * seq + t;
      const float* grad_row = grad_out + position * channels;
      accumulate_row(grad_wte + tokens[position] * channels, grad_row, channels);
      if (grad_wpe != nullptr) accumulate_row(grad_wpe + t * channels, grad_row, channels);
    }
}

}  // namespace trainctl::cpu
