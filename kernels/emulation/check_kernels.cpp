// Runs the CUDA kernels' own source (kernels/cuda/*_kernel.cuh) on the CPU through
// cuda_host_emulation.h and compares them with the double-precision reference (reference.h): every
// feature flag, fp32/fp16/bf16, head dims 64 and 128, ragged lengths, decode (Tq < Tk), sink logits
// of +-100 and rows with no visible key. It checks indexing, masking, synchronisation and the math;
// not speed, and not the real tensor-core hardware (wmma is emulated from its documented semantics).
// Usage: kernels/emulation/run.sh [--quick]. Exit status 1 when any comparison fails.
#include <cstdio>
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
/// failures. Inputs are unit normals, so outputs are O(1): the floor of 1 keeps an output that is
/// exactly 0 in theory (d_q with a single key) from turning round-off into a large relative error.
void compare(const std::string& what, const Vec& got, const Vec& want, double tol) {
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
  std::printf("  %-4s %-8s rel err %.2e (tol %.0e)%s\n", ok ? "ok" : "FAIL", what.c_str(), rel, tol,
              inf_mismatch ? " [inf/nan mismatch]" : "");
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

dim3 grid_for(int64_t len, int64_t rows, int64_t bh) {
  return dim3(static_cast<unsigned>((len + rows - 1) / rows), static_cast<unsigned>(bh));
}

/// The launch sequence of run_flash_fwd / run_flash_bwd_delta / run_flash_bwd, on the emulator.
template <typename T, int D>
void run_attention_case(const std::string& name, emu::AttnCase c, bool null_sink_pointer) {
  using G = TileGeometry<T, D>;
  c.q = rounded<T>(c.q), c.k = rounded<T>(c.k), c.v = rounded<T>(c.v), c.d_o = rounded<T>(c.d_o);
  auto q = to_type<T>(c.q), k = to_type<T>(c.k), v = to_type<T>(c.v), d_o = to_type<T>(c.d_o);
  std::vector<float> sink(c.sink_logit.begin(), c.sink_logit.end());
  std::vector<float> bias(c.routing_bias.begin(), c.routing_bias.end());
  std::vector<float> d_lse(c.d_lse.begin(), c.d_lse.end());
  std::unique_ptr<bool[]> mask(new bool[c.key_mask.size() + 1]);
  for (std::size_t i = 0; i < c.key_mask.size(); ++i) mask[i] = c.key_mask[i] != 0;

  const int64_t BH = c.B * c.H;
  std::vector<T> o(BH * c.Tq * D), d_q(o.size()), d_k(BH * c.Tk * D), d_v(d_k.size());
  std::vector<float> lse(BH * c.Tq), delta(lse.size()), d_sink(c.H, 123.0f), d_bias(BH * c.Tk);

  FlashParams p;
  p.q = q.data(), p.k = k.data(), p.v = v.data(), p.o = o.data(), p.lse = lse.data();
  p.sink_logit = c.sink && !null_sink_pointer ? sink.data() : nullptr;
  p.routing_bias = c.bias ? bias.data() : nullptr;
  p.key_mask = c.mask ? mask.get() : nullptr;
  p.d_o = d_o.data(), p.d_q = d_q.data(), p.d_k = d_k.data(), p.d_v = d_v.data();
  p.d_sink_logit = c.sink ? d_sink.data() : nullptr;
  p.d_routing_bias = c.bias ? d_bias.data() : nullptr;
  p.delta = delta.data();
  p.d_lse = d_lse.data();
  p.batch = c.B, p.heads = c.H, p.q_len = c.Tq, p.k_len = c.Tk, p.head_dim = D;
  p.scale = static_cast<float>(c.scale());
  p.has_sink = c.sink;

  emu::launch(grid_for(c.Tq, G::kRows, BH), G::kThreads, FwdSmem<T, D>::kBytes,
              [&] { flash_fwd_kernel<T, D>(p); });
  std::fill(d_sink.begin(), d_sink.end(), 0.0f);  // the launcher's cudaMemsetAsync
  emu::launch(grid_for(c.Tq, DeltaGeometry::kRowsPerBlock, BH), DeltaGeometry::kThreads,
              DeltaGeometry::kSmemBytes, [&] { flash_bwd_delta_kernel<T>(p); });
  emu::launch(grid_for(c.Tk, G::kRows, BH), G::kThreads, BwdSmem<T, D>::kBytes,
              [&] { flash_bwd_kv_kernel<T, D>(p); });
  emu::launch(grid_for(c.Tq, G::kRows, BH), G::kThreads, BwdSmem<T, D>::kBytes,
              [&] { flash_bwd_q_kernel<T, D>(p); });

  if (null_sink_pointer) std::fill(c.sink_logit.begin(), c.sink_logit.end(), 0.0);
  const emu::AttnResult want = emu::reference_attention(c);
  std::printf("%s %s d=%d B=%ld H=%ld Tq=%ld Tk=%ld%s%s%s\n", name.c_str(), type_name<T>(), D, (long)c.B,
              (long)c.H, (long)c.Tq, (long)c.Tk, c.sink ? " sink" : "", c.bias ? " bias" : "",
              c.mask ? " mask" : "");
  const double tol = tolerance<T>();
  compare("o", to_double(o), want.o, tol);
  compare("lse", Vec(lse.begin(), lse.end()), want.lse, std::max(tol, 1e-5));
  compare("d_q", to_double(d_q), want.d_q, tol);
  compare("d_k", to_double(d_k), want.d_k, tol);
  compare("d_v", to_double(d_v), want.d_v, tol);
  if (c.sink) compare("d_sink", Vec(d_sink.begin(), d_sink.end()), want.d_sink, tol);
  if (c.bias) compare("d_bias", Vec(d_bias.begin(), d_bias.end()), want.d_bias, tol);
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

/// The reference's own gradients against central differences of its forward (loss = sum o dO +
/// sum lse dlse), so that the kernels are not checked against a shared misreading of the math.
void check_reference_attention_gradients(std::mt19937& rng) {
  auto c = make_case(rng, 1, 2, 5, 7, 8);
  c.sink = c.bias = c.mask = true;
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
  std::printf("reference gradients vs central differences\n");
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
  check_reference_attention_gradients(rng);
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

template <typename T>
void all_cases(std::mt19937& rng, bool quick) {
  attention_cases<T, 64>(rng, quick);
  attention_cases<T, 128>(rng, quick);
  gate_cases<T>(rng);
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  std::mt19937 rng(20240520);
  check_reference_gradients(rng);
  all_cases<float>(rng, quick);
  all_cases<__half>(rng, quick);
  all_cases<__nv_bfloat16>(rng, quick);
  std::printf("%s: %d failed comparison(s)\n", g_failures ? "FAILED" : "PASSED", g_failures);
  return g_failures ? 1 : 0;
}
