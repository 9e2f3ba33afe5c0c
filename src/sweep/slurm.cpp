// `attnlab sweep --emit slurm`: a job array whose task k runs the sweep's run k with the same
// binary and arguments as the local runner. Resume needs nothing special: the trainer resumes from
// the run's newest checkpoint, and returns at once for a finished run.
#include <fstream>

#include <fmt/format.h>

#include "attnlab/sweep.h"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string header(const SweepSpec& spec, size_t n_runs) {
  const fs::path logs = fs::absolute(spec.out / "logs").lexically_normal();
  std::string text = fmt::format(
      "#!/bin/bash\n"
      "# Slurm job array for sweep '{}' ({}), written by `attnlab sweep --emit slurm`.\n"
      "# Task k runs the k-th run of manifest.json. Submit with: sbatch {}\n"
      "# Re-running a task resumes its run from the newest checkpoint (a finished run returns at once),\n"
      "# so requeueing, after preemption or the time limit, is always safe.\n"
      "#SBATCH --job-name=attnlab-{}\n"
      "#SBATCH --array=0-{}\n"
      "#SBATCH --requeue\n"
      "#SBATCH --open-mode=append\n"
      "#SBATCH --cpus-per-task={}\n"
      "#SBATCH --signal=B:USR1@300\n"
      "#SBATCH --output={}/slurm-%A_%a.out\n",
      spec.name, spec.file.string(), (spec.out / "slurm" / (spec.name + ".sbatch")).string(), spec.name, n_runs - 1,
      spec.threads_per_run, logs.string());
  for (const auto& [key, value] : spec.slurm) text += "#SBATCH --" + key + "=" + value + "\n";
  return text;
}

std::string run_table(const std::vector<SweepRun>& runs) {
  std::string text = "case \"${SLURM_ARRAY_TASK_ID:?submit with sbatch, or set SLURM_ARRAY_TASK_ID}\" in\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    text += fmt::format("  {}) RUN={}; ARGS=(", i, shell_quote(runs[i].name));
    const auto args = train_arguments(runs[i]);
    for (size_t a = 0; a < args.size(); ++a) text += (a ? " " : "") + shell_quote(args[a]);
    text += ") ;;\n";
  }
  text += "  *) echo \"[attnlab] no run for array index $SLURM_ARRAY_TASK_ID\" >&2; exit 1 ;;\nesac\n";
  return text;
}

// Slurm signals the batch shell (USR1 300 s before the time limit, TERM on preemption); the trainer
// must get it to save a checkpoint, and an interrupted task puts itself back in the queue.
const char* kBody = R"SH(echo "[attnlab] $RUN (array task $SLURM_ARRAY_TASK_ID, restart ${SLURM_RESTART_COUNT:-0})"
trap '[ -n "${pid:-}" ] && kill -TERM "$pid" 2>/dev/null' TERM USR1
"$ATTNLAB" "${ARGS[@]}" &
pid=$!
while kill -0 "$pid" 2>/dev/null; do wait "$pid" || true; done
rc=0
wait "$pid" || rc=$?
if [ "$rc" -ge 128 ] && [ -n "${SLURM_ARRAY_JOB_ID:-}" ]; then
  echo "[attnlab] $RUN interrupted (exit $rc); requeueing it to resume from its checkpoint"
  scontrol requeue "${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}" || true
fi
exit "$rc"
)SH";

}  // namespace

fs::path emit_slurm(const SweepSpec& spec, const std::vector<SweepRun>& runs, const fs::path& executable) {
  if (runs.empty()) throw SweepError(spec.file.string() + ": the grid has no runs");
  write_run_configs(spec, runs);
  fs::create_directories(spec.out / "logs");
  fs::create_directories(spec.out / "slurm");
  const fs::path script = spec.out / "slurm" / (spec.name + ".sbatch");
  std::ofstream out(script);
  out << header(spec, runs.size()) << "set -uo pipefail\n"
      << "cd " << shell_quote(fs::current_path().string()) << "\n"
      << "ATTNLAB=" << shell_quote(fs::absolute(executable).string()) << "\n"
      << run_table(runs) << kBody;
  if (!out) throw SweepError(script.string() + ": cannot write");
  out.close();
  fs::permissions(script, fs::perms::owner_exec | fs::perms::group_exec, fs::perm_options::add);
  return script;
}

}  // namespace attnlab
