// Runs the CUDA kernels' own source (kernels/cuda/*_kernel.cuh) on the CPU through
// cuda_host_emulation.h and compares them with the double-precision reference (reference.h): every
// feature flag, fp32/fp16/bf16, head dims 64 and 128, ragged lengths, decode (Tq < Tk), sink logits
// of +-100, rows with no visible key, sliding windows (docs/windows.md). It checks indexing, masking,
// tile skipping, synchronisation and the math; not speed, and not the real tensor-core hardware
// (wmma is emulated from its documented semantics).
// Usage: kernels/emulation/run.sh [--quick]. Exit status 1 when any comparison fails.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>

// clang-format off
#include "cuda_host_emulation.h"  // first: the CUDA built-ins the kernel headers use
// clang-format on
#include "../cuda/flash_bwd_delta_kernel.cuh"
#include "../cuda/flash_bwd_kernel.cuh"
#include "../cuda/flash_fwd_kernel.cuh"
#include "../cuda/value_gate_kernel.cuh"
#include "reference.h"

namespace {

using namespace attnlab::kernels::cuda;
using emu::Vec;

int g_failures = 0;

template <typename T>
T from_double(double x) {
  if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(static_cast<float>(x));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(static_cast<float>(x));
  else
    return static_cast<float>(x);
}

template <typename T>
std::vector<T> to_type(const Vec& x) {
  std::vector<T> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = from_double<T>(x[i]);
  return out;
}

template <typename T>
Vec to_double(const std::vector<T>& x) {
  Vec out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = nvcuda::wmma::as_float(x[i]);
  return out;
}

/// x rounded to T and back: the inputs the kernel really sees.
template <typename T>
Vec rounded(const Vec& x) {
  return to_double(to_type<T>(x));
}

Vec random_vec(std::mt19937& rng, std::size_t n, double scale = 1.0) {
  std::normal_distribution<double> dist(0.0, scale);
  Vec out(n);
  for (auto& v : out) v = dist(rng);
  return out;
}

/// max |got - want| over max(max |want|, 1) (infinities must match exactly); reports and counts
/// failures, and returns the relative error. Inputs are unit normals, so outputs are O(1): the floor
/// of 1 keeps an output that is exactly 0 in theory (d_q with a single key) from turning round-off
/// into a large relative error. `quiet` prints only a failure (the window grid: one line per case).
double compare(const std::string& what, const Vec& got, const Vec& want, double tol, bool quiet = false) {
  double err = 0, ref = 1.0;
  bool inf_mismatch = false;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (std::isinf(want[i]) || std::isinf(got[i]) || std::isnan(got[i])) {
      inf_mismatch |= !(got[i] == want[i]);
      continue;
    }
    err = std::max(err, std::abs(got[i] - want[i]));
    ref = std::max(ref, std::abs(want[i]));
  }
  const double rel = err / ref;
  const bool ok = !inf_mismatch && rel <= tol;
  if (!ok) ++g_failures;
  if (!ok || !quiet)
    std::printf("  %-4s %-8s rel err %.2e (tol %.0e)%s\n", ok ? "ok" : "FAIL", what.c_str(), rel, tol,
                inf_mismatch ? " [inf/nan mismatch]" : "");
  return rel;
}

template <typename T>
const char* type_name() {
  if constexpr (std::is_same_v<T, __half>)
    return "fp16";
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return "bf16";
  else
    return "fp32";
}

/// Relative tolerance of a kernel output against the double reference: fp32 keeps fp32 products;
/// fp16/bf16 round P, dS and the outputs to the 16-bit type.
template <typename T>
double tolerance() {
  if constexpr (std::is_same_v<T, __half>)
    return 4e-3;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return 3e-2;
  else
    return 2e-5;
}

/// What the attention cases ran, for the closing summary.
struct AttentionStats {
  int cases = 0, windowed = 0, bit_exact = 0;
  std::map<std::string, double> max_rel;  // per dtype, over every output of every case
};
AttentionStats g_stats;

dim3 grid_for(int64_t len, int64_t rows, int64_t bh) {
  return dim3(static_cast<unsigned>((len + rows - 1) / rows), static_cast<unsigned>(bh));
}

