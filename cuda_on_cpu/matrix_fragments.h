// The warp-level matrix instructions' fragment layouts and arithmetic, as the PTX ISA defines them
// (section 9.7.14.5.8, "Matrix Fragments for mma.m16n8k16 with floating point type", and
// 9.7.14.5.15, "Warp-level matrix load instruction: ldmatrix"): which elements of which matrix
// each lane holds, and what the instruction makes of the whole warp's. execution.cpp gathers the
// lanes' operands once all 32 have arrived and hands each lane its results.
#pragma once

#include <cstdint>

namespace cuda_on_cpu {

constexpr int kWarpLanes = 32;

// One lane's operands of mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: A (16 x 16) and
// B (16 x 8) as bf16 pairs, the lower-indexed element in the low half of each b32, and C (16 x 8)
// as floats.
struct MmaFragments {
  uint32_t a[4];
  uint32_t b[2];
  float c[4];
};

// D = A B + C from the warp's fragments (lanes[l]: lane l's); d[l] receives lane l's four floats.
// Each element of D is C's, then the 16 products of its row of A and column of B added in order
// of k, from 0 up, each sum rounded to nearest even in fp32. The products of two bf16 are exact
// in fp32 (16 significant bits), barring an overflow or underflow of its range, so a fused
// multiply-add gives the same bits; a GPU's tensor cores add in an order of their own.
void multiply_accumulate_m16n8k16(const MmaFragments* const (&lanes)[kWarpLanes], float* const (&d)[kWarpLanes]);

// ldmatrix.sync.aligned.m8n8{.trans}.shared.b16 of one 8 x 8 matrix of 16-bit elements whose row r
// is the 16 bytes at rows[r]: the b32 that `lane` receives, two elements, the lower-indexed in the
// low half. Plain: row lane / 4, elements 2 (lane % 4) and 2 (lane % 4) + 1. Transposed (.trans):
// column lane / 4, the elements of rows 2 (lane % 4) and 2 (lane % 4) + 1.
uint32_t matrix_fragment(const unsigned char* const (&rows)[8], int lane, bool transposed);

}  // namespace cuda_on_cpu
