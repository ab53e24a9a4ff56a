// engine/compiled/plan_cache.h: compiled plans kept on disk, so that a process that captures a
// step compiled before skips choosing kernels (timing them), searching recomputations and placing
// buffers: its first step costs a capture and a replay.
//
// What is stored: a Program's decisions (engine/compiled/plan_decisions.h's PlanDecisions: each
// op's kernel and the timings that chose it, the activations recomputed, every buffer's offset),
// under a key that hashes everything that could make another plan: the captured graph's structure
// (every node's op, shape, operands and arguments; the parameters' and constants' shapes), the
// element type, the options (memory budget, how kernels are chosen and which are forced, whether
// libraries may be opened, threads), the processor (vendor, family, model, stepping, feature
// flags) and the engine's version (the binary's GNU build ID, and kFormat). A plan made from the
// decisions is the plan they were taken from, so a warm start's results are bitwise a cold one's.
//
// One file per key, `<dir>/<key>.plan`: a header line, the key, the payload's length and
// checksum, the payload (text). A file that is truncated, corrupt (checksum), of another format
// or whose decisions do not fit the capture: one line on stderr (once per process), ignored, and
// rewritten by the cold compile that follows. The checksum finds damage, not an attacker: every
// decision is checked where it is used (Program: each offset inside the arena without wrapping,
// no two buffers live together sharing a byte, the arena no larger than its buffers need), and
// only a regular file is read (a FIFO, a device, a link to one: not opened).
// Written to a temporary file, then renamed: two processes writing one key leave one whole file (a
// writer killed before its rename leaves its temporary file, which the next store removes). A
// directory that cannot be made or written, or a write that fails (a full disk): one line, and the
// run goes on uncached.
//
// Tests: engine/compiled/plan_cache_test.cc.
#pragma once

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/compiled/plan_decisions.h"
#include "engine/core/tensor.h"
#include "engine/runtime/isa.h"

namespace bp {

// What a plan depends on besides the graph: the processor and the engine's build. Tests change
// one field at a time.
struct PlanMachine {
  std::string cpu;     // vendor, family, model, stepping, feature flags, and the ISA level run
  std::string engine;  // kFormat and the binary's build ID
};
// How the program is compiled.
struct PlanOptions {
  size_t budget_bytes = 0;
  double budget_fraction = 0;
  std::string dialects;   // DialectSpec::text ("priority", "auto", "auto,matmul:blis", ...)
  bool libraries = true;  // may kernels open a library (no, under a memory budget)
  int threads = 1;
};
struct PlanKey {
  uint64_t a = 0, b = 0;  // two hashes of the key's text
  std::string hex() const {
    char s[40];
    std::snprintf(s, sizeof s, "%016" PRIx64 "%016" PRIx64, a, b);
    return s;
  }
  bool operator==(const PlanKey&) const = default;
};

class PlanCache {
 public:
  static constexpr int kFormat = 1;  // of the file, and of the decisions' meaning
  static constexpr size_t kMaxFileBytes = size_t(1) << 30;

  // The default directory: $XDG_CACHE_HOME/backprop-bench, else ~/.cache/backprop-bench.
  static std::string default_dir() {
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
      return std::string(x) + "/backprop-bench";
    if (const char* h = std::getenv("HOME"); h && *h)
      return std::string(h) + "/.cache/backprop-bench";
    return "";
  }
  // The processor, and the level this process runs on it (engine/runtime/isa.h): a plan timed
  // at avx512 chose its kernels among AVX-512 ones, so BP_ISA=avx2 is another key.
  static PlanMachine this_machine() {
    return {cpu_text() + "isa " + isa_name(isa()) + "\n",
            "plan format " + std::to_string(kFormat) + ", build " + build_id()};
  }

  // An empty dir: off.
  explicit PlanCache(std::string dir) : dir_(std::move(dir)) {}
  bool on() const { return !dir_.empty() && usable_; }
  const std::string& dir() const { return dir_; }

