// `attnlab sweep --emit slurm`: a job array whose task k runs the sweep's run k with the same
// binary and arguments as the local runner (split into several arrays past Slurm's MaxArraySize),
// as one process or as a data-parallel job of srun tasks. Resume needs nothing special: the trainer
// resumes from the run's newest checkpoint, and returns at once for a finished run.
#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "attnlab/sweep.h"
#include "common/durable_file.h"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The runs [first, first + count) of the grid, as one array.
struct Part {
  size_t first = 0, count = 0;
  fs::path script;
};

std::string header(const SweepSpec& spec, const Part& part, const SlurmLayout& layout) {
  const fs::path logs = fs::absolute(spec.out / "logs").lexically_normal();
  std::string text = fmt::format(
      "#!/bin/bash\n"
      "# Slurm job array for sweep '{}' ({}), written by `attnlab sweep --emit slurm`.\n"
      "# Task k runs run {} + k of manifest.json. Submit with: sbatch {}\n"
      "# Re-running a task resumes its run from the newest checkpoint (a finished run returns at once),\n"
      "# so requeueing, after preemption or the time limit, is always safe.\n"
      "#SBATCH --job-name=attnlab-{}\n"
      "#SBATCH --array=0-{}\n"
      "#SBATCH --requeue\n"
      "#SBATCH --open-mode=append\n"
      "#SBATCH --cpus-per-task={}\n"
      "#SBATCH --signal=B:USR1@{}\n"
      "#SBATCH --output={}/slurm-%A_%a.out\n",
      spec.name, spec.file.string(), part.first, part.script.string(), spec.name, part.count - 1,
      spec.threads_per_run, spec.slurm_signal_margin, logs.string());
  if (layout.gpus_per_node > 0) {  // one srun task (rank) per GPU, each seeing its node's GPUs
    text += fmt::format("#SBATCH --nodes={}\n#SBATCH --ntasks-per-node={}\n#SBATCH --gpus-per-node={}\n", layout.nodes,
                        layout.gpus_per_node, layout.gpus_per_node);
  }
  for (const auto& [key, value] : spec.slurm) text += "#SBATCH --" + key + "=" + value + "\n";
  return text;
}

std::string run_table(const std::vector<SweepRun>& runs, const Part& part) {
  std::string text = "case \"${SLURM_ARRAY_TASK_ID:?submit with sbatch, or set SLURM_ARRAY_TASK_ID}\" in\n";
  for (size_t i = 0; i < part.count; ++i) {
    const auto& run = runs[part.first + i];
    text += fmt::format("  {}) RUN={}; ARGS=(", i, shell_quote(run.name));
    const auto args = train_arguments(run);
    for (size_t a = 0; a < args.size(); ++a) text += (a ? " " : "") + shell_quote(args[a]);
    text += ") ;;\n";
  }
  text += "  *) echo \"[attnlab] no run for array index $SLURM_ARRAY_TASK_ID\" >&2; exit 1 ;;\nesac\n";
  return text;
}

// One process per run.
const char* kLaunchOne = R"SH("$ATTNLAB" "${ARGS[@]}" &
)SH";

// A data-parallel job: one srun task per GPU, torchrun's variables from Slurm's (docs/distributed.md);
// srun forwards the script's SIGTERM to every rank, and --kill-on-bad-exit ends the job when one fails.
const char* kLaunchRanks = R"SH(export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))
srun --kill-on-bad-exit=1 bash -c \
  'RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID exec "$0" "$@"' "$ATTNLAB" "${ARGS[@]}" &
)SH";

// Slurm signals the batch shell: USR1 slurm_signal_margin seconds before the time limit (--signal),
// TERM on scancel, on preemption and at the limit itself. Either way the trainer gets a TERM, saves a
// checkpoint and exits; only a USR1 without a TERM puts the task back in the queue. A cancelled task
// must stay cancelled, and a preempted one Slurm requeues itself (PreemptMode=REQUEUE).
const char* kPrologue = R"SH(echo "[attnlab] $RUN (array task $SLURM_ARRAY_TASK_ID, restart ${SLURM_RESTART_COUNT:-0})"
stop_trainer() { [ -n "${pid:-}" ] && kill -TERM "$pid" 2>/dev/null; }
trap 'warned=1; stop_trainer' USR1
trap 'terminated=1; stop_trainer' TERM
)SH";
const char* kBody = R"SH(pid=$!
while kill -0 "$pid" 2>/dev/null; do wait "$pid" || true; done
rc=0
wait "$pid" || rc=$?
task="${SLURM_ARRAY_JOB_ID:-}_${SLURM_ARRAY_TASK_ID}"
if [ "$rc" -ge 128 ] && [ -n "${warned:-}" ] && [ -z "${terminated:-}" ] && [ -n "${SLURM_ARRAY_JOB_ID:-}" ] &&
   scontrol show job "$task" 2>/dev/null | grep -q "JobState=RUNNING"; then
  echo "[attnlab] $RUN stopped before its time limit (exit $rc); requeueing it to resume from its checkpoint"
  scontrol requeue "$task" || true
elif [ -n "${terminated:-}" ]; then
  echo "[attnlab] $RUN stopped by SIGTERM (exit $rc: scancel, preemption or the time limit); not requeued by this script"
fi
exit "$rc"
)SH";

// Arrays of at most kSlurmMaxArrayIndex tasks (indices 0..999, within Slurm's default MaxArraySize
// of 1001), so a 1,080-run grid becomes two arrays rather than one that sbatch would refuse.
std::vector<Part> split(const SweepSpec& spec, size_t n_runs) {
  const size_t per_part = static_cast<size_t>(kSlurmMaxArrayIndex);
  std::vector<Part> parts;
  for (size_t first = 0; first < n_runs; first += per_part) parts.push_back({first, std::min(per_part, n_runs - first), {}});
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string name = parts.size() == 1 ? spec.name : fmt::format("{}.part{}", spec.name, i);
    parts[i].script = spec.out / "slurm" / (name + ".sbatch");
  }
  return parts;
}

}  // namespace

std::vector<fs::path> emit_slurm(const SweepSpec& spec, const std::vector<SweepRun>& runs, const fs::path& executable,
                                 const SlurmLayout& layout) {
  if (runs.empty()) throw SweepError(spec.file.string() + ": the grid has no runs");
  if (layout.nodes < 1 || layout.gpus_per_node < 0 || (layout.nodes > 1 && layout.gpus_per_node == 0))
    throw SweepError(fmt::format("--emit slurm: {} node(s) x {} GPU(s) per node is not a layout (nodes >= 1; "
                                 "several nodes need GPUs per node)", layout.nodes, layout.gpus_per_node));
  write_run_configs(spec, runs);
  fs::create_directories(spec.out / "logs");
  fs::create_directories(spec.out / "slurm");
  std::vector<fs::path> scripts;
  for (const auto& part : split(spec, runs.size())) {
    std::ostringstream text;
    text << header(spec, part, layout) << "set -uo pipefail\n"
         << "cd " << shell_quote(fs::current_path().string()) << "\n"
         << "ATTNLAB=" << shell_quote(fs::absolute(executable).string()) << "\n"
         << run_table(runs, part) << kPrologue << (layout.gpus_per_node > 0 ? kLaunchRanks : kLaunchOne) << kBody;
    detail::write_file_atomically(part.script, text.str());
    fs::permissions(part.script, fs::perms::owner_exec | fs::perms::group_exec, fs::perm_options::add);
    scripts.push_back(part.script);
  }
  return scripts;
}

}  // namespace attnlab
