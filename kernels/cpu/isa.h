// Runtime choice of the instruction set for the CPU kernels. The library is compiled for the
// baseline x86-64 ISA; each kernel body is also instantiated under a target attribute (AVX2 + FMA,
// AVX-512) and the widest one the running CPU supports is called. The bodies are always-inline
// templates, so each instantiation is compiled entirely for its ISA, while every out-of-line helper
// stays baseline code (safe to share across instantiations). Private to kernels/cpu.
#pragma once

#include <cstdlib>
#include <string>

#define ATTNLAB_INLINE inline __attribute__((always_inline))

#if defined(__x86_64__) && defined(__GNUC__)
#define ATTNLAB_CPU_DISPATCH 1
#define ATTNLAB_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define ATTNLAB_TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#else
#define ATTNLAB_CPU_DISPATCH 0
#endif

namespace attnlab::kernels::cpu {

enum class Isa { baseline, avx2, avx512 };

/// The widest ISA both compiled in and supported by this CPU (checked once). The environment
/// variable ATTNLAB_CPU_ISA = baseline | avx2 caps it, so every instantiation can be tested on one
/// machine.
inline Isa cpu_isa() {
#if ATTNLAB_CPU_DISPATCH
  static const Isa isa = [] {
    __builtin_cpu_init();
    const char* cap = std::getenv("ATTNLAB_CPU_ISA");
    const std::string limit = cap ? cap : "";
    if (limit == "baseline") return Isa::baseline;
    if (limit != "avx2" && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
      return Isa::avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::avx2;
    return Isa::baseline;
  }();
  return isa;
#else
  return Isa::baseline;
#endif
}

}  // namespace attnlab::kernels::cpu

/// Defines `name##_isa<T>(args...)` calling the always-inline template `name<T, V>(args...)` through the
/// widest available instantiation, V being its register line in bytes (64 AVX-512, 32 AVX2, 16 SSE2).
/// `params` / `args` are the parenthesised parameter and argument lists.
#if ATTNLAB_CPU_DISPATCH
#define ATTNLAB_DISPATCH_ISA(name, params, args)                                  \
  template <class T>                                                              \
  ATTNLAB_TARGET_AVX512 void name##_avx512 params { name<T, 64> args; }           \
  template <class T>                                                              \
  ATTNLAB_TARGET_AVX2 void name##_avx2 params { name<T, 32> args; }               \
  template <class T>                                                              \
  void name##_baseline params { name<T, 16> args; }                               \
  template <class T>                                                              \
  void name##_isa params {                                                        \
    switch (::attnlab::kernels::cpu::cpu_isa()) {                                 \
      case ::attnlab::kernels::cpu::Isa::avx512: return name##_avx512<T> args;    \
      case ::attnlab::kernels::cpu::Isa::avx2: return name##_avx2<T> args;        \
      case ::attnlab::kernels::cpu::Isa::baseline: break;                         \
    }                                                                             \
    name##_baseline<T> args;                                                      \
  }
#else
#define ATTNLAB_DISPATCH_ISA(name, params, args)                                  \
  template <class T>                                                              \
  void name##_isa params { name<T, 16> args; }
#endif