/// The kernels' outputs of one case, as the launchers leave them.
template <typename T>
struct KernelOutputs {
  std::vector<T> o, d_q, d_k, d_v;
  std::vector<float> lse, d_sink, d_bias;
};

/// c with the inputs the kernel really sees (q, k, v, dO rounded to T).
template <typename T>
emu::AttnCase rounded_case(emu::AttnCase c) {
  c.q = rounded<T>(c.q), c.k = rounded<T>(c.k), c.v = rounded<T>(c.v), c.d_o = rounded<T>(c.d_o);
  return c;
}

/// The launch sequence of run_flash_fwd / run_flash_bwd_delta / run_flash_bwd, on the emulator, for
/// inputs already rounded to T. The window reaches the kernels as given: flash_api.cu drops one that
/// hides no key, but the kernels must give the global result bit for bit on their own too.
template <typename T, int D>
KernelOutputs<T> run_kernels(const emu::AttnCase& c, bool null_sink_pointer) {
  using G = TileGeometry<T, D>;
  auto q = to_type<T>(c.q), k = to_type<T>(c.k), v = to_type<T>(c.v), d_o = to_type<T>(c.d_o);
  std::vector<float> sink(c.sink_logit.begin(), c.sink_logit.end());
  std::vector<float> bias(c.routing_bias.begin(), c.routing_bias.end());
  std::vector<float> d_lse(c.d_lse.begin(), c.d_lse.end());
  std::unique_ptr<bool[]> mask(new bool[c.key_mask.size() + 1]);
  for (std::size_t i = 0; i < c.key_mask.size(); ++i) mask[i] = c.key_mask[i] != 0;

  const int64_t BH = c.B * c.H;
  KernelOutputs<T> out;
  out.o.resize(BH * c.Tq * D), out.d_q.resize(out.o.size());
  out.d_k.resize(BH * c.Tk * D), out.d_v.resize(out.d_k.size());
  out.lse.resize(BH * c.Tq), out.d_sink.assign(c.H, 123.0f), out.d_bias.resize(BH * c.Tk);
  std::vector<float> delta(out.lse.size());

  FlashParams p;
  p.q = q.data(), p.k = k.data(), p.v = v.data(), p.o = out.o.data(), p.lse = out.lse.data();
  p.sink_logit = c.sink && !null_sink_pointer ? sink.data() : nullptr;
  p.routing_bias = c.bias ? bias.data() : nullptr;
  p.key_mask = c.mask ? mask.get() : nullptr;
  p.d_o = d_o.data(), p.d_q = out.d_q.data(), p.d_k = out.d_k.data(), p.d_v = out.d_v.data();
  p.d_sink_logit = c.sink ? out.d_sink.data() : nullptr;
  p.d_routing_bias = c.bias ? out.d_bias.data() : nullptr;
  p.delta = delta.data();
  p.d_lse = d_lse.data();
  p.batch = c.B, p.heads = c.H, p.q_len = c.Tq, p.k_len = c.Tk, p.head_dim = D;
  p.scale = static_cast<float>(c.scale());
  p.has_sink = c.sink;
  p.window = c.window, p.keep_first = c.keep_first;

  emu::launch(grid_for(c.Tq, G::kRows, BH), G::kThreads, FwdSmem<T, D>::kBytes,
              [&] { flash_fwd_kernel<T, D>(p); });
  std::fill(out.d_sink.begin(), out.d_sink.end(), 0.0f);  // the launcher's cudaMemsetAsync
  emu::launch(grid_for(c.Tq, DeltaGeometry::kRowsPerBlock, BH), DeltaGeometry::kThreads,
              DeltaGeometry::kSmemBytes, [&] { flash_bwd_delta_kernel<T>(p); });
  emu::launch(grid_for(c.Tk, G::kRows, BH), G::kThreads, BwdSmem<T, D>::kBytes,
              [&] { flash_bwd_kv_kernel<T, D>(p); });
  emu::launch(grid_for(c.Tq, G::kRows, BH), G::kThreads, BwdSmem<T, D>::kBytes,
              [&] { flash_bwd_q_kernel<T, D>(p); });
  return out;
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(T) * a.size()) == 0;
}

