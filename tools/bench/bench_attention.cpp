// Benchmark of the attention backends: for each arm and backend, milliseconds, TFLOP/s, peak memory
// and tensor copies of the forward and of forward+backward, with every backend's baseline and sdpa
// timed in the same run so that the ratios hold on a noisy machine. Prints a Markdown table.
//
//   bench_attention                      # CPU set: B=2 H=4 d=64 T in {128, 256, 512, 1024}, float32
//   bench_attention --device cuda        # GPU set: B=8 H=12 d=64 T in {1024, 2048, 4096}, bfloat16
//   bench_attention --T 4096 --windows 0 256   # a local layer (W = 256) beside full causal attention
//
// Ratios: each arm's time over its own backend's baseline at the same T, each row's over plain
// SDPA's baseline (the speed yardstick), and over the same arm on flash (cuDNN against
// FlashAttention-2: what `auto`'s table in docs/kernels.md records). Copies: aten::copy_ calls of one forward+backward
// (copy_count.h), counted once outside the timed runs.
//
// FLOPs are the useful causal ones, the same for every backend: forward 4 B H d P with P the number
// of visible (query, key) pairs; backward 2.5x the forward (five matrix products against two).
// The forward is timed without autograd (inference); forward+backward with it.
// Times are taken in this process. Peak memory, CPU: each case runs once more in a fresh child
// process (this binary, --child) that fixes glibc's mmap threshold at 64 KiB (so freed buffers
// return to the OS), warms up once, resets the kernel's high-water mark (/proc/self/clear_refs) and
// reports VmHWM - VmRSS around one call: the bytes the call itself needed beyond its inputs. CUDA:
// the caching allocator's peak allocated bytes around one call, minus what was allocated before it.
#include <malloc.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <c10/core/CachingDeviceAllocator.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "attnlab/arm_attention.h"
#include "attnlab/arm_params.h"
#include "attnlab/output_gate.h"
#include "attnlab/copy_count.h"
#include "attnlab/cpu_math.h"
#include "attnlab/cudnn_attention.h"
#include "attnlab/flash_attention.h"
#include "bench_common.h"

namespace {

using attnlab::AttentionBackend;
namespace bench = attnlab::bench;

struct Setup {
  std::string device = "cpu";
  std::string dtype;  // float32 on CPU, bfloat16 on CUDA unless given
  int64_t B = 0, H = 0, d = 64;
  std::vector<int64_t> lengths;
  std::vector<std::string> arms;
  std::vector<std::string> backends;  // empty = every backend that serves the arm
  double min_time = 0.3;  // seconds of timed iterations per case
  bool cpu_clock = false;  // time with the process's CPU clock (CPU, one thread: immune to a loaded machine)
  int threads = 0;        // intra-op threads; 0 = LibTorch's default
  std::vector<int64_t> windows{0};  // W of a local layer per case; 0: full causal attention
  int64_t keep_first = 0;           // n of every windowed case
};

struct CaseSpec {
  std::string arm, backend;
  int64_t T = 0;
  bool backward = false;
  int64_t window = 0;
};

attnlab::AttentionWindow window_of(const Setup& s, const CaseSpec& c) {
  return c.window > 0 ? attnlab::AttentionWindow{c.window, s.keep_first} : attnlab::AttentionWindow{};
}

struct Measure {
  double ms = 0, peak_bytes = 0;
  int64_t copies = 0;
};

at::ScalarType parse_dtype(const std::string& name) {
  if (name == "float32") return at::kFloat;
  if (name == "float64") return at::kDouble;
  if (name == "bfloat16") return at::kBFloat16;
  if (name == "float16") return at::kHalf;
  throw std::invalid_argument("unknown dtype '" + name + "'; valid: float32, float64, bfloat16, float16");
}

/// Visible (query, key) pairs of a causal call over T positions under `window` (docs/windows.md).
double visible_pairs(int64_t T, const attnlab::AttentionWindow& window) {
  if (!window.hides_keys(T)) return 0.5 * static_cast<double>(T) * static_cast<double>(T + 1);
  double pairs = 0;
  for (int64_t i = 0; i < T; ++i) {
    const int64_t recent = std::min(i + 1, window.window);                          // i - W < j <= i
    pairs += static_cast<double>(recent + std::max<int64_t>(0, std::min(window.keep_first, i + 1 - recent)));
  }
  return pairs;
}

double causal_flops(const Setup& s, int64_t T, bool backward, const attnlab::AttentionWindow& window = {}) {
  const double pairs = visible_pairs(T, window);
  const double forward = 4.0 * static_cast<double>(s.B * s.H * s.d) * pairs;
  return backward ? 3.5 * forward : forward;
}

/// Inputs of one case, laid out as in the model: q, k, v [B, H, T, d] are views of one [B, T, 3, H, d]
/// tensor (c_attn's output), the output goes back to [B, T, H, d] memory as the layer's transpose
/// does, and its gradient arrives there; the arm's parameters at their initial values. An output
/// gate is computed from x [B, T, H d] (ln_1's output) and applied before that transpose's result.
struct Workload {
  attnlab::ArmSpec arm;
  AttentionBackend backend;
  at::Tensor qkv, d_y;
  at::Tensor x, out_gate_w, out_gate_c;  ///< output-gate arms only
  attnlab::ArmLayerParams params;
  std::vector<at::Tensor> leaves;

