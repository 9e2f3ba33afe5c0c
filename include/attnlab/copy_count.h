// Counts the tensor copies LibTorch makes: every aten::copy_ call (what .contiguous(), .clone(),
// .to() and copies into slices come down to) into a tensor of at least one dimension (scalars that
// operators wrap into 0-dim tensors move no data), through LibTorch's RecordFunction observers. How the
// attention backends are checked for layout copies (tests/parity/test_flash_layout.cpp,
// tools/bench/bench_attention.cpp's copies column).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attnlab {

/// Tensor copies made by any thread of this process while an instance lives (so a CUDA backward,
/// which autograd runs on a device thread, is seen too). One counter at a time per process: a
/// second while one lives throws std::logic_error. Counting slows every LibTorch op a little:
/// time nothing under a counter.
class CopyCounter {
 public:
  CopyCounter();
  ~CopyCounter();
  CopyCounter(const CopyCounter&) = delete;
  CopyCounter& operator=(const CopyCounter&) = delete;

  int64_t copies() const;  ///< aten::copy_ calls so far
  int64_t bytes() const;   ///< bytes those calls wrote (the destination's numel * element size)
  std::vector<std::string> shapes() const;  ///< each copy's destination shape, in order ("[2, 64, 128]")

 private:
  uint64_t handle_;
};

}  // namespace attnlab
