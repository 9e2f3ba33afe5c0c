#include "attnlab/copy_count.h"

#include <ATen/record_function.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <stdexcept>

namespace attnlab {
namespace {

std::atomic<bool> active{false};
std::atomic<int64_t> copies_seen{0};
std::atomic<int64_t> bytes_seen{0};
std::mutex shapes_mutex;
std::vector<std::string> shapes_seen;

std::unique_ptr<at::ObserverContext> on_op(const at::RecordFunction& fn) {
  if (std::strcmp(fn.name(), "aten::copy_") != 0) return nullptr;
  const auto inputs = fn.inputs();
  if (inputs.empty() || !inputs[0].isTensor()) return nullptr;
  const auto& destination = inputs[0].toTensor();
  if (destination.dim() == 0) return nullptr;  // a scalar operand wrapped into a tensor, not data moved
  ++copies_seen;
  bytes_seen += static_cast<int64_t>(destination.nbytes());
  const std::lock_guard<std::mutex> lock(shapes_mutex);
  shapes_seen.push_back(c10::str(destination.sizes()));
  return nullptr;
}

}  // namespace

CopyCounter::CopyCounter() {
  if (active.exchange(true)) throw std::logic_error("CopyCounter: one counter at a time per process");
  copies_seen = 0, bytes_seen = 0;
  shapes_seen.clear();
  handle_ = at::addGlobalCallback(
      at::RecordFunctionCallback(on_op).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
}

CopyCounter::~CopyCounter() {
  at::removeCallback(handle_);
  active = false;
}

int64_t CopyCounter::copies() const { return copies_seen; }
int64_t CopyCounter::bytes() const { return bytes_seen; }

std::vector<std::string> CopyCounter::shapes() const {
  const std::lock_guard<std::mutex> lock(shapes_mutex);
  return shapes_seen;
}

}  // namespace attnlab