  attnlab::AttentionWindow window;

  Workload(const Setup& s, const CaseSpec& c) : arm(attnlab::arm_by_name(c.arm)), window(window_of(s, c)) {
    backend = attnlab::parse_attention_backend(c.backend);
    auto opts = at::TensorOptions().dtype(parse_dtype(s.dtype)).device(s.device);
    auto leaf = [&](at::Tensor t) { return leaves.emplace_back(t.requires_grad_(c.backward)); };
    qkv = leaf(at::randn({s.B, c.T, 3, s.H, s.d}, opts));
    d_y = at::randn({s.B, c.T, s.H, s.d}, opts);
    auto acc = opts.dtype(at::kFloat);
    for (const auto& p : attnlab::attention_params(arm, s.H, s.d)) {
      auto t = leaf(at::full(p.shape, p.init_value, acc));
      if (p.param == attnlab::ArmParam::out_gate_w) out_gate_w = t;  // as the model's attention layer
      else if (p.param == attnlab::ArmParam::out_gate_c) out_gate_c = t;
      else attnlab::arm_param_slot(params, p.param) = t;
    }
    if (arm.out_gate != attnlab::OutputGate::none) x = leaf(at::randn({s.B, c.T, s.H * s.d}, opts));
  }

  /// One forward (and backward): exactly what a training step's attention layer does between c_attn
  /// and c_proj.
  void step(bool backward) {
    for (auto& t : leaves) t.mutable_grad().reset();
    auto head = [&](int64_t i) { return qkv.select(2, i).transpose(1, 2); };  // [B, H, T, d] view
    const auto keys = attnlab::prepare_keys(arm, params, head(1), head(2), false, backend);
    const auto out = attnlab::arm_attention(arm, params, head(0), keys, false, backend, window);
    at::Tensor gamma;
    if (arm.out_gate != attnlab::OutputGate::none)  // float32 leaves cast per step, as autocast does in training
      gamma = attnlab::output_gate_values(x, out_gate_w.to(x.scalar_type()), out_gate_c.to(x.scalar_type()));
    const auto y = attnlab::gated_heads(out.o, gamma, arm.out_gate);  // [B, T, H d], as the layer hands c_proj
    if (backward) y.backward(d_y.view_as(y));
  }
};

void synchronize(const Setup& s) {
  if (s.device != "cpu") torch::cuda::synchronize();
}

double median_ms(const Setup& s, Workload& w, bool backward) {
  std::vector<double> times;
  const double start = bench::now_ms(s.cpu_clock);
  while (times.size() < 3 || bench::now_ms(s.cpu_clock) - start < 1e3 * s.min_time) {
    const double t0 = bench::now_ms(s.cpu_clock);
    w.step(backward);
    synchronize(s);
    times.push_back(bench::now_ms(s.cpu_clock) - t0);
    if (times.size() >= 50) break;
  }
  return bench::median(times);
}

/// kB value of a /proc/self/status field, as bytes.
double proc_status_bytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return 1024.0 * std::stod(line.substr(field.size() + 1));
  }
  return 0.0;
}

double peak_bytes_of_one_step(const Setup& s, Workload& w, bool backward) {
  if (s.device == "cpu") {
    malloc_trim(0);
    std::ofstream("/proc/self/clear_refs") << "5";  // resets VmHWM to the current RSS
    const double before = proc_status_bytes("VmRSS");
    w.step(backward);
    return proc_status_bytes("VmHWM") - before;
  }
  auto* alloc = c10::getDeviceAllocator(c10::DeviceType::CUDA);
  const auto index = at::Device(s.device).has_index() ? at::Device(s.device).index() : 0;
  synchronize(s);
  alloc->resetPeakStats(index);
  const double before = static_cast<double>(alloc->getDeviceStats(index).allocated_bytes[0].current);
  w.step(backward);
  synchronize(s);
  return static_cast<double>(alloc->getDeviceStats(index).allocated_bytes[0].peak) - before;
}

