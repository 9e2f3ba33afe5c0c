#include "attnlab/cpu_memory.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace attnlab {

bool keep_freed_cpu_memory() {
#if defined(__GLIBC__)
  constexpr int kTopPad = 64 << 20;  // grow the heap 64 MiB at a time: fewer brk() calls
  return mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, -1) == 1 && mallopt(M_TOP_PAD, kTopPad) == 1;
#else
  return false;
#endif
}

}  // namespace attnlab
