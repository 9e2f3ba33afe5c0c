// Just enough of CUDA to run the kernels of kernels/cuda on the CPU, unchanged, for a machine without
// a GPU: each CUDA thread a fiber (or, for ThreadSanitizer, an OS thread), real barriers for
// __syncthreads / __syncwarp / shuffles, and wmma fragments in which every lane holds the whole 16x16
// tile (each store writes only the lane's share, so a missing __syncwarp shows up under
// ThreadSanitizer as it would on a GPU).
// Include this before any kernel header; compile with -DATTNLAB_CUDA_HOST_EMULATION.
#pragma once

#include <cuda_bf16.h>  // host versions of the 16-bit types and their conversions
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <ucontext.h>

#include <algorithm>
#include <array>
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

/// How a block's threads run. OsThreads: one std::thread each and std::barrier, so ThreadSanitizer
/// sees real concurrency (run.sh --tsan). Fibers (default): ucontext coroutines on one OS thread that
/// switch only at barriers, deterministic and much faster on a small machine.
class OsThreads {
 public:
  void run(int threads, const std::function<void()>& kernel) {
    std::barrier<> block(threads);
    std::vector<std::unique_ptr<std::barrier<>>> warps;
    for (int w = 0; w < threads / 32; ++w) warps.push_back(std::make_unique<std::barrier<>>(32));
    block_ = &block;
    warps_ = &warps;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        threadIdx = make_uint3(static_cast<unsigned>(t), 0, 0);
        kernel();
        (*warps[t / 32]).arrive_and_drop();  // an exited thread no longer takes part in barriers
        block.arrive_and_drop();
      });
    }
    for (auto& th : pool) th.join();
  }
  void warp_sync() { (*(*warps_)[threadIdx.x / 32]).arrive_and_wait(); }
  void block_sync() { block_->arrive_and_wait(); }

 private:
  std::barrier<>* block_ = nullptr;
  std::vector<std::unique_ptr<std::barrier<>>>* warps_ = nullptr;
};

class Fibers {
 public:
  void run(int threads, const std::function<void()>& kernel) {
    kernel_ = &kernel;
    fibers_.resize(threads);
    warps_.assign(threads / 32, Barrier{32, 0});
    block_ = Barrier{threads, 0};
    for (int t = 0; t < threads; ++t) start(t);
    for (int finished = 0; finished < threads;) {
      bool ran = false;
      for (int t = 0; t < threads; ++t) {
        if (fibers_[t].state != State::runnable) continue;
        threadIdx = make_uint3(static_cast<unsigned>(t), 0, 0);
        swapcontext(&main_, &fibers_[t].ctx);
        ran = true;
        finished += fibers_[t].state == State::finished;
      }
      assert(ran && "every live thread waits at a barrier the others never reach: deadlock");
      (void)ran;
    }
  }
  void warp_sync() { arrive(warps_[threadIdx.x / 32], Wait::warp); }
  void block_sync() { arrive(block_, Wait::block); }

 private:
  enum class State { runnable, waiting, finished };
  enum class Wait { none, warp, block };
  struct Barrier {
    int live, arrived;
  };
  struct Fiber {
    ucontext_t ctx;
    std::unique_ptr<char[]> stack;
    State state = State::runnable;
    Wait wait = Wait::none;
  };
  static constexpr std::size_t kStackBytes = 256 << 10;

  static Fibers*& self() {
    static Fibers* f = nullptr;
    return f;
  }

  static void entry() {
    Fibers& f = *self();
    (*f.kernel_)();
    f.finish(static_cast<int>(threadIdx.x));
  }  // returns to uc_link: the scheduler

  void start(int t) {
    Fiber& f = fibers_[t];
    if (!f.stack) f.stack.reset(new char[kStackBytes]);
    f.state = State::runnable;
    f.wait = Wait::none;
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack.get();
    f.ctx.uc_stack.ss_size = kStackBytes;
    f.ctx.uc_link = &main_;
    self() = this;
    makecontext(&f.ctx, &Fibers::entry, 0);
  }

