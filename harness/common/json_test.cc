// harness/common/json_test.cc: the JSON layer (harness/common/json.h): strict numbers, null for
// what is not finite, UTF-8 both ways, one short line per syntax error, nesting refused, and a
// const read of a missing key that stops.
//   build/harness_test --gtest_filter='Json*'
#include "harness/common/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/harness_test.h"

namespace {

TEST(Json, StrictNumbersAndNullForNonFinite) {
  EXPECT_THROW(bp::parse_json("[NaN]"), std::runtime_error);
  EXPECT_THROW(bp::parse_json("{\"a\": Infinity}"), std::runtime_error);
  EXPECT_THROW(bp::parse_json("[+1]"), std::runtime_error);
  EXPECT_THROW(bp::parse_json("[-]"), std::runtime_error);
  // Google Benchmark writes the cv of an all-zero counter as a bare NaN: its files' reader takes it
  // as null (and null as NaN through num_or), only outside strings
  const Json gb_json =
      bp::parse_benchmark_json(R"([NaN, -NaN, Infinity, -Infinity, 2, {"NaN": "-Infinity"}])");
  const JsonView gb = gb_json;
  EXPECT_TRUE(gb[0].is_null() && gb[1].is_null());
  EXPECT_TRUE(std::isnan(gb[0].num_or(NAN)));
  EXPECT_TRUE(gb[2].is_null() && gb[3].is_null());
  EXPECT_EQ(gb[4].num_or(0), 2);
  EXPECT_EQ(gb[5]["NaN"].str_or(""), "-Infinity");
  EXPECT_THROW(bp::parse_benchmark_json("[NaNa]"), std::runtime_error);
  EXPECT_EQ(bp::parse_json("[-1.5e3]")[0].get<double>(), -1500);
  EXPECT_THROW(bp::parse_json("[1e999]"), std::runtime_error);  // past double's range
  EXPECT_EQ(dump_json(json_numbers(std::vector<double>{1, NAN, INFINITY})), "[1.0, null, null]");
  const Json j_json = bp::parse_json(R"({"z": 1, "a": [true, null, "x\"y"]})");
  const JsonView j = j_json;
  EXPECT_EQ(dump_json(j), R"({"z": 1, "a": [true, null, "x\"y"]})");  // order kept
  EXPECT_TRUE(j["missing"].is_null());
}

// Strings are UTF-8 both ways: \\u escapes beyond ASCII (a surrogate pair joined) are read as
// their characters, and bytes that are not UTF-8 are written as U+FFFD, so a dump is JSON.
TEST(Json, UnicodeEscapesAreReadAndInvalidUtf8IsNeverWritten) {
  EXPECT_EQ(bp::parse_json(R"(["\u00e9\u4e2d\ud83d\ude00"])")[0].get<std::string>(),
            "\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80");                   // é, 中, an emoji
  EXPECT_THROW(bp::parse_json(R"(["\ud83dx"])"), std::runtime_error);  // an unpaired surrogate
  EXPECT_THROW(bp::parse_json(R"(["\u12"])"), std::runtime_error);
  EXPECT_EQ(dump_json(Json("caf\xc3\xa9")), "\"caf\xc3\xa9\"");  // valid: as it is
  // a stray byte, a cut sequence, an overlong '/', a surrogate: U+FFFD for each bad sequence, the
  // rest kept
  const std::string fffd = "\xef\xbf\xbd";
  const std::string bad =
      dump_json(Json::object({{"k\xff", "a\xff b\xe4\xb8 c\xc0\xaf d\xed\xa0\x80"}}));
  EXPECT_EQ(bad, "{\"k" + fffd + "\": \"a" + fffd + " b" + fffd + " c" + fffd + fffd + " d" + fffd +
                     fffd + fffd + "\"}");
  EXPECT_EQ(JsonView(bp::parse_json(bad))["k" + fffd].str_or(""),
            "a" + fffd + " b" + fffd + " c" + fffd + fffd + " d" + fffd + fffd + fffd);
  EXPECT_THROW(bp::parse_json("[\"\xff\"]"), std::runtime_error);  // and none is read
}

// A syntax error names the byte, and quotes at most 40 bytes of what it read.
TEST(Json, ASyntaxErrorIsOneShortLine) {
  try {
    bp::parse_json("{\"kind\": \"" + std::string(1 << 20, 'x'));
    FAIL() << "parsed";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_LT(what.size(), 200u) << what.substr(0, 300);
    EXPECT_NE(what.find("at byte 10485"), std::string::npos) << what.substr(0, 300);
    EXPECT_EQ(what.find('\n'), std::string::npos);
  }
}

// A document nested past 256 levels is refused, not recursed into.
TEST(Json, DeepNestingIsRefused) {
  EXPECT_NO_THROW(bp::parse_json(std::string(256, '[') + std::string(256, ']')));
  EXPECT_THROW(bp::parse_json(std::string(257, '[') + std::string(257, ']')), std::runtime_error);
  EXPECT_THROW(bp::parse_json(std::string(1 << 20, '[')), std::runtime_error);
}

// A const read of a missing key through ordered_json itself is not undefined behaviour: it stops.
TEST(JsonDeathTest, AConstReadOfAMissingKeyStops) {
  const Json j = Json::object({{"a", 1}});
  EXPECT_DEATH((void)j["b"], "does not hold");
  EXPECT_TRUE(JsonView(j)["b"].is_null());  // the view reads it as null
  EXPECT_TRUE(JsonView(j)["a"]["c"][3].is_null());
}

}  // namespace