  template <class T>
  static PlanKey key(const TensorGraph<T>& g, uint32_t root, const PlanOptions& o,
                     const PlanMachine& m) {
    std::string text = "backprop-bench plan\n" + m.engine + "\n" + m.cpu + "\n";
    text += std::string(sizeof(T) == 4 ? "float32" : "float64") + " precision " +
            precision_name(g.precision()) + "\n";
    char line[160];
    std::snprintf(line, sizeof line, "budget %zu %a dialects %s libraries %d threads %d\n",
                  o.budget_bytes, o.budget_fraction, o.dialects.c_str(), int(o.libraries),
                  o.threads);
    text += line;
    for (uint32_t i = 0; i <= root; i++) {
      const auto& n = g.node_at(i);
      std::snprintf(line, sizeof line, "%d %d %d %u %u %u %d %d %d %d %d\n", int(n.op), n.rows,
                    n.cols, n.in[0], n.in[1], n.in[2], n.arg[0], n.arg[1], n.arg[2],
                    int(n.needs_grad), int(n.grad != nullptr));
      text += line;
    }
    std::snprintf(line, sizeof line, "params %zu root %u\n", g.num_params(), root);
    text += line;
    return {fnv1a(text, 0xcbf29ce484222325ull), fnv1a(text, 0x84222325cbf29ce4ull)};
  }