/// A window that hides no key (Tk <= W + n) must give the call without one, bit for bit
/// (docs/windows.md, "The rule"). d_sink is summed with atomics: on a GPU its order (and last bit)
/// may vary from run to run, here blocks run in a fixed order.
template <typename T>
void compare_bits(const KernelOutputs<T>& got, const KernelOutputs<T>& global) {
  const bool same = same_bits(got.o, global.o) && same_bits(got.lse, global.lse) &&
                    same_bits(got.d_q, global.d_q) && same_bits(got.d_k, global.d_k) &&
                    same_bits(got.d_v, global.d_v) && same_bits(got.d_sink, global.d_sink) &&
                    same_bits(got.d_bias, global.d_bias);
  if (!same) ++g_failures;
  ++g_stats.bit_exact;
  std::printf("  %-4s every output bit for bit that of window 0\n", same ? "ok" : "FAIL");
}

/// Every output against the double reference. `compact`: one line for the case unless one fails.
template <typename T, int D>
void check_outputs(const std::string& name, const emu::AttnCase& c, const KernelOutputs<T>& got,
                   bool compact) {
  const emu::AttnResult want = emu::reference_attention(c);
  std::printf("%s %s d=%d B=%ld H=%ld Tq=%ld Tk=%ld%s%s%s", name.c_str(), type_name<T>(), D, (long)c.B,
              (long)c.H, (long)c.Tq, (long)c.Tk, c.sink ? " sink" : "", c.bias ? " bias" : "",
              c.mask ? " mask" : "");
  if (c.window > 0) std::printf(" W=%ld n=%ld", (long)c.window, (long)c.keep_first);
  std::printf("\n");
  const double tol = tolerance<T>();
  const int failures = g_failures;
  double rel = 0;
  auto check = [&](const char* what, const Vec& g, const Vec& w, double t) {
    rel = std::max(rel, compare(what, g, w, t, compact));
  };
  auto floats = [](const std::vector<float>& x) { return Vec(x.begin(), x.end()); };
  check("o", to_double(got.o), want.o, tol);
  check("lse", floats(got.lse), want.lse, std::max(tol, 1e-5));
  check("d_q", to_double(got.d_q), want.d_q, tol);
  check("d_k", to_double(got.d_k), want.d_k, tol);
  check("d_v", to_double(got.d_v), want.d_v, tol);
  if (c.sink) check("d_sink", floats(got.d_sink), want.d_sink, tol);
  if (c.bias) check("d_bias", floats(got.d_bias), want.d_bias, tol);
  if (compact && g_failures == failures)
    std::printf("  ok   every output, max rel err %.2e (tol %.0e)\n", rel, tol);
  double& worst = g_stats.max_rel[type_name<T>()];
  worst = std::max(worst, rel);
  ++g_stats.cases;
  g_stats.windowed += c.window > 0;
}

/// One case: the kernels against the reference and, for a window that hides no key, against the
/// same call without one. `global` may carry that call's outputs from case to case (the window grid
/// reuses one input per length).
template <typename T, int D>
void run_attention_case(const std::string& name, emu::AttnCase c, bool null_sink_pointer,
                        bool compact = false, std::optional<KernelOutputs<T>>* global = nullptr) {
  c = rounded_case<T>(c);
  const KernelOutputs<T> got = run_kernels<T, D>(c, null_sink_pointer);
  emu::AttnCase want = c;
  if (null_sink_pointer) std::fill(want.sink_logit.begin(), want.sink_logit.end(), 0.0);
  want.o_stored = [](double x) -> double { return nvcuda::wmma::as_float(from_double<T>(x)); };
  check_outputs<T, D>(name, want, got, compact);
  if (c.window == 0 || attnlab::kernels::window_hides_keys(c.window, c.keep_first, c.Tk)) return;
  std::optional<KernelOutputs<T>> own;
  std::optional<KernelOutputs<T>>& g = global ? *global : own;
  if (!g) {
    emu::AttnCase c0 = c;
    c0.window = c0.keep_first = 0;
    g = run_kernels<T, D>(c0, null_sink_pointer);
  }
  compare_bits(got, *g);
}

