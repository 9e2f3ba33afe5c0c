// How a CPU training process keeps its memory: freed tensor buffers stay in the process for the next
// step instead of going back to the operating system.
#pragma once

namespace attnlab {

/// Makes glibc's malloc keep freed memory in the process: large blocks come from the heap instead of
/// fresh mmap()s (M_MMAP_MAX = 0) and the heap's top is never trimmed (M_TRIM_THRESHOLD, M_TOP_PAD).
/// A training loop frees and re-allocates the same large activations every step (the logits and
/// their log-softmax are 32 MiB each at the micro tier); by default each one is a new mapping whose
/// every 4 KiB page faults and is zeroed by the kernel, about a third of a CPU step's time
/// (docs/benchmarks.md, "CPU training step against eager PyTorch"). Process-wide and permanent; the
/// resident set stays at its peak. Returns false, doing nothing, where the C library is not glibc.
bool keep_freed_cpu_memory();

}  // namespace attnlab
