// Gloo: c10d's CPU backend. Its header needs gloo's own headers, which LibTorch's wheel lacks;
// Debian's libgloo-dev provides them (scripts/setup.sh). Only declarations are used: the Gloo code
// that runs is the copy inside libtorch_cpu, so the headers' version need not match it.
#include "distributed/process_group.h"

#ifdef ATTNLAB_HAVE_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif

namespace attnlab::dist::detail {

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int size, std::chrono::milliseconds timeout) {
#ifdef ATTNLAB_HAVE_GLOO
  // create_default picks the network device as torch.distributed does (GLOO_SOCKET_IFNAME, else
  // the address this host's name resolves to).
  auto options = c10d::ProcessGroupGloo::Options::create_default(timeout);
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
#else
  (void)store, (void)rank, (void)size, (void)timeout;
  throw DistributedError(
      "this attnlab was built without the Gloo backend (CPU data-parallel training): install Debian's "
      "libgloo-dev (scripts/setup.sh does) and rebuild");
#endif
}

}  // namespace attnlab::dist::detail
