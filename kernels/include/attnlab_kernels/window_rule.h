// The sliding-window rule of a local layer (docs/windows.md, "The rule"), stated once for every
// caller: the torch side (attnlab/attention_window.h), the CPU kernels and the CUDA kernels, host and
// device. Plain C++ with no Torch and no CUDA header, so any translation unit may include it.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define ATTNLAB_WINDOW_FN __host__ __device__ constexpr
#else
#define ATTNLAB_WINDOW_FN constexpr
#endif

namespace attnlab::kernels {

/// Whether query position p sees key position j under window W (0: none, a global layer) with the
/// first n positions kept (keep_first): j <= p and (W == 0 or p - j < W or j < n). Positions are
/// those of the call's keys, 0..Tk-1; the queries are the last Tq of them.
ATTNLAB_WINDOW_FN bool window_sees(int64_t window, int64_t keep_first, int64_t p, int64_t j) {
  return j <= p && (window == 0 || p - j < window || j < keep_first);
}

/// Whether the window hides some key of a call over k_len key positions from a query that would see
/// it without the window: W > 0 and Tk > W + n. Otherwise the call is full causal attention and
/// runs as a global layer's, bit for bit. (Tk - W > n: no overflow for any W, n >= 0.)
ATTNLAB_WINDOW_FN bool window_hides_keys(int64_t window, int64_t keep_first, int64_t k_len) {
  return window > 0 && k_len - window > keep_first;
}

}  // namespace attnlab::kernels

#undef ATTNLAB_WINDOW_FN