/// Median milliseconds of one case, in this process (timings are not disturbed by the child's
/// allocator settings).
double time_here(const Setup& s, const CaseSpec& c) {
  Workload w(s, c);
  std::optional<torch::NoGradGuard> no_grad;
  if (!c.backward) no_grad.emplace();
  for (int i = 0; i < 3; ++i) w.step(c.backward);  // warm-up: thread pools, allocator caches
  synchronize(s);
  return median_ms(s, w, c.backward);
}

/// Peak bytes of one call of a case, in this process.
double peak_here(const Setup& s, const CaseSpec& c) {
  Workload w(s, c);
  std::optional<torch::NoGradGuard> no_grad;
  if (!c.backward) no_grad.emplace();
  w.step(c.backward);  // warm-up: thread pools, lazily allocated state
  synchronize(s);
  return peak_bytes_of_one_step(s, w, c.backward);
}

std::string self_exe() {
  std::array<char, 4096> buf{};
  const auto n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) throw std::runtime_error("cannot read /proc/self/exe");
  return std::string(buf.data(), static_cast<size_t>(n));
}

/// Peak bytes of one CPU case, measured in a fresh process so that the peak RSS is its own.
double peak_in_child(const Setup& s, const CaseSpec& c) {
  std::ostringstream cmd;
  cmd << self_exe() << " --child --device " << s.device << " --dtype " << s.dtype << " --B " << s.B << " --H " << s.H
      << " --d " << s.d << " --threads " << s.threads << " --arms " << c.arm << " --backend " << c.backend << " --T "
      << c.T << (c.backward ? " --backward" : "") << " --windows " << c.window << " --keep-first " << s.keep_first;
  FILE* pipe = popen(cmd.str().c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot start " + cmd.str());
  std::array<char, 512> line{};
  double peak = -1;
  while (fgets(line.data(), line.size(), pipe)) {
    std::istringstream in(line.data());
    std::string tag;
    if (in >> tag && tag == "PEAK") in >> peak;
  }
  if (pclose(pipe) != 0 || peak < 0) throw std::runtime_error("child failed: " + cmd.str());
  return peak;
}

/// Tensor copies of one call of a case (after a warm-up call), in this process.
int64_t copies_here(const Setup& s, const CaseSpec& c) {
  Workload w(s, c);
  std::optional<torch::NoGradGuard> no_grad;
  if (!c.backward) no_grad.emplace();
  w.step(c.backward);
  synchronize(s);
  attnlab::CopyCounter counter;
  w.step(c.backward);
  synchronize(s);
  return counter.copies();
}

Measure measure(const Setup& s, const CaseSpec& c) {
  Measure m;
  m.ms = time_here(s, c);
  m.peak_bytes = s.device == "cpu" ? peak_in_child(s, c) : peak_here(s, c);
  m.copies = copies_here(s, c);
  return m;
}

/// The backends that serve `arm` at a window: the backend table's rows whose refusal of such a call is
/// empty (sdpa and cudnn have no window; flash on CUDA only with n = 0).
std::vector<std::string> backends_for(const Setup& s, const std::string& arm, int64_t window) {
  attnlab::AttentionRequest r;
  r.device = at::Device(s.device), r.dtype = parse_dtype(s.dtype), r.head_dim = s.d;
  r.q_len = r.k_len = window + s.keep_first + 1;  // a length the window hides a key of
  if (window > 0) r.window = {window, s.keep_first};
  std::vector<std::string> all;
  for (const auto& row : attnlab::backend_table())
    if (row.refusal(r, attnlab::arm_by_name(arm)).empty()) all.push_back(row.name);
  if (s.backends.empty()) return all;
  std::vector<std::string> chosen;
  for (const auto& b : all)
    if (std::find(s.backends.begin(), s.backends.end(), b) != s.backends.end()) chosen.push_back(b);
  return chosen;
}

struct Row {
  std::string arm, backend;
  int64_t T;
  int64_t window;
  Measure fwd, fwd_bwd;
};

std::string fmt(double x, int precision) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(precision);
  out << x;
  return out.str();
}

std::string ratio(double num, const Row* den, bool backward) {
  if (den == nullptr) return "-";
  return fmt(num / (backward ? den->fwd_bwd.ms : den->fwd.ms), 2);
}

