// Just enough of CUDA to run the kernels of kernels/cuda on the CPU, unchanged, for a machine without
// a GPU: one std::thread per CUDA thread, real barriers for __syncthreads / __syncwarp / shuffles,
// and wmma fragments in which every lane holds the whole 16x16 tile (each store writes only the
// lane's share, so a missing __syncwarp shows up under ThreadSanitizer as it would on a GPU).
// Include this before any kernel header; compile with -DATTNLAB_CUDA_HOST_EMULATION.
#pragma once

#include <cuda_bf16.h>  // host versions of the 16-bit types and their conversions
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

#define __launch_bounds__(...)

using std::max;
using std::min;

inline thread_local uint3 threadIdx;
inline uint3 blockIdx;
inline dim3 gridDim;

namespace emu {

/// Barriers and shuffle buffers of the block being run.
struct Block {
  explicit Block(int threads) : block(threads) {
    for (int w = 0; w < threads / 32; ++w) warps.push_back(std::make_unique<Warp>());
  }
  struct Warp {
    std::barrier<> bar{32};
    float shfl[32] = {};
  };
  std::barrier<> block;
  std::vector<std::unique_ptr<Warp>> warps;
  struct Free {
    void operator()(unsigned char* p) const { ::operator delete[](p, std::align_val_t(128)); }
  };
  std::unique_ptr<unsigned char[], Free> smem;  // 128-byte aligned, like the GPU's
};

inline Block* g_block = nullptr;

inline Block::Warp& warp() { return *g_block->warps[threadIdx.x / 32]; }

/// Runs kernel() as a grid of `grid` blocks of `threads` threads with `smem_bytes` of dynamic shared
/// memory, filled with 0xff (NaN for every float type) so that reads of unwritten smem poison results.
inline void launch(dim3 grid, int threads, std::size_t smem_bytes, const std::function<void()>& kernel) {
  assert(threads % 32 == 0);
  gridDim = grid;
  for (unsigned by = 0; by < grid.y; ++by) {
    for (unsigned bx = 0; bx < grid.x; ++bx) {
      blockIdx = make_uint3(bx, by, 0);
      Block block(threads);
      block.smem.reset(static_cast<unsigned char*>(::operator new[](smem_bytes + 1, std::align_val_t(128))));
      std::memset(block.smem.get(), 0xff, smem_bytes);
      g_block = &block;
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
          threadIdx = make_uint3(static_cast<unsigned>(t), 0, 0);
          kernel();
          warp().bar.arrive_and_drop();  // an exited thread no longer takes part in barriers
          block.block.arrive_and_drop();
        });
      }
      for (auto& th : pool) th.join();
      g_block = nullptr;
    }
  }
}

}  // namespace emu

inline unsigned char* dynamic_smem_host() { return emu::g_block->smem.get(); }

namespace attnlab::kernels::cuda {
inline unsigned char* dynamic_smem() { return dynamic_smem_host(); }
}  // namespace attnlab::kernels::cuda

inline void __syncthreads() { emu::g_block->block.arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu::warp().bar.arrive_and_wait(); }

inline float __shfl_xor_sync(unsigned, float x, int lane_mask) {
  auto& w = emu::warp();
  const int lane = threadIdx.x % 32;
  w.shfl[lane] = x;
  w.bar.arrive_and_wait();
  const float y = w.shfl[lane ^ lane_mask];
  w.bar.arrive_and_wait();
  return y;
}

inline float atomicAdd(float* address, float value) {
  return std::atomic_ref<float>(*address).fetch_add(value);
}

inline float __uint_as_float(unsigned x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

inline float as_float(float x) { return x; }
inline float as_float(__half x) { return __half2float(x); }
inline float as_float(__nv_bfloat16 x) { return __bfloat162float(x); }

/// Every lane holds the whole tile: x[r * 16 + c].
template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  float x[256];
};

template <typename T>
void check_operand(const T* p, unsigned ldm) {
  assert(reinterpret_cast<std::uintptr_t>(p) % 32 == 0 && "wmma pointer must be 256-bit aligned");
  assert(ldm % (16 / sizeof(T)) == 0 && "wmma ldm must be a multiple of 16 bytes");
  (void)p;
  (void)ldm;
}

// matrix_a is 16 (m) x 16 (k); matrix_b is 16 (k) x 16 (n). Element (r, c) of the fragment's matrix.
template <typename Use, typename T, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const T* p, unsigned ldm) {
  check_operand(p, ldm);
  constexpr bool row = std::is_same_v<Layout, row_major>;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) f.x[r * 16 + c] = as_float(row ? p[r * ldm + c] : p[c * ldm + r]);
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p, unsigned ldm,
                             layout_t layout) {
  check_operand(p, ldm);
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) f.x[r * 16 + c] = layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
}

/// Lane l writes the elements e with e % 32 == l: a warp-wide store, as on the GPU.
inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm,
                              layout_t layout) {
  check_operand(p, ldm);
  for (int e = threadIdx.x % 32; e < 256; e += 32) {
    const int r = e / 16, c = e % 16;
    (layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.x[e];
  }
}

inline void fill_fragment(fragment<accumulator, 16, 16, 16, float>& f, float v) {
  std::fill(f.x, f.x + 256, v);
}

template <typename T, typename LA, typename LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, T, LA>& a,
              const fragment<matrix_b, 16, 16, 16, T, LB>& b,
              const fragment<accumulator, 16, 16, 16, float>& c) {
  float out[256];
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      float s = c.x[m * 16 + n];
      for (int k = 0; k < 16; ++k) s += a.x[m * 16 + k] * b.x[k * 16 + n];
      out[m * 16 + n] = s;
    }
  std::copy(out, out + 256, d.x);
}

}  // namespace nvcuda::wmma
