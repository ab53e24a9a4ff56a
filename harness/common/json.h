// harness/common/json.h: one JSON value type for everything the harness reads and writes.
//
// The runner reads Google Benchmark's JSON and the backends' check records, and writes its own
// files (processes.json, check.json, summary.json); the C++ backends write their check records.
// Objects keep the order their keys were written in. Strict where it matters for a benchmark:
// only JSON's own number syntax is read (Python's bare NaN or Infinity is a parse error), and a
// number that is not finite is written as null, which the judge rejects (harness/runner/judge.h).
// The one exception is parse_benchmark_json, for Google Benchmark's own files: it writes a counter
// aggregate it cannot compute (the coefficient of variation of a counter that is always 0) as a
// bare NaN, which that reader takes as a number.
// \u escapes are read as UTF-8 (a surrogate pair joined), and a string that is not valid UTF-8
// is written with U+FFFD for each bad byte. Numbers are doubles.
//   Tests: harness/harness_test.cc.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace bp {

struct Json {
  enum class Kind { null, boolean, number, string, array, object };
  Kind kind = Kind::null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  std::vector<std::pair<std::string, Json>> object;  // in the order written

  Json() = default;
  Json(std::nullptr_t) {}
  Json(bool b) : kind(Kind::boolean), boolean(b) {}
  template <class N>
  requires(std::is_arithmetic_v<N> && !std::is_same_v<N, bool>) Json(N n)
      : kind(Kind::number), number(double(n)) {}
  Json(const char* s) : kind(Kind::string), string(s) {}
  Json(std::string s) : kind(Kind::string), string(std::move(s)) {}
  Json(std::string_view s) : kind(Kind::string), string(s) {}

  static Json object_of(std::initializer_list<std::pair<std::string, Json>> members) {
    Json j;
    j.kind = Kind::object;
    for (const auto& m : members) j.object.push_back(m);
    return j;
  }
  static Json array_of(std::vector<Json> items = {}) {
    Json j;
    j.kind = Kind::array;
    j.array = std::move(items);
    return j;
  }
  template <class Range>
  static Json numbers(const Range& values) {
    Json j = array_of();
    for (double v : values) j.array.emplace_back(v);
    return j;
  }

  // Adds (or replaces) a member of an object; returns it for chaining.
  Json& set(const std::string& key, Json value) {
    kind = Kind::object;
    for (auto& [k, v] : object)
      if (k == key) return v = std::move(value), *this;
    object.emplace_back(key, std::move(value));
    return *this;
  }
  Json& push(Json value) {
    kind = Kind::array;
    array.push_back(std::move(value));
    return *this;
  }

  // Member access that tolerates absence: a missing key reads as null.
  const Json& operator[](std::string_view key) const {
    static const Json null_value;
    for (const auto& [k, v] : object)
      if (k == key) return v;
    return null_value;
  }
  bool is_null() const { return kind == Kind::null; }
  bool is_number() const { return kind == Kind::number; }
  double num_or(double fallback) const { return kind == Kind::number ? number : fallback; }
  std::string str_or(std::string fallback) const {
    return kind == Kind::string ? string : fallback;
  }

  // Compact within a line; with indent >= 0, one member or item per line down to `depth_limit`
  // levels (so a record stays on one line inside a readable file).
  std::string dump(int indent = -1, int depth_limit = 1 << 20) const {
    std::string out;
    write(out, indent, depth_limit, 0);
    return out;
  }

