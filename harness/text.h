// harness/text.h: the string helpers the harness shares: splitting a list, and writing JSON
// strings and numbers (the reading side is harness/json.h).
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <string_view>
#include <vector>

namespace bp {

// Every field between separators, empty ones included ("a,,b" is three fields).
inline std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    out.emplace_back(s.substr(start, at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

inline std::string json_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", int(c));
    else out += c;
  }
  return out;
}

// JSON has no NaN or infinity: a non-finite number is written as null, which the check rejects.
inline std::string json_number(double x) {
  return std::isfinite(x) ? fmt::format("{}", x) : std::string("null");
}

}  // namespace bp
