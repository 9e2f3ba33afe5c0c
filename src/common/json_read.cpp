#include "common/json_read.h"

#include <fmt/format.h>

#include "attnlab/file_error.h"
#include "common/input_file.h"

namespace attnlab::detail {
namespace {

using nlohmann::json;

// Thrown from the parser's callback, which sees each array and object as it opens.
struct TooDeep {};

// nlohmann's message without its "[json.exception.parse_error.101] " tag.
std::string without_tag(const char* what) {
  const std::string text = what;
  const auto end = text.find("] ");
  return text.rfind("[json.exception.", 0) == 0 && end != std::string::npos ? text.substr(end + 2) : text;
}

}  // namespace

json parse_json(std::string_view text, const JsonLimits& limits) {
  if (static_cast<int64_t>(text.size()) > limits.max_bytes) {
    throw JsonError(fmt::format("{} bytes of JSON, more than the {} this reader takes", text.size(), limits.max_bytes));
  }
  // depth counts the arrays and objects around the one that opens: 0 for the outermost.
  const json::parser_callback_t check_depth = [&limits](int depth, json::parse_event_t event, json&) {
    const bool opens = event == json::parse_event_t::object_start || event == json::parse_event_t::array_start;
    if (opens && depth >= limits.max_depth) throw TooDeep{};
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), check_depth);
  } catch (const TooDeep&) {
    throw JsonError(fmt::format("arrays or objects nested deeper than {} levels", limits.max_depth));
  } catch (const json::out_of_range& e) {  // id 406: a number that no double holds
    throw JsonError(e.id == 406 ? "a number beyond the range of a double (" + without_tag(e.what()) + ")"
                                : without_tag(e.what()));
  } catch (const json::exception& e) {
    throw JsonError("not valid JSON: " + without_tag(e.what()));
  }
}

json parse_json_or_discarded(std::string_view text, const JsonLimits& limits) {
  try {
    return parse_json(text, limits);
  } catch (const JsonError&) {
    return json(json::value_t::discarded);
  }
}

json read_json_file(const std::filesystem::path& file, const JsonLimits& limits) {
  const std::string text = read_regular_file(file, limits.max_bytes);
  try {
    return parse_json(text, limits);
  } catch (const JsonError& e) {
    throw FileError(file, e.what());
  }
}

}  // namespace attnlab::detail
