// The names of an enumeration, in one table: what parses a config value, a flag or a JSON field into
// the enum, what prints it back, and the list of valid names an error gives. Each enumeration with
// names declares its table's specialisation of name_table<E>() beside the enum and defines it in its
// .cpp, so adding a value is one line there (docs/config.md, "Names").
#pragma once

#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace attnlab {

template <class E>
class NameTable {
 public:
  struct Entry {
    E value;
    const char* name;
  };

  /// `what` names the kind in errors ("gate form"). `names`: each value's one written name, in the
  /// order errors list them; `aliases`: other spellings parse accepts and never writes ("proj").
  /// Throws std::logic_error for a name or a value given twice (a table that could not round-trip).
  NameTable(const char* what, std::initializer_list<Entry> names, std::initializer_list<Entry> aliases = {})
      : NameTable(what, std::vector<Entry>(names), std::vector<Entry>(aliases)) {}

  /// The same from lists built at run time (the attention backends' names come from their table).
  NameTable(const char* what, std::vector<Entry> names, std::vector<Entry> aliases)
      : what_(what), names_(std::move(names)), aliases_(std::move(aliases)) {
    std::vector<std::string> seen;
    for (const auto* list : {&names_, &aliases_})
      for (const auto& e : *list) {
        for (const auto& s : seen)
          if (s == e.name) throw std::logic_error(std::string(what) + ": '" + e.name + "' named twice");
        seen.emplace_back(e.name);
      }
    for (size_t i = 0; i < names_.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (names_[i].value == names_[j].value) throw std::logic_error(std::string(what) + ": a value named twice");
  }

  /// The written name of `value` (what to_yaml, state.json and logs hold). Throws std::logic_error
  /// for a value the table lacks (a value cast from an integer).
  const char* name(E value) const {
    for (const auto& e : names_)
      if (e.value == value) return e.name;
    throw std::logic_error(std::string(what_) + ": a value without a name");
  }

  /// True when `value` has a name here (false only for a value cast from an integer).
  bool has(E value) const {
    for (const auto& e : names_)
      if (e.value == value) return true;
    return false;
  }

  /// The value called `text` (a written name or an alias; exact, case-sensitive), or nullopt.
  std::optional<E> find(const std::string& text) const {
    for (const auto* list : {&names_, &aliases_})
      for (const auto& e : *list)
        if (text == e.name) return e.value;
    return std::nullopt;
  }

  /// The written names, comma-separated in table order: "none, norm, projection".
  std::string valid_names() const {
    std::string out;
    for (const auto& e : names_) out += (out.empty() ? "" : ", ") + std::string(e.name);
    return out;
  }

  /// "<key>: '<text>' is not one of <valid_names>": the refusal of a value read from `key` (a config
  /// key's full path, a flag, a JSON field).
  std::string refusal(const std::string& text, const std::string& key) const {
    return key + ": '" + text + "' is not one of " + valid_names();
  }

  /// The value called `text`; throws std::invalid_argument "unknown <what> '<text>'; valid: <names>".
  E parse(const std::string& text) const {
    if (const auto v = find(text)) return *v;
    throw std::invalid_argument("unknown " + std::string(what_) + " '" + text + "'; valid: " + valid_names());
  }

  /// The value called `text`, read from `key`; throws std::invalid_argument with refusal(text, key).
  E parse(const std::string& text, const std::string& key) const {
    if (const auto v = find(text)) return *v;
    throw std::invalid_argument(refusal(text, key));
  }

  /// Every value with its written name, in table order.
  const std::vector<Entry>& entries() const { return names_; }

 private:
  const char* what_;
  std::vector<Entry> names_, aliases_;
};

/// The table of enumeration E. Declared (specialised) beside each enum that has names, e.g.
/// `template <> const NameTable<GateKind>& name_table<GateKind>();` in arm.h.
template <class E>
const NameTable<E>& name_table();

}  // namespace attnlab
