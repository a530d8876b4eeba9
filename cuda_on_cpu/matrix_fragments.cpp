// The warp-level matrix instructions: see matrix_fragments.h. Every index below is the PTX ISA's
// formula, with groupID = lane >> 2 and threadID_in_group = lane % 4.
#include "matrix_fragments.h"

#include <bit>
#include <cstring>

namespace cuda_on_cpu {

namespace {

constexpr int kM = 16, kN = 8, kK = 16;

// Element `half` (0: the low 16 bits) of a pair of bf16, as the float it stands for exactly.
float bf16_of_pair(uint32_t pair, int half) { return std::bit_cast<float>(pair >> (16 * half) << 16); }

uint16_t element_at(const unsigned char* row, int column) {
  uint16_t element;
  std::memcpy(&element, row + 2 * column, sizeof(element));
  return element;
}

}  // namespace

void multiply_accumulate_m16n8k16(const MmaFragments* const (&lanes)[kWarpLanes], float* const (&d)[kWarpLanes]) {
  float a[kM][kK], b[kK][kN], c[kM][kN];
  for (int lane = 0; lane < kWarpLanes; ++lane) {
    const int group = lane >> 2, in_group = lane % 4;
    const MmaFragments& fragments = *lanes[lane];
    // a_i (register i / 2): row groupID for 0 <= i < 2 || 4 <= i < 6, groupID + 8 otherwise;
    // column threadID_in_group * 2 + (i & 1), + 8 for i >= 4.
    for (int i = 0; i < 8; ++i)
      a[group + 8 * (i / 2 % 2)][in_group * 2 + (i & 1) + 8 * (i / 4)] = bf16_of_pair(fragments.a[i / 2], i & 1);
    // b_i (register i / 2): row threadID_in_group * 2 + (i & 1), + 8 for i >= 2; column groupID.
    for (int i = 0; i < 4; ++i)
      b[in_group * 2 + (i & 1) + 8 * (i / 2)][group] = bf16_of_pair(fragments.b[i / 2], i & 1);
    // c_i: row groupID for i < 2, groupID + 8 otherwise; column threadID_in_group * 2 + (i & 1).
    for (int i = 0; i < 4; ++i) c[group + 8 * (i / 2)][in_group * 2 + (i & 1)] = fragments.c[i];
  }
  float product[kM][kN];
  for (int m = 0; m < kM; ++m)
    for (int n = 0; n < kN; ++n) {
      float sum = c[m][n];
      for (int k = 0; k < kK; ++k) sum += a[m][k] * b[k][n];
      product[m][n] = sum;
    }
  // D's fragments as C's.
  for (int lane = 0; lane < kWarpLanes; ++lane)
    for (int i = 0; i < 4; ++i) d[lane][i] = product[(lane >> 2) + 8 * (i / 2)][lane % 4 * 2 + (i & 1)];
}

uint32_t matrix_fragment(const unsigned char* const (&rows)[8], int lane, bool transposed) {
  const int first = 2 * (lane % 4);
  const uint16_t low = transposed ? element_at(rows[first], lane / 4) : element_at(rows[lane / 4], first);
  const uint16_t high = transposed ? element_at(rows[first + 1], lane / 4) : element_at(rows[lane / 4], first + 1);
  return uint32_t{low} | uint32_t{high} << 16;
}

}  // namespace cuda_on_cpu