emu::AttnCase make_case(std::mt19937& rng, int64_t B, int64_t H, int64_t Tq, int64_t Tk, int64_t d) {
  emu::AttnCase c;
  c.B = B, c.H = H, c.Tq = Tq, c.Tk = Tk, c.d = d;
  c.q = random_vec(rng, B * H * Tq * d);
  c.k = random_vec(rng, B * H * Tk * d);
  c.v = random_vec(rng, B * H * Tk * d);
  c.d_o = random_vec(rng, B * H * Tq * d);
  c.d_lse = Vec(B * H * Tq, 0.0);
  c.sink_logit = Vec(H, 0.0);
  return c;
}

/// The features asked for: a learned sink, a routing bias, a key mask that keeps each key with
/// probability 0.8 (so a small window leaves some rows with no visible key); with both a sink and a
/// bias, an upstream lse gradient too.
void add_features(std::mt19937& rng, emu::AttnCase& c, bool sink, bool bias, bool mask) {
  c.sink = sink, c.bias = bias, c.mask = mask;
  if (sink) c.sink_logit = random_vec(rng, c.H);
  if (bias) c.routing_bias = random_vec(rng, c.B * c.H * c.Tk, 0.5);
  if (mask) {
    c.key_mask.resize(c.B * c.Tk);
    std::bernoulli_distribution keep(0.8);
    for (auto& m : c.key_mask) m = keep(rng);
  }
  if (sink && bias) c.d_lse = random_vec(rng, c.B * c.H * c.Tq);
}

template <typename T, int D>
void attention_cases(std::mt19937& rng, bool quick) {
  // The plain causal path, one query and one key.
  run_attention_case<T, D>("single", make_case(rng, 1, 1, 1, 1, D), false);

  // Everything on, ragged length: learned sink, routing bias, a key mask that leaves query 0 of
  // batch 0 with no key (o = 0, lse = b_h), and an upstream lse gradient.
  auto c = make_case(rng, 2, 2, 70, 70, D);
  c.sink = c.bias = c.mask = true;
  c.sink_logit = random_vec(rng, c.H);
  c.routing_bias = random_vec(rng, c.B * c.H * c.Tk, 0.5);
  c.key_mask.resize(c.B * c.Tk);
  std::bernoulli_distribution keep(0.8);
  for (auto& m : c.key_mask) m = keep(rng);
  c.key_mask[0] = 0;
  c.d_lse = random_vec(rng, c.B * c.H * c.Tq);
  run_attention_case<T, D>("all-features", c, false);
  if (quick) return;

  // Decode-like: 3 queries at the last of 129 positions, fixed sink b = 0 passed as a null pointer.
  c = make_case(rng, 1, 2, 3, 129, D);
  c.sink = true;
  run_attention_case<T, D>("decode-off-by-one", c, true);

  // Extreme sinks, +100 on head 0 and -100 on head 1, plus a row with no key.
  c = make_case(rng, 1, 2, 65, 65, D);
  c.sink = c.mask = true;
  c.sink_logit = {100.0, -100.0};
  c.key_mask.assign(c.Tk, 1);
  c.key_mask[0] = 0;
  run_attention_case<T, D>("sink+-100", c, false);

  // No sink and a row with no visible key: lse = -inf, o = 0, and no NaN in any gradient.
  c = make_case(rng, 1, 1, 130, 130, D);
  c.mask = true;
  c.key_mask.assign(c.Tk, 1);
  c.key_mask[0] = c.key_mask[64] = 0;
  run_attention_case<T, D>("empty-row", c, false);
}

