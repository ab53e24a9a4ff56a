// harness/driver/shared_lines_test.cc: the lines the processes of a run share
// (harness/driver/shared_lines.h): each read takes what is new since the last one, whole lines
// only.
//   build/harness_test --gtest_filter='SharedLines.*'
#include "harness/driver/shared_lines.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "harness/harness_test.h"

namespace {

using Lines = std::vector<std::string>;

TEST(SharedLines, EachReadTakesTheWholeLinesAddedSinceTheLast) {
  char path[] = "/tmp/bp_shared_lines_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const bp::SharedLines file(path);
  size_t offset = 0;
  EXPECT_EQ(file.read_after(offset), Lines{});
  EXPECT_EQ(offset, 0u);
  ASSERT_TRUE(file.append("2 13 40 engine"));
  ASSERT_TRUE(file.append("resident libxsmm 2000"));
  EXPECT_EQ(file.read_after(offset), (Lines{"2 13 40 engine", "resident libxsmm 2000"}));
  EXPECT_EQ(offset, 37u);
  EXPECT_EQ(file.read_after(offset), Lines{});  // nothing new
  // Another process's line, half written: left for the read after its newline.
  ASSERT_EQ(lseek(fd, 0, SEEK_END), 37);
  ASSERT_EQ(write(fd, "3 8 8 li", 8), 8);
  EXPECT_EQ(file.read_after(offset), Lines{});
  EXPECT_EQ(offset, 37u);
  ASSERT_EQ(write(fd, "bxsmm\n", 6), 6);
  EXPECT_EQ(file.read_after(offset), Lines{"3 8 8 libxsmm"});
  size_t from_start = 0;  // a reader that starts again sees every line
  EXPECT_EQ(file.read_after(from_start).size(), 3u);
  EXPECT_EQ(from_start, offset);
  // Lines longer than one read's buffer come whole.
  const std::string long_line(40000, 'x');
  ASSERT_TRUE(file.append(long_line));
  EXPECT_EQ(file.read_after(offset), Lines{long_line});
  close(fd);
  std::remove(path);
  size_t gone = 0;  // an unreadable file is no error: nothing is shared
  EXPECT_EQ(file.read_after(gone), Lines{});
}

}  // namespace