 private:
  // The length of the valid UTF-8 sequence at s[i] (RFC 3629: no overlong form, no surrogate,
  // nothing past U+10FFFF), or 0.
  static size_t utf8_length(std::string_view s, size_t i) {
    const auto at = [&](size_t k) { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0; };
    const unsigned c = at(i);
    const auto tail = [&](size_t k) { return (at(k) & 0xC0) == 0x80; };
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return tail(i + 1) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
      const unsigned c1 = at(i + 1);
      if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F)) return 0;
      return tail(i + 1) && tail(i + 2) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
      const unsigned c1 = at(i + 1);
      if ((c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F)) return 0;
      return tail(i + 1) && tail(i + 2) && tail(i + 3) ? 4 : 0;
    }
    return 0;
  }
  // Invalid UTF-8 (a stray byte, a sequence cut short) is written as U+FFFD: whatever a string
  // holds, what is written is JSON.
  static void write_string(std::string& out, std::string_view s) {
    out += '"';
    for (size_t i = 0; i < s.size();) {
      const char c = s[i];
      const size_t n = utf8_length(s, i);
      if (n == 0)
        out += "\\ufffd", i++;
      else if (n > 1)
        out.append(s.substr(i, n)), i += n;
      else if (c == '"' || c == '\\')
        out += '\\', out += c, i++;
      else if (c == '\n')
        out += "\\n", i++;
      else if (static_cast<unsigned char>(c) < 0x20)
        out += fmt::format("\\u{:04x}", int(c)), i++;
      else
        out += c, i++;
    }
    out += '"';
  }
  void write(std::string& out, int indent, int depth_limit, int depth) const {
    const bool wrap = indent >= 0 && depth < depth_limit;
    auto newline = [&](int d) {
      if (wrap) out += '\n', out.append(size_t(indent * d), ' ');
    };
    switch (kind) {
      case Kind::null: out += "null"; break;
      case Kind::boolean: out += boolean ? "true" : "false"; break;
      case Kind::number: out += std::isfinite(number) ? fmt::format("{}", number) : "null"; break;
      case Kind::string: write_string(out, string); break;
      case Kind::array:
        out += '[';
        for (size_t i = 0; i < array.size(); i++) {
          out += i ? (wrap ? "," : ", ") : "";
          newline(depth + 1);
          array[i].write(out, indent, depth_limit, depth + 1);
        }
        if (!array.empty()) newline(depth);
        out += ']';
        break;
      case Kind::object:
        out += '{';
        for (size_t i = 0; i < object.size(); i++) {
          out += i ? (wrap ? "," : ", ") : "";
          newline(depth + 1);
          write_string(out, object[i].first);
          out += ": ";
          object[i].second.write(out, indent, depth_limit, depth + 1);
        }
        if (!object.empty()) newline(depth);
        out += '}';
        break;
    }
  }
};

// Parses one JSON document; a syntax error is a std::runtime_error with the byte offset.
class JsonParser {
 public:
  explicit JsonParser(std::string_view text, bool non_finite = false)
      : s_(text), non_finite_(non_finite) {}