/// docs/windows.md, "Checks": W in {1, 2, 63, 64, 65, T - 1, T} (W >= 1) for T in {1, 2, 63, 64, 65,
/// 257} (63, 64, 65 straddle the 64-wide tiles) and n in {0, 1, 4}, one input per length. Its
/// features (none; sink; bias and mask; all of them) rotate with the length and with `rotation`, so
/// that over the six (dtype, head dim) pairs each length meets every set.
template <typename T, int D>
void window_grid(std::mt19937& rng, int rotation) {
  const int64_t lengths[] = {1, 2, 63, 64, 65, 257};
  for (int t = 0; t < 6; ++t) {
    const int64_t len = lengths[t];
    emu::AttnCase base = make_case(rng, 1, 1, len, len, D);
    const int kind = (t + rotation) % 4;
    add_features(rng, base, kind % 2 == 1, kind >= 2, kind >= 2);
    base = rounded_case<T>(base);
    std::vector<int64_t> windows = {1, 2, 63, 64, 65, len - 1, len};
    std::sort(windows.begin(), windows.end());
    windows.erase(std::unique(windows.begin(), windows.end()), windows.end());
    std::optional<KernelOutputs<T>> global;  // the length's call without a window, run once
    for (int64_t n : {0, 1, 4})
      for (int64_t w : windows) {
        if (w < 1) continue;
        emu::AttnCase c = base;
        c.window = w, c.keep_first = n;
        run_attention_case<T, D>("window", c, false, true, &global);
      }
  }
}

/// Sliding windows (docs/windows.md): decode and batched shapes, then the grid. Quick: one decode
/// case whose walks skip tiles on both sides, and one whose window hides nothing.
template <typename T, int D>
void window_cases(std::mt19937& rng, bool quick, int rotation) {
  // The last 130 of 200 positions, W = 65, n = 4: the forward and q kernel of the last query tile
  // (positions 198..) walk key tiles 0 (kept), 128 and 192 and skip 64; the kv kernel of key tile 64
  // stops before the query tile at 128 (positions 198..), whose windows start past key 127.
  auto c = make_case(rng, 1, 1, 130, 200, D);
  c.window = 65, c.keep_first = 4;
  add_features(rng, c, true, true, true);
  run_attention_case<T, D>("window-decode", c, false);

  // T = 65 <= W + n = 67: no key hidden, so the result is that of window 0, bit for bit.
  c = make_case(rng, 1, 1, 65, 65, D);
  c.window = 63, c.keep_first = 4;
  add_features(rng, c, false, false, true);
  run_attention_case<T, D>("window-hides-none", c, false);
  if (quick) return;

  // Batch and heads, every feature, and a key tile (64..127) with kept and not kept keys (n = 70).
  c = make_case(rng, 2, 2, 150, 150, D);
  c.window = 40, c.keep_first = 70;
  add_features(rng, c, true, true, true);
  run_attention_case<T, D>("window-batched", c, false);

  // Decode through the tiles: 70 queries at the end of 257 positions (query tiles that start in the
  // middle of key tiles), n = 1 kept key, the sink passed as a null pointer (b = 0).
  c = make_case(rng, 1, 2, 70, 257, D);
  c.window = 63, c.keep_first = 1;
  add_features(rng, c, true, false, true);
  run_attention_case<T, D>("window-decode-tiles", c, true);

  // A few decoding queries whose window hides nothing (Tk = 130 = W + n).
  c = make_case(rng, 1, 1, 5, 130, D);
  c.window = 127, c.keep_first = 3;
  add_features(rng, c, true, true, false);
  run_attention_case<T, D>("window-decode-hides-none", c, false);

  window_grid<T, D>(rng, rotation);
}

