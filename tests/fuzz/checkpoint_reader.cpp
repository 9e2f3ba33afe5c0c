// The checkpoint readers under fuzzing (tests/fuzz/fuzz_checkpoint.py drives this program).
//
//   fuzz_checkpoint_reader make <run_dir>   a tiny run with checkpoints at steps 1 and 2
//   fuzz_checkpoint_reader serve            reads "run <dir>" / "lone <file>" lines on stdin and
//                                           answers one line each, flushed:
//       accepted <step>       the reader took the checkpoint of that step
//       refused <message>     a CheckpointError (the expected answer to damage)
//       unexpected <message>  any other exception: a failure (damage must be a CheckpointError)
//
// "run": RunDir::latest_checkpoint with check_restorable into a fresh model and AdamW (what a resume does);
// "lone": load_model on a model.safetensors (what eval, probe and ablate do).
#include <iostream>
#include <memory>
#include <string>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "attnlab/checkpoint.h"
#include "attnlab/run_dir.h"
#include "unit/trainee.h"

namespace {

namespace fs = std::filesystem;

/// "combo": every kind of arm parameter (sink logit and gate tensors).
attnlab::testing::Trainee trainee() { return attnlab::testing::Trainee(attnlab::testing::tiny_config("combo"), 1); }

int make(const fs::path& run_dir) {
  torch::manual_seed(0);
  auto t = trainee();
  for (int64_t step = 1; step <= 2; ++step) {
    t.step();
    attnlab::TrainState state;
    state.step = step;
    state.tokens_seen = 32 * step;
    state.data_position = step;
    state.val_loss = 4.0 - 0.1 * double(step);
    state.best_val_loss = state.val_loss;
    state.config = attnlab::testing::tiny_run_config("combo");
    attnlab::RetentionPolicy keep_all;
    keep_all.keep_last = 10;
    attnlab::save_checkpoint(attnlab::RunDir(run_dir).checkpoints_path(), *t.model, *t.opt, state, keep_all);
  }
  return 0;
}

std::string one_line(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return text;
}

std::string answer(const std::string& kind, const fs::path& path) {
  try {
    if (kind == "lone") return "accepted " + std::to_string(attnlab::load_model(path).step);
    auto t = trainee();
    const auto ckpt = attnlab::RunDir(path).latest_checkpoint(nullptr, true, [&](const attnlab::LoadedCheckpoint& c) {
      attnlab::check_restorable(c, *t.model, *t.opt);
    });
    if (!ckpt) return "refused no checkpoint";
    attnlab::restore(*ckpt, *t.model, *t.opt);
    return "accepted " + std::to_string(ckpt->state.step);
  } catch (const attnlab::CheckpointError& e) {
    return "refused " + one_line(e.what());
  } catch (const std::exception& e) {
    return "unexpected " + one_line(e.what());
  }
}

int serve() {
  std::string kind, path;
  while (std::cin >> kind && std::getline(std::cin >> std::ws, path)) {
    std::cout << answer(kind, path) << std::endl;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::err);  // the fallback warnings would flood the harness's log
  torch::set_num_threads(1);
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "make" && argc == 3) return make(argv[2]);
  if (mode == "serve" && argc == 2) return serve();
  std::cerr << "usage: fuzz_checkpoint_reader make <run_dir> | serve\n";
  return 2;
}