  /// The last live arrival releases the others and runs on; the rest yield to the scheduler.
  void arrive(Barrier& b, Wait kind) {
    const int t = static_cast<int>(threadIdx.x);
    if (++b.arrived == b.live) return release(b, kind, t / 32);
    fibers_[t].state = State::waiting;
    fibers_[t].wait = kind;
    swapcontext(&fibers_[t].ctx, &main_);
  }

  void release(Barrier& b, Wait kind, int warp) {
    b.arrived = 0;
    for (std::size_t t = 0; t < fibers_.size(); ++t) {
      Fiber& f = fibers_[t];
      if (f.state == State::waiting && f.wait == kind && (kind == Wait::block || int(t) / 32 == warp)) {
        f.state = State::runnable;
        f.wait = Wait::none;
      }
    }
  }

  void finish(int t) {
    fibers_[t].state = State::finished;
    Barrier& w = warps_[t / 32];
    --w.live;
    if (w.arrived > 0 && w.arrived == w.live) release(w, Wait::warp, t / 32);
    --block_.live;
    if (block_.arrived > 0 && block_.arrived == block_.live) release(block_, Wait::block, 0);
  }

  const std::function<void()>* kernel_ = nullptr;
  std::vector<Fiber> fibers_;
  std::vector<Barrier> warps_;
  Barrier block_{0, 0};
  ucontext_t main_;
};

#ifdef ATTNLAB_EMULATION_OS_THREADS
using Runner = OsThreads;
#else
using Runner = Fibers;
#endif

/// The block being run: its runner (barriers), shuffle buffers and dynamic shared memory.
struct Block {
  struct Free {
    void operator()(unsigned char* p) const { ::operator delete[](p, std::align_val_t(128)); }
  };
  Runner* runner = nullptr;
  std::vector<std::array<std::array<float, 32>, 2>> shfl;  // per warp, two buffers used in turn
  std::vector<unsigned char> shfl_turn;                     // per thread: the buffer of its next shuffle
  std::unique_ptr<unsigned char[], Free> smem;  // 128-byte aligned, like the GPU's
};

inline Block* g_block = nullptr;

/// Runs kernel() as a grid of `grid` blocks of `threads` threads with `smem_bytes` of dynamic shared
/// memory, filled with 0xff (NaN for every float type) so that reads of unwritten smem poison results.
inline void launch(dim3 grid, int threads, std::size_t smem_bytes, const std::function<void()>& kernel) {
  assert(threads % 32 == 0);
  static Runner runner;  // keeps its fiber stacks from launch to launch
  gridDim = grid;
  for (unsigned by = 0; by < grid.y; ++by) {
    for (unsigned bx = 0; bx < grid.x; ++bx) {
      blockIdx = make_uint3(bx, by, 0);
      Block block;
      block.runner = &runner;
      block.shfl.resize(threads / 32);
      block.shfl_turn.assign(threads, 0);
      block.smem.reset(static_cast<unsigned char*>(::operator new[](smem_bytes + 1, std::align_val_t(128))));
      std::memset(block.smem.get(), 0xff, smem_bytes);
      g_block = &block;
      runner.run(threads, kernel);
      g_block = nullptr;
    }
  }
}

}  // namespace emu

inline unsigned char* dynamic_smem_host() { return emu::g_block->smem.get(); }

namespace attnlab::kernels::cuda {
inline unsigned char* dynamic_smem() { return dynamic_smem_host(); }
}  // namespace attnlab::kernels::cuda

inline void __syncthreads() { emu::g_block->runner->block_sync(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu::g_block->runner->warp_sync(); }

/// One barrier per shuffle: consecutive shuffles use the warp's two buffers in turn, and a lane can
/// only write a buffer again (two shuffles later) once every lane is past the barrier of the shuffle
/// between, so past its reads of that buffer. Every lane of a warp runs the same shuffles.
inline float __shfl_xor_sync(unsigned, float x, int lane_mask) {
  unsigned char& turn = emu::g_block->shfl_turn[threadIdx.x];
  auto& buf = emu::g_block->shfl[threadIdx.x / 32][turn];
  turn ^= 1;
  const int lane = threadIdx.x % 32;
  buf[lane] = x;
  __syncwarp();
  return buf[lane ^ lane_mask];
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
