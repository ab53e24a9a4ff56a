// harness/json.h: a small JSON reader, enough for the files our backends write.
//
// The runner reads Google Benchmark's JSON and our check files back to compare backends and print
// the summary. Not a general library: no \u escapes beyond ASCII, numbers as double, and a parse
// error is a std::runtime_error with the byte offset.
#pragma once

#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace bp {

struct Json {
  enum class Kind { null, boolean, number, string, array, object } kind = Kind::null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  std::map<std::string, Json> object;

  // Member access that tolerates absence: a missing key reads as null.
  const Json& operator[](const std::string& key) const {
    static const Json null_value;
    auto it = object.find(key);
    return it == object.end() ? null_value : it->second;
  }
  bool is_null() const { return kind == Kind::null; }
  double num_or(double fallback) const { return kind == Kind::number ? number : fallback; }
  std::string str_or(std::string fallback) const {
    return kind == Kind::string ? string : fallback;
  }
};

class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : s_(text) {}

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
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' ||
                                s_[pos_] == '\t'))
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

  Json value() {
    skip_space();
    if (pos_ >= s_.size()) fail("unexpected end");
    Json v;
    const char c = s_[pos_];
    if (c == '{') {
      v.kind = Json::Kind::object;
      pos_++;
      if (eat('}')) return v;
      do {
        skip_space();
        std::string key = string_literal();
        expect(':');
        v.object[key] = value();
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
    } else {
      const char* begin = s_.data() + pos_;
      char* end = nullptr;
      v.kind = Json::Kind::number;
      v.number = std::strtod(begin, &end);
      if (end == begin) fail("expected a value");
      pos_ += size_t(end - begin);
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
          case 'u': {
            if (pos_ + 4 > s_.size()) fail("short \\u escape");
            const long code = std::strtol(std::string(s_.substr(pos_, 4)).c_str(), nullptr, 16);
            out += code < 0x80 ? char(code) : '?';
            pos_ += 4;
            break;
          }
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

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace bp
