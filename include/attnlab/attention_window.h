// Which keys a query of a local layer sees (docs/windows.md, "The rule"). Plain C++: the config
// records, the model and the attention calls share it without the tensor headers; the rule itself
// is the kernels' (attnlab_kernels/window_rule.h), so the torch side and the kernels cannot differ.
#pragma once

#include <cstdint>

#include "attnlab_kernels/window_rule.h"

namespace attnlab {

/// The window of one attention call. Query position p sees key position j when
///   j <= p  and  (window == 0  or  p - j < window  or  j < keep_first),
/// window W >= 1 (0: none, a global layer) and keep_first n >= 0, the first positions every query
/// sees (StreamingLLM's kept tokens). Positions are those of the call's keys, 0..Tk-1, the queries
/// the last Tq of them (attention.h).
struct AttentionWindow {
  int64_t window = 0;      ///< W in positions; 0: no window
  int64_t keep_first = 0;  ///< n in positions; 0 without a window

  /// A local layer: it has a window.
  bool local() const { return window > 0; }
  /// True when some query of a call over `k_len` key positions cannot see some key it would see
  /// without the window: local and k_len > W + n. Otherwise the call is full causal attention, and
  /// every backend runs it as a global layer, bit for bit (docs/windows.md).
  bool hides_keys(int64_t k_len) const { return kernels::window_hides_keys(window, keep_first, k_len); }
  /// Whether query position p sees key position j.
  bool sees(int64_t p, int64_t j) const { return kernels::window_sees(window, keep_first, p, j); }
};

}  // namespace attnlab
