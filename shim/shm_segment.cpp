// Shared-memory segments of one node (shm_segment.hpp).
#include "shm_segment.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "log.hpp"

namespace tnbc::shim::shm {
namespace {

constexpr std::string_view kOurs = "tnbc-";
constexpr std::array kKinds{kBarrier, kTurns};

std::uint64_t pid_namespace() {
  struct stat st {};
  return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0;
}

/// Unlinks this user's segments whose creator, in this pid namespace, no longer exists: left
/// by a job killed inside the window (see the header).  Once per process.
void remove_stale() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::uint64_t ns = pid_namespace();
    DIR* dir = ns != 0 ? opendir("/dev/shm") : nullptr;
    if (dir == nullptr) return;
    int removed = 0;
    while (const dirent* e = readdir(dir)) {
      const pid_t pid = creator_in(e->d_name, ns);
      struct stat st {};
      if (pid == 0 || kill(pid, 0) == 0 || errno != ESRCH ||
          fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != geteuid())
        continue;
      if (shm_unlink(fmt::format("/{}", e->d_name).c_str()) == 0) ++removed;
    }
    closedir(dir);
    if (removed > 0) log::debug("removed {} shared-memory segments of killed jobs", removed);
  });
}

}  // namespace

pid_t creator_in(std::string_view entry, std::uint64_t ns) {
  if (entry.substr(0, kOurs.size()) != kOurs) return 0;
  entry.remove_prefix(kOurs.size());
  bool known = false;
  for (std::string_view kind : kKinds)
    if (entry.size() > kind.size() && entry.substr(0, kind.size()) == kind && entry[kind.size()] == '-') {
      entry.remove_prefix(kind.size() + 1);
      known = true;
      break;
    }
  if (!known) return 0;
  std::uint64_t entry_ns = 0;
  long pid = 0;
  const char* end = entry.data() + entry.size();
  auto [p, ec] = std::from_chars(entry.data(), end, entry_ns);
  if (ec != std::errc() || entry_ns != ns || p == end || *p != '-') return 0;
  auto [q, ec2] = std::from_chars(p + 1, end, pid);
  if (ec2 != std::errc() || q == end || *q != '-' || pid <= 0) return 0;
  return static_cast<pid_t>(pid);
}

std::string create(std::string_view kind, std::size_t bytes, char (&name)[kNameBytes], void** base) {
  remove_stale();
  const std::uint64_t ns = pid_namespace();
  for (int attempt = 0; attempt < 8; ++attempt) {
    unsigned char random[8];
    if (getrandom(random, sizeof random, 0) != static_cast<ssize_t>(sizeof random))
      return std::string("getrandom: ") + std::strerror(errno);
    std::string n = fmt::format("/{}{}-{}-{}-", kOurs, kind, ns, getpid());
    for (unsigned char c : random) n += fmt::format("{:02x}", c);
    int fd = shm_open(n.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) return std::string("shm_open: ") + std::strerror(errno);
    std::string err;
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      err = std::string("ftruncate: ") + std::strerror(errno);
    } else {
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) err = std::string("mmap: ") + std::strerror(errno);
      else *base = p;
    }
    close(fd);
    if (!err.empty()) {
      shm_unlink(n.c_str());
      return err;
    }
    std::snprintf(name, kNameBytes, "%s", n.c_str());
    return {};
  }
  return "shm_open: no free name";
}

std::string open(const char* name, std::size_t bytes, void** base) {
  int fd = shm_open(name, O_RDWR, 0);
  if (fd < 0) return std::string("shm_open: ") + std::strerror(errno);
  struct stat st {};
  std::string err;
  if (fstat(fd, &st) != 0) err = std::string("fstat: ") + std::strerror(errno);
  else if (st.st_uid != geteuid() || static_cast<std::size_t>(st.st_size) != bytes)
    err = "segment has the wrong owner or size";
  if (err.empty()) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) err = std::string("mmap: ") + std::strerror(errno);
    else *base = p;
  }
  close(fd);
  return err;
}

}  // namespace tnbc::shim::shm
