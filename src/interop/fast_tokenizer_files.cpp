// The one call of tools/hf_tokenizer.py: Python writes the tokenizer files straight into the export's
// hidden directory, so a failure leaves nothing behind (export_hf removes that directory).
#include "interop/fast_tokenizer_files.h"

#include <set>
#include <stdexcept>

#include "common/child_process.h"
#include "checkpoint/file_ops.h"

namespace attnlab::interop {

namespace fs = std::filesystem;

std::vector<std::string> write_fast_tokenizer_files(const HfFastTokenizer& spec, const fs::path& dir, int64_t context,
                                                    int64_t vocab_size) {
  const std::string fix = " (scripts/setup.sh makes the venv; export-hf --python chooses another, --tokenizer none writes none)";
  if (spec.python.empty() || !fs::exists(spec.python))
    throw std::runtime_error("export-hf: no Python at '" + spec.python.string() + "' to write the " + spec.kind +
                             " tokenizer" + fix);
  if (!fs::exists(spec.script)) throw std::runtime_error("export-hf: script '" + spec.script.string() + "' not found");
  std::vector<std::string> args = {spec.script.string(), spec.kind, "--context", std::to_string(context),
                                   "--vocab-size", std::to_string(vocab_size), "--out", dir.string()};
  if (!spec.model.empty()) args.insert(args.end(), {"--model", spec.model.string()});
  if (spec.eot >= 0) args.insert(args.end(), {"--eot", std::to_string(spec.eot)});
  const auto before = detail::list_directory(dir);
  if (const int code = process::wait_exit(process::spawn(spec.python, args)))
    throw std::runtime_error("export-hf: " + spec.script.string() + " " + spec.kind + " exited with " +
                             std::to_string(code) + " (its message is above)");
  const std::set<std::string> old(before.begin(), before.end());
  std::vector<std::string> written;
  for (const auto& name : detail::list_directory(dir))
    if (!old.count(name)) written.push_back(name);
  return written;
}

}  // namespace attnlab::interop
