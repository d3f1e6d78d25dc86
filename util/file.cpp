#include "file.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace tnbc::util {
namespace {

// What a file that is not a regular one is, for messages.
const char* kind_of(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

// 64 random bits for a temporary name: getrandom, else (no entropy yet, very old kernel) the
// clock, the pid and a counter, which a planted link cannot predict to the nanosecond either.
std::uint64_t random_bits() {
  std::uint64_t r = 0;
  if (::getrandom(&r, sizeof r, GRND_NONBLOCK) == static_cast<ssize_t>(sizeof r)) return r;
  static std::atomic<std::uint64_t> counter{0};
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  r = static_cast<std::uint64_t>(ts.tv_nsec) ^ (static_cast<std::uint64_t>(ts.tv_sec) << 30) ^
      (static_cast<std::uint64_t>(::getpid()) << 40) ^ (++counter * 0x9e3779b97f4a7c15ull);
  return r;
}

}  // namespace

InputFile::InputFile(const std::string& path, std::uint64_t max_bytes) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) {
    error_ = path + ": cannot open: " + std::strerror(errno);
    return;
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    error_ = path + ": cannot stat: " + std::strerror(errno);
  } else if (S_ISDIR(st.st_mode)) {
    error_ = path + ": is a directory";
  } else if (!S_ISREG(st.st_mode)) {
    error_ = path + ": not a regular file (" + kind_of(st.st_mode) + ")";
  } else if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    error_ = path + ": " + std::to_string(st.st_size) + " bytes, larger than the limit of " +
             std::to_string(max_bytes);
  } else {
    size_ = static_cast<std::uint64_t>(st.st_size);
    return;
  }
  ::close(fd_);
  fd_ = -1;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

bool InputFile::read(std::uint64_t n, std::string& out) {
  if (fd_ < 0) return false;
  n = std::min(n, size_ - pos_);
  const std::size_t start = out.size();
  out.resize(start + n);
  std::size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd_, out.data() + start + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      error_ = path_ + ": cannot read: " + std::strerror(errno);
      out.resize(start);
      return false;
    }
    if (r == 0) break;  // shrank since fstat: the caller's format checks see a short file
    got += static_cast<std::size_t>(r);
  }
  out.resize(start + got);
  pos_ += got;
  return true;
}

std::optional<std::string> read_file(const std::string& path, std::uint64_t max_bytes,
                                     std::string& out) {
  InputFile file(path, max_bytes);
  out.clear();
  if (!file.read(file.size(), out)) return file.error();
  return std::nullopt;
}

std::optional<std::string> write_file_atomic(const std::string& path, std::string_view content) {
  std::string tmp;
  int fd = -1;
  // A name already taken (by a planted file or link, or by chance) is never opened: draw again.
  for (int attempt = 0; fd < 0; ++attempt) {
    char suffix[24];
    std::snprintf(suffix, sizeof suffix, ".tmp.%016llx",
                  static_cast<unsigned long long>(random_bits()));
    tmp = path + suffix;
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && (errno != EEXIST || attempt >= 16))
      return "cannot create " + tmp + ": " + std::strerror(errno);
  }
  const char* p = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = n < 0 ? errno : ENOSPC;
      ::close(fd);
      ::unlink(tmp.c_str());
      return "cannot write " + tmp + ": " + std::strerror(e);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  int sync_rc = ::fsync(fd);
  int sync_errno = errno;
  int close_rc = ::close(fd);
  int close_errno = errno;
  if (sync_rc != 0 || close_rc != 0) {
    ::unlink(tmp.c_str());
    return "cannot write " + tmp + ": " + std::strerror(sync_rc != 0 ? sync_errno : close_errno);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return "cannot rename " + tmp + " to " + path + ": " + std::strerror(e);
  }
  return std::nullopt;
}

std::optional<std::string> make_dirs(const std::string& path) {
  std::string partial;
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty()) continue;
    if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST)
      return "cannot create " + partial + ": " + std::strerror(errno);
  }
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return path + " is not a folder";
  return std::nullopt;
}

std::optional<std::string> check_private_folder(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return path + ": " + std::strerror(errno);
  if (!S_ISDIR(st.st_mode)) return path + " is not a folder";
  const uid_t me = ::geteuid();
  if (st.st_uid != me)
    return path + " is owned by user " + std::to_string(st.st_uid) + ", not by this user (" +
           std::to_string(me) + "): another user could replace its files";
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return path + " is writable by " + ((st.st_mode & S_IWOTH) ? "others" : "its group") +
           " (mode " + mode + "): they could plant files or links in it; chmod go-w " + path;
  }
  return std::nullopt;
}

}  // namespace tnbc::util
