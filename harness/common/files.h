// harness/common/files.h: the runner's reads and writes of its result files, every write checked,
// and the run folder they go to.
//
// A result file is written to `<name>.tmp`, flushed to the disk and renamed over `<name>`: a
// reader never sees half a file, and when anything fails on the way (a full disk, a quota, a
// file-size limit, a folder made read-only) the temporary file is removed, the last good `<name>`
// stays as it was, and WriteError says which file, why, and on which filesystem.
// RunFolder is <out>/<run-id>/: created by one run only (two started in the same second get -2,
// -3...), marked INCOMPLETE until the run finishes, and only then pointed at by <out>/latest; an
// interrupted one is reopened by --resume.
//   Tests: harness/tests/ (a run under a file-size limit, racing runs, stopped runs).
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

namespace bp {

namespace fs = std::filesystem;

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The mount point holding `p` (the deepest existing ancestor whose parent is on another device),
// and its free space, for the one line that says which disk is full.
inline std::string filesystem_of(const fs::path& p) {
  std::error_code ec;
  fs::path at = fs::absolute(p, ec);
  while (!at.empty() && !fs::exists(at, ec) && at != at.root_path()) at = at.parent_path();
  struct stat st {};
  if (stat(at.c_str(), &st) != 0) return "?";
  for (fs::path up = at.parent_path(); up != at; at = up, up = at.parent_path()) {
    struct stat parent {};
    if (stat(up.c_str(), &parent) != 0 || parent.st_dev != st.st_dev) break;
  }
  struct statvfs vfs {};
  if (statvfs(at.c_str(), &vfs) != 0) return at.string();
  return at.string() + ", " + std::to_string(uint64_t(vfs.f_bavail) * vfs.f_frsize / 1000000) +
         " MB free";
}

struct WriteError : std::runtime_error {
  WriteError(const fs::path& path, int err)
      : std::runtime_error("cannot write " + path.string() + ": " + std::strerror(err) +
                           " (filesystem " + filesystem_of(path) + ")") {}
};

inline void write_atomically(const fs::path& p, const std::string& text) {
  const fs::path tmp = p.string() + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw WriteError(p, errno);
  int err = 0;
  for (size_t done = 0; done < text.size() && !err;) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno != EINTR) err = errno;
    if (n > 0) done += size_t(n);
  }
  // A full disk may only show at fsync or close (delayed allocation): both are checked.
  if (!err && fsync(fd) != 0) err = errno;
  if (close(fd) != 0 && !err) err = errno;
  if (!err && rename(tmp.c_str(), p.c_str()) != 0) err = errno;
  if (err) {
    unlink(tmp.c_str());
    throw WriteError(p, err);
  }
}

class RunFolder {
 public:
  RunFolder() = default;

  // <out>/<prefix>[-N]/ with logs/ and check/, marked INCOMPLETE; nothing and *error when <out>
  // cannot hold it (bad input: it is found before anything runs).
  static std::optional<RunFolder> create(const fs::path& out, const std::string& prefix,
                                         std::string* error) {
    std::error_code ec;
    fs::create_directories(out, ec);
    if (ec) {
      *error = "--out " + out.string() + ": cannot create it (" + ec.message() + ")";
      return std::nullopt;
    }
    RunFolder f;
    f.out_ = out;
    for (int n = 1;; n++) {
      f.id_ = prefix + (n == 1 ? "" : "-" + std::to_string(n));
      f.dir_ = out / f.id_;
      if (mkdir(f.dir_.c_str(), 0755) == 0) break;
      if (errno != EEXIST) {
        *error = "--out " + out.string() + ": cannot create a run folder in it (" +
                 std::strerror(errno) + ")";
        return std::nullopt;
      }
    }
    std::string unused;
    f.lock(&unused);  // a new folder: no other run can hold it yet
    for (const char* sub : {"logs", "check"})
      if (mkdir((f.dir_ / sub).c_str(), 0755) != 0) throw WriteError(f.dir_ / sub, errno);
    write_atomically(f.dir_ / "INCOMPLETE",
                     "this run has not finished (or was interrupted): its results are partial\n");
    return f;
  }

  // An interrupted run's folder, to resume (bench_run --resume): nothing and *error unless it
  // is a run folder still marked INCOMPLETE.
  static std::optional<RunFolder> reopen(const fs::path& dir, std::string* error) {
    RunFolder f;
    f.dir_ = fs::absolute(dir).lexically_normal();
    if (f.dir_.filename().empty()) f.dir_ = f.dir_.parent_path();  // "run/" as "run"
    f.id_ = f.dir_.filename().string(), f.out_ = f.dir_.parent_path();
    std::error_code ec;
    if (!fs::is_directory(f.dir_, ec))
      *error = "--resume " + dir.string() + ": no such run folder";
    else if (!fs::exists(f.dir_ / "run.json", ec))
      *error = "--resume " + dir.string() + ": not a run folder of this version of bench_run " +
               "(no run.json)";
    else if (!fs::exists(f.dir_ / "INCOMPLETE", ec))
      *error = "--resume " + dir.string() + ": that run finished; there is nothing to resume";
    else
      return f;
    return std::nullopt;
  }

  // Takes the folder for this process, for as long as it lives: one run writes a folder at a
  // time (two resumes of one run would tear each other's files). False, and *error, when another
  // process holds it.
  bool lock(std::string* error) {
    const fs::path path = dir_ / ".lock";
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      *error = "cannot lock " + dir_.string() + ": " + std::strerror(errno);
      return false;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      close(fd);
      *error = "--resume " + dir_.string() + ": another bench_run is writing this run (it holds " +
               path.string() + "); wait for it to end, or stop it, then resume";
      return false;
    }
    // The pid is for a person looking; the lock is what counts. The descriptor stays open (and
    // the lock held) until the process ends.
    const std::string pid = std::to_string(getpid()) + "\n";
    [[maybe_unused]] const bool written =
        ftruncate(fd, 0) == 0 && write(fd, pid.data(), pid.size()) == ssize_t(pid.size());
    return true;
  }

  const fs::path& dir() const { return dir_; }
  const std::string& id() const { return id_; }

  void finished() const {
    if (unlink((dir_ / "INCOMPLETE").c_str()) != 0) throw WriteError(dir_ / "INCOMPLETE", errno);
  }

  // Nothing was measured: nothing is left behind.
  void remove() const {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // <out>/latest, shared by every run writing to <out>: moved only by a finished run, under a
  // lock, atomically (a new link renamed over the old), and never back to an older run.
  void point_latest_here() const {
    const fs::path latest = out_ / "latest";
    const int lock = open((out_ / ".latest.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock < 0) throw WriteError(out_ / ".latest.lock", errno);
    flock(lock, LOCK_EX);
    std::error_code ec;
    const fs::path now = fs::read_symlink(latest, ec);
    if (ec || now.string() < id_) {
      const fs::path tmp = out_ / (".latest." + std::to_string(getpid()));
      fs::remove(tmp, ec);
      fs::create_directory_symlink(id_, tmp, ec);
      if (!ec) fs::rename(tmp, latest, ec);
    }
    close(lock);  // releases the lock
    if (ec) throw WriteError(latest, ec.value());
  }

 private:
  fs::path out_, dir_;
  std::string id_;
};

}  // namespace bp