void print_table(const Setup& s, const std::vector<Row>& rows) {
  using Key = std::tuple<int64_t, int64_t, std::string>;
  std::map<Key, const Row*> base;   // (T, W, backend) -> baseline row
  std::map<Key, const Row*> flash;  // (T, W, arm) -> the arm's flash row
  std::map<std::tuple<int64_t, std::string, std::string>, const Row*> full;  // (T, arm, backend) at W = 0
  for (const auto& r : rows) {
    if (r.arm == "baseline") base[{r.T, r.window, r.backend}] = &r;
    if (r.backend == "flash") flash[{r.T, r.window, r.arm}] = &r;
    if (r.window == 0) full[{r.T, r.arm, r.backend}] = &r;
  }
  std::cout << "\n| T | W | arm | backend | fwd ms | fwd TFLOP/s | fwd peak MiB | fwd+bwd ms | fwd+bwd TFLOP/s | "
               "fwd+bwd peak MiB | copies fwd / fwd+bwd | fwd / baseline | fwd+bwd / baseline | fwd+bwd / sdpa | "
               "fwd+bwd / flash | fwd / full | fwd+bwd / full |\n"
            << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  const double mib = 1024.0 * 1024.0;
  for (const auto& r : rows) {
    auto find = [](const auto& map, const auto& key) -> const Row* {
      const auto it = map.find(key);
      return it == map.end() ? nullptr : it->second;
    };
    const Row* b = find(base, Key{r.T, r.window, r.backend});
    const Row* y = find(base, Key{r.T, r.window, "sdpa"});
    const Row* f = find(flash, Key{r.T, r.window, r.arm});
    const Row* w0 = r.window > 0 ? find(full, std::make_tuple(r.T, r.arm, r.backend)) : nullptr;
    const auto window = window_of(s, {r.arm, r.backend, r.T, false, r.window});
    std::cout << "| " << r.T << " | " << (r.window > 0 ? std::to_string(r.window) : "-") << " | " << r.arm << " | "
              << r.backend << " | " << fmt(r.fwd.ms, 2) << " | "
              << fmt(causal_flops(s, r.T, false, window) / (r.fwd.ms * 1e9), 3) << " | "
              << fmt(r.fwd.peak_bytes / mib, 1) << " | " << fmt(r.fwd_bwd.ms, 2) << " | "
              << fmt(causal_flops(s, r.T, true, window) / (r.fwd_bwd.ms * 1e9), 3) << " | "
              << fmt(r.fwd_bwd.peak_bytes / mib, 1) << " | " << r.fwd.copies << " / " << r.fwd_bwd.copies << " | "
              << ratio(r.fwd.ms, b, false) << " | " << ratio(r.fwd_bwd.ms, b, true) << " | "
              << ratio(r.fwd_bwd.ms, y, true) << " | " << ratio(r.fwd_bwd.ms, f, true) << " | "
              << ratio(r.fwd.ms, w0, false) << " | " << ratio(r.fwd_bwd.ms, w0, true) << " |\n";
  }
}

/// First line of /proc/loadavg: how busy the machine was (a loaded machine makes times noisy).
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

void describe(const Setup& s) {
  std::cout << "# bench_attention: device " << s.device << ", " << s.dtype << ", B=" << s.B << " H=" << s.H
            << " d=" << s.d << ", threads " << at::get_num_threads() << " of " << std::thread::hardware_concurrency()
            << " cores, load average " << load_average() << ", torch " << TORCH_VERSION << "\n"
            << "# FLOPs: useful causal (forward 4 B H d P, P the visible pairs: T(T+1)/2, fewer in a window; backward "
               "2.5x forward), same for every backend.\n"
            << "# W: a local layer's window (docs/windows.md), keep_first " << s.keep_first
            << "; '-' full causal attention; / full: over the same arm and backend at W = '-'.\n"
            << "# copies: aten::copy_ calls of one call (copy_count.h), counted outside the timed runs.\n"
            << "# ms: " << (s.cpu_clock ? "process CPU time, " : "wall time, ") << "median over >= 3 iterations and >= "
            << s.min_time
            << " s; forward without autograd; warm allocator (glibc keeps freed buffers).\n"
            << (s.device == "cpu"
                    ? "# peak: VmHWM - VmRSS around one call beyond its inputs, in a fresh child process per case "
                      "(glibc mmap threshold fixed at 64 KiB, /proc/self/clear_refs reset); times in the parent.\n"
                    : "# peak: CUDA caching allocator peak allocated bytes around one call, minus the bytes "
                      "allocated before it.\n");
}