  Json parse() {
    Json v = value();
    skip_space();
    if (pos_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    throw std::runtime_error("JSON: " + std::string(what) + " at byte " + std::to_string(pos_));
  }
  void skip_space() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t'))
      pos_++;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) return pos_++, true;
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail("unexpected character");
  }
  bool eat_word(std::string_view w) {
    if (s_.substr(pos_, w.size()) == w) return pos_ += w.size(), true;
    return false;
  }
  bool digit_at(size_t i) const { return i < s_.size() && s_[i] >= '0' && s_[i] <= '9'; }

  Json value() {
    skip_space();
    if (pos_ >= s_.size()) fail("unexpected end");
    Json v;
    const char c = s_[pos_];
    // Nesting is recursion here: a hostile document of a million '[' would overflow the stack.
    if ((c == '{' || c == '[') && depth_ >= kMaxDepth) fail("nested deeper than 256 levels");
    const Nesting nesting(c == '{' || c == '[' ? &depth_ : nullptr);
    if (c == '{') {
      v.kind = Json::Kind::object;
      pos_++;
      if (eat('}')) return v;
      do {
        skip_space();
        std::string key = string_literal();
        expect(':');
        v.object.emplace_back(std::move(key), value());
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      v.kind = Json::Kind::array;
      pos_++;
      if (eat(']')) return v;
      do v.array.push_back(value());
      while (eat(','));
      expect(']');
    } else if (c == '"') {
      v.kind = Json::Kind::string;
      v.string = string_literal();
    } else if (eat_word("true")) {
      v.kind = Json::Kind::boolean, v.boolean = true;
    } else if (eat_word("false")) {
      v.kind = Json::Kind::boolean;
    } else if (eat_word("null")) {
    } else if (non_finite_ &&
               (eat_word("NaN") || eat_word("-NaN") || eat_word("nan") || eat_word("-nan"))) {
      v.kind = Json::Kind::number, v.number = NAN;
    } else if (non_finite_ && (eat_word("Infinity") || eat_word("inf"))) {
      v.kind = Json::Kind::number, v.number = INFINITY;
    } else if (non_finite_ && (eat_word("-Infinity") || eat_word("-inf"))) {
      v.kind = Json::Kind::number, v.number = -INFINITY;
    } else if (c == '-' || digit_at(pos_)) {  // JSON's grammar: no NaN, Infinity, '+' or hex
      const size_t first_digit = pos_ + (c == '-');
      if (!digit_at(first_digit)) fail("expected a digit");
      const char* begin = s_.data() + pos_;
      char* end = nullptr;
      v.kind = Json::Kind::number;
      v.number = std::strtod(begin, &end);
      pos_ += size_t(end - begin);
    } else {
      fail("expected a value");
    }
    return v;
  }

  std::string string_literal() {
    if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string");
    pos_++;
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (c == '\\') {
        if (pos_ >= s_.size()) fail("unterminated escape");
        const char e = s_[pos_++];
        switch (e) {
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case 'r': out += '\r'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'u': append_utf8(out, code_point()); break;
          default: out += e;
        }
      } else {
        out += c;
      }
    }
    if (pos_ >= s_.size()) fail("unterminated string");
    pos_++;
    return out;
  }

  // The code point of a \\u escape after its "\\u", a surrogate pair joined; an unpaired
  // surrogate is U+FFFD.
  uint32_t hex4() {
    uint32_t v = 0;
    for (int k = 0; k < 4; k++, pos_++) {
      const char h = pos_ < s_.size() ? s_[pos_] : 0;
      const int d = h >= '0' && h <= '9'   ? h - '0'
                    : h >= 'a' && h <= 'f' ? h - 'a' + 10
                    : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                           : -1;
      if (d < 0) fail("expected 4 hex digits after \\u");
      v = v * 16 + uint32_t(d);
    }
    return v;
  }
  uint32_t code_point() {
    const uint32_t high = hex4();
    if (high < 0xD800 || high > 0xDFFF) return high;
    if (high > 0xDBFF || s_.substr(pos_, 2) != "\\u") return 0xFFFD;
    const size_t at = pos_;
    pos_ += 2;
    const uint32_t low = hex4();
    if (low < 0xDC00 || low > 0xDFFF) return pos_ = at, 0xFFFD;
    return 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
  }
  static void append_utf8(std::string& out, uint32_t c) {
    if (c < 0x80) {
      out += char(c);
    } else if (c < 0x800) {
      out += char(0xC0 | c >> 6), out += char(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += char(0xE0 | c >> 12), out += char(0x80 | (c >> 6 & 0x3F));
      out += char(0x80 | (c & 0x3F));
    } else {
      out += char(0xF0 | c >> 18), out += char(0x80 | (c >> 12 & 0x3F));
      out += char(0x80 | (c >> 6 & 0x3F)), out += char(0x80 | (c & 0x3F));
    }
  }

  static constexpr int kMaxDepth = 256;
  struct Nesting {
    int* depth;
    explicit Nesting(int* d) : depth(d) {
      if (depth) ++*depth;
    }
    ~Nesting() {
      if (depth) --*depth;
    }
  };

  std::string_view s_;
  bool non_finite_ = false;
  size_t pos_ = 0;
  int depth_ = 0;
};

inline Json parse_json(std::string_view text) { return JsonParser(text).parse(); }
// A Google Benchmark result file: JSON, plus the NaN and Infinity it writes (see the top).
inline Json parse_benchmark_json(std::string_view text) { return JsonParser(text, true).parse(); }

}  // namespace bp