/// The reference's own gradients against central differences of its forward (loss = sum o dO +
/// sum lse dlse), so that the kernels are not checked against a shared misreading of the math; once
/// without and once with a window (W = 2, n = 1: the query at position p sees keys 0, p - 1, p).
void check_reference_attention_gradients(std::mt19937& rng, int64_t window, int64_t keep_first) {
  auto c = make_case(rng, 1, 2, 5, 7, 8);
  c.sink = c.bias = c.mask = true;
  c.window = window, c.keep_first = keep_first;
  c.sink_logit = random_vec(rng, c.H);
  c.routing_bias = random_vec(rng, c.H * c.Tk);
  c.key_mask = {0, 1, 1, 0, 1, 1, 1};
  c.d_lse = random_vec(rng, c.H * c.Tq);
  auto loss = [&](const emu::AttnCase& x) {
    const emu::AttnResult r = emu::reference_attention(x);
    double l = 0;
    for (std::size_t i = 0; i < r.o.size(); ++i) l += r.o[i] * x.d_o[i];
    for (std::size_t i = 0; i < r.lse.size(); ++i)
      if (std::isfinite(r.lse[i])) l += r.lse[i] * x.d_lse[i];
    return l;
  };
  const emu::AttnResult g = emu::reference_attention(c);
  auto fd = [&](Vec emu::AttnCase::*field, const Vec& grad) {
    Vec got(grad.size());
    for (std::size_t i = 0; i < grad.size(); ++i) {
      emu::AttnCase hi = c, lo = c;
      (hi.*field)[i] += 1e-6, (lo.*field)[i] -= 1e-6;
      got[i] = (loss(hi) - loss(lo)) / 2e-6;
    }
    return got;
  };
  std::printf("reference gradients vs central differences%s\n", window ? ", window" : "");
  compare("d_q", fd(&emu::AttnCase::q, g.d_q), g.d_q, 1e-6);
  compare("d_k", fd(&emu::AttnCase::k, g.d_k), g.d_k, 1e-6);
  compare("d_v", fd(&emu::AttnCase::v, g.d_v), g.d_v, 1e-6);
  compare("d_sink", fd(&emu::AttnCase::sink_logit, g.d_sink), g.d_sink, 1e-6);
  compare("d_bias", fd(&emu::AttnCase::routing_bias, g.d_bias), g.d_bias, 1e-6);
}

/// The reference gate's gradients (norm and projection gates) against central differences.
void check_reference_gate_gradients(std::mt19937& rng) {
  emu::GateCase gc;
  gc.B = 1, gc.H = 2, gc.T = 3, gc.d = 5;
  for (bool norm : {true, false}) {
    gc.norm = norm;
    gc.v = random_vec(rng, 30), gc.tau = random_vec(rng, 2), gc.w = random_vec(rng, 10);
    gc.c = random_vec(rng, 2), gc.d_u = random_vec(rng, 30), gc.d_log = random_vec(rng, 6);
    auto gate_loss = [&](const emu::GateCase& x) {
      const emu::GateResult r = emu::reference_gate(x);
      double l = 0;
      for (std::size_t i = 0; i < r.u.size(); ++i) l += r.u[i] * x.d_u[i];
      for (std::size_t i = 0; i < r.log_g.size(); ++i) l += r.log_g[i] * x.d_log[i];
      return l;
    };
    const emu::GateResult gr = emu::reference_gate(gc);
    auto gfd = [&](Vec emu::GateCase::*field, std::size_t n) {
      Vec got(n);
      for (std::size_t i = 0; i < n; ++i) {
        emu::GateCase hi = gc, lo = gc;
        (hi.*field)[i] += 1e-6, (lo.*field)[i] -= 1e-6;
        got[i] = (gate_loss(hi) - gate_loss(lo)) / 2e-6;
      }
      return got;
    };
    compare(norm ? "g d_v" : "p d_v", gfd(&emu::GateCase::v, 30), gr.d_v, 1e-6);
    if (norm) compare("d_tau", gfd(&emu::GateCase::tau, 2), gr.d_tau, 1e-6);
    if (!norm) compare("d_w", gfd(&emu::GateCase::w, 10), gr.d_w, 1e-6);
    if (!norm) compare("d_c", gfd(&emu::GateCase::c, 2), gr.d_c, 1e-6);
  }
}

void check_reference_gradients(std::mt19937& rng) {
  check_reference_attention_gradients(rng, 0, 0);
  check_reference_attention_gradients(rng, 2, 1);
  check_reference_gate_gradients(rng);
}