void run_all(const Setup& s) {
  describe(s);
  std::vector<Row> rows;
  for (auto T : s.lengths) {
    for (auto window : s.windows) {
      for (const auto& arm : s.arms) {
        for (const auto& backend : backends_for(s, arm, window)) {
          Row r{arm, backend, T, window, {}, {}};
          for (bool backward : {false, true}) {
            const CaseSpec c{arm, backend, T, backward, window};
            (backward ? r.fwd_bwd : r.fwd) = measure(s, c);
          }
          std::cerr << "  T=" << T << " W=" << window << " " << arm << " " << backend << ": " << fmt(r.fwd.ms, 2)
                    << " / " << fmt(r.fwd_bwd.ms, 2) << " ms\n";
          rows.push_back(r);
        }
      }
    }
  }
  print_table(s, rows);
}

void fill_defaults(Setup& s) {
  const bool gpu = s.device != "cpu";
  if (s.dtype.empty()) s.dtype = gpu ? "bfloat16" : "float32";
  if (s.B == 0) s.B = gpu ? 8 : 2;
  if (s.H == 0) s.H = gpu ? 12 : 4;
  if (s.lengths.empty()) s.lengths = gpu ? std::vector<int64_t>{1024, 2048, 4096} : std::vector<int64_t>{128, 256, 512, 1024};
  if (s.arms.empty())
    for (const auto& arm : attnlab::all_arms())
      if (!arm.sink_token) s.arms.push_back(arm.name);  // sink_token's attention is baseline's
}

}  // namespace

int main(int argc, char** argv) {
  attnlab::warm_up_cpu_vector_math();
  CLI::App app{"Attention backend benchmark: every arm on every backend, against baseline and SDPA"};
  Setup s;
  bool child = false, backward = false;
  std::string backend;
  app.add_option("--device", s.device, "cpu, cuda or cuda:N (auto picks cuda when available)")->default_val("auto");
  app.add_option("--dtype", s.dtype, "float32 | float64 | bfloat16 | float16 (default float32 CPU, bfloat16 CUDA)");
  app.add_option("--B", s.B, "batch (default 2 CPU, 8 CUDA)");
  app.add_option("--H", s.H, "heads (default 4 CPU, 12 CUDA)");
  app.add_option("--d", s.d, "head dim")->default_val(64);
  app.add_option("--T", s.lengths, "sequence lengths");
  app.add_option("--arms", s.arms, "arms (default: every in-attention arm)");
  app.add_option("--min-time", s.min_time, "seconds of timed iterations per case")->default_val(0.3);
  app.add_flag("--cpu-clock", s.cpu_clock,
               "time with the process's CPU clock instead of the wall clock (CPU with --threads 1: what the "
               "work costs however loaded the machine is)");
  app.add_option("--threads", s.threads, "intra-op threads (0 = LibTorch's default)")->default_val(0);
  app.add_flag("--child", child, "internal: measure one case's peak memory and print PEAK bytes");
  app.add_option("--backends", s.backends,
                 "backends to time (default: fused, flash and cudnn where they run, reference, and sdpa for "
                 "baseline)");
  app.add_option("--backend", backend, "internal (--child): the backend");
  app.add_flag("--backward", backward, "internal (--child): forward+backward");
  app.add_option("--windows", s.windows, "windows W of a local layer to time, 0 = full causal attention (default 0)");
  app.add_option("--keep-first", s.keep_first, "kept first positions n of every windowed case")->default_val(0);
  CLI11_PARSE(app, argc, argv);
  try {
    if (s.device == "auto") s.device = torch::cuda::is_available() ? "cuda" : "cpu";
    if (s.threads > 0) at::set_num_threads(s.threads);
    if (s.cpu_clock && s.device != "cpu") throw std::invalid_argument("--cpu-clock times CPU work: use it with --device cpu");
    fill_defaults(s);
    if (child) {
      mallopt(M_MMAP_THRESHOLD, 64 * 1024);  // freed large buffers go back to the OS: RSS tracks live bytes
      std::cout << "PEAK " << peak_here(s, {s.arms.at(0), backend, s.lengths.at(0), backward, s.windows.at(0)})
                << std::endl;
      return 0;
    }
    // Times run on a warm allocator, as in a training loop: glibc keeps freed buffers instead of
    // returning them to the OS, so no backend pays page faults on every iteration.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest allowed value
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    run_all(s);
  } catch (const std::exception& e) {
    std::cerr << "bench_attention: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
