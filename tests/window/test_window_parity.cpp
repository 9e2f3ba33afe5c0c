// The sliding-window grid of issue 22 (docs/windows.md, "Checks"): every in-attention arm on the
// fused CPU kernels against the reference (a mask), forward and every gradient, for
// W in {1, 2, 63, 64, 65, T - 1, T}, T in {1, 2, 63, 64, 65, 257} and keep_first in {0, 1, 4}.
// 63, 64 and 65 straddle the kernels' 64-wide tiles. A window that hides no key (T <= W + n) must
// give the call without a window bit for bit, on both backends.
// Label `window` (its own executable: the grid takes minutes); ctest window.ci_sample runs a slice
// in CI (tests/CMakeLists.txt; costs in docs/building.md).
#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "attnlab/flash_attention.h"
#include "parity/arm_runner.h"

namespace attnlab {
namespace {

using Grid = std::tuple<std::string, int64_t, int64_t, int64_t>;  // arm, T, W, n

void expect_identical(const ArmRun& got, const ArmRun& want, const std::string& what) {
  auto same = [&](const at::Tensor& a, const at::Tensor& b, const char* name) {
    ASSERT_EQ(a.defined(), b.defined()) << what << " " << name;
    if (a.defined()) EXPECT_TRUE(at::equal(a, b)) << what << " " << name << " differs from the call without a window";
  };
  same(got.o, want.o, "o"), same(got.lse, want.lse, "lse"), same(got.dq, want.dq, "dq");
  same(got.dk, want.dk, "dk"), same(got.dv, want.dv, "dv"), same(got.db, want.db, "d b_h");
  same(got.dtau, want.dtau, "d tau_h"), same(got.dw, want.dw, "d w_h");
}

class WindowGrid : public ::testing::TestWithParam<Grid> {};

TEST_P(WindowGrid, FusedMatchesReference) {
  const auto& [name, T, W, n] = GetParam();
  const auto arm = parity::arm_named(name);
  const AttentionWindow window{W, n};
  const auto l = parity::as_leaves(parity::arm_values(100 + T, 1, 2, T, 16), at::kCPU, at::kDouble);
  const auto want = parity::run_arm_windowed(arm, l, AttentionBackend::reference, window);
  const std::string what = name + " T " + std::to_string(T) + " W " + std::to_string(W) + " n " + std::to_string(n);
  // float64: summation orders only. flash: LibTorch's CPU kernel over query chunks.
  for (auto backend : {AttentionBackend::fused, AttentionBackend::flash})
    parity::expect_arm_runs_close(parity::run_arm_windowed(arm, l, backend, window), want, 1e-13, what + " " + to_string(backend));
  if (!window.hides_keys(T)) {
    for (auto backend : {AttentionBackend::reference, AttentionBackend::fused, AttentionBackend::flash}) {
      expect_identical(parity::run_arm_windowed(arm, l, backend, window), parity::run_arm_windowed(arm, l, backend, {}),
                       what + " on " + to_string(backend));
    }
  }
}

std::vector<Grid> grid() {
  std::vector<Grid> all;
  for (const auto& name : parity::in_attention_arm_names()) {
    for (int64_t T : {1, 2, 63, 64, 65, 257}) {
      std::set<int64_t> windows{1, 2, 63, 64, 65, T - 1, T};
      windows.erase(0);  // W = T - 1 at T = 1
      for (int64_t W : windows)
        for (int64_t n : {0, 1, 4}) all.emplace_back(name, T, W, n);
    }
  }
  return all;
}

std::string grid_name(const ::testing::TestParamInfo<Grid>& info) {
  const auto& [name, T, W, n] = info.param;
  return name + "_T" + std::to_string(T) + "_W" + std::to_string(W) + "_n" + std::to_string(n);
}

INSTANTIATE_TEST_SUITE_P(Arms, WindowGrid, ::testing::ValuesIn(grid()), grid_name);

// The kernels' tile walk under other tilings (1 x 1, ragged, a query tile wider than the window)
// with every feature flag and decoding (Tq < Tk), against the reference, float64 and float32.
class WindowTiling : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, bool>> {};

TEST_P(WindowTiling, FusedTilingsMatchReference) {
  const auto& [W, n, decode] = GetParam();
  for (auto dtype : {at::kDouble, at::kFloat}) {
    parity::Case c;
    c.B = 2, c.H = 2, c.Tk = 70, c.Tq = decode ? 5 : 70, c.d = 8, c.dtype = dtype;
    c.sink = true, c.bias = true, c.mask = true, c.seed = 3 + W;
    auto l = parity::make_leaves(c);
    auto windowed = [&](const parity::Leaves& x) {
      AttentionInputs in{x.q, x.k, x.v, x.bias, x.sink, x.mask};
      in.window = {W, n};
      return in;
    };
    auto run = [&](bool fused, const FusedTiling& tiling) {
      for (const auto* t : {&l.q, &l.k, &l.v, &l.bias, &l.sink})
        if (t->defined() && t->grad().defined()) t->mutable_grad().reset();
      const auto in = windowed(l);
      auto out = fused ? fused_attention(in, tiling) : reference_attention(in);
      auto gen = at::make_generator<at::CPUGeneratorImpl>(9);
      auto R = at::normal(0.0, 1.0, out.o.sizes(), gen, at::TensorOptions().dtype(at::kDouble)).to(out.o.options());
      auto S = at::normal(0.0, 1.0, out.lse.sizes(), gen, at::TensorOptions().dtype(at::kDouble)).to(out.lse.options());
      auto lse = at::where(at::isfinite(out.lse), out.lse, at::zeros_like(out.lse));
      ((out.o * R).sum() + (lse * S).sum()).backward();
      return parity::Run{out.o.detach(), out.lse.detach(), l.q.grad(), l.k.grad(), l.v.grad(), l.bias.grad(),
                         l.sink.grad()};
    };
    const auto want = run(false, {});
    const double tol = dtype == at::kDouble ? 1e-13 : 2e-5;
    for (const FusedTiling tiling : {FusedTiling{1, 1}, FusedTiling{5, 7}, FusedTiling{64, 8}, FusedTiling{}}) {
      parity::expect_runs_close(run(true, tiling), want, tol,
                                "W " + std::to_string(W) + " n " + std::to_string(n) + " tiling " +
                                    std::to_string(tiling.q_tile) + "x" + std::to_string(tiling.k_tile));
    }
  }
}

std::string tiling_name(const ::testing::TestParamInfo<std::tuple<int64_t, int64_t, bool>>& info) {
  const auto& [W, n, decode] = info.param;
  return "W" + std::to_string(W) + "_n" + std::to_string(n) + (decode ? "_decode" : "");
}

INSTANTIATE_TEST_SUITE_P(Windows, WindowTiling,
                         ::testing::Combine(::testing::Values<int64_t>(1, 3, 16, 40), ::testing::Values<int64_t>(0, 2, 9),
                                            ::testing::Bool()),
                         tiling_name);

// The flash backend's CPU route under a window through both compositions (the kernel's mask, and the
// key columns CUDA uses): sink, routing bias and a loss through lse, float64 and float32, on T queries.
void expect_flash_windows_match_reference(int64_t T, const std::vector<AttentionWindow>& windows) {
  for (auto dtype : {at::kDouble, at::kFloat}) {
    parity::Case c;
    c.B = 2, c.H = 2, c.Tq = c.Tk = T, c.d = 16, c.dtype = dtype, c.sink = true, c.bias = true, c.seed = 5;
    auto l = parity::make_leaves(c);
    for (const AttentionWindow& window : windows) {
      auto run = [&](std::optional<FlashComposition> composition) {
        for (const auto* t : {&l.q, &l.k, &l.v, &l.bias, &l.sink})
          if (t->grad().defined()) t->mutable_grad().reset();
        AttentionInputs in{l.q, l.k, l.v, l.bias, l.sink};
        in.window = window;
        auto out = composition ? flash_attention(in, *composition) : reference_attention(in);
        auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
        auto R = at::normal(0.0, 1.0, out.o.sizes(), gen, at::TensorOptions().dtype(at::kDouble)).to(out.o.options());
        auto S = at::normal(0.0, 1.0, out.lse.sizes(), gen, at::TensorOptions().dtype(at::kDouble)).to(out.lse.options());
        ((out.o * R).sum() + (out.lse * S).sum()).backward();
        return parity::Run{out.o.detach(), out.lse.detach(), l.q.grad(), l.k.grad(), l.v.grad(), l.bias.grad(),
                           l.sink.grad()};
      };
      const auto want = run(std::nullopt);
      const double tol = dtype == at::kDouble ? 1e-12 : 2e-5;
      const std::string what = "T " + std::to_string(T) + " W " + std::to_string(window.window) + " n " +
                               std::to_string(window.keep_first);
      parity::expect_runs_close(run(FlashComposition::device), want, tol, what + " kernel mask");
      parity::expect_runs_close(run(FlashComposition::key_columns), want, tol, what + " key columns");
    }
  }
}

TEST(WindowFlash, BothCompositionsMatchTheReference) {
  expect_flash_windows_match_reference(150, {{1, 0}, {40, 3}, {149, 0}});
}

// Long enough for the CPU route's batched call to serve many chunks of W / 2 queries (up to 256),
// beside chunks of their own at both ends: kept keys that overlap the first windows, a ragged tail.
TEST(WindowFlash, BatchedChunksMatchTheReference) {
  expect_flash_windows_match_reference(700, {{256, 0}, {256, 4}, {100, 0}, {65, 40}, {600, 1}});
}

// Backends without a window refuse a local layer that hides a key, saying why; one that hides
// nothing runs (docs/windows.md, "Backends").
TEST(WindowBackends, RefusalsNameTheWindow) {
  const auto arm = parity::arm_named("baseline");
  const auto l = parity::as_leaves(parity::arm_values(5, 1, 2, 9, 16), at::kCPU, at::kFloat);
  auto message = [&](AttentionBackend backend, const AttentionWindow& window) -> std::string {
    try {
      parity::run_arm_windowed(arm, l, backend, window);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message(AttentionBackend::sdpa, {4, 0}).find("no sliding window"), std::string::npos);
  EXPECT_NE(message(AttentionBackend::cudnn, {4, 0}).find("no sliding window"), std::string::npos);
  EXPECT_EQ(message(AttentionBackend::flash, {4, 2}), "");  // CPU: over query chunks, kept positions too
  EXPECT_EQ(message(AttentionBackend::sdpa, {9, 0}), "");
  AttentionRequest cuda;
  cuda.device = at::Device(at::kCUDA, 0), cuda.dtype = at::kHalf, cuda.q_len = cuda.k_len = 9, cuda.cuda_capability = 90;
  cuda.window = {4, 2};
  EXPECT_NE(flash_refusal(cuda).find("keep"), std::string::npos);
  cuda.window = {4, 0};
  EXPECT_EQ(flash_refusal(cuda), "");
  // auto on CPU runs flash for a local layer in float32 and matches the reference.
  parity::expect_arm_runs_close(parity::run_arm_windowed(arm, l, AttentionBackend::automatic, {4, 0}),
                                parity::run_arm_windowed(arm, l, AttentionBackend::reference, {4, 0}), 1e-5, "auto");
}

}  // namespace
}  // namespace attnlab