template <typename T>
void run_gate_case(const std::string& name, emu::GateCase g) {
  using G = GateGeometry;
  g.v = rounded<T>(g.v), g.d_u = rounded<T>(g.d_u);
  auto v = to_type<T>(g.v), d_u = to_type<T>(g.d_u);
  std::vector<float> tau(g.tau.begin(), g.tau.end()), w(g.w.begin(), g.w.end()), cc(g.c.begin(), g.c.end());
  std::vector<float> d_log(g.d_log.begin(), g.d_log.end());
  const int64_t rows = g.B * g.H * g.T;
  std::vector<T> u(rows * g.d), d_v(rows * g.d);
  std::vector<float> log_g(rows), d_tau(g.H, 0.0f), d_w(g.H * g.d, 0.0f), d_c(g.H, 0.0f);

  GateParams p;
  p.v = v.data(), p.tau = tau.data(), p.w = w.data(), p.c = cc.data();
  p.gated_v = u.data(), p.log_gate = log_g.data();
  p.d_gated_v = d_u.data(), p.d_log_gate = d_log.data(), p.d_v = d_v.data();
  p.d_tau = g.norm ? d_tau.data() : nullptr;
  p.d_w = g.norm ? nullptr : d_w.data();
  p.d_c = g.norm ? nullptr : d_c.data();
  p.batch = g.B, p.heads = g.H, p.len = g.T, p.dim = static_cast<int>(g.d);
  p.beta = static_cast<float>(g.beta), p.norm = g.norm;

  const dim3 grid = grid_for(g.B * g.T, G::kRowsPerBlock, g.H);
  emu::launch(grid, G::kThreads, 0, [&] { value_gate_forward_kernel<T>(p); });
  emu::launch(grid, G::kThreads, G::kBackwardSmemBytes, [&] { value_gate_backward_kernel<T>(p); });

  const emu::GateResult want = emu::reference_gate(g);
  std::printf("%s %s d=%ld B=%ld H=%ld T=%ld\n", name.c_str(), type_name<T>(), (long)g.d, (long)g.B,
              (long)g.H, (long)g.T);
  const double tol = tolerance<T>();
  compare("u", to_double(u), want.u, tol);
  compare("log_g", Vec(log_g.begin(), log_g.end()), want.log_g, std::max(tol, 1e-5));
  compare("d_v", to_double(d_v), want.d_v, tol);
  if (g.norm) compare("d_tau", Vec(d_tau.begin(), d_tau.end()), want.d_tau, std::max(tol, 1e-5));
  if (!g.norm) compare("d_w", Vec(d_w.begin(), d_w.end()), want.d_w, std::max(tol, 1e-5));
  if (!g.norm) compare("d_c", Vec(d_c.begin(), d_c.end()), want.d_c, std::max(tol, 1e-5));
}

template <typename T>
void gate_cases(std::mt19937& rng) {
  for (int64_t d : {64, 48}) {
    for (bool norm : {true, false}) {
      emu::GateCase g;
      g.B = 2, g.H = 3, g.T = 37, g.d = d, g.norm = norm;
      g.v = random_vec(rng, g.B * g.H * g.T * d);
      std::fill(g.v.begin(), g.v.begin() + d, 0.0);  // a zero read: the norm gate's dz/dv is 0 there
      g.tau = random_vec(rng, g.H, 0.5);
      g.w = random_vec(rng, g.H * d, 0.2);
      g.c = random_vec(rng, g.H);
      g.d_u = random_vec(rng, g.v.size());
      g.d_log = random_vec(rng, g.B * g.H * g.T);
      run_gate_case<T>(norm ? "norm-gate" : "proj-gate", g);
    }
  }
}

/// `rotation` shifts the window grid's features from one dtype to the next.
template <typename T>
void all_cases(std::mt19937& rng, bool quick, int rotation) {
  attention_cases<T, 64>(rng, quick);
  window_cases<T, 64>(rng, quick, rotation);
  attention_cases<T, 128>(rng, quick);
  window_cases<T, 128>(rng, quick, rotation + 1);
  gate_cases<T>(rng);
}

void print_summary() {
  std::printf("attention: %d cases (%d with a window, %d of them also bit for bit against window 0)\n",
              g_stats.cases, g_stats.windowed, g_stats.bit_exact);
  for (const auto& [type, rel] : g_stats.max_rel)
    std::printf("  %s: max rel err %.2e over every output\n", type.c_str(), rel);
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  std::mt19937 rng(20240520);
  check_reference_gradients(rng);
  all_cases<float>(rng, quick, 0);
  all_cases<__half>(rng, quick, 2);
  all_cases<__nv_bfloat16>(rng, quick, 3);
  print_summary();
  std::printf("%s: %d failed comparison(s)\n", g_failures ? "FAILED" : "PASSED", g_failures);
  return g_failures ? 1 : 0;
}
