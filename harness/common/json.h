// harness/common/json.h: JSON for everything the harness reads and writes: nlohmann-json's
// ordered_json (objects keep the order their keys were written in), and a thin layer for what a
// benchmark needs on top of it.
//
// - Strict in: parse_json takes only JSON's own grammar (Python's bare NaN or Infinity is an
//   error) and refuses nesting past 256 levels; a syntax error is a std::runtime_error that names
//   the byte. The one exception is parse_benchmark_json, for Google Benchmark's own files, which
//   write a counter aggregate they cannot compute as a bare NaN (or Infinity): there each reads
//   as null, as this layer writes it.
// - Never invalid out: dump_json writes a number that is not finite as null (which the judge
//   rejects, harness/runner/judge.h) and each byte that is not UTF-8 as U+FFFD.
// - Absence reads as null: JsonView, for files another program wrote. ordered_json's own const
//   operator[] has no answer for a missing key, so reading goes through the view.
//   Tests: harness/common/json_test.cc.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bp {
[[noreturn]] inline void json_assert_failed(const char* condition, const char* file, int line) {
  std::fprintf(stderr, "nlohmann-json: %s:%d: %s does not hold (a const read of a missing key?)\n",
               file, line, condition);
  std::abort();
}
}  // namespace bp
// A broken invariant inside the library (a const read of a missing key) stops with a message,
// in every build, where assert() would be gone from a release one and leave undefined behaviour.
#define JSON_ASSERT(condition) \
  ((condition) ? void(0) : ::bp::json_assert_failed(#condition, __FILE__, __LINE__))
#include <nlohmann/json.hpp>

namespace bp {

using Json = nlohmann::ordered_json;

// A read-only view of a document: a missing key, an index past the end or a value of another
// kind reads as null (no elements, no members), so a reader says what it expected. The names
// elements() and members() are not ordered_json's: its array() and object() make new values.
class JsonView {
 public:
  JsonView(const Json& j) : j_(&j) {}  // NOLINT: a view of any document

  JsonView operator[](std::string_view key) const {
    if (!j_->is_object()) return null_value();
    const auto it = j_->find(key);
    return it == j_->end() ? null_value() : JsonView(*it);
  }
  JsonView operator[](size_t i) const {
    return j_->is_array() && i < j_->size() ? JsonView((*j_)[i]) : null_value();
  }
  const Json& json() const { return *j_; }

  bool is_null() const { return j_->is_null(); }
  bool is_number() const { return j_->is_number(); }
  bool is_string() const { return j_->is_string(); }
  bool is_boolean() const { return j_->is_boolean(); }
  bool is_array() const { return j_->is_array(); }
  bool is_object() const { return j_->is_object(); }
  size_t size() const { return j_->is_structured() ? j_->size() : 0; }

  double num_or(double fallback) const { return is_number() ? j_->get<double>() : fallback; }
  std::string str_or(std::string fallback) const {
    return is_string() ? j_->get<std::string>() : fallback;
  }
  bool bool_or(bool fallback) const { return is_boolean() ? j_->get<bool>() : fallback; }
  const Json::array_t& elements() const {
    static const Json::array_t empty;
    return is_array() ? j_->get_ref<const Json::array_t&>() : empty;
  }
  // An object's members in their order, each value a view.
  std::vector<std::pair<std::string, JsonView>> members() const {
    std::vector<std::pair<std::string, JsonView>> out;
    if (is_object())
      for (auto it = j_->begin(); it != j_->end(); ++it) out.emplace_back(it.key(), *it);
    return out;
  }

 private:
  static JsonView null_value() {
    static const Json null;
    return JsonView(null);
  }
  const Json* j_;
};

// An array of numbers from any range of them (a vector, a span).
template <class Range>
Json json_numbers(const Range& values) {
  Json out = Json::array();
  for (double v : values) out.push_back(v);
  return out;
}

namespace json_detail {
inline void write_scalar(std::string& out, const Json& j) {
  out += j.dump(-1, ' ', false, Json::error_handler_t::replace);
}
// The library writes numbers, strings and literals; the layout is ours: ", " and ": " within a
// line (as Python's json.dumps), a line per member down to depth_limit.
inline void write(std::string& out, const Json& j, int indent, int depth_limit, int depth) {
  if (!j.is_structured() || j.empty()) return write_scalar(out, j);
  const bool wrap = indent >= 0 && depth < depth_limit, object = j.is_object();
  out += object ? '{' : '[';
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it != j.begin()) out += wrap ? "," : ", ";
    if (wrap) out += '\n', out.append(size_t(indent) * size_t(depth + 1), ' ');
    if (object) write_scalar(out, Json(it.key())), out += ": ";
    write(out, *it, indent, depth_limit, depth + 1);
  }
  if (wrap) out += '\n', out.append(size_t(indent) * size_t(depth), ' ');
  out += object ? '}' : ']';
}
}  // namespace json_detail

// Compact on one line; with indent >= 0, one member or item per line down to `depth_limit`
// levels, so a record stays on one line inside a readable file.
inline std::string dump_json(const Json& j, int indent = -1, int depth_limit = 1 << 20) {
  std::string out;
  json_detail::write(out, j, indent, depth_limit, 0);
  return out;
}
inline std::string dump_json(JsonView j) { return dump_json(j.json()); }

inline constexpr int kJsonMaxDepth = 256;

inline Json parse_json(std::string_view text) {
  // ordered_json's parser keeps its own stack, but a document nested a million deep is no result
  // file: the callback stops it early.
  const Json::parser_callback_t depth_limit = [](int depth, Json::parse_event_t event, Json&) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= kJsonMaxDepth)
      throw std::runtime_error(fmt::format("JSON: nested deeper than {} levels", kJsonMaxDepth));
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), depth_limit);
  } catch (const Json::out_of_range& e) {  // a number past double's range: 1e999
    std::string_view what = e.what();      // "[json.exception.out_of_range.406] number overflow..."
    if (const size_t bracket = what.find("] "); bracket != what.npos)
      what.remove_prefix(bracket + 2);
    throw std::runtime_error(fmt::format("JSON: {} (past double's range)", what.substr(0, 80)));
  } catch (const Json::parse_error& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error while
    // parsing value - invalid literal; last read: 'N'": the reason, the token cut short (it may
    // be a whole 100 MB string), and the byte.
    std::string_view what = e.what();
    if (const size_t colon = what.find(": "); colon != what.npos) what.remove_prefix(colon + 2);
    constexpr std::string_view kLastRead = "; last read: '";
    const size_t token = what.find(kLastRead);
    std::string reason(what.substr(0, token));
    if (token != what.npos) {
      std::string_view read = what.substr(token + kLastRead.size());
      if (read.ends_with('\'')) read.remove_suffix(1);
      reason +=
          fmt::format("{}{}{}'", kLastRead, read.substr(0, 40), read.size() > 40 ? "..." : "");
    }
    throw std::runtime_error(fmt::format("JSON: {} at byte {}", reason, e.byte));
  }
}

// A Google Benchmark result file: JSON, plus the bare NaN and Infinity it writes (see the top).
// They are rewritten as null outside strings before the strict parse.
inline Json parse_benchmark_json(std::string_view text) {
  static constexpr std::string_view kWords[] = {"-Infinity", "Infinity", "-NaN", "NaN",
                                                "-inf",      "inf",      "-nan", "nan"};
  std::string json;
  json.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (in_string) {
      json += c, i++;
      if (c == '\\' && i < text.size())
        json += text[i++];
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    bool replaced = false;
    for (std::string_view word : kWords)
      if (text.substr(i, word.size()) == word) {
        json += "null", i += word.size(), replaced = true;
        break;
      }
    if (!replaced) json += c, i++;
  }
  return parse_json(json);
}

}  // namespace bp