  // The decisions stored under `k`, or nothing (a miss, or a bad file: then one line on stderr).
  // Only a regular file is read, whole and at most kMaxFileBytes: a FIFO, a device or a link to
  // one is not opened for reading (a FIFO would block, /dev/zero would never end).
  std::optional<PlanDecisions> load(const PlanKey& k) const {
    if (!on()) return std::nullopt;
    const std::string path = path_of(k);
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ELOOP)
        warn_once(path, "a symbolic link, not a plan file; ignored, and replaced");
      return std::nullopt;
    }
    struct stat st {};
    std::string whole, why;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      why = S_ISDIR(st.st_mode) ? "a directory, not a plan file; ignored, and left as it is"
                                : "not a regular file; ignored, and replaced";
    } else if (size_t(st.st_size) > kMaxFileBytes) {
      why = std::to_string(st.st_size) + " bytes, more than any plan (" +
            std::to_string(kMaxFileBytes) + "); ignored, and written again";
    } else {
      whole.resize(size_t(st.st_size));
      size_t got = 0;
      for (ssize_t n;
           got < whole.size() && (n = ::read(fd, whole.data() + got, whole.size() - got)) > 0;)
        got += size_t(n);
      whole.resize(got);
    }
    ::close(fd);
    if (!why.empty()) {
      warn_once(path, why);
      return std::nullopt;
    }
    std::optional<PlanDecisions> d = parse(whole, k, &why);
    if (!d) warn_once(path, why + "; ignored, and written again");
    return d;
  }
  // A plan that did not fit the capture its key said it was for: one line; store() rewrites it.
  void reject(const PlanKey& k, const std::string& why) const {
    warn_once(path_of(k), why + "; ignored, and written again");
  }
  // The payload's checksum, as the header states it (FNV-1a: it finds damage, not an attacker,
  // which is why every decision is checked again where it is used).
  static uint64_t checksum(const std::string& payload) {
    return fnv1a(payload, 0xcbf29ce484222325ull);
  }

  // Stores `d` under `k`: a temporary file, then a rename. False (and one line) if it cannot;
  // after that the cache is off for this process.
  bool store(const PlanKey& k, const PlanDecisions& d) {
    if (!on()) return false;
    std::error_code ec;
    if (std::filesystem::is_directory(path_of(k), ec)) return false;  // load() said so
    std::filesystem::create_directories(dir_, ec);
    if (!std::filesystem::is_directory(dir_))
      return off("%s is not a directory we can make", dir_.c_str());
    const std::string payload = serialize(d);
    char header[200];
    std::snprintf(header, sizeof header,
                  "backprop-bench plan cache %d\nkey %s\nbytes %zu\nchecksum %016" PRIx64 "\n",
                  kFormat, k.hex().c_str(), payload.size(), checksum(payload));
    static std::atomic<int> serial{0};
    const std::string tmp =
        path_of(k) + ".tmp." + std::to_string(getpid()) + "." + std::to_string(serial++);
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) return off("cannot write in %s: %s", dir_.c_str(), std::strerror(errno));
    const std::string whole = header + payload;
    const bool written = std::fwrite(whole.data(), 1, whole.size(), f) == whole.size();
    const int write_errno = errno;
    const bool closed = std::fclose(f) == 0;
    if (!written || !closed) {
      std::remove(tmp.c_str());
      return off("cannot write %s: %s", tmp.c_str(), std::strerror(written ? errno : write_errno));
    }
    if (std::rename(tmp.c_str(), path_of(k).c_str()) != 0) {
      std::remove(tmp.c_str());
      return off("cannot rename %s: %s", tmp.c_str(), std::strerror(errno));
    }
    remove_orphans();
    return true;
  }
  std::string path_of(const PlanKey& k) const { return dir_ + "/" + k.hex() + ".plan"; }

  // Temporary files of writers that died before their rename (`<key>.plan.tmp.<pid>.<n>`, the
  // pid gone): removed, so that a killed run leaves nothing behind for long.
  void remove_orphans() const {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
      const std::string name = e.path().filename().string();
      const size_t at = name.find(".plan.tmp.");
      if (at == std::string::npos) continue;
      const long pid = std::strtol(name.c_str() + at + 10, nullptr, 10);
      if (pid > 0 && pid != long(getpid()) && kill(pid_t(pid), 0) != 0 && errno == ESRCH)
        std::filesystem::remove(e.path(), ec);
    }
  }

 private:
  static uint64_t fnv1a(const std::string& s, uint64_t h) {
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    return h;
  }
  // One line per file and message in a process: a benchmark compiles once per repetition, and
  // the same bad file would say the same thing each time.
  static void warn_once(const std::string& path, const std::string& why) {
    warn_once(path + ": " + why);
  }
  static void warn_once(const std::string& line) {
    static std::mutex mutex;
    static std::set<std::string> said;
    std::lock_guard<std::mutex> lock(mutex);
    if (said.insert(line).second) warn("%s", line.c_str());
  }
  __attribute__((format(printf, 1, 2))) static void warn(const char* format, ...) {
    std::fprintf(stderr, "plan cache: ");
    va_list args;
    va_start(args, format);
    std::vfprintf(stderr, format, args);
    va_end(args);
    std::fputc('\n', stderr);
  }
  // One line, and no more cache for this process (the run goes on uncached).
  __attribute__((format(printf, 2, 3))) bool off(const char* format, ...) {
    char what[512];
    va_list args;
    va_start(args, format);
    std::vsnprintf(what, sizeof what, format, args);
    va_end(args);
    warn_once(std::string(what) + "; going on uncached");
    usable_ = false;
    return false;
  }

  static std::string serialize(const PlanDecisions& d) {
    std::ostringstream o;
    o.precision(17);
    o << "instructions " << d.instructions << "\nbudget " << d.budget_bytes << "\nplan "
      << d.plan.arena_bytes << " " << d.plan.lower_bound_bytes << " " << d.plan.unplanned_bytes
      << "\nkernels " << d.kernels.size() << "\n";
    for (const PlanDecisions::Choice& c : d.kernels) {
      o << c.dialect << " " << c.seconds.size();
      for (const auto& [dialect, s] : c.seconds) o << " " << dialect << " " << s;
      o << "\n";
    }
    std::string left_out = d.libraries_left_out.empty() ? "-" : d.libraries_left_out;
    for (char& c : left_out) c = c == ' ' ? '/' : c;  // one word
    o << "left_out " << left_out << "\n";
    o << "recomputed " << d.recomputed.size();
    for (uint32_t r : d.recomputed) o << " " << r;
    o << "\nbuffers " << d.offsets.size();
    for (size_t b : d.offsets) o << " " << b;
    o << "\nend\n";
    return o.str();
  }
  static std::optional<PlanDecisions> parse(const std::string& whole, const PlanKey& k,
                                            std::string* why) {
    // The header: four lines, each whole (ending in a newline), each read to its last character.
    std::string lines[4];
    size_t at = 0;
    for (std::string& line : lines) {
      const size_t end = whole.find('\n', at);
      if (end == std::string::npos) break;
      line = whole.substr(at, end - at), at = end + 1;
    }
    int format = 0, used = 0;
    if (std::sscanf(lines[0].c_str(), "backprop-bench plan cache %d%n", &format, &used) != 1 ||
        size_t(used) != lines[0].size())
      return *why = "not a plan file", std::nullopt;
    if (format != kFormat)
      return *why = "of format " + std::to_string(format) + ", this engine's is " +
                    std::to_string(kFormat),
             std::nullopt;
    if (lines[3].empty()) return *why = "truncated in its header", std::nullopt;
    const std::string expected = "key " + k.hex();
    if (lines[1] != expected)
      return *why = lines[1].size() == expected.size() && lines[1].rfind("key ", 0) == 0
                        ? "the plan of another key (" + lines[1].substr(4) + ")"
                        : "a damaged header (its key line)",
             std::nullopt;
    size_t bytes = 0;
    uint64_t checksum = 0;
    if (!whole_number(lines[2], "bytes ", 10, &bytes) ||
        !whole_number(lines[3], "checksum ", 16, &checksum))
      return *why = "a damaged header (its bytes or checksum line)", std::nullopt;
    const size_t payload_bytes = whole.size() - at;
    if (payload_bytes != bytes)
      return *why = (payload_bytes < bytes ? "truncated: " : "longer than it says: ") +
                    std::to_string(payload_bytes) + " bytes after the header, which says " +
                    std::to_string(bytes),
             std::nullopt;
    const std::string payload = whole.substr(at);
    if (PlanCache::checksum(payload) != checksum)
      return *why = "corrupt: its checksum does not match", std::nullopt;
    std::istringstream p(payload);
    std::string word;
    PlanDecisions d;
    size_t count = 0;
    bool ok = bool(p >> word >> d.instructions) && word == "instructions";
    ok = ok && (p >> word >> d.budget_bytes) && word == "budget";
    ok = ok &&
         (p >> word >> d.plan.arena_bytes >> d.plan.lower_bound_bytes >> d.plan.unplanned_bytes) &&
         word == "plan";
    ok = ok && (p >> word >> count) && word == "kernels";
    for (size_t i = 0; ok && i < count; i++) {
      PlanDecisions::Choice c;
      size_t timed = 0;
      ok = bool(p >> c.dialect >> timed);
      for (size_t j = 0; ok && j < timed; j++) {
        std::pair<std::string, double> s;
        ok = bool(p >> s.first >> s.second);
        c.seconds.push_back(s);
      }
      d.kernels.push_back(std::move(c));
    }
    ok = ok && (p >> word >> d.libraries_left_out) && word == "left_out";
    if (d.libraries_left_out == "-") d.libraries_left_out.clear();
    for (char& c : d.libraries_left_out) c = c == '/' ? ' ' : c;
    ok = ok && (p >> word >> count) && word == "recomputed";
    for (size_t i = 0; ok && i < count; i++) ok = bool(p >> d.recomputed.emplace_back());
    ok = ok && (p >> word >> count) && word == "buffers";
    for (size_t i = 0; ok && i < count; i++) ok = bool(p >> d.offsets.emplace_back());
    ok = ok && (p >> word) && word == "end";
    if (!ok) return *why = "unreadable after its checksum", std::nullopt;
    d.plan.recomputed_nodes = d.recomputed.size();
    return d;
  }

  // `line` is `prefix` and then a number in `base` and nothing else (no sign, no space).
  template <class U>
  static bool whole_number(const std::string& line, const char* prefix, int base, U* out) {
    const size_t n = std::strlen(prefix);
    if (line.compare(0, n, prefix) != 0 || line.size() == n || line.size() - n > 20) return false;
    for (size_t i = n; i < line.size(); i++)
      if (!(base == 16 ? std::isxdigit((unsigned char)line[i])
                       : std::isdigit((unsigned char)line[i])))
        return false;
    errno = 0;
    const unsigned long long v = std::strtoull(line.c_str() + n, nullptr, base);
    if (errno == ERANGE) return false;
    *out = U(v);
    return true;
  }

  // The processor as cpuid says it, feature flags included (/proc/cpuinfo's first processor).
  static std::string cpu_text() {
    std::ifstream in("/proc/cpuinfo");
    std::string line, out;
    for (const char* field : {"vendor_id", "cpu family", "model", "stepping", "flags"}) {
      in.clear(), in.seekg(0);
      while (std::getline(in, line))
        if (line.rfind(field, 0) == 0 && line.find(':') != std::string::npos &&
            line.substr(0, line.find(':')).find_last_not_of(" \t") + 1 == std::strlen(field)) {
          out += line + "\n";
          break;
        }
    }
    return out;
  }
  // The running binary's GNU build ID (the linker's hash of its contents), hex; "none" without.
  static std::string build_id() {
    std::string id = "none";
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* out) {
          for (int i = 0; i < info->dlpi_phnum; i++) {
            const ElfW(Phdr)& ph = info->dlpi_phdr[i];
            if (ph.p_type != PT_NOTE) continue;
            const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
            const char* end = p + ph.p_memsz;
            while (p + sizeof(ElfW(Nhdr)) <= end) {
              const auto* n = reinterpret_cast<const ElfW(Nhdr)*>(p);
              const char* name = p + sizeof(ElfW(Nhdr));
              const char* desc = name + ((n->n_namesz + 3) & ~3u);
              if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
                  std::memcmp(name, "GNU", 4) == 0) {
                std::string hex;
                char two[3];
                for (uint32_t b = 0; b < n->n_descsz; b++)
                  std::snprintf(two, sizeof two, "%02x", (unsigned char)desc[b]), hex += two;
                *static_cast<std::string*>(out) = hex;
                return 1;
              }
              p = desc + ((n->n_descsz + 3) & ~3u);
            }
          }
          return 1;  // the first object is the executable: stop there
        },
        &id);
    return id;
  }

  std::string dir_;
  bool usable_ = true;
};

}  // namespace bp
