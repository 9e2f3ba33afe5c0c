// NCCL: c10d's CUDA backend, compiled when LibTorch has it (USE_C10D_NCCL) and nccl.h is found
// (CMakeLists.txt prefers the one beside torch in its venv, the version the wheel was built with,
// since some of the header's inline parts depend on NCCL's version macros).
#include "distributed/process_group.h"

#ifdef ATTNLAB_HAVE_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace attnlab::dist::detail {

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int size, std::chrono::milliseconds timeout) {
#ifdef ATTNLAB_HAVE_NCCL
  auto options = c10d::ProcessGroupNCCL::Options::create();
  // The watchdog aborts a collective that runs past this (TORCH_NCCL_ASYNC_ERROR_HANDLING's
  // default then ends the process), so a dead or stalled rank cannot hang the others.
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
#else
  (void)store, (void)rank, (void)size, (void)timeout;
  throw DistributedError(
      "this attnlab was built without the NCCL backend (CUDA data-parallel training): build it against a "
      "CUDA LibTorch with nccl.h available (docs/distributed.md)");
#endif
}

}  // namespace attnlab::dist::detail
