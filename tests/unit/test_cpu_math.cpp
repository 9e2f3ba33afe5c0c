// The CPU vector-math warm-up (include/attnlab/cpu_math.h): a process's first parallel unary ops
// are as accurate as libm. ctest runs each test in a fresh process, so these calls are the first of
// their kind after main()'s warm-up. Without the warm-up, about 1 process in 20 gets one thread's
// chunk from a low-accuracy kernel (3e-9 relative in float64, 1.5e-4 in float32; measured 9 and 7
// failures in 150 runs): a red run here is never noise.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace {

/// Largest |got - want| / |want| over x, want computed element by element with libm in long double.
template <class T>
double worst_relative_error(const at::Tensor& x, const at::Tensor& got, long double (*libm)(long double)) {
  const auto xs = x.contiguous(), gs = got.contiguous();
  const T* xp = xs.data_ptr<T>();
  const T* gp = gs.data_ptr<T>();
  double worst = 0.0;
  for (int64_t i = 0; i < xs.numel(); ++i) {
    const long double want = libm(static_cast<long double>(xp[i]));
    worst = std::max(worst, static_cast<double>(std::fabs((gp[i] - want) / want)));
  }
  return worst;
}

long double exp_l(long double x) { return std::exp(x); }
long double log_l(long double x) { return std::log(x); }
long double tanh_l(long double x) { return std::tanh(x); }
long double sqrt_l(long double x) { return std::sqrt(x); }

template <class T>
void expect_first_calls_accurate(at::ScalarType dtype) {
  // The race needs first calls that start together on several threads: a started thread pool and a
  // tensor a few times ATen's grain size (2048), so each thread's chunk is short.
  at::set_num_threads(std::max(2, at::get_num_threads()));
  at::parallel_for(0, at::get_num_threads(), 1, [](int64_t, int64_t) {});
  (void)at::mm(at::ones({64, 64}, dtype), at::ones({64, 64}, dtype));  // MKL's own start-up, done
  const auto x = at::linspace(0.25, 4.0, 8192, at::TensorOptions().dtype(dtype));
  const double ulp = std::numeric_limits<T>::epsilon();
  EXPECT_LE(worst_relative_error<T>(x, at::exp(x), exp_l), 4 * ulp) << "exp";
  EXPECT_LE(worst_relative_error<T>(x, at::log(x), log_l), 4 * ulp) << "log";
  EXPECT_LE(worst_relative_error<T>(x, at::tanh(x), tanh_l), 4 * ulp) << "tanh";
  EXPECT_LE(worst_relative_error<T>(x, at::sqrt(x), sqrt_l), 4 * ulp) << "sqrt";
}

TEST(CpuVectorMath, FirstParallelFloat64UnaryOpsMatchLibm) { expect_first_calls_accurate<double>(at::kDouble); }

TEST(CpuVectorMath, FirstParallelFloat32UnaryOpsMatchLibm) { expect_first_calls_accurate<float>(at::kFloat); }

}  // namespace
